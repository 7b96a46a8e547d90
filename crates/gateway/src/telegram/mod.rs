//! The Telegram channel: Bot API long polling (`getUpdates` with offset and
//! timeout) in, `sendMessage` out, over a thin HTTP client. Approval requests
//! carry an inline keyboard; a press comes back as a `callback_query`, goes
//! on the bus as the `/approve` or `/deny` command it stands for, and is
//! acknowledged with `answerCallbackQuery` (the presser's toast). The API base is
//! configurable (`api_base`), so tests run against a local fake Bot API.

mod format;

pub use format::{MAX_MESSAGE_CHARS, split_for_telegram, to_html};

use crate::backoff::Backoff;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::approval::{ApprovalPrompt, BUTTONS, Decided, button_command};
use crate::bus::{InboundMessage, MessageBus, OutboundMessage, Receipt};
use crate::channel::{Channel, ChannelError};
use crate::connection::State;

/// The real Bot API.
pub const DEFAULT_API_BASE: &str = "https://api.telegram.org";
/// The variable read for the bot token when `token_env` is not set.
pub const DEFAULT_TOKEN_ENV: &str = "TELEGRAM_BOT_TOKEN";
/// Seconds one `getUpdates` long poll waits for messages (Telegram allows up to 50).
pub const DEFAULT_POLL_TIMEOUT_SECS: u64 = 30;
/// Longest wait between retries after the Bot API fails.
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// Extra time the HTTP client allows beyond the long poll itself.
const HTTP_SLACK: Duration = Duration::from_secs(10);

/// The Telegram channel (name `telegram`).
pub struct TelegramChannel {
    http: reqwest::Client,
    /// `API_BASE/botTOKEN`.
    base: String,
    /// `API_BASE/file/botTOKEN`: where received files are downloaded.
    file_base: String,
    /// Approval requests on screen: id -> (chat, message id, text), so the
    /// buttons can be taken off once the request is answered.
    asked: std::sync::Mutex<std::collections::HashMap<String, (i64, i64, String)>>,
    poll_timeout_secs: u64,
    /// The largest file a person may send ([`crate::media::MAX_INBOUND_BYTES`] unless set).
    max_file_bytes: usize,
}

impl TelegramChannel {
    /// A channel for the bot with `token`, at `api_base` (default the real API).
    pub fn new(
        token: &str,
        api_base: Option<&str>,
        poll_timeout_secs: u64,
    ) -> Result<Self, ChannelError> {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(poll_timeout_secs) + HTTP_SLACK)
            .build()
            .map_err(|e| ChannelError::Config {
                channel: "telegram".into(),
                message: e.to_string(),
            })?;
        let api = api_base.unwrap_or(DEFAULT_API_BASE).trim_end_matches('/');
        Ok(TelegramChannel {
            http,
            base: format!("{api}/bot{token}"),
            file_base: format!("{api}/file/bot{token}"),
            asked: Default::default(),
            poll_timeout_secs,
            max_file_bytes: crate::media::MAX_INBOUND_BYTES,
        })
    }

    /// The largest file a person may send (`[channels.telegram] max_file_mb`).
    pub fn with_max_file_bytes(mut self, max: usize) -> Self {
        self.max_file_bytes = max;
        self
    }

    /// Calls a Bot API method; the `result` on success.
    async fn call(&self, method: &str, body: &Value) -> Result<Value, ChannelError> {
        let platform =
            |message: String| ChannelError::Platform { channel: "telegram".into(), message };
        let response = self
            .http
            .post(format!("{}/{method}", self.base))
            .json(body)
            .send()
            .await
            .map_err(|e| platform(format!("{method}: {}", e.without_url())))?;
        let status = response.status();
        let value: Value = response
            .json()
            .await
            .map_err(|e| platform(format!("{method}: {}", e.without_url())))?;
        if value["ok"].as_bool() != Some(true) {
            let description = value["description"].as_str().unwrap_or("no description");
            return Err(platform(format!("{method} failed ({status}): {description}")));
        }
        Ok(value["result"].clone())
    }

    /// Turns one update into an inbound message (text messages, and presses
    /// of approval buttons).
    pub(crate) fn inbound(update: &Value) -> Option<InboundMessage> {
        if let Some(press) = update.get("callback_query") {
            let mut inbound = Self::button_press(press)?;
            // A press delivered again (after a restart) is the same update.
            inbound.metadata.insert("update_id".into(), update["update_id"].clone());
            return Some(inbound);
        }
        let message = update.get("message").or_else(|| update.get("edited_message"))?;
        let has_file = FILE_KINDS.iter().any(|k| message.get(*k).is_some());
        let text = message["text"]
            .as_str()
            .or_else(|| message["caption"].as_str())
            .or(has_file.then_some(""))?;
        let sender = message["from"]["id"].as_i64()?.to_string();
        let chat = message["chat"]["id"].as_i64()?.to_string();
        let mut inbound = InboundMessage::new("telegram", sender, chat, text);
        let meta = &mut inbound.metadata;
        if let Some(u) = message["from"]["username"].as_str() {
            meta.insert("username".into(), json!(u));
        }
        if let Some(n) = message["from"]["first_name"].as_str() {
            meta.insert("name".into(), json!(n));
        }
        meta.insert("message_id".into(), message["message_id"].clone());
        // Names the turn that answers it (an edit is a new update of the same message).
        meta.insert("update_id".into(), update["update_id"].clone());
        Some(inbound)
    }
}

