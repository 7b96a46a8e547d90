//! The Discord channel: receives through the Gateway WebSocket, sends through
//! the REST API.
//!
//! Receiving: the channel connects to the Gateway (`gateway_url`, else the URL
//! `GET /gateway/bot` names), identifies with the bot token and the
//! GUILD_MESSAGES, DIRECT_MESSAGES and MESSAGE_CONTENT intents (the last must
//! be switched on in the developer portal), heartbeats, and resumes the
//! session after a dropped connection. Each MESSAGE_CREATE from a person
//! becomes an [`InboundMessage`] with `sender` = the author's id and `chat_id`
//! = the channel id:
//!
//! - direct messages always;
//! - server (guild) messages only when they mention the bot (the mention is
//!   taken out of the text) or are in a channel listed in `channels`;
//! - never messages of bots (the agent's own included) or webhooks.
//!
//! Every such message goes on the bus; the gateway then applies the channel's
//! `dm_policy` and `allow_from` (user ids, never names) before anything
//! reaches a model.
//!
//! Approval requests carry buttons (message components); a press arrives as
//! an INTERACTION_CREATE, goes on the bus as the `/approve` or `/deny`
//! command it stands for (sender = the presser), and is answered through the
//! interaction's callback (privately to a presser who may not decide).
//!
//! Sending: `POST /channels/{id}/messages`, split into messages of at most
//! 2,000 characters at paragraph or line boundaries (code fences closed and
//! reopened), waiting out 429 rate limits.
//!
//! ```toml
//! [channels.discord]
//! enabled = true
//! token_env = "DISCORD_BOT_TOKEN"   # the default
//! allow_from = ["123456789012345678"]
//! channels = ["234567890123456789"] # server channels answered without a mention
//! ```

mod rest;
mod session;

use crate::backoff::Backoff;
use std::time::Duration;

use async_trait::async_trait;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::approval::{ApprovalPrompt, BUTTONS, Decided, button_command};
use crate::bus::{InboundMessage, MessageBus, OutboundMessage};
use crate::channel::{Channel, ChannelError};
use crate::config::ChannelSettings;
use crate::connection::State;
use crate::format::split_markdown;
pub use rest::{MAX_RATE_LIMIT_RETRIES, MAX_RETRY_AFTER, REQUEST_TIMEOUT};
use session::{SessionEnd, SessionState};

/// The channel's name in config, session keys and the `message` tool.
pub const CHANNEL_NAME: &str = "discord";
/// Discord's REST API, version 10.
pub const DEFAULT_API_BASE: &str = "https://discord.com/api/v10";
/// The variable read for the bot token when `token_env` is not set.
pub const DEFAULT_TOKEN_ENV: &str = "DISCORD_BOT_TOKEN";
/// Discord's limit on a message's `content`, in characters.
pub const MESSAGE_LIMIT: usize = 2000;
/// The query every Gateway URL needs: API version 10, JSON payloads.
pub const GATEWAY_QUERY: &str = "v=10&encoding=json";
/// Gateway intents: GUILD_MESSAGES (1 << 9), DIRECT_MESSAGES (1 << 12) and
/// MESSAGE_CONTENT (1 << 15), a privileged intent.
pub const INTENTS: u64 = (1 << 9) | (1 << 12) | (1 << 15);
/// The first wait before reconnecting after a connection that never got
/// ready; it doubles with each failure up to [`RECONNECT_MAX_DELAY`]. A
/// connection that was ready is resumed at once, as Discord advises.
pub const RECONNECT_FIRST_DELAY: Duration = Duration::from_secs(1);
/// The longest wait between reconnection attempts.
pub const RECONNECT_MAX_DELAY: Duration = Duration::from_secs(60);
/// Failed connections in a row after which the session is given up and the
/// bot identifies anew instead of resuming.
pub const RESUME_ATTEMPTS: u32 = 3;
/// Keys of `[channels.discord]` besides the common ones.
pub use crate::config::DISCORD_KEYS as OPTION_KEYS;
/// Message types the agent answers: DEFAULT (0) and REPLY (19); the others
/// are system notices (joins, pins, boosts).
const PERSON_MESSAGE_TYPES: [u64; 2] = [0, 19];

/// How to reach Discord.
#[derive(Debug, Clone)]
pub struct DiscordConfig {
    /// The bot token (sent as `Authorization: Bot TOKEN`).
    pub token: String,
    /// REST API base URL (default [`DEFAULT_API_BASE`]).
    pub api_base: String,
    /// Gateway WebSocket URL; `None` asks `GET /gateway/bot`.
    pub gateway_url: Option<String>,
    /// Server channel ids whose every message goes to the agent, mention or not.
    pub channels: Vec<String>,
    /// The largest file a person may send (default [`crate::media::MAX_INBOUND_BYTES`]).
    pub max_file_bytes: usize,
}

