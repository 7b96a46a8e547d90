//! End-to-end: what Claude Code users expect of `-p`: refusals said out
//! loud and in the result, piped input, prompts that look like subcommands,
//! Claude Code's flags, and its stream-json schema.

use crate::common;

use common::{Env, Wire, run, tool_results};
use ferroclaw_testkit::{Fault, ScriptedToolCall, Step, Turn};
use serde_json::{Value, json};

fn refused_script() -> Vec<Step> {
    vec![
        Turn::tool("bash", json!({"command": "git status --short"})).into(),
        Turn::tool("write", json!({"path": "out.txt", "content": "made"})).into(),
        Turn::text("could not do it").into(),
    ]
}

#[test]
fn refused_calls_are_named_on_stderr_and_listed_in_the_json_result() {
    let env = Env::new(Wire::Anthropic, refused_script());
    let (code, stdout, stderr) = run(&mut env.oneshot("tidy up", &["--output-format", "json"]));
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains("2 tool calls were refused"), "{stderr}");
    assert!(stderr.contains("bash(git status --short)") && stderr.contains("write(out.txt)"));
    assert!(stderr.contains("--allowedTools") && stderr.contains("'bash(git status"), "{stderr}");
    let result: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(result["type"], "result");
    assert_eq!(result["subtype"], "success");
    assert!(result["duration_ms"].is_u64());
    let denials = result["permission_denials"].as_array().unwrap();
    assert_eq!(denials.len(), 2);
    assert_eq!(denials[0]["tool_name"], "Bash", "Claude Code's names");
    assert_eq!(denials[0]["tool_input"]["command"], "git status --short");
    assert!(denials[0]["tool_use_id"].as_str().is_some_and(|id| !id.is_empty()));
    assert_eq!(denials[1]["tool_name"], "Write");
    let file = env.ws().join("out.txt");
    assert_eq!(denials[1]["tool_input"]["file_path"], file.to_string_lossy().as_ref());
}

#[test]
fn the_suggested_rule_allows_the_refused_command() {
    let env = Env::new(Wire::Anthropic, refused_script());
    let (_, _, stderr) = run(&mut env.oneshot("tidy up", &[]));
    let rule = stderr.split("--allowedTools '").nth(1).unwrap().split('\'').next().unwrap();
    let env2 = Env::new(Wire::Anthropic, refused_script());
    std::process::Command::new("git")
        .arg("init")
        .arg("-q")
        .current_dir(env2.ws())
        .status()
        .unwrap();
    let (code, _, stderr) = run(&mut env2.oneshot("tidy up", &["--allowedTools", rule, "write"]));
    assert_eq!(code, 0, "{stderr}");
    assert!(!stderr.contains("refused"), "{rule}: {stderr}");
    let results = tool_results(&env2.request_body(1));
    assert!(!results[0].1, "the command ran: {results:?}");
    assert_eq!(std::fs::read_to_string(env2.ws().join("out.txt")).unwrap(), "made");
}

#[test]
fn the_suggestion_for_a_chained_alias_call_is_scoped_rules_on_bash_never_the_whole_tool() {
    let env = Env::new(
        Wire::OpenAi,
        vec![
            Turn::tool("exec", json!({"command": "git status; touch pwned"})).into(),
            Turn::text("could not").into(),
        ],
    );
    let (code, _, stderr) = run(&mut env.oneshot("look", &[]));
    assert_eq!(code, 0, "{stderr}");
    let line = stderr.lines().find(|l| l.starts_with("to allow them:")).unwrap();
    assert!(line.contains("'bash(git status:*)'"), "{line}");
    assert!(line.contains("'bash(touch"), "{line}");
    assert!(!line.contains("'exec'") && !line.contains("'bash'"), "never the whole tool: {line}");
    assert!(!env.ws().join("pwned").exists());
}

#[test]
fn disallowed_tools_win_over_yes() {
    let env = Env::new(
        Wire::OpenAi,
        vec![
            Turn::tool("write", json!({"path": "a.txt", "content": "x"})).into(),
            Turn::text("ok").into(),
        ],
    );
    let (code, stdout, _) = run(&mut env.oneshot(
        "write",
        &["--yes", "--disallowedTools", "write,web_fetch", "--output-format", "json"],
    ));
    assert_eq!(code, 0);
    assert!(!env.ws().join("a.txt").exists());
    let result: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(result["permission_denials"][0]["tool_name"], "Write");
}