/// The message fields that carry a file.
const FILE_KINDS: [&str; 4] = ["photo", "document", "voice", "audio"];
/// Telegram's limits for bots: photos up to 10 MB, other files up to 50 MB.
const PHOTO_LIMIT: u64 = 10 * 1024 * 1024;
const FILE_LIMIT: u64 = 50 * 1024 * 1024;

impl TelegramChannel {
    /// Downloads the photo, document or voice note of `update`'s message and
    /// attaches it to `inbound` (a file too big is mentioned instead).
    async fn receive_files(&self, update: &Value, inbound: &mut InboundMessage) {
        let Some(message) = update.get("message").or_else(|| update.get("edited_message")) else {
            return;
        };
        // (file, name, type); of a photo's sizes, the largest.
        let mut files = Vec::new();
        if let Some(photo) = message["photo"].as_array().and_then(|sizes| sizes.last()) {
            files.push((photo, "photo.jpg".to_string(), "image/jpeg".to_string()));
        }
        for kind in ["document", "voice", "audio"] {
            if let Some(file) = message.get(kind) {
                let default_name = if kind == "document" { "document" } else { "voice.ogg" };
                let name = file["file_name"].as_str().unwrap_or(default_name).to_string();
                let media_type = file["mime_type"].as_str().unwrap_or(if kind == "document" {
                    "application/octet-stream"
                } else {
                    "audio/ogg"
                });
                files.push((file, name, media_type.to_string()));
            }
        }
        for (file, name, media_type) in files {
            let got = self.download(file).await;
            crate::media::attach_downloaded(inbound, "telegram", name, media_type, got);
        }
    }

    /// A file by its `file_id` (`getFile`, then the download), size-capped.
    async fn download(&self, file: &Value) -> Result<Vec<u8>, String> {
        let max = self.max_file_bytes;
        if file["file_size"].as_u64().is_some_and(|n| n > max as u64) {
            return Err(crate::media::DownloadError::TooBig { limit: max }.to_string());
        }
        let id = file["file_id"].as_str().ok_or("no file_id")?;
        let found =
            self.call("getFile", &json!({"file_id": id})).await.map_err(|e| e.to_string())?;
        let path = found["file_path"].as_str().ok_or("getFile gave no file_path")?;
        let request = self.http.get(format!("{}/{path}", self.file_base));
        crate::media::download(request, max).await.map_err(|e| e.to_string())
    }

