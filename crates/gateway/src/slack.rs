//! The Slack channel: Socket Mode in, `chat.postMessage` out. No public URL
//! is needed: the channel opens the WebSocket itself with the app-level
//! token (`xapp-…`, scope `connections:write`) and posts with the bot token
//! (`xoxb-…`, scopes `chat:write`, plus `im:history` and `channels:history`
//! for the events below).
//!
//! Receiving: every Socket Mode envelope is acknowledged at once; `message`
//! events (subscribe the app to `message.im`, and `message.channels` /
//! `message.groups` for channels, or just `app_mention`) become an
//! [`InboundMessage`] with `sender` = the user id and `chat_id` = the channel
//! id (a message that arrives both as `message` and `app_mention` counts once):
//!
//! - direct messages always;
//! - channel messages only when they mention the bot (the mention is taken
//!   out of the text) or are in a channel listed in `channels`;
//! - never bot messages (the agent's own included), edits, deletions or other
//!   subtypes.
//!
//! The thread to answer in (the message's thread, or for a channel message a
//! new thread under it) is kept in the message's `metadata["thread_ts"]`,
//! and the channel remembers it so the answer (whose `reply_to` names the
//! message) lands in that thread. Every such message goes on the bus; the
//! gateway then applies `dm_policy` and `allow_from` (user ids).
//!
//! Approval requests carry Block Kit buttons; a press arrives as an
//! `interactive` envelope (`block_actions`, enable Interactivity for the app),
//! goes on the bus as the `/approve` or `/deny` command it stands for
//! (sender = the presser), and a presser who may not decide is told so with
//! an ephemeral message.
//!
//! Sending: Markdown converted to mrkdwn ([`to_mrkdwn`]) and split into
//! messages of at most [`MESSAGE_LIMIT`] characters.
//!
//! ```toml
//! [channels.slack]
//! enabled = true
//! app_token_env = "SLACK_APP_TOKEN"  # the default; xapp-…
//! bot_token_env = "SLACK_BOT_TOKEN"  # the default; xoxb-…
//! allow_from = ["U0123ABCD"]
//! channels = ["C0456EFGH"]           # channels answered without a mention
//! ```

mod api;
mod mrkdwn;
mod socket;

use crate::backoff::Backoff;
use std::collections::{HashMap, VecDeque};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::approval::{ApprovalPrompt, BUTTONS, Decided, button_command};
use crate::bus::{InboundMessage, MessageBus, OutboundMessage};
use crate::channel::{Channel, ChannelError};
use crate::config::{ChannelSettings, GatewayConfigError};
use crate::connection::State;
use crate::format::split_markdown;
pub use api::{MAX_RATE_LIMIT_RETRIES, MAX_RETRY_AFTER, REQUEST_TIMEOUT};
pub use mrkdwn::to_mrkdwn;
use socket::SocketEnd;
pub use socket::{PING_INTERVAL, STALE_AFTER};

/// The channel's name in config, session keys and the `message` tool.
pub const CHANNEL_NAME: &str = "slack";
/// Slack's Web API.
pub const DEFAULT_API_BASE: &str = "https://slack.com/api";
/// The variable read for the app-level token when `app_token_env` is not set.
pub const DEFAULT_APP_TOKEN_ENV: &str = "SLACK_APP_TOKEN";
/// The variable read for the bot token when neither `bot_token_env` nor
/// `token_env` is set.
pub const DEFAULT_BOT_TOKEN_ENV: &str = "SLACK_BOT_TOKEN";
/// Characters per posted message: Slack advises keeping `text` under 4,000
/// (it truncates far later, at 40,000); a margin is left for mrkdwn escapes.
pub const MESSAGE_LIMIT: usize = 3900;
/// The first wait before reconnecting after a connection that was never
/// greeted; it doubles with each failure up to [`RECONNECT_MAX_DELAY`]. A
/// connection that was greeted is replaced at once.
pub const RECONNECT_FIRST_DELAY: Duration = Duration::from_secs(1);
/// The longest wait between reconnection attempts.
pub const RECONNECT_MAX_DELAY: Duration = Duration::from_secs(60);
/// Messages whose thread the channel remembers for their answers; the
/// oldest is forgotten first (its late answer then goes to the channel).
pub const REMEMBERED_THREADS: usize = 1024;
/// Recent messages remembered to drop the second copy of one that arrives as
/// both `message` and `app_mention`.
const RECENT_MESSAGES: usize = 256;
/// Keys of `[channels.slack]` besides the common ones.
pub use crate::config::SLACK_KEYS as OPTION_KEYS;
/// Message subtypes that are still a person writing to the agent.
const PERSON_SUBTYPES: [&str; 2] = ["file_share", "thread_broadcast"];

