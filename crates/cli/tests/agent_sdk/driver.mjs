// Drives ferroclaw with the real Claude Agent SDK, as an SDK user would.
// node driver.mjs SDK_DIR EXECUTABLE CWD SCENARIO
// Prints one JSON line per message the SDK yields, and `{"sdk": ...}` lines
// for what the program's callbacks saw. Scenarios:
//   prompt     query() with a prompt string
//   turns      a streaming-input prompt: two user messages, the second sent
//              after the first turn's result and setPermissionMode("acceptEdits")
//   can-use    canUseTool: allows a Write to allowed.txt, denies the rest
//   interrupt  canUseTool allows everything; interrupt() once a Bash call shows
//   options    a Claude model id and options ferroclaw does not act on
//              (partial messages, a thinking budget, a fallback model, every setting source)
//   budget     maxBudgetUsd, which ferroclaw cannot keep; stderr is shown
//   mcp        mcpServers (delivered as --mcp-config): ferroclaw's own `mcp serve`
//              as a stdio server, its list_dir allowed (allowedTools)
//   mcp-init   mcpServers delivered the SDK's default way, in its initialize request
const [sdkDir, executable, cwd, scenario] = process.argv.slice(2);
const { query } = await import(`${sdkDir}/node_modules/@anthropic-ai/claude-agent-sdk/sdk.mjs`);
const say = (value) => console.log(JSON.stringify(value));

const options = { pathToClaudeCodeExecutable: executable, cwd, env: { ...process.env } };
let prompt = "say hi";
let firstResult;
const turnOver = new Promise((resolve) => { firstResult = resolve; });
if (scenario === "turns") {
  prompt = (async function* () {
    yield { type: "user", message: { role: "user", content: "first question" }, parent_tool_use_id: null };
    await turnOver;
    say({ sdk: "mode", answer: await q.setPermissionMode("acceptEdits") });
    yield { type: "user", message: { role: "user", content: "second question" }, parent_tool_use_id: null };
  })();
}
if (scenario === "can-use" || scenario === "interrupt") {
  prompt = "do the work";
  options.canUseTool = async (toolName, input) => {
    say({ sdk: "can_use_tool", toolName, input });
    if (scenario === "interrupt" || (toolName === "Write" && input.file_path.endsWith("/allowed.txt"))) {
      return { behavior: "allow", updatedInput: input };
    }
    return { behavior: "deny", message: "the SDK user said no" };
  };
}
if (scenario === "options") {
  Object.assign(options, {
    model: "claude-sonnet-4-5",
    includePartialMessages: true,
    maxThinkingTokens: 2048,
    fallbackModel: "claude-haiku-4-5",
    settingSources: ["user", "project", "local"],
  });
}
if (scenario === "budget") options.maxBudgetUsd = 1;
if (scenario === "mcp-init") {
  options.mcpServers = { fc: { type: "stdio", command: executable, args: ["mcp", "serve"] } };
}
if (scenario === "mcp") {
  options.mcpServers = { fc: { type: "stdio", command: executable, args: ["mcp", "serve"] } };
  // As --mcp-config; by default the SDK sends them in its initialize request.
  options.mcpServersDelivery = "argv";
  options.allowedTools = ["mcp__fc__list_dir"];
}
options.stderr = (data) => say({ sdk: "stderr", data: String(data) });
const q = query({ prompt, options });
try {
  for await (const message of q) {
    say(message);
    if (message.type === "result") firstResult();
    const calls = message.type === "assistant" ? message.message.content : [];
    if (scenario === "interrupt" && calls.some((block) => block.type === "tool_use" && block.name === "Bash")) {
      await q.interrupt();
      say({ sdk: "interrupted" });
    }
  }
} catch (error) {
  say({ sdk: "error", message: String(error.message ?? error) });
}