    /// Sends a workspace file: a photo when it is an image small enough, else a document.
    async fn send_file(&self, chat_id: i64, path: &str) -> Result<(), ChannelError> {
        let file =
            crate::media::Outgoing::load(path, "telegram", PHOTO_LIMIT, FILE_LIMIT).map_err(
                |e| ChannelError::Platform { channel: "telegram".into(), message: e.to_string() },
            )?;
        let (method, field) =
            if file.photo { ("sendPhoto", "photo") } else { ("sendDocument", "document") };
        let form = crate::multipart::Form::new().text("chat_id", &chat_id.to_string()).file(
            field,
            &file.file_name,
            &file.media_type,
            &file.bytes,
        );
        let platform =
            |message: String| ChannelError::Platform { channel: "telegram".into(), message };
        let response = self
            .http
            .post(format!("{}/{method}", self.base))
            .header("Content-Type", form.content_type())
            .body(form.bytes())
            .send()
            .await
            .map_err(|e| platform(format!("{method}: {}", e.without_url())))?;
        let value: Value = response
            .json()
            .await
            .map_err(|e| platform(format!("{method}: {}", e.without_url())))?;
        if value["ok"].as_bool() != Some(true) {
            let description = value["description"].as_str().unwrap_or("no description");
            return Err(platform(format!("{method} failed: {description}")));
        }
        Ok(())
    }

    /// A press of an approval button: its command, from the presser, in the
    /// chat of the message the button is on.
    fn button_press(press: &Value) -> Option<InboundMessage> {
        let data = press["data"].as_str()?;
        if !(data.starts_with("/approve ") || data.starts_with("/deny ")) {
            return None;
        }
        let sender = press["from"]["id"].as_i64()?.to_string();
        let chat = press["message"]["chat"]["id"].as_i64()?.to_string();
        let mut inbound = InboundMessage::new("telegram", sender, chat, data);
        inbound.metadata.insert("callback_query_id".into(), press["id"].clone());
        if let Some(n) = press["from"]["first_name"].as_str() {
            inbound.metadata.insert("name".into(), json!(n));
        }
        Some(inbound)
    }
}

#[async_trait]
impl Channel for TelegramChannel {
    fn name(&self) -> &str {
        "telegram"
    }

    async fn start(
        &self,
        bus: MessageBus,
        shutdown: CancellationToken,
    ) -> Result<(), ChannelError> {
        let mut offset: i64 = 0;
        let mut backoff = Backoff::new(Duration::from_secs(1), MAX_BACKOFF);
        loop {
            let body = json!({"offset": offset, "timeout": self.poll_timeout_secs, "allowed_updates": ["message", "edited_message", "callback_query"]});
            let updates = tokio::select! {
                () = shutdown.cancelled() => return Ok(()),
                r = self.call("getUpdates", &body) => r,
            };
            let updates = match updates {
                Ok(u) => {
                    backoff.reset();
                    bus.connections().set("telegram", State::Connected);
                    u
                }
                Err(e) => {
                    backoff.fail();
                    tracing::warn!("{e}; retrying in {}s", backoff.delay().as_secs());
                    bus.connections().set("telegram", State::Reconnecting { error: e.to_string() });
                    backoff.sleep(&shutdown).await;
                    if shutdown.is_cancelled() {
                        return Ok(());
                    }
                    continue;
                }
            };
            // Telegram forgets an update once a poll asks past it: the
            // offset moves on only when the gateway has each one for good
            // (with a shared database: stored), so an update taken during a
            // database outage by a process that then dies is fetched again.
            let mut next = offset;
            let mut receipts = Vec::new();
            for update in updates.as_array().into_iter().flatten() {
                if let Some(id) = update["update_id"].as_i64() {
                    next = next.max(id + 1);
                }
                let Some(message) = Self::inbound(update) else { continue };
                let (receipt, kept) = Receipt::new();
                let mut message = message.with_receipt(receipt);
                receipts.push(kept);
                self.receive_files(update, &mut message).await;
                let chat_id = message.chat_id.clone();
                if let Err(e) = bus.publish(message) {
                    let busy = OutboundMessage {
                        channel: "telegram".into(),
                        chat_id,
                        content: e.to_string(),
                        media: Vec::new(),
                        reply_to: None,
                        failure: None,
                    };
                    let _ = self.send(busy).await;
                }
            }
            for kept in receipts {
                tokio::select! {
                    () = shutdown.cancelled() => return Ok(()),
                    _ = kept => {}
                }
            }
            offset = next;
        }
    }

