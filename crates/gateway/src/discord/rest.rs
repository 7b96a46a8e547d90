//! Discord's REST API, the two calls the channel makes: where the Gateway
//! WebSocket is (`GET /gateway/bot`) and posting a message
//! (`POST /channels/{id}/messages`), waiting out rate limits (HTTP 429 with
//! `retry_after`) as Discord asks.

use std::time::Duration;

use reqwest::StatusCode;
use serde::Deserialize;
use serde_json::{Value, json};

use super::CHANNEL_NAME;
use crate::channel::ChannelError;

/// How long one REST call may take, connection included.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// Times a rate-limited call is retried before the send fails.
pub const MAX_RATE_LIMIT_RETRIES: u32 = 3;
/// The longest `retry_after` waited out; a longer one fails the send at once
/// (Discord asks for long waits only after abuse or for global limits).
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);
/// The User-Agent Discord requires from bots: `DiscordBot (url, version)`.
const USER_AGENT: &str =
    concat!("DiscordBot (https://github.com/ferroclaw, ", env!("CARGO_PKG_VERSION"), ")");
/// How much of an error body goes into an error message.
const ERROR_BODY_CHARS: usize = 300;

/// An authenticated client for one bot's REST calls.
#[derive(Clone)]
pub(super) struct Rest {
    http: reqwest::Client,
    api_base: String,
    token: String,
}

/// The 429 body: seconds to wait.
#[derive(Deserialize)]
struct RateLimited {
    retry_after: f64,
}

impl Rest {
    /// A client for `api_base` (e.g. `https://discord.com/api/v10`) with bot `token`.
    pub(super) fn new(api_base: &str, token: &str) -> Result<Self, ChannelError> {
        // Ignore the error: another crate or an earlier call installed one.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = reqwest::Client::builder()
            .user_agent(USER_AGENT)
            .timeout(REQUEST_TIMEOUT)
            .build()
            .map_err(|e| platform(format!("cannot build the HTTP client: {e}")))?;
        Ok(Rest {
            http,
            api_base: api_base.trim_end_matches('/').to_string(),
            token: token.to_string(),
        })
    }

    /// The Gateway WebSocket URL from `GET /gateway/bot`.
    pub(super) async fn gateway_url(&self) -> Result<String, ChannelError> {
        #[derive(Deserialize)]
        struct GatewayBot {
            url: String,
        }
        let url = format!("{}/gateway/bot", self.api_base);
        let response = self
            .http
            .get(&url)
            .header("Authorization", format!("Bot {}", self.token))
            .send()
            .await
            .map_err(|e| platform(format!("GET {url}: {e}")))?;
        let status = response.status();
        if !status.is_success() {
            return Err(status_error("GET /gateway/bot", status, response, None).await);
        }
        let body: GatewayBot = response
            .json()
            .await
            .map_err(|e| platform(format!("GET {url}: unexpected answer: {e}")))?;
        Ok(body.url)
    }

    /// Posts `content` (at most 2,000 characters) to channel `chat_id`,
    /// waiting out rate limits up to [`MAX_RATE_LIMIT_RETRIES`] times.
    pub(super) async fn create_message(
        &self,
        chat_id: &str,
        content: &str,
    ) -> Result<(), ChannelError> {
        let body = json!({ "content": content, "allowed_mentions": { "parse": [] } });
        self.create_message_with(chat_id, &body).await
    }

    /// Posts a message whose whole body is `body` (content, components, ...).
    pub(super) async fn create_message_with(
        &self,
        chat_id: &str,
        body: &Value,
    ) -> Result<(), ChannelError> {
        let path = format!("/channels/{chat_id}/messages");
        self.post(&path, Body::Json(body), Some(chat_id)).await
    }

    /// Answers an interaction (a button press) with `body`.
    pub(super) async fn interaction_callback(
        &self,
        id: &str,
        token: &str,
        body: &Value,
    ) -> Result<(), ChannelError> {
        self.post(&format!("/interactions/{id}/{token}/callback"), Body::Json(body), None).await
    }