/// How to reach Slack.
#[derive(Debug, Clone)]
pub struct SlackConfig {
    /// The app-level token (`xapp-…`), for `apps.connections.open`.
    pub app_token: String,
    /// The bot token (`xoxb-…`), for `auth.test` and `chat.postMessage`.
    pub bot_token: String,
    /// Web API base URL (default [`DEFAULT_API_BASE`]).
    pub api_base: String,
    /// Channel ids whose every message goes to the agent, mention or not.
    pub channels: Vec<String>,
    /// The largest file a person may send (default [`crate::media::MAX_INBOUND_BYTES`]).
    pub max_file_bytes: usize,
}

impl SlackConfig {
    /// The defaults, with both tokens.
    pub fn new(app_token: impl Into<String>, bot_token: impl Into<String>) -> Self {
        SlackConfig {
            app_token: app_token.into(),
            bot_token: bot_token.into(),
            api_base: DEFAULT_API_BASE.into(),
            channels: Vec::new(),
            max_file_bytes: crate::media::MAX_INBOUND_BYTES,
        }
    }

    /// Reads `[channels.slack]`: the app-level token from `app_token` or the
    /// variable in `app_token_env` (default `SLACK_APP_TOKEN`); the bot token
    /// from `token` or the variable in `bot_token_env` (or `token_env`;
    /// default `SLACK_BOT_TOKEN`); `api_base` and `channels`.
    pub fn from_settings(settings: &ChannelSettings) -> Result<Self, ChannelError> {
        let config_error = |e: GatewayConfigError| ChannelError::Config {
            channel: CHANNEL_NAME.into(),
            message: e.to_string(),
        };
        let missing = |what: &str, env: &str| ChannelError::Config {
            channel: CHANNEL_NAME.into(),
            message: format!(
                "no {what}: set {env} (or the key naming another variable in [channels.slack])"
            ),
        };
        settings.check_options(&OPTION_KEYS).map_err(config_error)?;
        let app_env: Option<String> = settings.option("app_token_env").map_err(config_error)?;
        let app_env = app_env.unwrap_or_else(|| DEFAULT_APP_TOKEN_ENV.into());
        let app_literal: Option<String> = settings.option("app_token").map_err(config_error)?;
        let app_token = secret(app_literal, &app_env)
            .ok_or_else(|| missing("app-level token (xapp-…)", &app_env))?;
        let bot_env: Option<String> = settings.option("bot_token_env").map_err(config_error)?;
        let bot_env = bot_env
            .or_else(|| settings.token_env.clone())
            .unwrap_or_else(|| DEFAULT_BOT_TOKEN_ENV.into());
        let bot_token = secret(settings.token.clone(), &bot_env)
            .ok_or_else(|| missing("bot token (xoxb-…)", &bot_env))?;
        let mut config = SlackConfig::new(app_token, bot_token);
        if let Some(base) = &settings.api_base {
            config.api_base = base.clone();
        }
        config.channels = settings.option("channels").map_err(config_error)?.unwrap_or_default();
        config.max_file_bytes = settings.max_file_bytes();
        Ok(config)
    }
}

