//! A fake OAuth authorization server in front of a test's own MCP server, for
//! tests of logging in to HTTP MCP servers.
//!
//! [`FakeOAuth::start`] serves, on one loopback port and its own thread and
//! runtime: protected resource metadata (`/.well-known/oauth-protected-resource[/mcp]`),
//! authorization server metadata (`/.well-known/oauth-authorization-server`),
//! dynamic client registration (`/register`), an authorization page that
//! approves at once and redirects back with a code (`/authorize`, PKCE S256
//! required), and a token endpoint for the authorization-code and refresh
//! grants (`/token`). The test's MCP routes (at `/mcp`) sit behind a guard
//! that answers 401 with a `WWW-Authenticate` challenge without a valid
//! bearer token and, in step-up mode, 403 `insufficient_scope` for a token
//! without the scopes the JSON-RPC method needs: [`READ_SCOPE`] for every
//! request, [`WRITE_SCOPE`] too for `tools/call`.
//!
//! It is a stand-in for the flows ferroclaw's client drives, not a general
//! authorization server: consent is automatic and the code verifier is only
//! checked for its length.
//!
//! ```no_run
//! use ferroclaw_testkit::oauth::{FakeOAuth, OAuthOptions};
//!
//! let fake = FakeOAuth::start(OAuthOptions { step_up: true, ..Default::default() }, |_base| {
//!     axum::Router::new().route("/mcp", axum::routing::post(|| async { "{}" }))
//! });
//! let server_url = format!("{}/mcp", fake.url());
//! // ... log in to `server_url`, call a tool ...
//! assert_eq!(fake.authorizations(), ["files:read"]);
//! ```

