//! End-to-end: the real Claude Agent SDK (npm `@anthropic-ai/claude-agent-sdk`,
//! pinned) drives ferroclaw as it drives Claude Code
//! (`options.pathToClaudeCodeExecutable`): stream-json on stdin kept open, the
//! control protocol (`initialize`, `interrupt`, `can_use_tool`) beside it.
//! `agent_sdk/driver.mjs` is the SDK program; it prints what its user sees.
//!
//! The SDK comes from `FERROCLAW_AGENT_SDK_DIR`, else
//! `~/.cache/ferroclaw-agent-sdk` (`scripts/install-test-components agent-sdk`).

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::common;

use common::{Env, Wire};
use ferroclaw_testkit::components::{self, Component};
use ferroclaw_testkit::{ScriptedToolCall, Step, Turn};
use serde_json::{Value, json};

/// The SDK version `scripts/install-test-components` installs.
const PINNED: &str = "0.3.337";

/// The SDK's folder; `None` only when the developer opted out.
#[track_caller]
fn sdk_dir() -> Option<PathBuf> {
    let dir = components::require(Component::AgentSdk, components::agent_sdk_dir())?;
    let package = dir.join("node_modules/@anthropic-ai/claude-agent-sdk/package.json");
    let manifest = std::fs::read_to_string(&package).unwrap();
    assert!(
        manifest.contains(&format!("\"version\": \"{PINNED}\"")),
        "{} is not the Agent SDK {PINNED} (scripts/install-test-components agent-sdk)",
        package.display()
    );
    Some(dir)
}

/// What the SDK program printed: the messages the SDK yielded, and its
/// callbacks' notes (`{"sdk": ...}`).
struct Seen {
    lines: Vec<Value>,
    stderr: String,
}

impl Seen {
    fn messages(&self, kind: &str) -> Vec<&Value> {
        self.lines.iter().filter(|l| l["type"] == kind).collect()
    }

    fn notes(&self, what: &str) -> Vec<&Value> {
        self.lines.iter().filter(|l| l["sdk"] == what).collect()
    }

    /// The text blocks of the assistant messages, in order.
    fn answers(&self) -> Vec<&str> {
        self.messages("assistant")
            .into_iter()
            .flat_map(|m| m["message"]["content"].as_array().into_iter().flatten())
            .filter_map(|b| b["text"].as_str())
            .collect()
    }
}

/// Runs the SDK program's `scenario` against the built binary and `env`'s server.
fn drive(sdk: &Path, env: &Env, scenario: &str) -> Seen {
    let driver = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/agent_sdk/driver.mjs");
    let ferroclaw = env.std_cmd();
    let mut node = std::process::Command::new("node");
    node.arg(driver)
        .arg(sdk)
        .arg(ferroclaw.get_program())
        .arg(env.ws())
        .arg(scenario)
        .env_clear()
        .current_dir(env.ws());
    // The SDK hands its environment to the process it starts.
    for (key, value) in ferroclaw.get_envs() {
        if let Some(value) = value {
            node.env(key, value);
        }
    }
    let out = assert_cmd::Command::from_std(node).timeout(Duration::from_secs(120)).output();
    let out = out.unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "the SDK program failed: {stderr}\n{stdout}");
    let lines = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    let seen = Seen { lines, stderr };
    if !["budget", "mcp-init"].contains(&scenario) {
        assert!(
            seen.notes("error").is_empty(),
            "the SDK raised: {:?}\n{}",
            seen.lines,
            seen.stderr
        );
    }
    seen
}

/// What ferroclaw wrote on stderr, as the SDK's `stderr` callback got it.
fn stderr_of(seen: &Seen) -> String {
    seen.notes("stderr").iter().filter_map(|n| n["data"].as_str()).collect()
}

