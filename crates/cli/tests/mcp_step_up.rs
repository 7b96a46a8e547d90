//! End-to-end: an HTTP MCP server whose tool calls need an OAuth scope the
//! login did not grant (403 `insufficient_scope`). `ferroclaw mcp login`
//! goes through a stand-in browser (an `xdg-open` on PATH that follows the
//! authorization page's redirect with curl); then `-p` says which login
//! grants the scopes, and the REPL asks for them in the browser, saying
//! which and why, and the call goes through.

use crate::common;

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use common::{Env, Wire, run, tool_results};
use ferroclaw_testkit::oauth::{FakeOAuth, OAuthOptions, READ_SCOPE as READ, WRITE_SCOPE as WRITE};
use ferroclaw_testkit::{Step, Turn};
use serde_json::{Value, json};

/// A streamable HTTP MCP server in JSON-response mode with one tool,
/// `write_note`. The fake's guard in front of it answers 401 without a token
/// and 403 `insufficient_scope` for a call without [`WRITE`].
async fn mcp(body: String) -> Response {
    let message: Value = serde_json::from_str(&body).unwrap_or_default();
    let id = message["id"].clone();
    let result = match message["method"].as_str().unwrap_or_default() {
        "initialize" => json!({
            "protocolVersion": message["params"]["protocolVersion"],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "notes", "version": "1.0.0"},
        }),
        "tools/list" => json!({"tools": [{
            "name": "write_note",
            "description": "Saves a note.",
            "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}},
        }]}),
        "tools/call" => json!({"content": [{"type": "text", "text": "note saved"}]}),
        _ => return StatusCode::ACCEPTED.into_response(),
    };
    let reply = json!({"jsonrpc": "2.0", "id": id, "result": result});
    ([("content-type", "application/json"), ("mcp-session-id", "s1")], reply.to_string())
        .into_response()
}

/// Starts the fake authorization server, in step-up mode, in front of [`mcp`].
fn start_fake() -> FakeOAuth {
    FakeOAuth::start(OAuthOptions { step_up: true, ..Default::default() }, |_base| {
        axum::Router::new()
            .route("/mcp", post(mcp).get(|| async { StatusCode::METHOD_NOT_ALLOWED }))
    })
}

fn write_note() -> Vec<Step> {
    vec![
        Turn::tool("mcp__notes__write_note", json!({"text": "hi"})).into(),
        Turn::text("done").into(),
    ]
}

#[test]
fn a_call_that_needs_more_scopes_names_the_login_in_one_shot_and_steps_up_in_the_repl() {
    let fake = start_fake();
    let env = Env::new(Wire::Anthropic, [write_note(), write_note()].concat());
    env.write_home_config(&format!(
        "permission_mode = \"bypass\"\n[mcp_servers.notes]\nurl = \"{}/mcp\"\n",
        fake.url()
    ));
    // The stand-in browser: follows the authorization page's redirect back
    // to ferroclaw's loopback listener.
    let bin = env.home.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::write(bin.join("xdg-open"), "#!/bin/sh\nexec curl -sfL -o /dev/null \"$1\"\n")
        .unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::Permissions::from_mode(0o755);
        std::fs::set_permissions(bin.join("xdg-open"), mode).unwrap();
    }
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());

    let (code, _, stderr) = run(env.cmd().env("PATH", &path).args(["mcp", "login", "notes"]));
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(fake.authorizations(), [READ], "the login asks for read");

    let (code, _, stderr) = run(env.oneshot("save a note", &[]).env("PATH", &path));
    assert_eq!(code, 0, "{stderr}");
    let (result, is_error) = tool_results(&env.request_body(1))[0].clone();
    assert!(is_error, "{result}");
    assert!(
        result.ends_with(
            "it needs the OAuth scope(s) files:read files:write; \
             run `ferroclaw mcp login notes --scopes \"files:read files:write\"` to grant them"
        ),
        "-p has nobody at a browser: {result}"
    );
    assert_eq!(fake.authorizations().len(), 1);

    let (code, _, stderr) = run(env.cmd().env("PATH", &path).write_stdin("save a note\n"));
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stderr.contains(
            "mcp server notes refused the call of write_note: it needs the OAuth scope(s) \
             files:read files:write (writing notes needs files:write); granted so far: \
             files:read. ferroclaw asks its authorization server for files:read files:write.\n\
             To grant them, open this address in a browser:"
        ),
        "the REPL says which scopes and why before the browser: {stderr}"
    );
    let (result, is_error) = tool_results(&env.request_body(3))[0].clone();
    assert!(!is_error && result.contains("note saved"), "the call is retried: {result}");
    assert_eq!(
        fake.authorizations(),
        [READ.to_string(), format!("{READ} {WRITE}")],
        "one step-up, for the granted and the demanded scopes"
    );
}