    async fn ask_approval(
        &self,
        chat_id: &str,
        prompt: &ApprovalPrompt,
    ) -> Result<(), ChannelError> {
        let chat: i64 = chat_id.parse().map_err(|_| ChannelError::UnknownChat {
            channel: "telegram".into(),
            chat_id: chat_id.to_string(),
        })?;
        // Two buttons a row, so the labels fit a phone's width.
        let buttons: Vec<Value> = BUTTONS
            .iter()
            .map(|(label, word)| json!({"text": label, "callback_data": button_command(&prompt.id, word)}))
            .collect();
        let rows: Vec<Value> = buttons.chunks(2).map(|r| json!(r)).collect();
        let body = json!({
            "chat_id": chat,
            "text": prompt.text(),
            "reply_markup": {"inline_keyboard": rows},
        });
        let sent = self.call("sendMessage", &body).await?;
        if let Some(message_id) = sent["message_id"].as_i64() {
            let mut asked = self.asked.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            asked.insert(prompt.id.clone(), (chat, message_id, prompt.text()));
        }
        Ok(())
    }

    async fn approval_resolved(
        &self,
        _chat_id: &str,
        id: &str,
        outcome: &str,
    ) -> Result<(), ChannelError> {
        let shown = self.asked.lock().unwrap_or_else(std::sync::PoisonError::into_inner).remove(id);
        let Some((chat, message_id, text)) = shown else { return Ok(()) };
        // The request stays readable, with its outcome instead of its buttons.
        let body = json!({"chat_id": chat, "message_id": message_id, "text": format!("{text}\n\n→ {outcome}")});
        self.call("editMessageText", &body).await.map(|_| ())
    }

    async fn answer_decision(
        &self,
        decision: &InboundMessage,
        decided: &Decided,
        text: &str,
    ) -> Result<(), ChannelError> {
        match decision.metadata.get("callback_query_id") {
            // A button press: the toast tells the presser; a taken decision
            // is also said in the chat, for everyone in it.
            Some(id) => {
                let toast = json!({"callback_query_id": id, "text": text, "show_alert": !matches!(decided, Decided::Done { .. })});
                self.call("answerCallbackQuery", &toast).await?;
                if matches!(decided, Decided::Done { .. }) {
                    self.send(OutboundMessage::reply(decision, text)).await?;
                }
                Ok(())
            }
            None => self.send(OutboundMessage::reply(decision, text)).await,
        }
    }

    async fn send(&self, message: OutboundMessage) -> Result<(), ChannelError> {
        let chat_id: i64 = message.chat_id.parse().map_err(|_| ChannelError::UnknownChat {
            channel: "telegram".into(),
            chat_id: message.chat_id.clone(),
        })?;
        let mut content = message.content.clone();
        for media in message.media.iter().filter(|m| crate::media::is_url(m)) {
            content.push_str(&format!("\n{media}"));
        }
        let pieces =
            if content.trim().is_empty() { Vec::new() } else { split_for_telegram(&content) };
        for piece in pieces {
            let html = json!({"chat_id": chat_id, "text": to_html(&piece), "parse_mode": "HTML"});
            if let Err(e) = self.call("sendMessage", &html).await {
                // HTML Telegram cannot parse: send the text as it is.
                tracing::debug!("{e}; sending as plain text");
                let plain = json!({"chat_id": chat_id, "text": piece});
                self.call("sendMessage", &plain).await?;
            }
        }
        for path in message.media.iter().filter(|m| !crate::media::is_url(m)) {
            self.send_file(chat_id, path).await?;
        }
        Ok(())
    }
}
