//! End-to-end: Claude Code hook scripts, unchanged, in the REPL and in
//! one-shot runs; a project's hooks only once the project is trusted.

use crate::common;

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

/// Claude Code's documented "protect files" hook: reads `tool_input.file_path`
/// with jq and refuses writes to `.env`, lock files and `.git/`.
const PROTECT_FILES: &str = r#"#!/bin/bash
INPUT=$(cat)
FILE_PATH=$(echo "$INPUT" | jq -r '.tool_input.file_path // empty')
PROTECTED_PATTERNS=(".env" "package-lock.json" ".git/")
for pattern in "${PROTECTED_PATTERNS[@]}"; do
  if [[ "$FILE_PATH" == *"$pattern"* ]]; then
    echo "Blocked: $FILE_PATH matches protected pattern '$pattern'" >&2
    exit 2
  fi
done
exit 0
"#;

/// A hook from a public repository that keeps secrets out of the model's reads.
const GUARD_ENV_READS: &str = r#"#!/bin/bash
file=$(jq -r '.tool_input.file_path // empty')
case "$file" in
  /*/.env|/*/.env.*) echo "reading $file is not allowed" >&2; exit 2 ;;
esac
exit 0
"#;

/// Writes `script` as an executable `name` in `dir` and a settings.json there
/// running it for `event` calls of the tools `matcher` names.
fn install_hooks(dir: &std::path::Path, hooks: &[(&str, &str, &str, &str)]) {
    std::fs::create_dir_all(dir).unwrap();
    let mut table = serde_json::Map::new();
    for (event, matcher, name, script) in hooks {
        let path = dir.join(name);
        std::fs::write(&path, script).unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        let group = json!({"matcher": matcher, "hooks": [{"type": "command", "command": path.to_string_lossy()}]});
        table
            .entry(event.to_string())
            .or_insert_with(|| json!([]))
            .as_array_mut()
            .unwrap()
            .push(group);
    }
    std::fs::write(dir.join("settings.json"), json!({"hooks": table}).to_string()).unwrap();
}

#[test]
fn claude_codes_protect_files_hook_stops_the_model_writing_dot_env() {
    let env = env_with(vec![
        Turn::tool("write", json!({"path": ".env", "content": "API_KEY=stolen\n"})).into(),
        Turn::read_then(
            "edit",
            json!({"path": "package-lock.json", "old_string": "1", "new_string": "2"}),
        )
        .into(),
        Turn::text("done").into(),
    ]);
    std::fs::write(env.ws().join("package-lock.json"), "{\"v\": 1}\n").unwrap();
    let home = env.home.path().join(".claude");
    install_hooks(
        &home,
        &[("PreToolUse", "Edit|MultiEdit|Write", "protect-files.sh", PROTECT_FILES)],
    );

    let (code, _, stderr) = run(&mut env.oneshot("set it up", &[]));
    assert_eq!(code, 0, "{stderr}");
    assert!(!env.ws().join(".env").exists(), "the hook must stop the write");
    let lock = std::fs::read_to_string(env.ws().join("package-lock.json")).unwrap();
    assert_eq!(lock, "{\"v\": 1}\n", "and the edit");
    let (result, is_error) = tool_results(&env.request_body(1))[0].clone();
    let env_path = env.ws().join(".env");
    assert!(
        is_error && result.contains(&format!("Blocked: {}", env_path.display())),
        "the hook saw the absolute file_path, and its reason reaches the model: {result}"
    );
}

#[test]
fn a_hook_guarding_reads_of_dot_env_keeps_the_secret_from_the_model() {
    let env = env_with(vec![
        Turn::tool("read", json!({"path": ".env"})).into(),
        Turn::text("done").into(),
    ]);
    std::fs::write(env.ws().join(".env"), "API_KEY=sk-very-secret\n").unwrap();
    install_hooks(
        &env.home.path().join(".claude"),
        &[("PreToolUse", "Read", "guard.sh", GUARD_ENV_READS)],
    );

    let (code, _, stderr) = run(&mut env.oneshot("what is in .env?", &[]));
    assert_eq!(code, 0, "{stderr}");
    let body = env.request_body(1).to_string();
    assert!(!body.contains("sk-very-secret"), "the secret never reaches the model: {body}");
    let (result, is_error) = tool_results(&env.request_body(1))[0].clone();
    assert!(is_error && result.contains("is not allowed"), "{result}");
}

