//! The web channel: one HTTP server (loopback by default, token auth) with
//! the built-in web app at `/` (its files in `app/`, built into the binary),
//! its WebSocket at `/ws`, its JSON API under `/api/`, an OpenAI-compatible
//! API at `/v1/chat/completions` and `/v1/models`, and `/health`.
//!
//! Every request but the app's files and `/health` needs the token:
//! `Authorization: Bearer TOKEN` for `/api/` and `/v1/`, `?token=TOKEN` for
//! the WebSocket (browsers cannot set its headers). A token holder is the
//! owner: their messages come from sender `owner`, which the web channel's
//! allow-list lets in by default.

mod api;
mod assets;
pub mod context;
mod frames;
pub mod limits;
mod openai;
mod openai_media;
mod openai_request;
mod operate;
mod queue;
mod search_snippet;
mod server;
mod socket;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use async_trait::async_trait;
use axum::Router;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, delete, get, post, put};
use serde_json::{Value, json};
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use crate::approval::{ApprovalPrompt, Decided};
use crate::bus::{Failure, InboundMessage, MessageBus, OutboundMessage};
use crate::channel::{Channel, ChannelError};
use crate::config::{
    DEFAULT_HEADER_TIMEOUT_SECS, DEFAULT_MAX_CONNECTIONS, DEFAULT_MAX_WEBSOCKETS,
    DEFAULT_REQUESTS_PER_MINUTE,
};
use frames::{Answer, Refusal, ServerFrame};
use limits::{BUSY_RETRY_AFTER_SECS, DRAIN_RETRY_AFTER_SECS};
pub use limits::{MAX_BODY_BYTES, Rate, RateLimiter};
pub use queue::MAX_QUEUED_BYTES;
use queue::OutQueue;

pub use crate::bus::OWNER;
pub use context::{WebContext, WebParts};

/// How the web channel is reached.
#[derive(Debug, Clone)]
pub struct WebOptions {
    pub addr: SocketAddr,
    pub token: String,
    /// Serve `/v1/chat/completions` and `/v1/models`.
    pub openai_api: bool,
    /// The model name `/v1/models` lists.
    pub model_name: String,
    /// `[channels.web] models`: model names API clients may ask for, each
    /// the `PROVIDER/MODEL` it stands for.
    pub models: std::collections::BTreeMap<String, String>,
    /// Connections open at once; more are closed at once.
    pub max_connections: usize,
    /// Chat pages open at once; more are refused (503).
    pub max_websockets: usize,
    /// Requests per minute per address (0: no limit); more get 429.
    pub requests_per_minute: u32,
    /// Origins besides the gateway's own whose pages may open `/ws`
    /// (e.g. `https://chat.example.com` behind a reverse proxy).
    pub allowed_origins: Vec<String>,
    /// How long a connection may take to send its request headers.
    pub header_timeout: std::time::Duration,
    /// Bytes that may wait for one client (a chat page, a streamed answer)
    /// before it is disconnected as too slow.
    pub max_queued_bytes: usize,
}

impl WebOptions {
    /// Options with the default limits.
    pub fn new(addr: SocketAddr, token: String, model_name: String) -> Self {
        WebOptions {
            addr,
            token,
            openai_api: true,
            model_name,
            models: Default::default(),
            max_connections: DEFAULT_MAX_CONNECTIONS,
            max_websockets: DEFAULT_MAX_WEBSOCKETS,
            requests_per_minute: DEFAULT_REQUESTS_PER_MINUTE,
            allowed_origins: Vec::new(),
            header_timeout: std::time::Duration::from_secs(DEFAULT_HEADER_TIMEOUT_SECS),
            max_queued_bytes: MAX_QUEUED_BYTES,
        }
    }
}

/// The web channel (name `web`). Cheap handle over the shared state the
/// HTTP handlers use.
pub struct WebChannel {
    state: Arc<WebState>,
}

/// The state shared by the channel and its handlers.
struct WebState {
    options: WebOptions,
    /// Open chat pages, by chat id.
    sockets: Mutex<HashMap<String, Vec<OutQueue<String>>>>,
    /// Chat pages open now (checked against `max_websockets`).
    open_sockets: AtomicUsize,
    /// API requests waiting for their answer, by inbound message id.
    pending: Mutex<HashMap<String, oneshot::Sender<OutboundMessage>>>,
    /// The address actually bound (port 0 picks one), once started.
    bound: Mutex<Option<SocketAddr>>,
    /// Requests by address.
    per_address: Arc<RateLimiter>,
    /// The running gateway, for the app's sessions and operate views.
    gateway: OnceLock<Arc<WebContext>>,
    /// The background jobs last shown to each chat (ids and states), so a
    /// page is told only of changes.
    shown_jobs: Mutex<HashMap<String, String>>,
    /// Each web chat's turns asked from its pages, by chat id.
    chats: Mutex<HashMap<String, socket::ChatTurns>>,
    /// Fetches the pictures API requests link, under `web_fetch`'s rules.
    images: OnceLock<ferroclaw_tools::WebFetchTool>,
}