impl DiscordConfig {
    /// The defaults, with `token`.
    pub fn new(token: impl Into<String>) -> Self {
        DiscordConfig {
            token: token.into(),
            api_base: DEFAULT_API_BASE.into(),
            gateway_url: None,
            channels: Vec::new(),
            max_file_bytes: crate::media::MAX_INBOUND_BYTES,
        }
    }

    /// Reads `[channels.discord]`: the token from `token` or the variable in
    /// `token_env` (default `DISCORD_BOT_TOKEN`), `api_base`, `gateway_url`
    /// and `channels`.
    pub fn from_settings(settings: &ChannelSettings) -> Result<Self, ChannelError> {
        let config_error = |e: crate::config::GatewayConfigError| ChannelError::Config {
            channel: CHANNEL_NAME.into(),
            message: e.to_string(),
        };
        settings.check_options(&OPTION_KEYS).map_err(config_error)?;
        let Some(token) = settings.secret(DEFAULT_TOKEN_ENV) else {
            let env = settings.token_env.as_deref().unwrap_or(DEFAULT_TOKEN_ENV);
            return Err(ChannelError::Config {
                channel: CHANNEL_NAME.into(),
                message: format!("no bot token: set {env} (or token_env in [channels.discord])"),
            });
        };
        let mut config = DiscordConfig::new(token.trim());
        if let Some(base) = &settings.api_base {
            config.api_base = base.clone();
        }
        config.gateway_url = settings.option("gateway_url").map_err(config_error)?;
        config.channels = settings.option("channels").map_err(config_error)?.unwrap_or_default();
        config.max_file_bytes = settings.max_file_bytes();
        Ok(config)
    }
}

/// The Discord channel; share it as `Arc<dyn Channel>`.
pub struct DiscordChannel {
    config: DiscordConfig,
    rest: rest::Rest,
}

impl DiscordChannel {
    /// A channel for `config`; connects only in [`Channel::start`].
    pub fn new(config: DiscordConfig) -> Result<Self, ChannelError> {
        let rest = rest::Rest::new(&config.api_base, &config.token)?;
        Ok(DiscordChannel { config, rest })
    }

    /// Where to connect: the resume URL when resuming, else the configured
    /// or announced Gateway URL, with the version query.
    async fn connect_url(&self, state: &SessionState) -> Result<String, ChannelError> {
        let base = match (&state.resume_url, state.can_resume(), &self.config.gateway_url) {
            (Some(url), true, _) => url.clone(),
            (_, _, Some(url)) => url.clone(),
            _ => self.rest.gateway_url().await?,
        };
        Ok(if base.contains('?') {
            base
        } else {
            format!("{}/?{GATEWAY_QUERY}", base.trim_end_matches('/'))
        })
    }

    /// Turns a MESSAGE_CREATE (or a button press) into a bus message, when it is for the agent.
    fn on_dispatch(&self, bus: &MessageBus, event: &str, data: Value, bot_id: Option<&str>) {
        let message = match event {
            "MESSAGE_CREATE" => inbound_message(data, bot_id, &self.config.channels),
            "INTERACTION_CREATE" => button_press(&data),
            _ => None,
        };
        let Some(message) = message else { return };
        // Files are fetched first: the message goes on the bus with them.
        if !message.media.is_empty() {
            let (rest, bus, max) = (self.rest.clone(), bus.clone(), self.config.max_file_bytes);
            tokio::spawn(async move {
                let message = with_attachments(&rest, max, message).await;
                if let Err(e) = bus.publish(message) {
                    tracing::warn!(channel = CHANNEL_NAME, "message not taken: {e}");
                }
            });
            return;
        }
        let chat_id = message.chat_id.clone();
        if let Err(e) = bus.publish(message) {
            tracing::warn!(channel = CHANNEL_NAME, chat_id, "message not taken: {e}");
            let rest = self.rest.clone();
            tokio::spawn(async move {
                if let Err(e) = rest.create_message(&chat_id, &e.to_string()).await {
                    tracing::warn!("{e}");
                }
            });
        }
    }
}

#[async_trait]
impl Channel for DiscordChannel {
    fn name(&self) -> &str {
        CHANNEL_NAME
    }