/// `literal` when set, else the variable `env`; blank counts as unset.
fn secret(literal: Option<String>, env: &str) -> Option<String> {
    literal
        .or_else(|| std::env::var(env).ok())
        .map(|t| t.trim().to_string())
        .filter(|t| !t.is_empty())
}

/// The Slack channel; share it as `Arc<dyn Channel>`.
pub struct SlackChannel {
    config: SlackConfig,
    api: api::SlackApi,
    threads: Mutex<Threads>,
    /// `channel:key:id` of the latest messages and presses published
    /// ([`SlackChannel::first_time`]), newest last.
    recent: Mutex<VecDeque<String>>,
}

/// Which thread each recent inbound message's answer belongs in.
#[derive(Default)]
struct Threads {
    by_message: HashMap<String, String>,
    order: VecDeque<String>,
}

impl Threads {
    fn remember(&mut self, message_id: String, thread_ts: String) {
        if self.order.len() >= REMEMBERED_THREADS
            && let Some(oldest) = self.order.pop_front()
        {
            self.by_message.remove(&oldest);
        }
        self.order.push_back(message_id.clone());
        self.by_message.insert(message_id, thread_ts);
    }
}

impl SlackChannel {
    /// A channel for `config`; connects only in [`Channel::start`].
    pub fn new(config: SlackConfig) -> Result<Self, ChannelError> {
        let api = api::SlackApi::new(&config.api_base, &config.app_token, &config.bot_token)?;
        let (threads, recent) = (Mutex::new(Threads::default()), Mutex::new(VecDeque::new()));
        Ok(SlackChannel { config, api, threads, recent })
    }

    /// Whether this process sees `message` (named by its `metadata[id_key]`;
    /// one without that id always is) for the first time among the last
    /// [`RECENT_MESSAGES`]; Socket Mode
    /// sends an envelope again when its acknowledgement came late.
    fn first_time(&self, message: &InboundMessage, id_key: &str) -> bool {
        let Some(id) = message.metadata.get(id_key).and_then(Value::as_str) else { return true };
        let key = format!("{}:{id_key}:{id}", message.chat_id);
        let mut recent = self.recent.lock().unwrap_or_else(PoisonError::into_inner);
        if recent.contains(&key) {
            return false;
        }
        if recent.len() >= RECENT_MESSAGES {
            recent.pop_front();
        }
        recent.push_back(key);
        true
    }

    /// Publishes a `message` event (or a button press) when it is for the agent.
    fn on_event(&self, bus: &MessageBus, event: Value, bot_id: &str) {
        if event["type"] == "block_actions" {
            if let Some(press) = button_press(&event)
                && self.first_time(&press, "press_id")
                && let Err(e) = bus.publish(press)
            {
                tracing::warn!(channel = CHANNEL_NAME, "button press not taken: {e}");
            }
            return;
        }
        let Some(message) = inbound_message(&event, bot_id, &self.config.channels) else { return };
        if !self.first_time(&message, "ts") {
            return;
        }
        let thread = message.metadata.get("thread_ts").and_then(Value::as_str).map(str::to_string);
        let (id, chat_id) = (message.id.clone(), message.chat_id.clone());
        if let Some(ts) = &thread {
            self.threads.lock().unwrap_or_else(PoisonError::into_inner).remember(id, ts.clone());
        }
        // Files are fetched (with the bot token) first: the message goes on the bus with them.
        if message.metadata.contains_key("slack_files") {
            let (api, bus, max) = (self.api.clone(), bus.clone(), self.config.max_file_bytes);
            tokio::spawn(async move {
                let message = with_files(&api, max, message).await;
                if let Err(e) = bus.publish(message) {
                    tracing::warn!(channel = CHANNEL_NAME, "message not taken: {e}");
                }
            });
            return;
        }
        if let Err(e) = bus.publish(message) {
            tracing::warn!(channel = CHANNEL_NAME, chat_id, "message not taken: {e}");
            let api = self.api.clone();
            tokio::spawn(async move {
                if let Err(e) = api.post_message(&chat_id, &e.to_string(), thread.as_deref()).await
                {
                    tracing::warn!("{e}");
                }
            });
        }
    }
}

