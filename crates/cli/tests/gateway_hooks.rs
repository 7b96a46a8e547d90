//! The gateway's chats run the same hooks and custom commands as the REPL.

use crate::common;
use crate::gateway_support;

use common::{Env, Wire, tool_results};
use ferroclaw_testkit::Turn;
use gateway_support::{Gateway, chat};
use serde_json::json;

#[test]
fn a_chat_turn_runs_the_users_hooks_and_custom_commands() {
    let env = Env::new(
        Wire::OpenAi,
        vec![
            Turn::tool("bash", json!({"command": "rm -rf notes"})).into(),
            Turn::text("could not remove it").into(),
            Turn::text("tagged").into(),
        ],
    );
    let claude = env.home.path().join(".claude");
    std::fs::create_dir_all(&claude).unwrap();
    let hook = r#"jq -r .tool_input.command | grep -q '^rm ' && { echo 'no rm from chats' >&2; exit 2; }; exit 0"#;
    let settings = json!({"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": hook}]}]}});
    std::fs::write(claude.join("settings.json"), settings.to_string()).unwrap();
    std::fs::create_dir_all(env.home.path().join("commands")).unwrap();
    std::fs::write(env.home.path().join("commands/release.md"), "Tag release $0 now.\n").unwrap();
    let gw = Gateway::start(&env, "heartbeat_minutes = 0\n");

    let (status, answer) = chat(gw.port, "u1", "tidy up");
    assert_eq!((status, answer.as_str()), (200, "could not remove it"));
    let (result, _) = tool_results(&env.request_body(1))[0].clone();
    assert!(result.contains("no rm from chats"), "{result}");

    let (status, answer) = chat(gw.port, "u1", "/release v9");
    assert_eq!((status, answer.as_str()), (200, "tagged"));
    assert!(env.request_body(2).to_string().contains("Tag release v9 now."));
}