    async fn start(
        &self,
        bus: MessageBus,
        shutdown: CancellationToken,
    ) -> Result<(), ChannelError> {
        let mut state = SessionState::default();
        let mut backoff = reconnect_backoff();
        loop {
            backoff.sleep(&shutdown).await;
            if shutdown.is_cancelled() {
                return Ok(());
            }
            if backoff.failures() >= RESUME_ATTEMPTS && state.can_resume() {
                tracing::info!(channel = CHANNEL_NAME, "cannot resume; identifying anew");
                state.forget();
            }
            let url = match self.connect_url(&state).await {
                Ok(url) => url,
                Err(e @ ChannelError::Config { .. }) => return Err(e),
                Err(e) => {
                    tracing::warn!("{e}");
                    bus.connections()
                        .set(CHANNEL_NAME, State::Reconnecting { error: e.to_string() });
                    backoff.fail();
                    continue;
                }
            };
            let ws = match session::connect(&url).await {
                Ok(ws) => ws,
                Err(e) => {
                    tracing::warn!(channel = CHANNEL_NAME, "{e}");
                    bus.connections().set(CHANNEL_NAME, State::Reconnecting { error: e.clone() });
                    backoff.fail();
                    continue;
                }
            };
            state.ready = false;
            let mut on_dispatch = |event: &str, data: Value, bot_id: Option<&str>| {
                self.on_dispatch(&bus, event, data, bot_id);
            };
            let connections = bus.connections();
            let token = &self.config.token;
            let end =
                session::run(ws, token, &mut state, &shutdown, connections, &mut on_dispatch).await;
            if state.ready {
                backoff.reset();
            } else {
                backoff.fail();
            }
            match end {
                SessionEnd::Shutdown => return Ok(()),
                SessionEnd::Fatal(e) => return Err(e),
                SessionEnd::Reconnect => {
                    let error = "the connection closed".to_string();
                    connections.set(CHANNEL_NAME, State::Reconnecting { error });
                }
            }
        }
    }

    async fn ask_approval(
        &self,
        chat_id: &str,
        prompt: &ApprovalPrompt,
    ) -> Result<(), ChannelError> {
        // Styles: 1 primary, 2 secondary, 4 danger.
        let buttons: Vec<Value> = BUTTONS
            .iter()
            .map(|(label, word)| {
                let style = match *word {
                    "once" => 1,
                    "deny" => 4,
                    _ => 2,
                };
                json!({"type": 2, "style": style, "label": label, "custom_id": button_command(&prompt.id, word)})
            })
            .collect();
        let text: String = prompt.text().chars().take(MESSAGE_LIMIT).collect();
        let body = json!({
            "content": text,
            "allowed_mentions": { "parse": [] },
            "components": [{"type": 1, "components": buttons}],
        });
        self.rest.create_message_with(chat_id, &body).await
    }

    async fn answer_decision(
        &self,
        decision: &InboundMessage,
        decided: &Decided,
        text: &str,
    ) -> Result<(), ChannelError> {
        let field = |k: &str| decision.metadata.get(k).and_then(Value::as_str);
        match (field("interaction_id"), field("interaction_token")) {
            // CHANNEL_MESSAGE_WITH_SOURCE (4); ephemeral (flag 64) unless taken.
            (Some(id), Some(token)) => {
                let flags = if matches!(decided, Decided::Done { .. }) { 0 } else { 64 };
                let body = json!({"type": 4, "data": {"content": text, "flags": flags, "allowed_mentions": {"parse": []}}});
                self.rest.interaction_callback(id, token, &body).await
            }
            _ => self.send(OutboundMessage::reply(decision, text)).await,
        }
    }

    async fn send(&self, message: OutboundMessage) -> Result<(), ChannelError> {
        let mut text = message.content;
        for url in
            message.media.iter().filter(|m| m.starts_with("http://") || m.starts_with("https://"))
        {
            text.push('\n');
            text.push_str(url);
        }
        if !text.trim().is_empty() {
            for piece in split_markdown(&text, MESSAGE_LIMIT) {
                self.rest.create_message(&message.chat_id, &piece).await?;
            }
        }
        for path in message.media.iter().filter(|m| !crate::media::is_url(m)) {
            let file = crate::media::Outgoing::load(path, CHANNEL_NAME, FILE_LIMIT, FILE_LIMIT)
                .map_err(|e| ChannelError::Platform {
                    channel: CHANNEL_NAME.into(),
                    message: e.to_string(),
                })?;
            let payload = json!({"attachments": [{"id": 0, "filename": file.file_name}], "allowed_mentions": {"parse": []}});
            let form = crate::multipart::Form::new()
                .text("payload_json", &payload.to_string())
                .file("files[0]", &file.file_name, &file.media_type, &file.bytes);
            self.rest.create_message_with_file(&message.chat_id, &form).await?;
        }
        Ok(())
    }
}

