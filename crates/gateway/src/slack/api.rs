//! The three Slack Web API methods the channel calls: `apps.connections.open`
//! (app-level token: where the Socket Mode WebSocket is), `auth.test` (bot
//! token: the bot's own user id) and `chat.postMessage` (bot token), waiting
//! out rate limits (HTTP 429 with `Retry-After`).

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};

use super::CHANNEL_NAME;
use crate::channel::ChannelError;

/// How long one Web API call may take, connection included.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// Times a rate-limited call is retried before it fails.
pub const MAX_RATE_LIMIT_RETRIES: u32 = 3;
/// The longest `Retry-After` waited out; a longer one fails the call at once.
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);
/// Slack's `error` codes that mean a token is wrong, not that Slack is down.
const TOKEN_ERRORS: [&str; 6] = [
    "invalid_auth",
    "not_authed",
    "account_inactive",
    "token_revoked",
    "token_expired",
    "not_allowed_token_type",
];
/// Slack's `error` codes that mean the chat cannot be reached.
const CHAT_ERRORS: [&str; 3] = ["channel_not_found", "not_in_channel", "is_archived"];

/// A client for the Web API at one base URL, with both tokens.
#[derive(Clone)]
pub(super) struct SlackApi {
    http: reqwest::Client,
    api_base: String,
    app_token: String,
    bot_token: String,
}

impl SlackApi {
    /// A client for `api_base` (e.g. `https://slack.com/api`).
    pub(super) fn new(
        api_base: &str,
        app_token: &str,
        bot_token: &str,
    ) -> Result<Self, ChannelError> {
        // Ignore the error: another crate or an earlier call installed one.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = reqwest::Client::builder()
            .timeout(REQUEST_TIMEOUT)
            .build()
            .map_err(|e| platform(format!("cannot build the HTTP client: {e}")))?;
        Ok(SlackApi {
            http,
            api_base: api_base.trim_end_matches('/').to_string(),
            app_token: app_token.to_string(),
            bot_token: bot_token.to_string(),
        })
    }

    /// A fresh Socket Mode WebSocket URL (each is good for one connection).
    pub(super) async fn open_connection(&self) -> Result<String, ChannelError> {
        let answer = self.call("apps.connections.open", &self.app_token, None).await?;
        answer["url"]
            .as_str()
            .map(str::to_string)
            .ok_or_else(|| platform("apps.connections.open: no url in the answer".into()))
    }

    /// The bot's own user id (to spot mentions and skip its own messages).
    pub(super) async fn bot_user_id(&self) -> Result<String, ChannelError> {
        let answer = self.call("auth.test", &self.bot_token, None).await?;
        answer["user_id"]
            .as_str()
            .map(str::to_string)
            .ok_or_else(|| platform("auth.test: no user_id".into()))
    }

    /// Posts `text` (mrkdwn) to `channel`, in the thread `thread_ts` when given.
    pub(super) async fn post_message(
        &self,
        channel: &str,
        text: &str,
        thread_ts: Option<&str>,
    ) -> Result<(), ChannelError> {
        let mut body = json!({ "channel": channel, "text": text, "unfurl_links": false });
        if let Some(ts) = thread_ts {
            body["thread_ts"] = json!(ts);
        }
        let posted = self.call("chat.postMessage", &self.bot_token, Some(&body)).await;
        posted.map(|_| ()).map_err(|e| match e {
            ChannelError::Platform { message, .. }
                if CHAT_ERRORS.iter().any(|c| message.ends_with(c)) =>
            {
                ChannelError::UnknownChat { channel: CHANNEL_NAME.into(), chat_id: channel.into() }
            }
            other => other,
        })
    }

    /// Posts a message whose whole body is `body` (text, blocks, ...).
    pub(super) async fn post_with(&self, body: &Value) -> Result<(), ChannelError> {
        self.call("chat.postMessage", &self.bot_token, Some(body)).await.map(|_| ())
    }

    /// Downloads a file a person shared (`url_private`: needs the bot token), at most `max` bytes.
    pub(super) async fn download(&self, url: &str, max: usize) -> Result<Vec<u8>, String> {
        let request = self.http.get(url).bearer_auth(&self.bot_token);
        crate::media::download(request, max).await.map_err(|e| e.to_string())
    }