/// The options an SDK program passes that ferroclaw does not act on leave
/// the run going (each named once on stderr), and a Claude model id picks
/// that model.
#[test]
fn sdk_options_ferroclaw_does_not_act_on_are_named_and_the_run_goes_on() {
    let Some(sdk) = sdk_dir() else { return };
    let env = Env::new(Wire::Anthropic, vec![Turn::text("hi with options").into()]);
    let seen = drive(&sdk, &env, "options");
    assert_eq!(seen.answers(), ["hi with options"]);
    assert_eq!(env.request_body(0)["model"], "claude-sonnet-4-5");
    let stderr = stderr_of(&seen);
    for flag in ["--include-partial-messages", "--max-thinking-tokens", "--fallback-model"] {
        assert!(stderr.contains(&format!("ignoring Claude Code's {flag}")), "{stderr}");
    }
}

/// The program's `mcpServers` start for the run, as Claude Code starts them
/// (`--mcp-config`): here ferroclaw's own tools served over stdio.
#[test]
fn sdk_mcp_servers_start_for_the_run_and_their_tools_answer() {
    let Some(sdk) = sdk_dir() else { return };
    let script: Vec<Step> =
        vec![Turn::tool("mcp__fc__list_dir", json!({})).into(), Turn::text("listed").into()];
    let env = Env::new(Wire::Anthropic, script);
    std::fs::write(env.ws().join("marker-file.txt"), "x").unwrap();
    let seen = drive(&sdk, &env, "mcp");
    assert_eq!(seen.answers(), ["listed"], "{:?}", seen.lines);
    let tools = env.request_body(0)["tools"].to_string();
    assert!(tools.contains("mcp__fc__list_dir"), "the server's tools were offered");
    let result = env.request_body(1)["messages"].to_string();
    assert!(result.contains("marker-file.txt"), "{result}");
}

/// MCP servers the SDK sends in its initialize request (its default) are
/// not read: the run stops before the model is asked and says how to pass
/// them instead.
#[test]
fn sdk_mcp_servers_sent_in_the_initialize_request_stop_the_run_saying_how_to_pass_them() {
    let Some(sdk) = sdk_dir() else { return };
    let env = Env::new(Wire::Anthropic, vec![Turn::text("never").into()]);
    let seen = drive(&sdk, &env, "mcp-init");
    assert_eq!(seen.notes("error").len(), 1, "{:?}", seen.lines);
    let stderr = stderr_of(&seen);
    assert!(stderr.contains("--await-initialize is not supported"), "{stderr}");
    assert!(stderr.contains("mcpServersDelivery: \"argv\""), "{stderr}");
    assert!(env.server.requests().is_empty(), "the model was asked");
}

/// An option ferroclaw cannot keep stops the run before the model is asked,
/// and the program's user reads why.
#[test]
fn an_sdk_option_ferroclaw_cannot_keep_stops_the_run_and_says_why() {
    let Some(sdk) = sdk_dir() else { return };
    let env = Env::new(Wire::Anthropic, vec![Turn::text("never").into()]);
    let seen = drive(&sdk, &env, "budget");
    assert_eq!(seen.notes("error").len(), 1, "{:?}", seen.lines);
    let stderr = stderr_of(&seen);
    assert!(
        stderr.contains(
            "Claude Code's --max-budget-usd is not supported: ferroclaw does not count dollars"
        ),
        "{stderr}"
    );
    assert!(env.server.requests().is_empty(), "the model was asked");
}

#[test]
fn query_with_a_prompt_string_gets_the_answer_and_a_successful_result() {
    let Some(sdk) = sdk_dir() else { return };
    let env = Env::new(Wire::Anthropic, vec![Turn::text("hi from ferroclaw").into()]);
    let seen = drive(&sdk, &env, "prompt");
    let init = seen.messages("system");
    assert_eq!(init.first().map(|m| &m["subtype"]), Some(&json!("init")), "{:?}", seen.lines);
    assert_eq!(seen.answers(), ["hi from ferroclaw"]);
    let results = seen.messages("result");
    assert_eq!(results.len(), 1, "{:?}", seen.lines);
    assert_eq!(
        (&results[0]["subtype"], &results[0]["result"]),
        (&json!("success"), &json!("hi from ferroclaw"))
    );
    assert!(env.request_body(0).to_string().contains("say hi"), "the prompt reached the model");
}

