//! End-to-end: an HTTP MCP server whose tool calls need an OAuth scope the
//! login did not grant (403 `insufficient_scope`). `ferroclaw mcp login`
//! goes through a stand-in browser (an `xdg-open` on PATH that follows the
//! authorization page's redirect with curl); then `-p` says which login
//! grants the scopes, and the REPL asks for them in the browser, saying
//! which and why, and the call goes through.

use crate::common;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::Json;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use common::{Env, Wire, run, tool_results};
use ferroclaw_testkit::{Step, Turn};
use serde_json::{Value, json};

/// The scope every request needs.
const READ: &str = "files:read";
/// The scope `tools/call` needs on top of [`READ`].
const WRITE: &str = "files:write";

/// The fake's books.
#[derive(Default)]
struct Fake {
    base: String,
    /// code -> the scopes it grants.
    codes: Mutex<HashMap<String, String>>,
    /// access token -> its scopes.
    tokens: Mutex<HashMap<String, String>>,
    /// The `scope` of each authorization request, in order.
    authorizations: Mutex<Vec<String>>,
}

async fn resource_metadata(State(fake): State<Arc<Fake>>) -> Json<Value> {
    let b = &fake.base;
    Json(
        json!({"resource": format!("{b}/mcp"), "authorization_servers": [b], "scopes_supported": [READ]}),
    )
}

async fn server_metadata(State(fake): State<Arc<Fake>>) -> Json<Value> {
    let b = &fake.base;
    Json(json!({
        "issuer": b,
        "authorization_endpoint": format!("{b}/authorize"),
        "token_endpoint": format!("{b}/token"),
        "registration_endpoint": format!("{b}/register"),
        "response_types_supported": ["code"],
        "grant_types_supported": ["authorization_code", "refresh_token"],
        "code_challenge_methods_supported": ["S256"],
        "token_endpoint_auth_methods_supported": ["none"],
    }))
}

async fn register(Json(body): Json<Value>) -> Response {
    let reply = json!({"client_id": "client-1", "redirect_uris": body["redirect_uris"]});
    (StatusCode::CREATED, Json(reply)).into_response()
}

/// Approves at once: redirects back with a code for the requested scopes.
async fn authorize(
    State(fake): State<Arc<Fake>>,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    let (Some(redirect), Some(state)) = (q.get("redirect_uri"), q.get("state")) else {
        return (StatusCode::BAD_REQUEST, "bad authorization request").into_response();
    };
    let scope = q.get("scope").cloned().unwrap_or_default();
    let mut authorizations = fake.authorizations.lock().unwrap();
    authorizations.push(scope.clone());
    let code = format!("code-{}", authorizations.len());
    fake.codes.lock().unwrap().insert(code.clone(), scope);
    Redirect::to(&format!("{redirect}?code={code}&state={state}")).into_response()
}

async fn token(State(fake): State<Arc<Fake>>, body: String) -> Response {
    let form: HashMap<&str, &str> =
        body.split('&').filter_map(|pair| pair.split_once('=')).collect();
    let scope = form.get("code").and_then(|c| fake.codes.lock().unwrap().remove(*c));
    let Some(scope) = scope else {
        return (StatusCode::BAD_REQUEST, Json(json!({"error": "invalid_grant"}))).into_response();
    };
    let access = format!("access-{}", fake.tokens.lock().unwrap().len());
    fake.tokens.lock().unwrap().insert(access.clone(), scope.clone());
    Json(
        json!({"access_token": access, "token_type": "Bearer", "expires_in": 3600, "scope": scope}),
    )
    .into_response()
}

/// A streamable HTTP MCP server in JSON-response mode with one tool,
/// `write_note`; 401 without a token, 403 `insufficient_scope` for a call
/// without [`WRITE`].
async fn mcp(State(fake): State<Arc<Fake>>, headers: HeaderMap, body: String) -> Response {
    let bearer = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    let metadata = format!("{}/.well-known/oauth-protected-resource/mcp", fake.base);
    let scopes = bearer.and_then(|t| fake.tokens.lock().unwrap().get(t).cloned());
    let Some(scopes) = scopes else {
        let challenge = format!("Bearer scope=\"{READ}\", resource_metadata=\"{metadata}\"");
        return (StatusCode::UNAUTHORIZED, [("www-authenticate", challenge)]).into_response();
    };
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
        "tools/call" if !scopes.split(' ').any(|s| s == WRITE) => {
            let challenge = format!(
                "Bearer error=\"insufficient_scope\", scope=\"{READ} {WRITE}\", \
                 resource_metadata=\"{metadata}\", error_description=\"writing notes needs {WRITE}\""
            );
            return (StatusCode::FORBIDDEN, [("www-authenticate", challenge)]).into_response();
        }
        "tools/call" => json!({"content": [{"type": "text", "text": "note saved"}]}),
        _ => return StatusCode::ACCEPTED.into_response(),
    };
    let reply = json!({"jsonrpc": "2.0", "id": id, "result": result});
    ([("content-type", "application/json"), ("mcp-session-id", "s1")], reply.to_string())
        .into_response()
}

/// Starts the fake on a free loopback port, on a runtime of its own.
fn start_fake() -> Arc<Fake> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let fake = Arc::new(Fake { base: format!("http://127.0.0.1:{port}"), ..Default::default() });
    let app = axum::Router::new()
        .route("/.well-known/oauth-protected-resource/mcp", get(resource_metadata))
        .route("/.well-known/oauth-protected-resource", get(resource_metadata))
        .route("/.well-known/oauth-authorization-server", get(server_metadata))
        .route("/register", post(register))
        .route("/authorize", get(authorize))
        .route("/token", post(token))
        .route("/mcp", post(mcp).get(|| async { StatusCode::METHOD_NOT_ALLOWED }))
        .with_state(Arc::clone(&fake));
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            axum::serve(listener, app).await.unwrap();
        });
    });
    fake
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
        fake.base
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
    assert_eq!(*fake.authorizations.lock().unwrap(), [READ], "the login asks for read");

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
    assert_eq!(fake.authorizations.lock().unwrap().len(), 1);

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
        *fake.authorizations.lock().unwrap(),
        [READ.to_string(), format!("{READ} {WRITE}")],
        "one step-up, for the granted and the demanded scopes"
    );
}