    /// Uploads `file` to `channel` (in `thread_ts` when given) the way Slack
    /// asks: `files.getUploadURLExternal`, the bytes to that URL, then
    /// `files.completeUploadExternal`.
    pub(super) async fn upload(
        &self,
        channel: &str,
        thread_ts: Option<&str>,
        file: &crate::media::Outgoing,
    ) -> Result<(), ChannelError> {
        // The name is safe (letters, digits, . - _): no escaping needed.
        let method = format!(
            "files.getUploadURLExternal?filename={}&length={}",
            file.file_name,
            file.bytes.len()
        );
        let answer = self.call(&method, &self.bot_token, None).await?;
        let (Some(url), Some(id)) = (answer["upload_url"].as_str(), answer["file_id"].as_str())
        else {
            return Err(platform("files.getUploadURLExternal: no upload_url or file_id".into()));
        };
        let form = crate::multipart::Form::new().file(
            "file",
            &file.file_name,
            &file.media_type,
            &file.bytes,
        );
        let response = self
            .http
            .post(url)
            .header("Content-Type", form.content_type())
            .body(form.bytes())
            .send()
            .await
            .map_err(|e| platform(format!("file upload: {}", e.without_url())))?;
        if !response.status().is_success() {
            return Err(platform(format!("file upload: HTTP {}", response.status())));
        }
        let mut body =
            json!({"files": [{"id": id, "title": file.file_name}], "channel_id": channel});
        if let Some(ts) = thread_ts {
            body["thread_ts"] = json!(ts);
        }
        self.call("files.completeUploadExternal", &self.bot_token, Some(&body)).await.map(|_| ())
    }

    /// Shows `text` to `user` alone in `channel` (`chat.postEphemeral`).
    pub(super) async fn post_ephemeral(
        &self,
        channel: &str,
        user: &str,
        text: &str,
    ) -> Result<(), ChannelError> {
        let body = json!({ "channel": channel, "user": user, "text": text });
        self.call("chat.postEphemeral", &self.bot_token, Some(&body)).await.map(|_| ())
    }

    /// POSTs `method` with `token` (a JSON body, or none) and returns the
    /// answer when Slack says `ok`.
    pub(super) async fn call(
        &self,
        method: &str,
        token: &str,
        body: Option<&Value>,
    ) -> Result<Value, ChannelError> {
        let url = format!("{}/{method}", self.api_base);
        let mut retries = 0;
        loop {
            let mut request = self.http.post(&url).bearer_auth(token);
            request = match body {
                Some(body) => request.json(body),
                None => request.header("Content-Type", "application/x-www-form-urlencoded"),
            };
            let response = request.send().await.map_err(|e| platform(format!("{method}: {e}")))?;
            let status = response.status();
            if status == StatusCode::TOO_MANY_REQUESTS && retries < MAX_RATE_LIMIT_RETRIES {
                let wait = retry_after(&response);
                if wait > MAX_RETRY_AFTER {
                    return Err(platform(format!(
                        "{method}: rate limited for {}s",
                        wait.as_secs()
                    )));
                }
                tracing::debug!(method, wait_ms = wait.as_millis() as u64, "slack rate limit");
                tokio::time::sleep(wait).await;
                retries += 1;
                continue;
            }
            let answer: Value = match response.json().await {
                Ok(v) => v,
                Err(_) => {
                    return Err(platform(format!("{method}: HTTP {status} with no JSON answer")));
                }
            };
            if answer["ok"].as_bool() == Some(true) {
                return Ok(answer);
            }
            let error = answer["error"].as_str().unwrap_or("unknown_error");
            let message = format!("{method} failed: {error}");
            if TOKEN_ERRORS.contains(&error) {
                let which = if method == "apps.connections.open" {
                    "app-level token (xapp-…)"
                } else {
                    "bot token (xoxb-…)"
                };
                let message = format!("{message}: check the {which}");
                return Err(ChannelError::Config { channel: CHANNEL_NAME.into(), message });
            }
            return Err(platform(message));
        }
    }
}

/// The wait a 429 asks for (`Retry-After`, whole seconds; one second when absent).
fn retry_after(response: &reqwest::Response) -> Duration {
    let seconds = response
        .headers()
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|s| s.is_finite() && *s >= 0.0)
        .unwrap_or(1.0);
    Duration::from_secs_f64(seconds.min(MAX_RETRY_AFTER.as_secs_f64() + 1.0))
}

fn platform(message: String) -> ChannelError {
    ChannelError::Platform { channel: CHANNEL_NAME.into(), message }
}