#[test]
fn max_turns_and_failures_have_claude_code_subtypes() {
    let steps: Vec<Step> =
        (0..3).map(|_| Turn::tool("glob", json!({"pattern": "*"})).into()).collect();
    let env = Env::new(Wire::OpenAi, steps);
    let (_, stdout, _) =
        run(&mut env.oneshot("loop", &["--max-turns", "1", "--output-format", "json"]));
    let result: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(result["subtype"], "error_max_turns");

    let down = || Step::Fault(Fault::Status { status: 500, body: None, retry_after: None });
    let env = Env::new(Wire::OpenAi, vec![down(), down(), down()]);
    let (_, stdout, _) = run(&mut env.oneshot("hi", &["--output-format", "json"]));
    let result: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(result["subtype"], "error_during_execution");
    assert_eq!(result["is_error"], true);
}

#[test]
fn stream_json_names_a_refusal_permission_denied() {
    let env = Env::new(Wire::Anthropic, refused_script());
    let (_, stdout, _) = run(&mut env.oneshot("tidy", &["--output-format", "stream-json"]));
    let kinds: Vec<String> = stdout
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap()["type"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(kinds.iter().filter(|k| *k == "permission_denied").count(), 2, "{kinds:?}");
    assert!(!kinds.iter().any(|k| k == "permission_requested"), "nobody is asked in -p");
}

#[test]
fn piped_input_is_added_to_the_prompt() {
    let env = Env::new(Wire::Anthropic, vec![Turn::text("it failed twice").into()]);
    let log = "12:00 error: disk full\n12:01 error: disk full\n";
    let (code, stdout, _) = run(env.oneshot("explain this log", &[]).write_stdin(log));
    assert_eq!(code, 0);
    assert_eq!(stdout, "it failed twice\n");
    let text =
        env.request_body(0)["messages"][0]["content"][0]["text"].as_str().unwrap().to_string();
    assert!(text.starts_with("explain this log"), "{text}");
    assert!(
        text.contains("<stdin>\n12:00 error: disk full\n12:01 error: disk full\n</stdin>"),
        "{text}"
    );
}

#[test]
fn piped_input_over_the_cap_is_cut_with_a_note() {
    let env = Env::new(Wire::Anthropic, vec![Turn::text("big").into()]);
    let big = "0123456789abcdef\n".repeat(20_000);
    let (code, _, stderr) = run(env.oneshot("summarise", &[]).write_stdin(big));
    assert_eq!(code, 0);
    assert!(stderr.contains("stdin cut"), "{stderr}");
    let text =
        env.request_body(0)["messages"][0]["content"][0]["text"].as_str().unwrap().to_string();
    assert!(text.len() < 270 * 1024, "{}", text.len());
    assert!(text.contains("[stdin cut: the first 256 KiB of 332 KiB are shown]"));
}

#[test]
fn a_prompt_that_names_a_subcommand_goes_to_the_model() {
    for word in ["status", "tasks", "doctor"] {
        let env = Env::new(Wire::Anthropic, vec![Turn::text("all good").into()]);
        let (code, stdout, stderr) = run(&mut env.oneshot(word, &[]));
        assert_eq!(code, 0, "{word}: {stderr}");
        assert_eq!(stdout, "all good\n");
        assert_eq!(env.request_body(0)["messages"][0]["content"][0]["text"], word);
    }
}

#[test]
fn append_system_prompt_add_dir_and_model_aliases() {
    let other = tempfile::tempdir().unwrap();
    let notes = other.path().join("notes.txt");
    std::fs::write(&notes, "outside the workspace").unwrap();
    // The scripted call reads the file in the added folder.
    let env = Env::new(
        Wire::Anthropic,
        vec![
            Turn::tool("read", json!({"path": notes.to_str().unwrap()})).into(),
            Turn::text("read it").into(),
        ],
    );
    let dir = other.path().to_str().unwrap();
    let args = [
        "--append-system-prompt",
        "Always answer in French.",
        "--add-dir",
        dir,
        "--model",
        "sonnet",
    ];
    let (code, _, stderr) = run(&mut env.oneshot("read my notes", &args));
    assert_eq!(code, 0, "{stderr}");
    let body = env.request_body(0);
    assert!(body["system"].to_string().contains("Always answer in French."));
    assert_eq!(body["model"], "claude-sonnet-4-5", "sonnet is the Anthropic model");
    let results = tool_results(&env.request_body(1));
    assert!(!results[0].1 && results[0].0.contains("outside the workspace"), "{results:?}");
}

#[test]
fn claude_stream_format_follows_claude_codes_schema() {
    let env = Env::new(
        Wire::Anthropic,
        vec![
            Turn::tools(vec![
                ScriptedToolCall::new("glob", json!({"pattern": "*.txt"})),
                ScriptedToolCall::new("read", json!({"path": "x.txt"})),
            ])
            .with_text("Looking.")
            .into(),
            Turn::tool("edit", json!({"path": "x.txt", "old_string": "x", "new_string": "y"}))
                .into(),
            Turn::text("One file.").into(),
        ],
    );
    std::fs::write(env.ws().join("x.txt"), "x\n").unwrap();
    let args = ["--output-format", "stream-json", "--stream-format", "claude"];
    let (code, stdout, _) = run(env.oneshot("list", &args).arg("--dangerously-skip-permissions"));
    assert_eq!(code, 0);
    let events: Vec<Value> = stdout.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let init = &events[0];
    assert_eq!((init["type"].as_str(), init["subtype"].as_str()), (Some("system"), Some("init")));
    let tools = init["tools"].as_array().unwrap();
    assert!(tools.iter().any(|t| t == "Read") && tools.iter().any(|t| t == "Bash"), "{tools:?}");
    assert_eq!(init["permissionMode"], "bypassPermissions");
    assert_eq!(init["model"], "claude-test", "without the provider");
    let session = init["session_id"].as_str().unwrap();
    let assistant: Vec<&Value> = events.iter().filter(|e| e["type"] == "assistant").collect();
    let blocks: Vec<&Value> = assistant.iter().map(|e| &e["message"]["content"][0]).collect();
    assert_eq!(
        (blocks[0]["type"].as_str(), blocks[0]["text"].as_str()),
        (Some("text"), Some("Looking."))
    );
    assert_eq!(
        (blocks[1]["type"].as_str(), blocks[1]["name"].as_str()),
        (Some("tool_use"), Some("Glob"))
    );
    let file = env.ws().join("x.txt").to_string_lossy().into_owned();
    assert_eq!(blocks[2]["name"], "Read");
    assert_eq!(blocks[3]["name"], "Edit");
    assert_eq!(
        blocks[3]["input"],
        json!({"file_path": file, "old_string": "x", "new_string": "y", "replace_all": false})
    );
    for message in &assistant {
        assert!(message["uuid"].as_str().is_some_and(|u| u.len() == 36), "{message}");
        assert!(message["message"]["stop_reason"].is_null(), "as Claude Code streams it");
        assert_eq!(message["message"]["usage"]["input_tokens"], 10, "{message}");
    }
    let results: Vec<&Value> = events.iter().filter(|e| e["type"] == "user").collect();
    let tool_result = &results[0]["message"]["content"][0];
    assert_eq!(tool_result["type"], "tool_result");
    assert_eq!(tool_result["tool_use_id"], blocks[1]["id"]);
    assert!(tool_result["content"].as_str().unwrap().contains("x.txt"));
    assert_eq!(results[0]["tool_use_result"]["numFiles"], 1);
    let edit = &results[2]["tool_use_result"];
    assert_eq!(
        (edit["filePath"].as_str(), edit["originalFile"].as_str()),
        (Some(file.as_str()), Some("x\n"))
    );
    assert_eq!(edit["structuredPatch"][0]["lines"], json!(["-x", "+y"]));
    let last = events.last().unwrap();
    assert_eq!(
        (last["type"].as_str(), last["subtype"].as_str()),
        (Some("result"), Some("success"))
    );
    assert_eq!(last["result"], "One file.");
    assert_eq!(last["session_id"], session);
    assert_eq!(last["stop_reason"], "end_turn");
    assert_eq!(last["num_turns"], 4, "two calls in one answer count as two turns");
    assert_eq!(last["usage"]["cache_read_input_tokens"], 0);
    assert_eq!(last["usage"]["cache_creation_input_tokens"], 0);
    assert_eq!(last["usage"]["input_tokens"], 30);
    assert!(last["total_cost_usd"].is_number() && last["uuid"].is_string(), "{last}");
}

#[test]
fn stream_json_input_runs_each_user_message_as_the_agent_sdk_sends_them() {
    let env = Env::new(
        Wire::Anthropic,
        vec![Turn::text("first answer").into(), Turn::text("second answer").into()],
    );
    let stdin = concat!(
        r#"{"type":"user","message":{"role":"user","content":"first question"},"parent_tool_use_id":null,"session_id":""}"#,
        "\n",
        r#"{"type":"user","message":{"role":"user","content":[{"type":"text","text":"second question"}]}}"#,
        "\n",
    );
    let args = ["--input-format", "stream-json", "--output-format", "json"];
    let mut cmd = env.cmd();
    cmd.args(["-p"]).args(args).write_stdin(stdin);
    let (code, stdout, stderr) = run(&mut cmd);
    assert_eq!(code, 0, "{stderr}");
    let result: Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(
        (result["result"].as_str(), result["num_turns"].as_u64()),
        (Some("second answer"), Some(2))
    );
    let second = env.request_body(1).to_string();
    assert!(
        second.contains("first question") && second.contains("second question"),
        "one conversation: {second}"
    );
}

/// The test config waits 10 ms (less jitter) before a retry: a wait under a
/// second is said in milliseconds, not as "0.0 s".
#[test]
fn text_mode_says_when_it_retries_and_a_short_wait_in_milliseconds() {
    let env = Env::new(
        Wire::Anthropic,
        vec![
            Fault::Status { status: 529, body: None, retry_after: None }.into(),
            Turn::text("second time lucky").into(),
        ],
    );
    let (code, stdout, stderr) = run(&mut env.oneshot("hi", &[]));
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(stdout, "second time lucky\n", "the notice stays off stdout");
    let notice = stderr.lines().find(|l| l.contains("retrying in")).unwrap_or_default();
    assert!(notice.starts_with("⟳ retrying in") && notice.contains("529"), "{stderr}");
    let wait = notice.strip_prefix("⟳ retrying in ").and_then(|rest| rest.split_once(" ms:"));
    let ms: u64 = wait.and_then(|(n, _)| n.parse().ok()).unwrap_or(0);
    assert!((1..=10).contains(&ms), "{notice}");
}

#[test]
fn the_allow_hint_names_the_config_file_ferroclaw_reads_when_ferroclaw_home_moves_it() {
    let env = Env::new(
        Wire::Anthropic,
        vec![
            Turn::tool("bash", json!({"command": "git status"})).into(),
            Turn::text("could not").into(),
        ],
    );
    let elsewhere = tempfile::tempdir().unwrap();
    let (code, _, stderr) = run(env.oneshot("look", &[]).env("HOME", elsewhere.path()));
    assert_eq!(code, 0, "{stderr}");
    let line = stderr.lines().find(|l| l.starts_with("to allow them:")).unwrap();
    let config = env.home.path().join("config.toml");
    assert!(line.contains(&format!("under [permissions] in {} or", config.display())), "{line}");
    assert!(!line.contains("~/.ferroclaw"), "{line}");
}

#[test]
fn a_prompt_swallowed_by_allowed_tools_is_named_with_where_the_prompt_goes() {
    let env = Env::new(Wire::Anthropic, vec![Turn::text("never").into()]);
    let (code, _, stderr) = run(env.cmd().args(["-p", "--allowedTools", "edit", "fix the bug"]));
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains(
            "--allowedTools takes every word after it (here \"fix the bug\" too), so put the \
             prompt before it: ferroclaw -p \"...\" --allowedTools RULES"
        ),
        "{stderr}"
    );
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(env.server.requests().is_empty());
}