use std::collections::HashMap;
use std::net::{Ipv4Addr, TcpListener as StdListener};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use axum::extract::{Query, Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{Value, json};
use tokio::sync::watch;

/// The scope every request needs in step-up mode.
pub const READ_SCOPE: &str = "files:read";
/// The scope a `tools/call` needs on top of [`READ_SCOPE`] in step-up mode.
pub const WRITE_SCOPE: &str = "files:write";

/// How the fake behaves.
#[derive(Debug, Clone, Copy, Default)]
pub struct OAuthOptions {
    /// Step-up mode: the resource advertises [`READ_SCOPE`], token replies
    /// name their scopes, and the guard enforces them (`tools/call` needs
    /// [`WRITE_SCOPE`] too). Off: any valid token will do.
    pub step_up: bool,
    /// The authorization page never grants [`WRITE_SCOPE`].
    pub withhold_write: bool,
    /// The access token a code buys is already expired, so its first use
    /// must refresh it.
    pub first_token_expired: bool,
}

/// A running fake; stops when dropped.
pub struct FakeOAuth {
    books: Arc<Books>,
    shutdown: watch::Sender<bool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// What an authorization code stands for.
struct Grant {
    /// The client it was issued to.
    client: String,
    scopes: Vec<String>,
}

/// The fake's books: codes handed out, tokens valid, requests seen.
#[derive(Default)]
struct Books {
    base: String,
    options: OAuthOptions,
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

impl Books {
    /// A fresh identifier: `prefix-N`.
    fn next(&self, prefix: &str) -> String {
        format!("{prefix}-{}", self.issued.fetch_add(1, Ordering::SeqCst))
    }
}

/// Locks a mutex of the books, poisoned or not (a panicking test thread must
/// not hide what the fake saw).
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl FakeOAuth {
    /// Starts the fake on a free loopback port, with the routes `mcp` builds
    /// (given the fake's root URL) behind the token guard; returns once it is
    /// listening. Panics when it cannot start.
    pub fn start(options: OAuthOptions, mcp: impl FnOnce(&str) -> Router) -> FakeOAuth {
        let listener = StdListener::bind((Ipv4Addr::LOCALHOST, 0)).expect("fake OAuth: bind");
        listener.set_nonblocking(true).expect("fake OAuth: non-blocking listener");
        let port = listener.local_addr().expect("fake OAuth: local address").port();
        let base = format!("http://127.0.0.1:{port}");
        let books = Arc::new(Books { base: base.clone(), options, ..Default::default() });
        let guarded = mcp(&base)
            .layer(axum::middleware::from_fn_with_state(Arc::clone(&books), require_token));
        let app = Router::new()
            .route("/.well-known/oauth-protected-resource/mcp", get(resource_metadata))
            .route("/.well-known/oauth-protected-resource", get(resource_metadata))
            .route("/.well-known/oauth-authorization-server", get(server_metadata))
            .route("/register", post(register))
            .route("/authorize", get(authorize))
            .route("/token", post(token))
            .with_state(Arc::clone(&books))
            .merge(guarded);
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("fake OAuth: runtime");
        let (shutdown, mut signal) = watch::channel(false);
        let thread = std::thread::spawn(move || {
            runtime.block_on(async move {
                let listener =
                    tokio::net::TcpListener::from_std(listener).expect("fake OAuth: listen");
                tokio::select! {
                    served = axum::serve(listener, app) => served.expect("fake OAuth: serve"),
                    _ = signal.wait_for(|stop| *stop) => {}
                }
            });
        });
        FakeOAuth { books, shutdown, thread: Some(thread) }
    }

    /// The root URL, `http://127.0.0.1:PORT`; the MCP server is at `{url}/mcp`.
    pub fn url(&self) -> &str {
        &self.books.base
    }

    /// The `scope` of each authorization request so far, in order.
    pub fn authorizations(&self) -> Vec<String> {
        lock(&self.books.authorizations).clone()
    }

    /// How many clients registered.
    pub fn registrations(&self) -> usize {
        self.books.registrations.load(Ordering::SeqCst)
    }

    /// How many refresh-token grants were asked for.
    pub fn refreshes(&self) -> usize {
        self.books.refreshes.load(Ordering::SeqCst)
    }
}

impl Drop for FakeOAuth {
    fn drop(&mut self) {
        let _ = self.shutdown.send(true);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

async fn resource_metadata(State(books): State<Arc<Books>>) -> Json<Value> {
    let mut metadata =
        json!({"resource": format!("{}/mcp", books.base), "authorization_servers": [books.base]});
    if books.options.step_up {
        metadata["scopes_supported"] = json!([READ_SCOPE]);
    }
    Json(metadata)
}

async fn server_metadata(State(books): State<Arc<Books>>) -> Json<Value> {
    let b = &books.base;
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

async fn register(State(books): State<Arc<Books>>, Json(body): Json<Value>) -> Response {
    books.registrations.fetch_add(1, Ordering::SeqCst);
    let reply = json!({"client_id": books.next("client"), "redirect_uris": body["redirect_uris"]});
    (StatusCode::CREATED, Json(reply)).into_response()
}

/// Approves at once: redirects back with a code for the requested scopes
/// (less [`WRITE_SCOPE`] when withheld).
async fn authorize(
    State(books): State<Arc<Books>>,
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
    lock(&books.authorizations).push(requested.clone());
    let granted: Vec<String> = requested
        .split_whitespace()
        .filter(|s| !(books.options.withhold_write && *s == WRITE_SCOPE))
        .map(str::to_string)
        .collect();
    let code = books.next("code");
    let client = q.get("client_id").cloned().unwrap_or_default();
    lock(&books.codes).insert(code.clone(), Grant { client, scopes: granted });
    Redirect::to(&format!("{redirect}?code={code}&state={state}")).into_response()
}

/// The authorization-code grant (with a code verifier) and the refresh grant
/// (for the client the refresh token was issued to).
async fn token(State(books): State<Arc<Books>>, body: String) -> Response {
    let form: HashMap<&str, &str> =
        body.split('&').filter_map(|pair| pair.split_once('=')).collect();
    let invalid_grant =
        || (StatusCode::BAD_REQUEST, Json(json!({"error": "invalid_grant"}))).into_response();
    let (access, expires_in, client, scopes) = match form.get("grant_type").copied() {
        Some("authorization_code") => {
            let known = form.get("code").and_then(|c| lock(&books.codes).remove(*c));
            let verifier_ok = form.get("code_verifier").is_some_and(|v| v.len() >= 43);
            let (Some(Grant { client, scopes }), true) = (known, verifier_ok) else {
                return invalid_grant();
            };
            let expires_in = if books.options.first_token_expired { 0 } else { 3600 };
            (books.next("access"), expires_in, client, scopes)
        }
        Some("refresh_token") => {
            books.refreshes.fetch_add(1, Ordering::SeqCst);
            let sent = form.get("refresh_token").copied().unwrap_or_default();
            let grant = lock(&books.refresh_tokens).get(sent).cloned();
            // A refresh token is good only for the client it was issued to.
            let Some((client, scopes)) =
                grant.filter(|(client, _)| form.get("client_id") == Some(&client.as_str()))
            else {
                return invalid_grant();
            };
            (books.next("refreshed"), 3600, client, scopes)
        }
        _ => {
            return (StatusCode::BAD_REQUEST, Json(json!({"error": "unsupported_grant_type"})))
                .into_response();
        }
    };
    let refresh = books.next("refresh");
    lock(&books.valid_tokens).insert(access.clone(), scopes.clone());
    lock(&books.refresh_tokens).insert(refresh.clone(), (client, scopes.clone()));
    let mut reply = json!({"access_token": access, "token_type": "Bearer", "expires_in": expires_in, "refresh_token": refresh});
    if books.options.step_up {
        reply["scope"] = json!(scopes.join(" "));
    }
    Json(reply).into_response()
}

/// 401 with a `WWW-Authenticate` challenge unless a valid token comes
/// along; in step-up mode, 403 `insufficient_scope` for a token without the
/// scopes the JSON-RPC method needs.
async fn require_token(State(books): State<Arc<Books>>, request: Request, next: Next) -> Response {
    let sent = request
        .headers()
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::to_string);
    let scopes = sent.and_then(|t| lock(&books.valid_tokens).get(&t).cloned());
    let metadata = format!("{}/.well-known/oauth-protected-resource/mcp", books.base);
    let Some(scopes) = scopes else {
        let scope =
            if books.options.step_up { format!("scope=\"{READ_SCOPE}\", ") } else { String::new() };
        let challenge = format!("Bearer {scope}resource_metadata=\"{metadata}\"");
        return (StatusCode::UNAUTHORIZED, [("www-authenticate", challenge)], "unauthorized")
            .into_response();
    };
    if !books.options.step_up {
        return next.run(request).await;
    }
    let (parts, body) = request.into_parts();
    let body = axum::body::to_bytes(body, 1 << 20).await.unwrap_or_default();
    let method = serde_json::from_slice::<Value>(&body).unwrap_or_default()["method"].clone();
    let needed: &[&str] =
        if method == "tools/call" { &[READ_SCOPE, WRITE_SCOPE] } else { &[READ_SCOPE] };
    if needed.iter().all(|n| scopes.iter().any(|s| s == n)) {
        return next.run(Request::from_parts(parts, axum::body::Body::from(body))).await;
    }
    let challenge = format!(
        "Bearer error=\"insufficient_scope\", scope=\"{}\", resource_metadata=\"{metadata}\", \
         error_description=\"writing notes needs {WRITE_SCOPE}\"",
        needed.join(" ")
    );
    (StatusCode::FORBIDDEN, [("www-authenticate", challenge)], "insufficient scope").into_response()
}