    /// Posts a message with one attached file (`multipart/form-data`).
    pub(super) async fn create_message_with_file(
        &self,
        chat_id: &str,
        form: &crate::multipart::Form,
    ) -> Result<(), ChannelError> {
        let path = format!("/channels/{chat_id}/messages");
        self.post(&path, Body::Form(form), Some(chat_id)).await
    }

    /// Downloads an attachment (from Discord's CDN: no token is sent), at most `max` bytes.
    pub(super) async fn download(&self, url: &str, max: usize) -> Result<Vec<u8>, String> {
        crate::media::download(self.http.get(url), max).await.map_err(|e| e.to_string())
    }

    /// POSTs to `path` (after the API base), waiting out rate limits up to
    /// [`MAX_RATE_LIMIT_RETRIES`] times; `chat_id` names the chat in errors.
    async fn post(
        &self,
        path: &str,
        body: Body<'_>,
        chat_id: Option<&str>,
    ) -> Result<(), ChannelError> {
        let url = format!("{}{path}", self.api_base);
        // Interaction tokens are secrets: errors name the route, not the URL.
        let what = match chat_id {
            Some(id) => format!("POST /channels/{id}/messages"),
            None => "POST /interactions/…/callback".to_string(),
        };
        let mut retries = 0;
        loop {
            let request =
                self.http.post(&url).header("Authorization", format!("Bot {}", self.token));
            let request = match body {
                Body::Json(v) => request.json(v),
                Body::Form(f) => request.header("Content-Type", f.content_type()).body(f.bytes()),
            };
            let response = request
                .send()
                .await
                .map_err(|e| platform(format!("{what}: {}", e.without_url())))?;
            let status = response.status();
            if status.is_success() {
                return Ok(());
            }
            if status == StatusCode::TOO_MANY_REQUESTS && retries < MAX_RATE_LIMIT_RETRIES {
                let wait = retry_after(response).await;
                if wait <= MAX_RETRY_AFTER {
                    tracing::debug!(what, wait_ms = wait.as_millis() as u64, "discord rate limit");
                    tokio::time::sleep(wait).await;
                    retries += 1;
                    continue;
                }
                return Err(platform(format!(
                    "rate limited for {}s ({what}); message not sent",
                    wait.as_secs()
                )));
            }
            return Err(status_error(&what, status, response, chat_id).await);
        }
    }
}

/// What a POST carries.
#[derive(Clone, Copy)]
enum Body<'a> {
    Json(&'a Value),
    Form(&'a crate::multipart::Form),
}

/// The wait a 429 asks for: the body's `retry_after`, else the
/// `Retry-After` header, else one second.
async fn retry_after(response: reqwest::Response) -> Duration {
    let header = response
        .headers()
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<f64>().ok());
    let body = response.json::<RateLimited>().await.ok().map(|r| r.retry_after);
    let seconds = body.or(header).filter(|s| s.is_finite() && *s >= 0.0).unwrap_or(1.0);
    Duration::from_secs_f64(seconds.min(MAX_RETRY_AFTER.as_secs_f64() + 1.0))
}

/// The error for a failed call: an unknown channel for 404 on a send, else
/// the status and the start of Discord's message.
async fn status_error(
    what: &str,
    status: StatusCode,
    response: reqwest::Response,
    chat_id: Option<&str>,
) -> ChannelError {
    if let (StatusCode::NOT_FOUND, Some(chat_id)) = (status, chat_id) {
        return ChannelError::UnknownChat { channel: CHANNEL_NAME.into(), chat_id: chat_id.into() };
    }
    let body = response.text().await.unwrap_or_default();
    let body: String = body.chars().take(ERROR_BODY_CHARS).collect();
    if status == StatusCode::UNAUTHORIZED {
        let message = format!("{what}: HTTP {status}: the bot token was refused: {body}");
        return ChannelError::Config { channel: CHANNEL_NAME.into(), message };
    }
    let hint = if status == StatusCode::FORBIDDEN {
        " (does the bot have access to that channel?)"
    } else {
        ""
    };
    platform(format!("{what}: HTTP {status}{hint}: {body}"))
}

fn platform(message: String) -> ChannelError {
    ChannelError::Platform { channel: CHANNEL_NAME.into(), message }
}