/// Between the turns the program switches the permission mode: the second
/// turn's edit, which nobody could approve in the default mode, runs.
#[test]
fn a_streaming_input_prompt_runs_each_user_message_as_a_turn_of_one_conversation() {
    let Some(sdk) = sdk_dir() else { return };
    let script: Vec<Step> = vec![
        Turn::text("first answer").into(),
        Turn::tool("write", json!({"path": "note.txt", "content": "noted"})).into(),
        Turn::text("second answer").into(),
    ];
    let env = Env::new(Wire::Anthropic, script);
    let seen = drive(&sdk, &env, "turns");
    assert_eq!(seen.answers(), ["first answer", "second answer"]);
    let results: Vec<&Value> = seen.messages("result").iter().map(|r| &r["result"]).collect();
    assert_eq!(results, [&json!("first answer"), &json!("second answer")], "a result per turn");
    let second = env.request_body(1).to_string();
    assert!(second.contains("first question") && second.contains("second question"), "{second}");
    assert_eq!(seen.notes("mode").len(), 1, "{:?}", seen.lines);
    assert_eq!(std::fs::read_to_string(env.ws().join("note.txt")).unwrap(), "noted");
}

#[test]
fn can_use_tool_decides_each_call_the_allowed_one_runs_and_the_denied_one_does_not() {
    let Some(sdk) = sdk_dir() else { return };
    let script: Vec<Step> = vec![
        Turn::tools(vec![
            ScriptedToolCall::new("write", json!({"path": "allowed.txt", "content": "yes"})),
            ScriptedToolCall::new("write", json!({"path": "denied.txt", "content": "no"})),
        ])
        .into(),
        Turn::text("done writing").into(),
    ];
    let env = Env::new(Wire::Anthropic, script);
    let seen = drive(&sdk, &env, "can-use");
    // The SDK's callback saw both calls, in Claude Code's names and shapes.
    let asked: Vec<(&Value, &Value)> = seen
        .notes("can_use_tool")
        .iter()
        .map(|n| (&n["toolName"], &n["input"]["file_path"]))
        .collect();
    let ws = env.ws().to_string_lossy().to_string();
    assert_eq!(
        asked,
        [
            (&json!("Write"), &json!(format!("{ws}/allowed.txt"))),
            (&json!("Write"), &json!(format!("{ws}/denied.txt")))
        ]
    );
    assert_eq!(std::fs::read_to_string(env.ws().join("allowed.txt")).unwrap(), "yes");
    assert!(!env.ws().join("denied.txt").exists(), "a denied call does not run");
    // The model was told why, in the SDK user's words.
    let results = common::tool_results(&env.request_body(1));
    assert!(results.iter().any(|(text, _)| text.contains("the SDK user said no")), "{results:?}");
    let result = seen.messages("result");
    assert_eq!(result.last().map(|r| &r["result"]), Some(&json!("done writing")));
    let denials = &result[0]["permission_denials"];
    assert_eq!(denials.as_array().map(Vec::len), Some(1), "{denials}");
}

#[test]
fn interrupt_ends_the_running_turn_and_the_model_is_not_asked_again() {
    let Some(sdk) = sdk_dir() else { return };
    let script: Vec<Step> = vec![
        Turn::tool("bash", json!({"command": "sleep 60 && touch slept.txt"})).into(),
        Turn::text("never said").into(),
    ];
    let env = Env::new(Wire::Anthropic, script);
    let seen = drive(&sdk, &env, "interrupt");
    assert_eq!(seen.notes("interrupted").len(), 1, "{:?}", seen.lines);
    let result = seen.messages("result");
    assert_eq!(result.len(), 1, "{:?}", seen.lines);
    assert_eq!(result[0]["subtype"], "error_during_execution", "{}", result[0]);
    assert!(!seen.answers().contains(&"never said"));
    assert_eq!(env.server.requests().len(), 1, "the turn ended at the interrupt");
    assert!(!env.ws().join("slept.txt").exists(), "the command was stopped");
}
