//! OAuth against an in-process fake: an MCP server that answers 401 without
//! a bearer token, and the authorization server it names (protected
//! resource metadata, authorization server metadata, dynamic client
//! registration, authorization code with PKCE, refresh tokens).

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use axum::Json;
use axum::extract::{Query, Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use ferroclaw_mcp::{Consent, HubOptions, McpConfig, McpHub, ServerConfig, TokenStore, ToolServer};
use ferroclaw_tools::{ToolContext, ToolRegistry};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use serde_json::{Value, json};

/// The fake's books: codes handed out, tokens valid, requests seen.
#[derive(Default)]
struct Fake {
    base: String,
    /// code -> PKCE challenge.
    codes: Mutex<HashMap<String, String>>,
    valid_tokens: Mutex<Vec<String>>,
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
    Json(json!({"resource": format!("{}/mcp", fake.base), "authorization_servers": [fake.base]}))
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
    let (Some(challenge), Some(redirect), Some(state), true) =
        (q.get("code_challenge"), q.get("redirect_uri"), q.get("state"), ok)
    else {
        return (StatusCode::BAD_REQUEST, "bad authorization request").into_response();
    };
    let code = fake.next("code");
    fake.codes.lock().unwrap().insert(code.clone(), challenge.clone());
    Redirect::to(&format!("{redirect}?code={code}&state={state}")).into_response()
}

async fn token(State(fake): State<Arc<Fake>>, body: String) -> Response {
    let form: HashMap<&str, &str> =
        body.split('&').filter_map(|pair| pair.split_once('=')).collect();
    let (access, expires_in) = match form.get("grant_type").copied() {
        Some("authorization_code") => {
            let known =
                form.get("code").is_some_and(|c| fake.codes.lock().unwrap().remove(*c).is_some());
            let verifier_ok = form.get("code_verifier").is_some_and(|v| v.len() >= 43);
            if !known || !verifier_ok {
                return (StatusCode::BAD_REQUEST, Json(json!({"error": "invalid_grant"})))
                    .into_response();
            }
            // Already expired: the first use must refresh it.
            (fake.next("access"), 0)
        }
        Some("refresh_token") => {
            fake.refreshes.fetch_add(1, Ordering::SeqCst);
            (fake.next("refreshed"), 3600)
        }
        _ => {
            return (StatusCode::BAD_REQUEST, Json(json!({"error": "unsupported_grant_type"})))
                .into_response();
        }
    };
    fake.valid_tokens.lock().unwrap().push(access.clone());
    Json(json!({"access_token": access, "token_type": "Bearer", "expires_in": expires_in, "refresh_token": fake.next("refresh")})).into_response()
}

/// 401 with a `WWW-Authenticate` challenge unless a valid token comes along.
async fn require_token(State(fake): State<Arc<Fake>>, request: Request, next: Next) -> Response {
    let sent = request
        .headers()
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::to_string);
    if sent.is_some_and(|t| fake.valid_tokens.lock().unwrap().contains(&t)) {
        return next.run(request).await;
    }
    let challenge = format!(
        "Bearer resource_metadata=\"{}/.well-known/oauth-protected-resource/mcp\"",
        fake.base
    );
    (StatusCode::UNAUTHORIZED, [("www-authenticate", challenge)], "unauthorized").into_response()
}

/// Starts the fake on a free loopback port.
async fn start_fake() -> Arc<Fake> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let fake = Arc::new(Fake { base: format!("http://127.0.0.1:{port}"), ..Default::default() });
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
    McpHub::start(
        McpConfig { servers: vec![ServerConfig::http("web", url)], ..Default::default() },
        HubOptions {
            workspace: std::env::temp_dir(),
            tokens: Some(tokens.clone()),
            ..Default::default()
        },
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_answers_401_needs_login_then_works_with_refreshed_tokens() {
    let fake = start_fake().await;
    let url = format!("{}/mcp", fake.base);
    let home = tempfile::tempdir().unwrap();
    let tokens = TokenStore::new(home.path().join("mcp-tokens"));

    let hub = start_hub(&url, &tokens).await;
    assert_eq!(
        hub.problems(),
        ["mcp server web needs you to log in (OAuth): run `ferroclaw mcp login web`"]
    );
    hub.shutdown().await;

    ferroclaw_mcp::login("web", &url, &tokens, Consent::Headless, None, &Default::default())
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
