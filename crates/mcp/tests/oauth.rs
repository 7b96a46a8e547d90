//! OAuth against an in-process fake: an MCP server that answers 401 without
//! a bearer token, and the authorization server it names (protected
//! resource metadata, authorization server metadata, dynamic client
//! registration, authorization code with PKCE, refresh tokens). In step-up
//! mode its tool calls need the scope `files:write` on top of `files:read`,
//! and it answers a token without it with 403 `insufficient_scope`.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use axum::Json;
use axum::extract::{Query, Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use ferroclaw_mcp::{
    ClientHooks, Consent, HubOptions, McpConfig, McpHub, ServerConfig, TokenStore, ToolServer,
};
use ferroclaw_tools::{ToolContext, ToolRegistry};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use serde_json::{Value, json};

/// The scope every request needs in step-up mode.
const READ: &str = "files:read";
/// The scope a tool call needs on top of [`READ`] in step-up mode.
const WRITE: &str = "files:write";

/// What an authorization code stands for.
struct Grant {
    /// The client it was issued to.
    client: String,
    scopes: Vec<String>,
}

/// The fake's books: codes handed out, tokens valid, requests seen.
#[derive(Default)]
struct Fake {
    base: String,
    /// Step-up mode: scopes enforced, `tools/call` needs [`WRITE`].
    step_up: bool,
    /// The authorization server never grants [`WRITE`].
    withhold_write: bool,
    /// code -> what it grants.
    codes: Mutex<HashMap<String, Grant>>,
    /// Access token -> its scopes.
    valid_tokens: Mutex<HashMap<String, Vec<String>>>,
    /// Refresh token -> the client it was issued to and the grant's scopes.
    refresh_tokens: Mutex<HashMap<String, (String, Vec<String>)>>,
    /// The `scope` of each authorization request, in order.
    authorizations: Mutex<Vec<String>>,
    registrations: AtomicUsize,
    refreshes: AtomicUsize,
    issued: AtomicUsize,
}

impl Fake {
    fn next(&self, prefix: &str) -> String {
        format!("{prefix}-{}", self.issued.fetch_add(1, Ordering::SeqCst))
    }
}

async fn resource_metadata(State(fake): State<Arc<Fake>>) -> Json<Value> {
    let mut metadata =
        json!({"resource": format!("{}/mcp", fake.base), "authorization_servers": [fake.base]});
    if fake.step_up {
        metadata["scopes_supported"] = json!([READ]);
    }
    Json(metadata)
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

async fn register(State(fake): State<Arc<Fake>>, Json(body): Json<Value>) -> Response {
    fake.registrations.fetch_add(1, Ordering::SeqCst);
    let reply = json!({"client_id": fake.next("client"), "redirect_uris": body["redirect_uris"]});
    (StatusCode::CREATED, Json(reply)).into_response()
}

async fn authorize(
    State(fake): State<Arc<Fake>>,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    let ok = q.get("response_type").map(String::as_str) == Some("code")
        && q.get("code_challenge_method").map(String::as_str) == Some("S256");
    let (Some(_challenge), Some(redirect), Some(state), true) =
        (q.get("code_challenge"), q.get("redirect_uri"), q.get("state"), ok)
    else {
        return (StatusCode::BAD_REQUEST, "bad authorization request").into_response();
    };
    let requested = q.get("scope").cloned().unwrap_or_default();
    fake.authorizations.lock().unwrap().push(requested.clone());
    let granted: Vec<String> = requested
        .split_whitespace()
        .filter(|s| !(fake.withhold_write && *s == WRITE))
        .map(str::to_string)
        .collect();
    let code = fake.next("code");
    let client = q.get("client_id").cloned().unwrap_or_default();
    fake.codes.lock().unwrap().insert(code.clone(), Grant { client, scopes: granted });
    Redirect::to(&format!("{redirect}?code={code}&state={state}")).into_response()
}

async fn token(State(fake): State<Arc<Fake>>, body: String) -> Response {
    let form: HashMap<&str, &str> =
        body.split('&').filter_map(|pair| pair.split_once('=')).collect();
    let invalid_grant =
        || (StatusCode::BAD_REQUEST, Json(json!({"error": "invalid_grant"}))).into_response();
    let (access, expires_in, client, scopes) = match form.get("grant_type").copied() {
        Some("authorization_code") => {
            let known = form.get("code").and_then(|c| fake.codes.lock().unwrap().remove(*c));
            let verifier_ok = form.get("code_verifier").is_some_and(|v| v.len() >= 43);
            let (Some(Grant { client, scopes }), true) = (known, verifier_ok) else {
                return invalid_grant();
            };
            // Already expired: the first use must refresh it.
            (fake.next("access"), 0, client, scopes)
        }
        Some("refresh_token") => {
            fake.refreshes.fetch_add(1, Ordering::SeqCst);
            let sent = form.get("refresh_token").copied().unwrap_or_default();
            let grant = fake.refresh_tokens.lock().unwrap().get(sent).cloned();
            // A refresh token is good only for the client it was issued to.
            let Some((client, scopes)) =
                grant.filter(|(client, _)| form.get("client_id") == Some(&client.as_str()))
            else {
                return invalid_grant();
            };
            (fake.next("refreshed"), 3600, client, scopes)
        }
        _ => {
            return (StatusCode::BAD_REQUEST, Json(json!({"error": "unsupported_grant_type"})))
                .into_response();
        }
    };
    let refresh = fake.next("refresh");
    fake.valid_tokens.lock().unwrap().insert(access.clone(), scopes.clone());
    fake.refresh_tokens.lock().unwrap().insert(refresh.clone(), (client, scopes.clone()));
    let mut reply = json!({"access_token": access, "token_type": "Bearer", "expires_in": expires_in, "refresh_token": refresh});
    if fake.step_up {
        reply["scope"] = json!(scopes.join(" "));
    }
    Json(reply).into_response()
}

/// 401 with a `WWW-Authenticate` challenge unless a valid token comes
/// along; in step-up mode, 403 `insufficient_scope` for a token without the
/// scopes the JSON-RPC method needs.
async fn require_token(State(fake): State<Arc<Fake>>, request: Request, next: Next) -> Response {
    let sent = request
        .headers()
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::to_string);
    let scopes = sent.and_then(|t| fake.valid_tokens.lock().unwrap().get(&t).cloned());
    let metadata = format!("{}/.well-known/oauth-protected-resource/mcp", fake.base);
    let Some(scopes) = scopes else {
        let scope = if fake.step_up { format!("scope=\"{READ}\", ") } else { String::new() };
        let challenge = format!("Bearer {scope}resource_metadata=\"{metadata}\"");
        return (StatusCode::UNAUTHORIZED, [("www-authenticate", challenge)], "unauthorized")
            .into_response();
    };
    if !fake.step_up {
        return next.run(request).await;
    }
    let (parts, body) = request.into_parts();
    let body = axum::body::to_bytes(body, 1 << 20).await.unwrap_or_default();
    let method = serde_json::from_slice::<Value>(&body).unwrap_or_default()["method"].clone();
    let needed: &[&str] = if method == "tools/call" { &[READ, WRITE] } else { &[READ] };
    if needed.iter().all(|n| scopes.iter().any(|s| s == n)) {
        return next.run(Request::from_parts(parts, axum::body::Body::from(body))).await;
    }
    let challenge = format!(
        "Bearer error=\"insufficient_scope\", scope=\"{}\", resource_metadata=\"{metadata}\", \
         error_description=\"writing needs {WRITE}\"",
        needed.join(" ")
    );
    (StatusCode::FORBIDDEN, [("www-authenticate", challenge)], "insufficient scope").into_response()
}

/// Starts the fake on a free loopback port (in step-up mode when
/// `step_up`; never granting [`WRITE`] when `withhold_write`).
async fn start_fake(step_up: bool, withhold_write: bool) -> Arc<Fake> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let base = format!("http://127.0.0.1:{port}");
    let fake = Arc::new(Fake { base, step_up, withhold_write, ..Default::default() });
    let mut tools = ToolRegistry::new();
    let builtins = ferroclaw_tools::builtin_tools();
    tools.register_arc(Arc::clone(builtins.get("read").unwrap()));
    let server = ToolServer::new(tools, ToolContext::new("/"), Arc::new(|_, _| Ok(())));
    let service = StreamableHttpService::new(
        move || Ok(server.clone()),
        LocalSessionManager::default().into(),
        StreamableHttpServerConfig::default()
            .with_allowed_hosts([format!("127.0.0.1:{port}"), "127.0.0.1".to_string()]),
    );
    let mcp = axum::Router::new()
        .nest_service("/mcp", service)
        .layer(axum::middleware::from_fn_with_state(Arc::clone(&fake), require_token));
    let oauth = axum::Router::new()
        .route("/.well-known/oauth-protected-resource/mcp", get(resource_metadata))
        .route("/.well-known/oauth-protected-resource", get(resource_metadata))
        .route("/.well-known/oauth-authorization-server", get(server_metadata))
        .route("/register", post(register))
        .route("/authorize", get(authorize))
        .route("/token", post(token))
        .with_state(Arc::clone(&fake));
    tokio::spawn(async move {
        axum::serve(listener, oauth.merge(mcp)).await.unwrap();
    });
    fake
}

