//! End-to-end: Claude Code hook scripts, unchanged, in the REPL and in
//! one-shot runs; a project's hooks only once the project is trusted.

mod common;

use common::{Env, Wire, run, tool_results};
use ferroclaw_testkit::{Step, Turn};
use serde_json::json;

/// A Claude Code PreToolUse hook (bash + jq) that refuses any `rm`.
const NO_RM: &str = r#"#!/bin/bash
cmd=$(jq -r '.tool_input.command // empty')
if [[ "$cmd" == *"rm "* ]]; then
  echo "rm is not allowed here; move files to ./trash instead" >&2
  exit 2
fi
exit 0
"#;

/// A Claude Code PreToolUse hook (python3) that rewrites `echo original`.
const REWRITE: &str = r#"#!/usr/bin/env python3
import json, sys
event = json.load(sys.stdin)
command = event["tool_input"]["command"]
if event["tool_name"] == "Bash" and "original" in command:
    print(json.dumps({"hookSpecificOutput": {
        "hookEventName": "PreToolUse",
        "updatedInput": {"command": command.replace("original", "rewritten")},
    }}))
"#;

fn rm_script() -> Vec<Step> {
    vec![
        Turn::tool("bash", json!({"command": "rm -rf data"})).into(),
        Turn::text("could not remove it").into(),
    ]
}

fn echo_script() -> Vec<Step> {
    vec![
        Turn::tool("bash", json!({"command": "echo original > out.txt"})).into(),
        Turn::text("wrote it").into(),
    ]
}

/// Installs `script` as an executable file and a `settings.json` at `dir`
/// that runs it before every Bash call.
fn install_hook(dir: &std::path::Path, name: &str, script: &str) {
    std::fs::create_dir_all(dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, script).unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let settings = json!({
        "permissions": {"allow": ["Bash(ls:*)"]},
        "hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [
            {"type": "command", "command": path.to_string_lossy(), "timeout": 30}
        ]}]}
    });
    std::fs::write(dir.join("settings.json"), settings.to_string()).unwrap();
}

/// A home where commands run without asking, so only the hooks decide.
fn env_with(script: Vec<Step>) -> Env {
    let env = Env::new(Wire::Anthropic, script);
    env.write_home_config("permission_mode = \"bypass\"\n");
    std::fs::create_dir_all(env.ws().join("data")).unwrap();
    env
}

#[test]
fn a_pre_tool_use_hook_blocks_rm_with_exit_2_in_one_shot_and_in_the_repl() {
    let env = env_with([rm_script(), rm_script()].concat());
    install_hook(&env.home.path().join(".claude"), "no-rm.sh", NO_RM);

    let (code, _, stderr) = run(&mut env.oneshot("clean up", &[]));
    assert_eq!(code, 0, "{stderr}");
    assert!(env.ws().join("data").exists(), "the hook must stop the rm");
    let (result, is_error) = tool_results(&env.request_body(1))[0].clone();
    assert!(
        is_error && result.contains("move files to ./trash"),
        "stderr reaches the model: {result}"
    );
    assert!(!stderr.contains("--allowedTools"), "no rule can overrule a hook: {stderr}");

    let (code, stdout, stderr) = run(env.cmd().write_stdin("clean up\n/hooks\n"));
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("could not remove it"), "{stdout}");
    assert!(
        stdout.contains("PreToolUse [Bash]") && stdout.contains("no-rm.sh"),
        "/hooks: {stdout}"
    );
    assert!(env.ws().join("data").exists(), "the REPL runs the same hooks");
    let (result, _) = tool_results(&env.request_body(3))[0].clone();
    assert!(result.contains("move files to ./trash"), "{result}");

    let sessions: String =
        env.session_files().iter().map(|f| std::fs::read_to_string(f).unwrap()).collect();
    let hook_lines: Vec<serde_json::Value> = sessions
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["type"] == "hook")
        .collect();
    assert_eq!(hook_lines.len(), 2, "each hook run is in the session file: {sessions}");
    assert_eq!(hook_lines[0]["event"], "PreToolUse");
    assert_eq!(hook_lines[0]["exit_code"], 2);
}

#[test]
fn a_pre_tool_use_hook_rewrites_the_input_in_one_shot_and_in_the_repl() {
    let env = env_with([echo_script(), echo_script()].concat());
    install_hook(&env.home.path().join(".claude"), "rewrite.py", REWRITE);

    let (code, _, stderr) = run(&mut env.oneshot("write it", &[]));
    assert_eq!(code, 0, "{stderr}");
    let out = std::fs::read_to_string(env.ws().join("out.txt")).unwrap();
    assert_eq!(out.trim(), "rewritten", "the command that ran is the hook's");

    std::fs::remove_file(env.ws().join("out.txt")).unwrap();
    let (code, _, stderr) = run(env.cmd().write_stdin("write it\n"));
    assert_eq!(code, 0, "{stderr}");
    let out = std::fs::read_to_string(env.ws().join("out.txt")).unwrap();
    assert_eq!(out.trim(), "rewritten");
}

#[test]
fn a_projects_hooks_run_only_once_the_project_is_trusted() {
    let env = env_with([rm_script(), rm_script()].concat());
    install_hook(&env.ws().join(".claude"), "no-rm.sh", NO_RM);

    let (code, _, stderr) = run(&mut env.oneshot("clean up", &[]));
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stderr.contains("hooks (commands) for PreToolUse in .claude/settings.json")
            && stderr.contains("ferroclaw trust"),
        "says the project's hooks were skipped and how to allow them: {stderr}"
    );
    assert!(!env.ws().join("data").exists(), "an untrusted project's hook does not run");

    std::fs::create_dir_all(env.ws().join("data")).unwrap();
    let (code, _, stderr) = run(env.cmd().arg("trust"));
    assert_eq!(code, 0, "{stderr}");
    let (code, _, stderr) = run(&mut env.oneshot("clean up", &[]));
    assert_eq!(code, 0, "{stderr}");
    assert!(env.ws().join("data").exists(), "a trusted project's hook runs: {stderr}");
}

/// A hook that writes the names of the variables it sees to `seen.txt`.
const ENV_DUMP: &str = "#!/bin/sh\nenv | cut -d= -f1 > \"$CLAUDE_PROJECT_DIR/seen.txt\"\nexit 0\n";

fn names_a_hook_sees(config: &str) -> String {
    let env = env_with(echo_script());
    env.write_home_config(&format!("permission_mode = \"bypass\"\n{config}"));
    install_hook(&env.home.path().join(".claude"), "dump.sh", ENV_DUMP);
    let (code, _, stderr) = run(&mut env.oneshot("write it", &[]));
    assert_eq!(code, 0, "{stderr}");
    std::fs::read_to_string(env.ws().join("seen.txt")).unwrap()
}

#[test]
fn hooks_see_the_whole_environment_by_default_and_only_the_allow_list_with_hook_env_sandbox() {
    let all = names_a_hook_sees("");
    assert!(all.lines().any(|n| n == "ANTHROPIC_API_KEY"), "Claude Code's default: {all}");

    let sandboxed = names_a_hook_sees("[sandbox]\nhook_env = \"sandbox\"\n");
    assert!(!sandboxed.lines().any(|n| n == "ANTHROPIC_API_KEY"), "{sandboxed}");
    assert!(sandboxed.lines().any(|n| n == "PATH"), "{sandboxed}");
    assert!(sandboxed.lines().any(|n| n == "CLAUDE_PROJECT_DIR"), "{sandboxed}");
}