/// Discord's upload limit for bots without a boosted server: 10 MiB.
const FILE_LIMIT: u64 = 10 * 1024 * 1024;

/// `message` with its attachments downloaded (a file that cannot be is mentioned instead).
async fn with_attachments(
    rest: &rest::Rest,
    max: usize,
    mut message: InboundMessage,
) -> InboundMessage {
    let files: Vec<(String, String, String)> = message
        .metadata
        .get("attachment_files")
        .and_then(Value::as_array)
        .map(|list| {
            list.iter()
                .map(|a| {
                    let text = |k: &str| a[k].as_str().unwrap_or_default().to_string();
                    (text("url"), text("filename"), text("content_type"))
                })
                .collect()
        })
        .unwrap_or_default();
    message.metadata.remove("attachment_files");
    for (url, name, media_type) in files {
        let got = rest.download(&url, max).await;
        crate::media::attach_downloaded(&mut message, CHANNEL_NAME, name, media_type, got);
    }
    message
}

/// The waits between reconnection attempts: doubling from
/// [`RECONNECT_FIRST_DELAY`] up to [`RECONNECT_MAX_DELAY`].
fn reconnect_backoff() -> Backoff {
    Backoff::new(RECONNECT_FIRST_DELAY, RECONNECT_MAX_DELAY)
}

/// The bus message for an INTERACTION_CREATE that presses an approval button
/// (MESSAGE_COMPONENT, type 3): the button's command, from the presser (the
/// member in a server, the user in a direct message), in the button's channel.
pub(crate) fn button_press(data: &Value) -> Option<InboundMessage> {
    if data["type"].as_u64() != Some(3) {
        return None;
    }
    let command = data["data"]["custom_id"].as_str()?;
    if !(command.starts_with("/approve ") || command.starts_with("/deny ")) {
        return None;
    }
    let user = data["member"]["user"]["id"].as_str().or_else(|| data["user"]["id"].as_str())?;
    let channel = data["channel_id"].as_str()?;
    let mut inbound = InboundMessage::new(CHANNEL_NAME, user, channel, command);
    inbound.metadata.insert("interaction_id".into(), data["id"].clone());
    inbound.metadata.insert("interaction_token".into(), data["token"].clone());
    if let Some(guild) = data["guild_id"].as_str() {
        inbound.metadata.insert("guild_id".into(), json!(guild));
    }
    Some(inbound)
}

/// A message as MESSAGE_CREATE delivers it (the fields the channel reads).
#[derive(Deserialize)]
struct DiscordMessage {
    id: String,
    channel_id: String,
    #[serde(default)]
    guild_id: Option<String>,
    #[serde(default, rename = "type")]
    kind: u64,
    #[serde(default)]
    content: String,
    author: Author,
    #[serde(default)]
    mentions: Vec<Author>,
    #[serde(default)]
    attachments: Vec<Attachment>,
    #[serde(default)]
    webhook_id: Option<String>,
}

#[derive(Deserialize)]
struct Author {
    id: String,
    #[serde(default)]
    bot: bool,
    #[serde(default)]
    username: Option<String>,
    #[serde(default)]
    global_name: Option<String>,
}

#[derive(Deserialize)]
struct Attachment {
    url: String,
    #[serde(default)]
    filename: String,
    #[serde(default)]
    content_type: Option<String>,
}