/// What the handlers share.
#[derive(Clone)]
struct App {
    web: Arc<WebState>,
    bus: MessageBus,
}

impl WebChannel {
    /// Hands the web app the running gateway (once, before it starts).
    pub fn attach(&self, gateway: Arc<WebContext>) {
        let _ = self.state.gateway.set(gateway);
    }

    /// A web channel; it listens once started.
    pub fn new(options: WebOptions) -> Self {
        let per_address = Arc::new(RateLimiter::new(options.requests_per_minute));
        WebChannel {
            state: Arc::new(WebState {
                options,
                sockets: Mutex::default(),
                open_sockets: AtomicUsize::new(0),
                pending: Mutex::default(),
                bound: Mutex::default(),
                per_address,
                gateway: OnceLock::new(),
                shown_jobs: Mutex::new(HashMap::new()),
                chats: Mutex::default(),
                images: OnceLock::new(),
            }),
        }
    }

    /// The address it listens on, once started.
    pub fn bound(&self) -> Option<SocketAddr> {
        *self.state.bound.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl WebState {
    fn authorized(&self, given: Option<&str>) -> bool {
        let expected = self.options.token.as_bytes();
        let given = given.unwrap_or_default().as_bytes();
        // Compare in constant time for equal lengths.
        given.len() == expected.len()
            && given.iter().zip(expected).fold(0u8, |acc, (a, b)| acc | (a ^ b)) == 0
    }

    fn bearer_ok(&self, headers: &HeaderMap) -> bool {
        let token = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "));
        self.authorized(token)
    }

    /// True when a page from `origin` may open a chat socket: the gateway's
    /// own origin (its address, or loopback names for a loopback address),
    /// or one configured in `allowed_origins`.
    fn origin_allowed(&self, origin: &str) -> bool {
        let origin = origin.trim_end_matches('/');
        if self.options.allowed_origins.iter().any(|o| o.trim_end_matches('/') == origin) {
            return true;
        }
        let addr = self.bound().unwrap_or(self.options.addr);
        let port = addr.port();
        let mut own = Vec::new();
        if !addr.ip().is_unspecified() {
            own.push(format!("http://{addr}"));
        }
        if addr.ip().is_loopback() || addr.ip().is_unspecified() {
            own.extend([
                format!("http://127.0.0.1:{port}"),
                format!("http://localhost:{port}"),
                format!("http://[::1]:{port}"),
            ]);
        }
        own.iter().any(|o| o == origin)
    }

    fn bound(&self) -> Option<SocketAddr> {
        *self.bound.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn wait_for_reply(&self, id: &str) -> oneshot::Receiver<OutboundMessage> {
        let (tx, rx) = oneshot::channel();
        self.pending.lock().unwrap_or_else(PoisonError::into_inner).insert(id.to_string(), tx);
        rx
    }

    /// What fetches the pictures API requests link: `web_fetch`'s rules
    /// with its `[web_fetch] allow_private`.
    fn image_fetcher(&self, gateway: &WebContext) -> &ferroclaw_tools::WebFetchTool {
        self.images.get_or_init(|| {
            let config = gateway.runtime.config();
            let allowed = config.file.web_fetch.as_ref().map(|f| f.allow_private.clone());
            ferroclaw_tools::WebFetchTool::allowing_private(&allowed.unwrap_or_default())
                .unwrap_or_else(|e| {
                    tracing::warn!(
                        "[web_fetch] allow_private: {e}; pictures stay on public addresses"
                    );
                    ferroclaw_tools::WebFetchTool::new()
                })
        })
    }

    fn forget_reply(&self, id: &str) {
        self.pending.lock().unwrap_or_else(PoisonError::into_inner).remove(id);
    }

    fn router(self: &Arc<Self>, bus: MessageBus) -> Router {
        let app = App { web: self.clone(), bus };
        // The token is checked before a body is read, as for `/v1/`.
        let api = Router::new()
            .route("/api/sessions", get(api::list_sessions))
            .route("/api/sessions/{id}", get(api::read_session))
            .route("/api/sessions/{id}/title", put(api::rename_session))
            .route("/api/sessions/{id}/images/{n}", get(api::read_image))
            .route("/api/chats/{chat}", get(api::chat_state))
            .route("/api/files", get(api::read_file))
            .route("/api/status", get(operate::status))
            .route("/api/cron", get(operate::cron_list).post(operate::cron_add))
            .route("/api/cron/explain", post(operate::cron_explain))
            .route("/api/cron/{id}", delete(operate::cron_remove))
            .route("/api/cron/{id}/run", post(operate::cron_run))
            .route("/api/cron/{id}/enabled", put(operate::cron_enable))
            .route("/api/pairing", get(operate::pairing_list))
            .route("/api/pairing/{channel}/{code}/{decision}", post(operate::pairing_decide))
            .route("/api/memory", get(operate::memory_read))
            .route("/api/memory/{which}", put(operate::memory_write))
            .route("/api/skills", get(operate::skills))
            .route("/api/usage", get(operate::usage))
            .route("/api/log", get(operate::log_tail))
            .route_layer(middleware::from_fn_with_state(app.clone(), require_api_token));
        let mut router = assets::routes()
            .route("/health", get(health))
            .route("/ws", get(socket::upgrade))
            .merge(api);
        if self.options.openai_api {
            // The token is checked before the body is read: a stranger's
            // upload is refused without being taken into memory.
            let api = Router::new()
                .route(
                    "/v1/chat/completions",
                    post(openai::completions).fallback(openai::wrong_method),
                )
                .route("/v1/models", get(openai::models).fallback(openai::wrong_method))
                .route("/v1/models/{id}", get(openai::model).fallback(openai::wrong_method))
                .route("/v1/{*path}", any(openai::unknown_path))
                .route_layer(middleware::from_fn_with_state(app.clone(), require_token));
            router = router.merge(api);
        } else {
            router = router.route("/v1/{*path}", any(openai::api_off));
        }
        router.with_state(app)
    }
}

/// Refuses API requests without the bearer token, before their body is read.
async fn require_token(State(app): State<App>, request: Request, next: Next) -> Response {
    if !app.web.bearer_ok(request.headers()) {
        return api_error(StatusCode::UNAUTHORIZED, "bad or missing bearer token");
    }
    next.run(request).await
}

/// Refuses `/api/` requests without the bearer token, before their body is read.
async fn require_api_token(State(app): State<App>, request: Request, next: Next) -> Response {
    if !app.web.bearer_ok(request.headers()) {
        let body = json!({"error": "bad or missing token (Authorization: Bearer TOKEN)"});
        return (StatusCode::UNAUTHORIZED, axum::Json(body)).into_response();
    }
    next.run(request).await
}

async fn health() -> Response {
    axum::Json(json!({"status": "ok"})).into_response()
}

/// An OpenAI-style error response (see [`openai_request::ApiError`]).
fn api_error(status: StatusCode, message: &str) -> Response {
    openai_request::ApiError::status(status, message).into_response()
}

/// 429 with `retry-after`.
fn rate_limited(retry_after_secs: u64) -> Response {
    let message = format!("too many requests; try again in {retry_after_secs} s");
    let mut response = api_error(StatusCode::TOO_MANY_REQUESTS, &message);
    response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(retry_after_secs));
    response
}

/// The answer to every new request while the gateway drains: 503 with
/// `Retry-After`, as an OpenAI error on `/v1/`, JSON on `/api/` and
/// `/health`, and a line of text for the app's pages.
fn draining(path: &str) -> Response {
    let message =
        format!("the gateway is stopping (restarting?); try again in {DRAIN_RETRY_AFTER_SECS} s");
    let status = StatusCode::SERVICE_UNAVAILABLE;
    let mut response = if path.starts_with("/v1/") {
        api_error(status, &message)
    } else if path.starts_with("/api/") {
        (status, axum::Json(json!({"error": message}))).into_response()
    } else if path == "/health" {
        (status, axum::Json(json!({"status": "stopping"}))).into_response()
    } else {
        (status, message).into_response()
    };
    response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(DRAIN_RETRY_AFTER_SECS));
    response
}

/// The response for a message that got no real answer.
fn failure_response(failure: Failure, message: &str) -> Response {
    match failure {
        Failure::Busy => {
            let mut response = api_error(StatusCode::TOO_MANY_REQUESTS, message);
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(BUSY_RETRY_AFTER_SECS));
            response
        }
        other => api_error(openai::failure_status(other), message),
    }
}

