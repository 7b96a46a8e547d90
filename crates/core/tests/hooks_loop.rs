//! The loop's hook points against the scripted LLM server: a Stop hook sends
//! the model back, a UserPromptSubmit hook refuses a prompt, PostToolUse
//! hooks talk to the model, SubagentStop replaces Stop for a sub-agent.

use crate::support;

use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;
use ferroclaw_core::hooks::{Hook, HookEvent, Hooks, Matcher};
use ferroclaw_core::{Agent, NoOneToAsk, PermissionMode};
use ferroclaw_protocol::{ContentBlock, Message};
use ferroclaw_testkit::{ScriptedServer, Turn};
use ferroclaw_tools::{Tool, ToolContext, ToolError, ToolOutput, ToolRegistry};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

/// A tool that says what it was given.
struct Echo;

#[async_trait]
impl Tool for Echo {
    fn name(&self) -> &str {
        "echo"
    }
    fn description(&self) -> &str {
        "echoes"
    }
    fn input_schema(&self) -> Value {
        json!({"type": "object"})
    }
    async fn execute(&self, input: Value, _ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        Ok(ToolOutput::text(input.to_string()))
    }
}

fn hook(event: HookEvent, command: &str) -> Hook {
    Hook {
        event,
        matcher: Matcher::Any,
        command: command.into(),
        timeout_secs: 30.0,
        fail_closed: false,
        source: "test".into(),
        options: Default::default(),
    }
}

fn agent(server: &ScriptedServer, home: &Path, hooks: Vec<Hook>, subagent: Option<&str>) -> Agent {
    agent_in(PermissionMode::Bypass, server, home, hooks, subagent)
}

fn agent_in(
    mode: PermissionMode,
    server: &ScriptedServer,
    home: &Path,
    hooks: Vec<Hook>,
    subagent: Option<&str>,
) -> Agent {
    let mut tools = ToolRegistry::new();
    tools.register(Echo);
    let mut agent = support::agent(server, home, tools, mode, Arc::new(NoOneToAsk));
    agent.set_hooks(Arc::new(Hooks::from_hooks(hooks, home)), subagent.map(str::to_string));
    agent
}

async fn run(agent: &mut Agent, prompt: &str) -> ferroclaw_core::Report {
    let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
    agent.run(Message::user(prompt), &tx, &CancellationToken::new()).await
}

const STOP_ONCE: &str =
    "if [ -e stopped ]; then exit 0; fi; touch stopped; echo 'run the tests first' >&2; exit 2";

#[tokio::test]
async fn a_stop_hook_that_blocks_sends_the_model_back_once() {
    let server = ScriptedServer::start(vec![
        Turn::text("done").into(),
        Turn::text("tests pass, done").into(),
    ]);
    let home = tempfile::tempdir().unwrap();
    let mut agent = agent(&server, home.path(), vec![hook(HookEvent::Stop, STOP_ONCE)], None);
    let report = run(&mut agent, "fix it").await;
    assert_eq!(report.text, "tests pass, done");
    assert_eq!(server.requests().len(), 2);
    assert!(server.requests()[1].body.to_string().contains("run the tests first"));
}

#[tokio::test]
async fn a_sub_agent_runs_subagent_stop_not_stop() {
    let server = ScriptedServer::start(vec![Turn::text("child done").into()]);
    let home = tempfile::tempdir().unwrap();
    let hooks = vec![
        hook(HookEvent::Stop, "touch stop-ran"),
        hook(HookEvent::SubagentStart, "touch start-ran"),
        hook(HookEvent::SubagentStop, "cat > subagent-stop.json"),
    ];
    let mut agent = agent(&server, home.path(), hooks, Some("explore"));
    run(&mut agent, "look around").await;
    assert!(!home.path().join("stop-ran").exists());
    assert!(home.path().join("start-ran").exists());
    let seen = std::fs::read_to_string(home.path().join("subagent-stop.json")).unwrap();
    let seen: Value = serde_json::from_str(&seen).unwrap();
    // Claude Code's name for the type, and the sub-agent's own transcript.
    assert_eq!(
        (seen["hook_event_name"].as_str(), seen["agent_type"].as_str()),
        (Some("SubagentStop"), Some("Explore"))
    );
    assert!(seen["agent_id"].is_string() && seen["agent_transcript_path"].is_string(), "{seen}");
}