#[async_trait]
impl Channel for SlackChannel {
    fn name(&self) -> &str {
        CHANNEL_NAME
    }

    async fn start(
        &self,
        bus: MessageBus,
        shutdown: CancellationToken,
    ) -> Result<(), ChannelError> {
        let mut bot_id: Option<String> = None;
        let mut backoff = reconnect_backoff();
        loop {
            backoff.sleep(&shutdown).await;
            if shutdown.is_cancelled() {
                return Ok(());
            }
            let opened = async {
                let id = match &bot_id {
                    Some(id) => id.clone(),
                    None => self.api.bot_user_id().await?,
                };
                Ok::<_, ChannelError>((id, self.api.open_connection().await?))
            };
            let (id, url) = match opened.await {
                Ok(found) => found,
                Err(e @ ChannelError::Config { .. }) => return Err(e),
                Err(e) => {
                    tracing::warn!("{e}");
                    bus.connections()
                        .set(CHANNEL_NAME, State::Reconnecting { error: e.to_string() });
                    backoff.fail();
                    continue;
                }
            };
            bot_id = Some(id.clone());
            let ws = match socket::connect(&url).await {
                Ok(ws) => ws,
                Err(e) => {
                    tracing::warn!(channel = CHANNEL_NAME, "{e}");
                    bus.connections().set(CHANNEL_NAME, State::Reconnecting { error: e.clone() });
                    backoff.fail();
                    continue;
                }
            };
            let mut hello = false;
            let mut on_event = |event: Value| self.on_event(&bus, event, &id);
            let end =
                socket::run(ws, &shutdown, &mut hello, bus.connections(), &mut on_event).await;
            if hello {
                backoff.reset();
            } else {
                backoff.fail();
            }
            if end == SocketEnd::Shutdown {
                return Ok(());
            }
            let error = "the connection closed".to_string();
            bus.connections().set(CHANNEL_NAME, State::Reconnecting { error });
        }
    }

    async fn ask_approval(
        &self,
        chat_id: &str,
        prompt: &ApprovalPrompt,
    ) -> Result<(), ChannelError> {
        let buttons: Vec<Value> = BUTTONS
            .iter()
            .map(|(label, word)| {
                let mut button = json!({
                    "type": "button",
                    "text": {"type": "plain_text", "text": label},
                    "action_id": format!("approval_{word}"),
                    "value": button_command(&prompt.id, word),
                });
                match *word {
                    "once" => button["style"] = json!("primary"),
                    "deny" => button["style"] = json!("danger"),
                    _ => {}
                }
                button
            })
            .collect();
        let text: String = to_mrkdwn(&prompt.text()).chars().take(MESSAGE_LIMIT).collect();
        let body = json!({
            "channel": chat_id,
            "text": text,
            "blocks": [
                {"type": "section", "text": {"type": "mrkdwn", "text": text}},
                {"type": "actions", "block_id": format!("approval_{}", prompt.id), "elements": buttons},
            ],
        });
        self.api.post_with(&body).await
    }

    async fn answer_decision(
        &self,
        decision: &InboundMessage,
        decided: &Decided,
        text: &str,
    ) -> Result<(), ChannelError> {
        if matches!(decided, Decided::Done { .. }) {
            return self.api.post_message(&decision.chat_id, text, None).await;
        }
        // Only the presser (or writer) sees a refusal.
        self.api.post_ephemeral(&decision.chat_id, &decision.sender, text).await
    }

