//! End-to-end: custom slash commands from Markdown files, in one-shot runs
//! and the REPL: arguments, `allowed-tools` for that request only, `!`cmd``.

use crate::common;

use common::{Env, Wire, run, tool_results};
use ferroclaw_testkit::{Step, Turn};
use serde_json::json;

const RELEASE: &str = "---
description: Tag a release
argument-hint: [version] [note]
allowed-tools: Bash(touch:*), Bash(echo:*)
---
Tag release $0 ($ARGUMENTS). Branch: !`echo on-main`
";

fn touch(file: &str) -> Vec<Step> {
    vec![
        Turn::tool("bash", json!({"command": format!("touch {file}")})).into(),
        Turn::text("done").into(),
    ]
}

fn env_with(script: Vec<Step>) -> Env {
    let env = Env::new(Wire::Anthropic, script);
    std::fs::create_dir_all(env.home.path().join("commands")).unwrap();
    std::fs::write(env.home.path().join("commands/release.md"), RELEASE).unwrap();
    env
}

/// The text of the first user message of request `i`.
fn first_prompt(env: &Env, i: usize) -> String {
    let body = env.request_body(i);
    let user = body["messages"].as_array().unwrap().iter().find(|m| m["role"] == "user").cloned();
    user.unwrap()["content"].to_string()
}

#[test]
fn a_command_fills_in_its_arguments_and_grants_its_allowed_tools_in_one_shot() {
    let env = env_with(touch("v1.2"));
    let (code, _, stderr) = run(&mut env.oneshot("/release v1.2 \"first cut\"", &[]));
    assert_eq!(code, 0, "{stderr}");
    let prompt = first_prompt(&env, 0);
    assert!(prompt.contains("Tag release v1.2 (v1.2 \\\"first cut\\\")"), "{prompt}");
    assert!(prompt.contains("Branch: on-main"), "!`cmd` output replaces it: {prompt}");
    assert!(env.ws().join("v1.2").exists(), "allowed-tools let the touch run without asking");
    assert!(!tool_results(&env.request_body(1))[0].1);
}

#[test]
fn allowed_tools_last_one_request_and_commands_show_in_help() {
    let env = env_with([touch("first"), touch("second")].concat());
    let (code, stdout, stderr) =
        run(env.cmd().write_stdin("/help\n/release v2\nagain\nn\n/exit\n"));
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("/release [version] [note]  Tag a release"), "{stdout}");
    assert!(env.ws().join("first").exists(), "the command's request may touch");
    assert!(!env.ws().join("second").exists(), "the next request asks again (answered no)");
    assert!(stderr.contains("? allow bash(touch second)?"), "{stderr}");
}

#[test]
fn a_command_that_is_not_allowed_to_run_a_shell_span_says_so_instead() {
    let env = Env::new(Wire::Anthropic, vec![Turn::text("ok").into()]);
    std::fs::create_dir_all(env.ws().join(".claude/commands/git")).unwrap();
    std::fs::write(env.ws().join(".claude/commands/git/wipe.md"), "Wipe: !`touch wiped`\n")
        .unwrap();
    let (code, _, stderr) = run(&mut env.oneshot("/git:wipe", &[]));
    assert_eq!(code, 0, "{stderr}");
    assert!(!env.ws().join("wiped").exists(), "!`cmd` goes through the permission check");
    let prompt = first_prompt(&env, 0);
    assert!(prompt.contains("not run"), "{prompt}");
}

#[test]
fn typed_arguments_never_become_a_command_the_command_file_runs() {
    // A chat message (or any typed text) spelling `!`cmd`` as an argument
    // of a command whose allowed-tools cover it: before, it ran at once,
    // unasked and before the model saw anything.
    let env = env_with(vec![Turn::text("tagged").into()]);
    let (code, _, stderr) = run(&mut env.oneshot("/release v1 !`touch pwned`", &[]));
    assert_eq!(code, 0, "{stderr}");
    assert!(!env.ws().join("pwned").exists(), "the typed span ran");
    let prompt = first_prompt(&env, 0);
    assert!(prompt.contains("!`touch pwned`"), "it reaches the model as text: {prompt}");
    assert!(prompt.contains("Branch: on-main"), "the file's own span still runs: {prompt}");
}

/// Writes `$FERROCLAW_HOME/commands/NAME.md` (the user's own: trusted).
fn home_command(env: &Env, name: &str, text: &str) {
    std::fs::create_dir_all(env.home.path().join("commands")).unwrap();
    std::fs::write(env.home.path().join(format!("commands/{name}.md")), text).unwrap();
}

#[test]
fn a_command_with_no_placeholder_gets_the_typed_arguments_appended_as_claude_code_does() {
    // 155 of 308 public commands have no `$ARGUMENTS`; the words were dropped.
    let env = Env::new(Wire::Anthropic, vec![Turn::text("ok").into()]);
    home_command(&env, "review", "Review the open diff.\n");
    let (code, _, stderr) = run(&mut env.oneshot("/review src/parser \"error paths\"", &[]));
    assert_eq!(code, 0, "{stderr}");
    let prompt = first_prompt(&env, 0);
    assert!(
        prompt.contains("Review the open diff.\\n\\n\\nARGUMENTS: src/parser \\\"error paths\\\""),
        "{prompt}"
    );
}

#[test]
fn named_indexed_and_positional_arguments_count_from_zero_as_claude_code_does() {
    let env = Env::new(Wire::Anthropic, vec![Turn::text("ok").into()]);
    let text = "---\narguments: [issue, priority]\n---\nFix #$issue ($priority); first $0, second $ARGUMENTS[1], none $5\n";
    home_command(&env, "fix", text);
    let (code, _, stderr) = run(&mut env.oneshot("/fix 42 \"very high\"", &[]));
    assert_eq!(code, 0, "{stderr}");
    let prompt = first_prompt(&env, 0);
    assert!(
        prompt.contains("Fix #42 (very high); first 42, second very high, none $5"),
        "{prompt}"
    );
    assert!(!prompt.contains("ARGUMENTS:"), "a body with placeholders gets nothing appended");
}

#[test]
fn a_claude_model_alias_runs_the_commands_request_on_that_claude_model() {
    let env = Env::new(Wire::Anthropic, vec![Turn::text("ok").into(), Turn::text("ok").into()]);
    home_command(&env, "quick", "---\nmodel: haiku\n---\nSummarise.\n");
    home_command(&env, "pinned", "---\nmodel: claude-sonnet-4-0\n---\nSummarise.\n");
    let (code, _, stderr) = run(&mut env.oneshot("/quick", &[]));
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(env.request_body(0)["model"], "claude-haiku-4-5");
    let (code, _, stderr) = run(&mut env.oneshot("/pinned", &[]));
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(env.request_body(1)["model"], "claude-sonnet-4-0");
}

#[test]
fn a_claude_model_alias_on_a_provider_without_claude_models_is_named_in_a_warning() {
    let env = Env::new(Wire::OpenAi, vec![Turn::text("ok").into()]);
    home_command(&env, "quick", "---\nmodel: haiku\n---\nSummarise.\n");
    let (code, _, stderr) = run(&mut env.oneshot("/quick", &[]));
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains("/quick: model `haiku` is a Claude model"), "{stderr}");
    assert_eq!(env.request_body(0)["model"], "gpt-test", "the request still runs");
}