#[async_trait]
impl Channel for WebChannel {
    fn name(&self) -> &str {
        "web"
    }

    async fn start(
        &self,
        bus: MessageBus,
        shutdown: CancellationToken,
    ) -> Result<(), ChannelError> {
        let addr = self.state.options.addr;
        let listener =
            tokio::net::TcpListener::bind(addr).await.map_err(|e| ChannelError::Config {
                channel: "web".into(),
                message: format!("cannot listen on {addr}: {e}"),
            })?;
        let bound = listener.local_addr().ok();
        *self.state.bound.lock().unwrap_or_else(PoisonError::into_inner) = bound;
        tracing::info!("web chat on http://{}/", bound.unwrap_or(addr));
        bus.connections().set("web", crate::connection::State::Connected);
        let router = self.state.router(bus);
        let limits = server::ServerLimits {
            max_connections: self.state.options.max_connections,
            header_timeout: self.state.options.header_timeout,
            per_address: self.state.per_address.clone(),
        };
        // Stopping starts the drain; the listener stays until it is over.
        let drained = match self.state.gateway.get() {
            Some(gateway) => gateway.drained.clone(),
            None => shutdown.clone(),
        };
        server::serve(listener, router, limits, shutdown, drained).await;
        Ok(())
    }

    async fn ask_approval(
        &self,
        chat_id: &str,
        prompt: &ApprovalPrompt,
    ) -> Result<(), ChannelError> {
        if socket::send_to_chat(&self.state, chat_id, &ServerFrame::approval(prompt)) {
            Ok(())
        } else {
            Err(ChannelError::UnknownChat { channel: "web".into(), chat_id: chat_id.into() })
        }
    }

