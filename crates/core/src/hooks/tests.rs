use super::*;
use serde_json::json;

fn hook(event: HookEvent, matcher: &str, command: &str, fail_closed: bool) -> Hook {
    Hook {
        event,
        matcher: Matcher::parse(Some(matcher)).unwrap(),
        command: command.into(),
        timeout_secs: 10.0,
        fail_closed,
        source: PathBuf::from("test"),
        options: Default::default(),
    }
}

fn common(ws: &Path) -> Common {
    Common {
        session_id: "s1".into(),
        transcript_path: ws.join("s1.jsonl"),
        cwd: ws.to_path_buf(),
        permission_mode: "default".into(),
        agent: None,
    }
}

async fn pre_tool(hooks: Vec<Hook>, ws: &Path, input: Value) -> HookOutcome {
    Hooks::from_hooks(hooks, ws)
        .run(
            HookEvent::PreToolUse,
            &["bash", "Bash"],
            &common(ws),
            json!({"tool_name": "Bash", "tool_input": input}),
        )
        .await
}

#[tokio::test]
async fn exit_2_blocks_with_stderr_and_the_other_hooks_still_run_as_in_claude_code() {
    let ws = tempfile::tempdir().unwrap();
    let hooks = vec![
        hook(HookEvent::PreToolUse, "Bash", "echo 'no rm here' >&2; exit 2", false),
        hook(HookEvent::PreToolUse, "Bash", "touch second-ran; exit 2", false),
        hook(HookEvent::PreToolUse, "Bash", r#"echo '{"decision": "approve"}'"#, false),
    ];
    let out = pre_tool(hooks, ws.path(), json!({"command": "rm -rf x"})).await;
    assert_eq!(out.blocked.as_deref(), Some("no rm here"), "the first block's reason is given");
    assert!(ws.path().join("second-ran").exists(), "a hook after a block still runs");
    assert_eq!(out.runs.len(), 3);
    assert_eq!(out.runs[0].exit_code, Some(2));
}

#[tokio::test]
async fn rewrites_chain_in_order_and_each_hook_sees_the_last_rewrite() {
    let ws = tempfile::tempdir().unwrap();
    let first = r#"echo '{"hookSpecificOutput": {"hookEventName": "PreToolUse", "updatedInput": {"command": "echo one"}}}'"#;
    // The second hook sees the first one's rewrite and appends to it.
    let second = r#"python3 -c 'import json,sys; d=json.load(sys.stdin); c=d["tool_input"]["command"]; print(json.dumps({"hookSpecificOutput": {"updatedInput": {"command": c + " two"}}}))'"#;
    let hooks = vec![
        hook(HookEvent::PreToolUse, "Bash", first, false),
        hook(HookEvent::PreToolUse, "Edit|Write", "exit 2", false),
        hook(HookEvent::PreToolUse, "*", second, false),
    ];
    let out = pre_tool(hooks, ws.path(), json!({"command": "echo zero"})).await;
    assert_eq!(out.blocked, None, "a hook for other tools does not run");
    assert_eq!(out.updated_input, Some(json!({"command": "echo one two"})));
    assert_eq!(out.runs.len(), 2);
}

#[tokio::test]
async fn a_failing_hook_is_a_notice_unless_it_is_fail_closed() {
    let ws = tempfile::tempdir().unwrap();
    let open = pre_tool(
        vec![hook(HookEvent::PreToolUse, "", "echo broken >&2; exit 1", false)],
        ws.path(),
        json!({}),
    )
    .await;
    assert_eq!(open.blocked, None);
    assert!(open.notices[0].contains("broken"), "{:?}", open.notices);
    let mut slow = hook(HookEvent::PreToolUse, "", "sleep 5", true);
    slow.timeout_secs = 0.2;
    let closed = pre_tool(vec![slow], ws.path(), json!({})).await;
    let reason = closed.blocked.unwrap();
    assert!(reason.contains("timed out") && reason.contains("fail_closed"), "{reason}");
    assert_eq!(closed.runs[0].exit_code, None);
}

#[tokio::test]
async fn json_answers_decide_permission_and_add_context() {
    let ws = tempfile::tempdir().unwrap();
    let deny = r#"echo '{"hookSpecificOutput": {"permissionDecision": "deny", "permissionDecisionReason": "not on fridays"}}'"#;
    let out =
        pre_tool(vec![hook(HookEvent::PreToolUse, "", deny, false)], ws.path(), json!({})).await;
    assert_eq!(out.permission, Some(PermissionAnswer::Deny("not on fridays".into())));
    let allow = r#"echo '{"hookSpecificOutput": {"permissionDecision": "allow", "additionalContext": "ctx"}}'"#;
    let ask = r#"echo '{"hookSpecificOutput": {"permissionDecision": "ask"}}'"#;
    let out = pre_tool(
        vec![
            hook(HookEvent::PreToolUse, "", allow, false),
            hook(HookEvent::PreToolUse, "", ask, false),
        ],
        ws.path(),
        json!({}),
    )
    .await;
    assert_eq!(out.permission, Some(PermissionAnswer::Ask), "the strictest answer wins");
    assert_eq!(out.context, vec!["ctx".to_string()]);
}

#[tokio::test]
async fn hooks_get_claude_codes_fields_and_run_in_the_workspace() {
    let ws = tempfile::tempdir().unwrap();
    let hooks = vec![hook(HookEvent::PreToolUse, "Bash", "cat > seen.json; pwd > where", false)];
    pre_tool(hooks, ws.path(), json!({"command": "ls"})).await;
    let seen: Value =
        serde_json::from_str(&std::fs::read_to_string(ws.path().join("seen.json")).unwrap())
            .unwrap();
    assert_eq!(seen["hook_event_name"], "PreToolUse");
    assert_eq!(seen["session_id"], "s1");
    assert_eq!(seen["permission_mode"], "default");
    assert_eq!(seen["tool_input"]["command"], "ls");
    assert!(seen["transcript_path"].as_str().unwrap().ends_with("s1.jsonl"));
    let wd = std::fs::read_to_string(ws.path().join("where")).unwrap();
    assert_eq!(
        std::fs::canonicalize(wd.trim()).unwrap(),
        std::fs::canonicalize(ws.path()).unwrap()
    );
}

#[tokio::test]
async fn user_prompt_plain_stdout_is_context_and_continue_false_stops() {
    let ws = tempfile::tempdir().unwrap();
    let hooks = Hooks::from_hooks(
        vec![
            hook(HookEvent::UserPromptSubmit, "", "echo 'today is monday'", false),
            hook(
                HookEvent::UserPromptSubmit,
                "",
                r#"echo '{"continue": false, "stopReason": "quiet hours"}'"#,
                false,
            ),
        ],
        ws.path(),
    );
    let out = hooks
        .run(HookEvent::UserPromptSubmit, &[], &common(ws.path()), json!({"prompt": "hi"}))
        .await;
    assert_eq!(out.context, vec!["today is monday".to_string()]);
    assert_eq!(out.stop.as_deref(), Some("quiet hours"));
}

#[test]
fn hooks_load_in_the_documented_order_and_a_projects_only_once_trusted() {
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let toml = |c: &str| {
        format!("[[hooks.Stop]]\n[[hooks.Stop.hooks]]\ntype = \"command\"\ncommand = \"{c}\"\n")
    };
    let json = |c: &str| {
        json!({"hooks": {"Stop": [{"hooks": [{"type": "command", "command": c}]}]}}).to_string()
    };
    std::fs::write(home.path().join("config.toml"), toml("home-toml")).unwrap();
    std::fs::create_dir_all(ws.path().join(".agent")).unwrap();
    std::fs::create_dir_all(ws.path().join(".claude")).unwrap();
    std::fs::write(ws.path().join(".agent/config.toml"), toml("project-toml")).unwrap();
    std::fs::write(ws.path().join(".claude/settings.json"), json("project-json")).unwrap();
    std::fs::write(ws.path().join(".claude/settings.local.json"), json("local-json")).unwrap();
    let load = || {
        let config =
            crate::Config::load(home.path().into(), ws.path().into(), &crate::Overrides::default())
                .unwrap();
        let hooks = Hooks::load(&config).unwrap();
        let ours = ["home-toml", "project-toml", "project-json", "local-json"];
        let commands: Vec<String> = hooks
            .list()
            .iter()
            .map(|h| h.command.clone())
            .filter(|c| ours.contains(&c.as_str()))
            .collect();
        (commands, config.ignored)
    };
    let (commands, ignored) = load();
    assert_eq!(commands, ["home-toml"]);
    let said = ignored.join("\n");
    assert!(
        said.contains(".agent/config.toml")
            && said.contains(".claude/settings.json")
            && said.contains(".claude/settings.local.json"),
        "{said}"
    );
    crate::trust::TrustStore::new(home.path()).trust(ws.path()).unwrap();
    let (commands, ignored) = load();
    assert_eq!(commands, ["home-toml", "project-toml", "project-json", "local-json"]);
    assert!(ignored.is_empty(), "{ignored:?}");
}

/// Serves one HTTP request on a local port: answers `reply` and hands back the body it got.
async fn one_http_answer(reply: &'static str) -> (String, tokio::task::JoinHandle<String>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    let served = tokio::spawn(async move {
        let (mut tcp, _) = listener.accept().await.unwrap();
        let mut got = Vec::new();
        let mut buf = [0u8; 4096];
        loop {
            let n = tcp.read(&mut buf).await.unwrap();
            got.extend_from_slice(&buf[..n]);
            let text = String::from_utf8_lossy(&got).to_string();
            if let Some((head, body)) = text.split_once("\r\n\r\n") {
                let len: usize = head
                    .lines()
                    .find_map(|l| {
                        l.to_ascii_lowercase()
                            .strip_prefix("content-length:")
                            .map(|v| v.trim().parse().unwrap())
                    })
                    .unwrap_or(0);
                if body.len() >= len {
                    let answer = format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{reply}",
                        reply.len()
                    );
                    tcp.write_all(answer.as_bytes()).await.unwrap();
                    return body.to_string();
                }
            }
        }
    });
    (url, served)
}