async fn start_hub(url: &str, tokens: &TokenStore) -> McpHub {
    start_hub_consenting(url, tokens, None).await
}

/// A hub whose user grants more scopes as `consent` says (`None`: nobody can).
async fn start_hub_consenting(url: &str, tokens: &TokenStore, consent: Option<Consent>) -> McpHub {
    McpHub::start(
        McpConfig { servers: vec![ServerConfig::http("web", url)], ..Default::default() },
        HubOptions {
            workspace: std::env::temp_dir(),
            tokens: Some(tokens.clone()),
            hooks: ClientHooks { scope_consent: consent, ..Default::default() },
            ..Default::default()
        },
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_answers_401_needs_login_then_works_with_refreshed_tokens() {
    let fake = start_fake(false, false).await;
    let url = format!("{}/mcp", fake.base);
    let home = tempfile::tempdir().unwrap();
    let tokens = TokenStore::new(home.path().join("mcp-tokens"));

    let hub = start_hub(&url, &tokens).await;
    assert_eq!(
        hub.problems(),
        ["mcp server web needs you to log in (OAuth): run `ferroclaw mcp login web`"]
    );
    hub.shutdown().await;

    ferroclaw_mcp::login("web", &url, &tokens, Consent::Headless, None, &Default::default(), &[])
        .await
        .unwrap();
    assert_eq!(fake.registrations.load(Ordering::SeqCst), 1);
    assert!(tokens.has_tokens("web", &url));
    assert!(!tokens.has_tokens("web", "http://127.0.0.1:1/other"));
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(tokens.path("web")).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "tokens are readable by the user only");
    }

    let hub = start_hub(&url, &tokens).await;
    assert!(hub.problems().is_empty(), "{:?}", hub.problems());
    let mut registry = ToolRegistry::new();
    hub.register_tools(&mut registry);
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.txt"), "behind oauth\n").unwrap();
    let out = registry
        .get("mcp__web__read")
        .unwrap()
        .execute(json!({"path": dir.path().join("a.txt")}), &ToolContext::new("/"))
        .await
        .unwrap();
    assert!(out.joined_text().contains("behind oauth"), "{out:?}");
    assert_eq!(
        fake.refreshes.load(Ordering::SeqCst),
        1,
        "the expired access token was refreshed once"
    );
    let saved = std::fs::read_to_string(tokens.path("web")).unwrap();
    assert!(saved.contains("refreshed-"), "the refreshed token is saved: {saved}");
    hub.shutdown().await;

    assert!(tokens.remove("web").unwrap());
    let hub = start_hub(&url, &tokens).await;
    assert_eq!(hub.problems().len(), 1, "logged out: {:?}", hub.problems());
    hub.shutdown().await;
}