    fn show_jobs(&self, chat_id: &str, jobs: &[ferroclaw_tools::JobSummary]) {
        let seen: String = jobs.iter().map(|j| format!("{}:{:?};", j.id, j.status)).collect();
        let mut shown = self.state.shown_jobs.lock().unwrap_or_else(PoisonError::into_inner);
        if shown.get(chat_id).map_or(jobs.is_empty(), |s| *s == seen) {
            return;
        }
        shown.insert(chat_id.to_string(), seen);
        let jobs: Vec<Value> = jobs.iter().map(api::job_json).collect();
        socket::send_to_chat(&self.state, chat_id, &ServerFrame::Jobs { jobs });
    }

    async fn approval_resolved(
        &self,
        chat_id: &str,
        id: &str,
        outcome: &str,
    ) -> Result<(), ChannelError> {
        socket::send_to_chat(&self.state, chat_id, &ServerFrame::ApprovalResolved { id, outcome });
        Ok(())
    }

    async fn answer_decision(
        &self,
        decision: &InboundMessage,
        decided: &Decided,
        text: &str,
    ) -> Result<(), ChannelError> {
        // A decision taken shows as `approval_resolved`; a refused one as an error.
        if !matches!(decided, Decided::Done { .. }) {
            socket::send_to_chat(&self.state, &decision.chat_id, &ServerFrame::error(text));
        }
        Ok(())
    }

    async fn send(&self, message: OutboundMessage) -> Result<(), ChannelError> {
        let web = &self.state;
        if let Some(id) = &message.reply_to {
            socket::turns(web, &message.chat_id, |t| t.unanswered.remove(id));
            let waiting = web.pending.lock().unwrap_or_else(PoisonError::into_inner).remove(id);
            if let Some(tx) = waiting {
                let _ = tx.send(message);
                return Ok(());
            }
        }
        // Files by their path in the workspace: what any gateway serves.
        let media: Vec<String> = match web.gateway.get() {
            Some(gw) => message
                .media
                .iter()
                .map(|m| crate::shared_media::key(&gw.workspace, m).unwrap_or_else(|| m.clone()))
                .collect(),
            None => message.media.clone(),
        };
        let answer = Answer {
            message: &message.content,
            content: &message.content,
            media: &media,
            reply_to: message.reply_to.as_deref(),
        };
        let frame = match (&message.reply_to, message.failure) {
            (Some(_), Some(_)) => ServerFrame::Error(Refusal::failed(answer)),
            (Some(_), None) => ServerFrame::Reply(answer),
            (None, _) => ServerFrame::Message(answer),
        };
        let open = socket::send_to_chat(web, &message.chat_id, &frame);
        if open {
            Ok(())
        } else {
            Err(ChannelError::UnknownChat { channel: "web".into(), chat_id: message.chat_id })
        }
    }
}