#[test]
fn hooks_get_claude_codes_tool_input_tool_response_and_last_message() {
    let env = env_with(vec![
        Turn::tool("write", json!({"path": "notes.txt", "content": "hi\n"})).into(),
        Turn::tool("bash", json!({"command": "echo out; echo err >&2"})).into(),
        Turn::text("All done.").into(),
    ]);
    let dumped = env.home.path().join("hook-inputs.jsonl");
    let dump = format!("#!/bin/sh\ncat >> '{0}'\necho >> '{0}'\n", dumped.display());
    install_hooks(
        &env.home.path().join(".claude"),
        &[("PostToolUse", "", "dump.sh", &dump), ("Stop", "", "dump-stop.sh", &dump)],
    );
    let (code, _, stderr) = run(&mut env.oneshot("go", &[]));
    assert_eq!(code, 0, "{stderr}");
    let dumped = std::fs::read_to_string(dumped).unwrap();
    let inputs: Vec<serde_json::Value> = dumped
        .lines()
        .filter(|l| !l.is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let file = env.ws().join("notes.txt").to_string_lossy().into_owned();
    let write = &inputs[0];
    assert_eq!(write["tool_name"], "Write");
    assert_eq!(write["tool_input"], json!({"file_path": file, "content": "hi\n"}));
    assert_eq!(
        write["tool_response"],
        json!({"type": "create", "filePath": file, "content": "hi\n", "structuredPatch": [],
               "originalFile": null, "userModified": false})
    );
    let bash = &inputs[1];
    assert_eq!(bash["tool_name"], "Bash");
    assert_eq!(bash["tool_response"]["stdout"], "out\nerr");
    assert_eq!(bash["tool_response"]["interrupted"], false);
    assert!(bash["tool_use_id"].as_str().is_some_and(|id| !id.is_empty()), "{bash}");
    let stop = &inputs[2];
    assert_eq!(stop["hook_event_name"], "Stop");
    assert_eq!(stop["last_assistant_message"], "All done.");
    assert_eq!(stop["stop_hook_active"], false);
    assert_eq!(stop["permission_mode"], "bypassPermissions");
}

#[test]
fn an_unknown_or_unrun_hook_event_is_a_warning_and_the_rest_of_the_file_still_guards() {
    let env = env_with(rm_script());
    let dir = env.home.path().join(".claude");
    install_hook(&dir, "no-rm.sh", NO_RM);
    let settings = dir.join("settings.json");
    let mut value: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&settings).unwrap()).unwrap();
    let stray = json!([{"hooks": [{"type": "command", "command": "true"}]}]);
    value["hooks"]["Setup"] = stray.clone();
    value["hooks"]["preToolUse"] = stray;
    std::fs::write(&settings, value.to_string()).unwrap();

    let (code, _, stderr) = run(&mut env.oneshot("clean up", &[]));
    assert_eq!(code, 0, "one odd event does not stop the run: {stderr}");
    assert!(
        stderr.contains("\"Setup\" is a Claude Code event ferroclaw does not have")
            && stderr.contains("\"preToolUse\" is not a hook event"),
        "{stderr}"
    );
    assert!(env.ws().join("data").exists(), "the PreToolUse hook still guards");
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

#[test]
fn a_hook_printing_past_the_output_cap_is_cut_and_says_so() {
    let env = env_with(echo_script());
    let flood = "#!/bin/sh\nhead -c 200000 /dev/zero | tr '\\0' x\n";
    install_hook(&env.home.path().join(".claude"), "flood.sh", flood);
    let (code, _, stderr) = run(&mut env.oneshot("write it", &[]));
    assert_eq!(code, 0, "{stderr}");
    let said = "printed 200000 bytes on stdout, over the 64 KiB cap on hook output";
    assert!(stderr.contains(said), "the user is told: {stderr}");
    let sessions: String =
        env.session_files().iter().map(|f| std::fs::read_to_string(f).unwrap()).collect();
    assert!(sessions.contains(said), "the session file says so too: {sessions}");
}

#[test]
fn a_prompt_hook_asks_the_sessions_model_and_its_no_sends_the_model_back() {
    let env = env_with(vec![
        Turn::text("done").into(),
        Turn::text(r#"{"ok": false, "reason": "run the tests first"}"#).into(),
        Turn::text("tests pass, done").into(),
        Turn::text(
            r#"```json
{"ok": true}
```"#,
        )
        .into(),
    ]);
    let dir = env.home.path().join(".claude");
    std::fs::create_dir_all(&dir).unwrap();
    let settings = json!({"hooks": {"Stop": [{"hooks": [
        {"type": "prompt", "prompt": "Did the agent run the tests? $ARGUMENTS"}
    ]}]}});
    std::fs::write(dir.join("settings.json"), settings.to_string()).unwrap();
    let (code, stdout, stderr) = run(&mut env.oneshot("fix it", &[]));
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(stdout.trim(), "tests pass, done");
    let asked = env.request_body(1).to_string();
    assert!(
        asked.contains("Did the agent run the tests?") && asked.contains("last_assistant_message"),
        "the hook's question carries the event: {asked}"
    );
    let sent_back = env.request_body(2).to_string();
    assert!(sent_back.contains("run the tests first"), "the hook's reason: {sent_back}");
}