/// Logs in headlessly to the step-up fake and starts a hub on the tokens;
/// returns the hub, the tokens' directory and a file the tools can read.
async fn logged_in(
    fake: &Fake,
    tokens: &TokenStore,
    consent: Option<Consent>,
) -> (McpHub, tempfile::TempDir) {
    let url = format!("{}/mcp", fake.base);
    ferroclaw_mcp::login("web", &url, tokens, Consent::Headless, None, &Default::default(), &[])
        .await
        .unwrap();
    assert_eq!(*fake.authorizations.lock().unwrap(), [READ], "the first login asks for read only");
    let hub = start_hub_consenting(&url, tokens, consent).await;
    assert!(hub.problems().is_empty(), "tools/list needs read only: {:?}", hub.problems());
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.txt"), "needs write scope\n").unwrap();
    (hub, dir)
}

/// Calls the fake's `read` tool (a `tools/call`, which needs [`WRITE`]).
async fn call_read(hub: &McpHub, dir: &tempfile::TempDir) -> ferroclaw_tools::ToolOutput {
    let mut registry = ToolRegistry::new();
    hub.register_tools(&mut registry);
    registry
        .get("mcp__web__read")
        .unwrap()
        .execute(json!({"path": dir.path().join("a.txt")}), &ToolContext::new("/"))
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_refused_with_403_insufficient_scope_steps_up_to_the_union_and_is_retried() {
    let fake = start_fake(true, false).await;
    let home = tempfile::tempdir().unwrap();
    let tokens = TokenStore::new(home.path().join("mcp-tokens"));
    let (hub, dir) = logged_in(&fake, &tokens, Some(Consent::Headless)).await;

    let out = call_read(&hub, &dir).await;
    assert!(!out.is_error && out.joined_text().contains("needs write scope"), "{out:?}");
    assert_eq!(
        *fake.authorizations.lock().unwrap(),
        [READ.to_string(), format!("{READ} {WRITE}")],
        "one new authorization, for the scopes granted plus those demanded"
    );
    let url = format!("{}/mcp", fake.base);
    assert_eq!(tokens.granted_scopes("web", &url), [READ, WRITE], "the new token is saved");

    let again = call_read(&hub, &dir).await;
    assert!(!again.is_error, "{again:?}");
    assert_eq!(fake.authorizations.lock().unwrap().len(), 2, "the new token serves later calls");
    hub.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_still_refuses_after_a_step_up_gets_a_clear_error_not_a_loop() {
    let fake = start_fake(true, true).await;
    let home = tempfile::tempdir().unwrap();
    let tokens = TokenStore::new(home.path().join("mcp-tokens"));
    let (hub, dir) = logged_in(&fake, &tokens, Some(Consent::Headless)).await;

    let out = call_read(&hub, &dir).await;
    assert!(out.is_error, "{out:?}");
    assert_eq!(
        out.joined_text(),
        "mcp server web refused the call of read: it needs the OAuth scope(s) files:read \
         files:write; it still refused after ferroclaw was granted files:read, so ferroclaw \
         gives up (the authorization server may not grant them to you)"
    );
    let again = call_read(&hub, &dir).await;
    assert!(again.joined_text().contains("does not ask again"), "{again:?}");
    assert_eq!(
        fake.authorizations.lock().unwrap().len(),
        2,
        "the login and one step-up: no second step-up for scopes refused after one"
    );
    hub.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_anyone_to_consent_a_403_names_the_login_command_that_grants_the_scopes() {
    let fake = start_fake(true, false).await;
    let home = tempfile::tempdir().unwrap();
    let tokens = TokenStore::new(home.path().join("mcp-tokens"));
    let (hub, dir) = logged_in(&fake, &tokens, None).await;

    let out = call_read(&hub, &dir).await;
    assert!(out.is_error, "{out:?}");
    assert!(
        out.joined_text().ends_with(
            "run `ferroclaw mcp login web --scopes \"files:read files:write\"` to grant them"
        ),
        "{out:?}"
    );
    assert_eq!(fake.authorizations.lock().unwrap().len(), 1, "no authorization without consent");
    hub.shutdown().await;
}