/// The bus message for a MESSAGE_CREATE's `data`, or `None` when the agent
/// should not see it (a bot's, a system notice, a server message that neither
/// mentions the bot nor is in one of `channels`, or nothing to read).
pub(crate) fn inbound_message(
    data: Value,
    bot_id: Option<&str>,
    channels: &[String],
) -> Option<InboundMessage> {
    let message: DiscordMessage = match serde_json::from_value(data) {
        Ok(m) => m,
        Err(e) => {
            tracing::debug!(channel = CHANNEL_NAME, "unreadable MESSAGE_CREATE skipped: {e}");
            return None;
        }
    };
    let own = bot_id.is_some_and(|id| id == message.author.id);
    if own || message.author.bot || message.webhook_id.is_some() {
        return None;
    }
    if !PERSON_MESSAGE_TYPES.contains(&message.kind) {
        return None;
    }
    let mention = bot_id.map(|id| (format!("<@{id}>"), format!("<@!{id}>")));
    let mentioned = match (&mention, bot_id) {
        (Some((plain, nick)), Some(id)) => {
            message.mentions.iter().any(|m| m.id == id)
                || message.content.contains(plain.as_str())
                || message.content.contains(nick.as_str())
        }
        _ => false,
    };
    let in_guild = message.guild_id.is_some();
    if in_guild && !mentioned && !channels.contains(&message.channel_id) {
        return None;
    }
    let mut content = message.content;
    if let Some((plain, nick)) = &mention {
        content = content.replace(plain.as_str(), "").replace(nick.as_str(), "");
    }
    let content = content.trim().to_string();
    if content.is_empty() && message.attachments.is_empty() {
        return None;
    }
    let mut inbound =
        InboundMessage::new(CHANNEL_NAME, message.author.id, message.channel_id, content);
    let files: Vec<Value> = message
        .attachments
        .iter()
        .map(|a| json!({"url": a.url, "filename": a.filename, "content_type": a.content_type}))
        .collect();
    if !files.is_empty() {
        inbound.metadata.insert("attachment_files".into(), json!(files));
    }
    inbound.media = message.attachments.into_iter().map(|a| a.url).collect();
    let metadata = &mut inbound.metadata;
    metadata.insert("message_id".into(), json!(message.id));
    if let Some(guild) = message.guild_id {
        metadata.insert("guild_id".into(), json!(guild));
    }
    // `name` is shown in pairing requests; `username` is informative only
    // (`allow_from` matches the author's id, which nobody else can take).
    let name = message.author.global_name.or_else(|| message.author.username.clone());
    if let Some(username) = message.author.username {
        metadata.insert("username".into(), json!(username));
    }
    if let Some(name) = name {
        metadata.insert("name".into(), json!(name));
    }
    Some(inbound)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn create(author: &str, guild: Option<&str>, content: &str) -> Value {
        json!({
            "id": "m1", "channel_id": "c1", "guild_id": guild, "type": 0, "content": content,
            "author": { "id": author, "username": "ann" }, "mentions": [],
        })
    }

    #[test]
    fn intents_are_guild_messages_direct_messages_and_message_content() {
        assert_eq!(INTENTS, 512 + 4096 + 32768);
    }

    #[test]
    fn a_direct_message_becomes_an_inbound_message_with_author_and_channel() {
        let m = inbound_message(create("u1", None, " hi "), Some("bot"), &[]).unwrap();
        assert_eq!(
            (m.channel.as_str(), m.sender.as_str(), m.chat_id.as_str()),
            ("discord", "u1", "c1")
        );
        assert_eq!(m.content, "hi");
        assert_eq!((&m.metadata["username"], &m.metadata["name"]), (&json!("ann"), &json!("ann")));
    }

    #[test]
    fn a_server_message_needs_a_mention_or_a_listed_channel_and_loses_the_mention() {
        assert!(inbound_message(create("u1", Some("g"), "hello all"), Some("bot"), &[]).is_none());
        let m = inbound_message(create("u1", Some("g"), "<@bot> hello"), Some("bot"), &[]).unwrap();
        assert_eq!(m.content, "hello");
        let m = inbound_message(create("u1", Some("g"), "<@!bot> yo"), Some("bot"), &[]).unwrap();
        assert_eq!(m.content, "yo");
        let listed = ["c1".to_string()];
        assert!(
            inbound_message(create("u1", Some("g"), "hello all"), Some("bot"), &listed).is_some()
        );
    }

    #[test]
    fn bots_webhooks_and_system_notices_are_skipped() {
        assert!(inbound_message(create("bot", None, "echo"), Some("bot"), &[]).is_none());
        let mut other_bot = create("u2", None, "beep");
        other_bot["author"]["bot"] = json!(true);
        assert!(inbound_message(other_bot, Some("bot"), &[]).is_none());
        let mut pin = create("u1", None, "");
        pin["type"] = json!(6);
        assert!(inbound_message(pin, Some("bot"), &[]).is_none());
        assert!(inbound_message(json!({"nonsense": 1}), Some("bot"), &[]).is_none());
    }

    /// The wait after `failures` failed attempts.
    fn reconnect_delay(failures: u32) -> Duration {
        let mut backoff = reconnect_backoff();
        (0..failures).for_each(|_| backoff.fail());
        backoff.delay()
    }

    #[test]
    fn reconnect_delays_double_up_to_the_cap() {
        assert_eq!(reconnect_delay(1), Duration::from_secs(1));
        assert_eq!(reconnect_delay(3), Duration::from_secs(4));
        assert_eq!(reconnect_delay(40), RECONNECT_MAX_DELAY);
    }
}