#[tokio::test]
async fn an_http_hook_gets_the_event_as_json_and_its_answer_counts() {
    let ws = tempfile::tempdir().unwrap();
    let (url, served) =
        one_http_answer(r#"{"decision": "block", "reason": "the server says no"}"#).await;
    let table: HookTable = serde_json::from_value(json!({
        "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "http", "url": url}]}]
    }))
    .unwrap();
    let hooks = settings::compile(&table, Path::new("settings.json")).unwrap();
    let out = pre_tool(hooks, ws.path(), json!({"command": "rm -rf x"})).await;
    assert_eq!(out.blocked.as_deref(), Some("the server says no"));
    let sent: Value = serde_json::from_str(&served.await.unwrap()).unwrap();
    assert_eq!(
        (sent["hook_event_name"].as_str(), sent["tool_input"]["command"].as_str()),
        (Some("PreToolUse"), Some("rm -rf x"))
    );
}

#[tokio::test]
async fn a_once_hook_runs_once_and_an_async_hook_blocks_nothing() {
    let ws = tempfile::tempdir().unwrap();
    let table: HookTable = serde_json::from_value(json!({
        "PreToolUse": [{"hooks": [
            {"type": "command", "command": "echo run >> once.log", "once": true},
            {"type": "command", "command": "exit 2", "async": true}
        ]}]
    }))
    .unwrap();
    let hooks = settings::compile(&table, Path::new("settings.json")).unwrap();
    let hooks = Hooks::from_hooks(hooks, ws.path());
    for _ in 0..2 {
        let out = hooks.run(HookEvent::PreToolUse, &["bash"], &common(ws.path()), json!({})).await;
        assert_eq!(out.blocked, None, "an async hook's exit 2 is not waited for");
    }
    let log = std::fs::read_to_string(ws.path().join("once.log")).unwrap();
    assert_eq!(log, "run\n");
}