    async fn send(&self, message: OutboundMessage) -> Result<(), ChannelError> {
        let thread = message.reply_to.as_ref().and_then(|id| {
            self.threads.lock().unwrap_or_else(PoisonError::into_inner).by_message.get(id).cloned()
        });
        let mut text = message.content;
        for url in
            message.media.iter().filter(|m| m.starts_with("http://") || m.starts_with("https://"))
        {
            text.push('\n');
            text.push_str(url);
        }
        if !text.trim().is_empty() {
            for piece in split_markdown(&to_mrkdwn(&text), MESSAGE_LIMIT) {
                self.api.post_message(&message.chat_id, &piece, thread.as_deref()).await?;
            }
        }
        for path in message.media.iter().filter(|m| !crate::media::is_url(m)) {
            let file = crate::media::Outgoing::load(path, CHANNEL_NAME, FILE_LIMIT, FILE_LIMIT)
                .map_err(|e| ChannelError::Platform {
                    channel: CHANNEL_NAME.into(),
                    message: e.to_string(),
                })?;
            self.api.upload(&message.chat_id, thread.as_deref(), &file).await?;
        }
        Ok(())
    }
}

/// The largest file the channel uploads (Slack takes up to 1 GB; a personal
/// assistant's files are far smaller, and each is held in memory).
const FILE_LIMIT: u64 = 50 * 1024 * 1024;

/// `message` with its Slack files downloaded (one that cannot be is mentioned instead).
async fn with_files(
    api: &api::SlackApi,
    max: usize,
    mut message: InboundMessage,
) -> InboundMessage {
    let files = message.metadata.remove("slack_files").unwrap_or_default();
    for f in files.as_array().into_iter().flatten() {
        let name = f["name"].as_str().unwrap_or("file").to_string();
        let got = if f["size"].as_u64().is_some_and(|n| n > max as u64) {
            Err(crate::media::DownloadError::TooBig { limit: max }.to_string())
        } else {
            api.download(f["url"].as_str().unwrap_or_default(), max).await
        };
        let media_type = f["mimetype"].as_str().unwrap_or_default().to_string();
        crate::media::attach_downloaded(&mut message, CHANNEL_NAME, name, media_type, got);
    }
    message
}

/// The waits between reconnection attempts: doubling from
/// [`RECONNECT_FIRST_DELAY`] up to [`RECONNECT_MAX_DELAY`].
fn reconnect_backoff() -> Backoff {
    Backoff::new(RECONNECT_FIRST_DELAY, RECONNECT_MAX_DELAY)
}

/// The bus message for a `block_actions` payload that presses an approval
/// button: the button's command, from the presser, in the message's channel.
pub(crate) fn button_press(payload: &Value) -> Option<InboundMessage> {
    let command = payload["actions"][0]["value"].as_str()?;
    if !(command.starts_with("/approve ") || command.starts_with("/deny ")) {
        return None;
    }
    let user = payload["user"]["id"].as_str()?;
    let channel = payload["channel"]["id"]
        .as_str()
        .or_else(|| payload["container"]["channel_id"].as_str())?;
    let mut inbound = InboundMessage::new(CHANNEL_NAME, user, channel, command);
    // The same in a payload Socket Mode sends again (its envelope id is
    // new), another for every other press: who pressed, and when.
    let press_id = match payload["actions"][0]["action_ts"].as_str() {
        Some(at) => Some(format!("{user}:{at}")),
        None => payload["trigger_id"].as_str().map(str::to_string),
    };
    if let Some(id) = press_id {
        inbound.metadata.insert("press_id".into(), json!(id));
    }
    if let Some(url) = payload["response_url"].as_str() {
        inbound.metadata.insert("response_url".into(), json!(url));
    }
    Some(inbound)
}

