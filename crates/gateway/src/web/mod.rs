//! The web channel: one HTTP server (loopback by default, token auth) with
//! the built-in web chat at `/`, its WebSocket at `/ws`, an OpenAI-compatible
//! API at `/v1/chat/completions` and `/v1/models`, and `/health`.
//!
//! Every request but `/` and `/health` needs the token: `Authorization:
//! Bearer TOKEN` for the API, `?token=TOKEN` for the WebSocket (browsers
//! cannot set its headers). A token holder is the owner: their messages come
//! from sender `owner`, which the web channel's allow-list lets in by default.

mod openai;
mod socket;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;
use axum::Router;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::json;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use crate::bus::{MessageBus, OutboundMessage};
use crate::channel::{Channel, ChannelError};

/// The sender id of whoever holds the web token.
pub const OWNER: &str = "owner";
/// The web chat page, plain HTML and JavaScript, no build step.
const PAGE: &str = include_str!("chat.html");
/// Largest request body accepted (a long pasted document).
const MAX_BODY_BYTES: usize = 4 * 1024 * 1024;

/// How the web channel is reached.
#[derive(Debug, Clone)]
pub struct WebOptions {
    pub addr: SocketAddr,
    pub token: String,
    /// Serve `/v1/chat/completions` and `/v1/models`.
    pub openai_api: bool,
    /// The model name `/v1/models` lists.
    pub model_name: String,
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
    sockets: Mutex<HashMap<String, Vec<mpsc::UnboundedSender<serde_json::Value>>>>,
    /// API requests waiting for their answer, by inbound message id.
    pending: Mutex<HashMap<String, oneshot::Sender<OutboundMessage>>>,
    /// The address actually bound (port 0 picks one), once started.
    bound: Mutex<Option<SocketAddr>>,
}

/// What the handlers share.
#[derive(Clone)]
struct App {
    web: Arc<WebState>,
    bus: MessageBus,
}

impl WebChannel {
    /// A web channel; it listens once started.
    pub fn new(options: WebOptions) -> Self {
        WebChannel {
            state: Arc::new(WebState {
                options,
                sockets: Mutex::default(),
                pending: Mutex::default(),
                bound: Mutex::default(),
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

    fn wait_for_reply(&self, id: &str) -> oneshot::Receiver<OutboundMessage> {
        let (tx, rx) = oneshot::channel();
        self.pending.lock().unwrap_or_else(PoisonError::into_inner).insert(id.to_string(), tx);
        rx
    }

    fn forget_reply(&self, id: &str) {
        self.pending.lock().unwrap_or_else(PoisonError::into_inner).remove(id);
    }

    fn router(self: &Arc<Self>, bus: MessageBus) -> Router {
        let mut router = Router::new()
            .route("/", get(|| async { Html(PAGE) }))
            .route("/health", get(health))
            .route("/ws", get(socket::upgrade));
        if self.options.openai_api {
            router = router
                .route("/v1/chat/completions", post(openai::completions))
                .route("/v1/models", get(openai::models));
        }
        router
            .layer(axum::extract::DefaultBodyLimit::max(MAX_BODY_BYTES))
            .with_state(App { web: self.clone(), bus })
    }
}

async fn health() -> Response {
    axum::Json(json!({"status": "ok"})).into_response()
}

/// An OpenAI-style error response.
fn api_error(status: StatusCode, message: &str) -> Response {
    let body = json!({"error": {"message": message, "type": "invalid_request_error"}});
    (status, axum::Json(body)).into_response()
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
        axum::serve(listener, self.state.router(bus))
            .with_graceful_shutdown(async move { shutdown.cancelled().await })
            .await
            .map_err(|e| ChannelError::Platform { channel: "web".into(), message: e.to_string() })
    }

    async fn send(&self, message: OutboundMessage) -> Result<(), ChannelError> {
        let web = &self.state;
        if let Some(id) = &message.reply_to {
            let waiting = web.pending.lock().unwrap_or_else(PoisonError::into_inner).remove(id);
            if let Some(tx) = waiting {
                let _ = tx.send(message);
                return Ok(());
            }
        }
        let frame = json!({
            "type": if message.reply_to.is_some() { "reply" } else { "message" },
            "content": message.content,
            "media": message.media,
            "reply_to": message.reply_to,
        });
        let mut sockets = web.sockets.lock().unwrap_or_else(PoisonError::into_inner);
        let open = sockets.get_mut(&message.chat_id).map(|list| {
            list.retain(|tx| tx.send(frame.clone()).is_ok());
            !list.is_empty()
        });
        if open == Some(true) {
            Ok(())
        } else {
            Err(ChannelError::UnknownChat { channel: "web".into(), chat_id: message.chat_id })
        }
    }
}