#[test]
fn the_allow_hint_never_suggests_a_rule_already_in_force() {
    let env = Env::new(
        Wire::Anthropic,
        vec![
            Turn::tool("bash", json!({"command": "git status; touch pwned"})).into(),
            Turn::text("could not").into(),
        ],
    );
    let (code, _, stderr) =
        run(&mut env.oneshot("look", &["--allowedTools", "bash(git status:*)"]));
    assert_eq!(code, 0, "{stderr}");
    let line = stderr.lines().find(|l| l.starts_with("to allow them:")).unwrap();
    assert!(line.contains("'bash(touch"), "{line}");
    assert!(!line.contains("git status"), "already allowed, so not the way to allow it: {line}");
}

#[test]
fn a_model_calling_claude_codes_tools_in_claudes_shape_gets_ours() {
    let env = Env::new(
        Wire::Anthropic,
        vec![
            Turn::tool("Write", json!({"file_path": "notes.md", "content": "# Notes\n"})).into(),
            Turn::text("written").into(),
        ],
    );
    let (code, _, stderr) = run(&mut env.oneshot("take notes", &["--yes"]));
    assert_eq!(code, 0, "{stderr}");
    let written = std::fs::read_to_string(env.ws().join("notes.md")).unwrap();
    assert_eq!(written, "# Notes\n", "Write {{file_path}} ran as write {{path}}");
}