/// The bus message for a `message` event, or `None` when the agent should
/// not see it (a bot's, an edit or other subtype, a channel message that
/// neither mentions the bot nor is in one of `channels`, or empty).
pub(crate) fn inbound_message(
    event: &Value,
    bot_id: &str,
    channels: &[String],
) -> Option<InboundMessage> {
    let text_of = |key: &str| event[key].as_str();
    let kind = text_of("type");
    if !matches!(kind, Some("message" | "app_mention"))
        || event.get("bot_id").is_some_and(|b| !b.is_null())
    {
        return None;
    }
    if text_of("subtype").is_some_and(|s| !PERSON_SUBTYPES.contains(&s)) {
        return None;
    }
    let (user, channel, ts) = (text_of("user")?, text_of("channel")?, text_of("ts")?);
    if user == bot_id {
        return None;
    }
    let mention = format!("<@{bot_id}>");
    let text = text_of("text").unwrap_or_default();
    let direct = text_of("channel_type") == Some("im");
    let mentioned = text.contains(&mention);
    if !direct && !mentioned && !channels.iter().any(|c| c == channel) {
        return None;
    }
    let content = unescape(text.replace(&mention, "").trim());
    let files: Vec<Value> = event["files"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|f| {
            let url = f["url_private_download"].as_str().or_else(|| f["url_private"].as_str())?;
            Some(json!({"url": url, "name": f["name"], "mimetype": f["mimetype"], "size": f["size"]}))
        })
        .collect();
    if content.is_empty() && files.is_empty() {
        return None;
    }
    let mut inbound = InboundMessage::new(CHANNEL_NAME, user, channel, content);
    let metadata = &mut inbound.metadata;
    if !files.is_empty() {
        metadata.insert("slack_files".into(), json!(files));
    }
    metadata.insert("ts".into(), json!(ts));
    // Answer in the message's thread; a channel message starts one under itself.
    match (text_of("thread_ts"), direct) {
        (Some(thread), _) => _ = metadata.insert("thread_ts".into(), json!(thread)),
        (None, false) => _ = metadata.insert("thread_ts".into(), json!(ts)),
        (None, true) => {}
    }
    if let Some(kind) = text_of("channel_type") {
        metadata.insert("channel_type".into(), json!(kind));
    }
    Some(inbound)
}

/// Undoes Slack's escaping of `&`, `<` and `>` in message text.
fn unescape(text: &str) -> String {
    text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(text: &str, channel_type: &str) -> Value {
        json!({ "type": "message", "user": "U1", "channel": "C1", "ts": "1.000", "text": text, "channel_type": channel_type })
    }

    #[test]
    fn a_direct_message_becomes_an_inbound_message_without_a_thread() {
        let m = inbound_message(&event("a &lt; b", "im"), "UBOT", &[]).unwrap();
        assert_eq!(
            (m.channel.as_str(), m.sender.as_str(), m.chat_id.as_str()),
            ("slack", "U1", "C1")
        );
        assert_eq!(m.content, "a < b");
        assert!(!m.metadata.contains_key("thread_ts"));
    }

    #[test]
    fn a_channel_message_needs_a_mention_and_is_answered_in_a_thread() {
        assert!(inbound_message(&event("hello all", "channel"), "UBOT", &[]).is_none());
        let m = inbound_message(&event("<@UBOT> hi", "channel"), "UBOT", &[]).unwrap();
        assert_eq!(m.content, "hi");
        assert_eq!(m.metadata["thread_ts"], "1.000");
        assert!(inbound_message(&event("hello all", "channel"), "UBOT", &["C1".into()]).is_some());
    }

    #[test]
    fn bot_messages_own_messages_and_edits_are_skipped() {
        let mut from_bot = event("beep", "im");
        from_bot["bot_id"] = json!("B1");
        assert!(inbound_message(&from_bot, "UBOT", &[]).is_none());
        assert!(inbound_message(&event("me", "im"), "U1", &[]).is_none());
        let mut edit = event("x", "im");
        edit["subtype"] = json!("message_changed");
        assert!(inbound_message(&edit, "UBOT", &[]).is_none());
    }

    #[test]
    fn the_oldest_remembered_thread_is_forgotten_first() {
        let mut threads = Threads::default();
        for i in 0..=REMEMBERED_THREADS {
            threads.remember(format!("m{i}"), format!("{i}.0"));
        }
        assert!(!threads.by_message.contains_key("m0"));
        assert_eq!(threads.by_message.len(), REMEMBERED_THREADS);
    }
}