#[tokio::test]
async fn a_sub_agents_tool_calls_run_the_tool_hooks_and_say_which_sub_agent_made_them() {
    let server = ScriptedServer::start(vec![
        Turn::tool("echo", json!({"x": 1})).into(),
        Turn::text("child done").into(),
    ]);
    let home = tempfile::tempdir().unwrap();
    let guard = "cat > pre.json; echo 'not from a sub-agent' >&2; exit 2";
    let mut agent =
        agent(&server, home.path(), vec![hook(HookEvent::PreToolUse, guard)], Some("general"));
    run(&mut agent, "do it").await;
    let seen: Value =
        serde_json::from_str(&std::fs::read_to_string(home.path().join("pre.json")).unwrap())
            .unwrap();
    assert_eq!(
        (seen["tool_name"].as_str(), seen["agent_type"].as_str()),
        (Some("echo"), Some("general-purpose"))
    );
    assert!(seen["agent_id"].is_string(), "{seen}");
    let result = server.requests()[1].body.to_string();
    assert!(result.contains("not from a sub-agent"), "the hook refused the call: {result}");
}

#[tokio::test]
async fn a_user_prompt_submit_hook_refuses_the_prompt_before_the_model_sees_it() {
    let server = ScriptedServer::start(vec![Turn::text("never").into()]);
    let home = tempfile::tempdir().unwrap();
    let refuse = r#"jq -e '.prompt | test("password")' >/dev/null && { echo 'no secrets in prompts' >&2; exit 2; }; exit 0"#;
    let mut agent =
        agent(&server, home.path(), vec![hook(HookEvent::UserPromptSubmit, refuse)], None);
    let report = run(&mut agent, "my password is hunter2").await;
    assert!(report.is_error() && report.text.contains("no secrets in prompts"), "{}", report.text);
    assert!(server.requests().is_empty());
    assert!(agent.messages().is_empty(), "the refused prompt is not kept");
}

#[tokio::test]
async fn post_tool_use_hooks_add_their_say_to_the_result() {
    let server = ScriptedServer::start(vec![
        Turn::tool("echo", json!({"x": 1})).into(),
        Turn::text("ok").into(),
    ]);
    let home = tempfile::tempdir().unwrap();
    let say = r#"echo '{"decision": "block", "reason": "lint failed", "hookSpecificOutput": {"additionalContext": "3 warnings"}}'"#;
    let mut agent = agent(&server, home.path(), vec![hook(HookEvent::PostToolUse, say)], None);
    run(&mut agent, "go").await;
    let result: String = agent
        .messages()
        .iter()
        .flat_map(|m| m.content.iter())
        .filter_map(|b| match b {
            ContentBlock::ToolResult { content, .. } => {
                Some(content.iter().filter_map(|p| p.as_text()).collect::<Vec<_>>().join("\n"))
            }
            _ => None,
        })
        .collect();
    assert!(result.contains("{\"x\":1}") && result.contains("lint failed"), "{result}");
    assert!(result.contains("3 warnings"), "{result}");
}

fn tool_results(agent: &Agent) -> String {
    agent
        .messages()
        .iter()
        .flat_map(|m| m.content.iter())
        .filter_map(|b| match b {
            ContentBlock::ToolResult { content, .. } => {
                Some(content.iter().filter_map(|p| p.as_text()).collect::<Vec<_>>().join("\n"))
            }
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn a_permission_request_hook_answers_for_the_user_and_may_rewrite_the_input() {
    let server = ScriptedServer::start(vec![
        Turn::tool("echo", json!({"x": 1})).into(),
        Turn::text("ok").into(),
    ]);
    let home = tempfile::tempdir().unwrap();
    let allow = r#"echo '{"hookSpecificOutput": {"hookEventName": "PermissionRequest", "decision": {"behavior": "allow", "updatedInput": {"x": 2}}}}'"#;
    let hooks = vec![hook(HookEvent::PermissionRequest, allow)];
    // Nobody could be asked: without the hook the call would be refused.
    let mut agent = agent_in(PermissionMode::Default, &server, home.path(), hooks, None);
    run(&mut agent, "go").await;
    assert_eq!(tool_results(&agent), "{\"x\":2}");
}
