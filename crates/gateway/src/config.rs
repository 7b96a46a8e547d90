//! The gateway's configuration: `[gateway]` and `[channels.NAME]` of
//! `config.toml`, which `ferroclaw-core` keeps as raw tables and this module
//! checks, with errors that name the section and key.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use ferroclaw_core::PermissionMode;
use serde::Deserialize;

/// Port of the web channel: nanobot's gateway port.
pub const DEFAULT_PORT: u16 = 18790;
/// Agent turns running at once across all chats.
pub const DEFAULT_MAX_CONCURRENT_TURNS: usize = 4;
/// Minutes between heartbeats, as nanobot.
pub const DEFAULT_HEARTBEAT_MINUTES: f64 = 30.0;
/// Days finished rows stay in the shared database.
pub const DEFAULT_STORE_KEEP_DAYS: f64 = 7.0;
/// Minutes a chat's agent stays in memory after its last message; it is
/// reopened from its session file when the chat speaks again.
pub const DEFAULT_SESSION_IDLE_MINUTES: f64 = 30.0;
/// Messages one chat may have waiting before it is told "busy".
pub const DEFAULT_CHAT_QUEUE: usize = 16;
/// The variable read for the web token when `token_env` is not set.
pub const DEFAULT_TOKEN_ENV: &str = "FERROCLAW_GATEWAY_TOKEN";

/// Requests (and chat-page messages) one network address may make a minute.
pub const DEFAULT_REQUESTS_PER_MINUTE: u32 = 600;
/// Messages one sender may send a minute on a chat platform; more are
/// dropped (the sender is told once).
pub const DEFAULT_MESSAGES_PER_MINUTE: u32 = 30;
/// Connections the web channel keeps open at once.
pub const DEFAULT_MAX_CONNECTIONS: usize = 256;
/// Chat pages (WebSockets) open at once.
pub const DEFAULT_MAX_WEBSOCKETS: usize = 64;
/// Seconds a connection may take to send its request headers: long enough
/// for a slow phone network, short enough that half-open connections go.
pub const DEFAULT_HEADER_TIMEOUT_SECS: u64 = 10;

/// The keys of `[gateway]` (the fields of [`GatewaySettings`]).
pub const GATEWAY_KEYS: [&str; 28] = [
    "bind",
    "port",
    "token",
    "token_env",
    "workspace",
    "max_concurrent_turns",
    "heartbeat_minutes",
    "heartbeat_to",
    "permission_mode",
    "session_idle_minutes",
    "chat_queue",
    "requests_per_minute",
    "messages_per_minute",
    "max_connections",
    "max_websockets",
    "allowed_origins",
    "header_timeout_secs",
    "approval_timeout",
    "approvers",
    "transcription",
    "store",
    "store_migrate",
    "chat_lease_secs",
    "channel_lease_secs",
    "channel_lease_renew_secs",
    "store_keep_days",
    "media_keep_days",
    "model_config_check",
];

/// The channels the gateway ships, with the keys of each beyond [`COMMON_KEYS`].
pub const CHANNEL_KEYS: [(&str, &[&str]); 4] = [
    ("web", &["openai_api", "models"]),
    ("telegram", &["poll_timeout_secs"]),
    ("discord", &DISCORD_KEYS),
    ("slack", &SLACK_KEYS),
];
/// Keys of `[channels.discord]` besides the common ones.
pub const DISCORD_KEYS: [&str; 2] = ["gateway_url", "channels"];
/// Keys of `[channels.slack]` besides the common ones.
pub const SLACK_KEYS: [&str; 4] = ["app_token", "app_token_env", "bot_token_env", "channels"];

/// A configuration problem in `[gateway]` or `[channels.*]`.
#[derive(Debug, thiserror::Error)]
pub enum GatewayConfigError {
    #[error("config.toml [{section}]: {message}")]
    Invalid { section: String, message: String },
    /// A key or section found where it is, with where it is.
    #[error("{}:{line}:{column}: [{section}] {message}", path.display())]
    At { path: PathBuf, line: usize, column: usize, section: String, message: String },
}

fn invalid(section: &str, message: impl Into<String>) -> GatewayConfigError {
    GatewayConfigError::Invalid { section: section.to_string(), message: message.into() }
}

/// `[gateway]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct GatewaySettings {
    /// Address the web channel listens on (default loopback only).
    pub bind: IpAddr,
    pub port: u16,
    /// The web token itself (prefer `token_env`).
    pub token: Option<String>,
    /// Environment variable holding the web token.
    pub token_env: Option<String>,
    /// The agent's workspace (default `$FERROCLAW_HOME/workspace`).
    pub workspace: Option<PathBuf>,
    pub max_concurrent_turns: usize,
    /// Minutes between heartbeats; 0 turns the heartbeat off.
    pub heartbeat_minutes: f64,
    /// Where heartbeat findings go, as `CHANNEL:CHAT_ID` (default: the chat
    /// that spoke last).
    pub heartbeat_to: Option<String>,
    /// How gateway agents run tools (default: calls that need approval are
    /// asked for in the chat; `accept-edits`, `bypass` ask less).
    pub permission_mode: Option<PermissionMode>,
    /// Seconds an approval request waits for its answer before the call is
    /// denied (default 600).
    pub approval_timeout: f64,
    /// Who may answer any chat's approval requests besides the person whose
    /// message started the turn: sender ids, or `CHANNEL:SENDER`.
    pub approvers: Vec<String>,
    /// Where voice notes are transcribed (none: they are saved, not transcribed).
    pub transcription: Option<crate::media::TranscriptionSettings>,
    pub session_idle_minutes: f64,
    pub chat_queue: usize,
    /// Requests per minute per network address on the web channel (0: no limit).
    pub requests_per_minute: u32,
    /// Messages per minute per sender on each channel (0: no limit).
    pub messages_per_minute: u32,
    /// Connections the web channel keeps open at once.
    pub max_connections: usize,
    /// Chat pages open at once.
    pub max_websockets: usize,
    /// Origins besides the gateway's own whose pages may open the chat socket.
    pub allowed_origins: Vec<String>,
    /// Seconds a connection may take to send a request's headers (and stay
    /// idle between requests) before it is dropped.
    pub header_timeout_secs: u64,
    /// Where several gateway processes keep what they share: `"files"` (the
    /// default: this box's files, one process) or a `postgres://` URL.
    /// `FERROCLAW_DATABASE_URL` wins over it.
    pub store: Option<String>,
    /// Apply the database's missing migrations at start (default true).
    pub store_migrate: bool,
    /// Seconds a process holds a chat without renewing (database store; default 30):
    /// a process that dies mid-turn delays that chat by at most this long.
    pub chat_lease_secs: f64,
    /// Seconds a process holds a single-holder channel (Telegram, Discord,
    /// Slack) without renewing (default 6): the longest such a channel is
    /// silent after its process dies.
    pub channel_lease_secs: f64,
    /// Seconds between renewals of a channel lease (default 2; below `channel_lease_secs`).
    pub channel_lease_renew_secs: f64,
    /// Days finished messages, delivered answers, cron runs, finished turns'
    /// journals and old approval requests stay in the database, and answers
    /// that could not be delivered wait (default 7). On files: days a
    /// finished turn's journal file stays.
    pub store_keep_days: f64,
    /// Days files people sent (the workspace's `inbox/`) and files the agent
    /// sent (kept in the database) stay (default 30; 0 keeps them for ever).
    pub media_keep_days: f64,
    /// Database store: what a gateway does when the database serves another
    /// model config than its own (`match`, the default: it takes no turns;
    /// `adopt`: its config becomes the database's; `off`: it takes turns anyway).
    pub model_config_check: crate::liveness::ModelConfigCheck,
}

impl Default for GatewaySettings {
    fn default() -> Self {
        GatewaySettings {
            bind: IpAddr::from([127, 0, 0, 1]),
            port: DEFAULT_PORT,
            token: None,
            token_env: None,
            workspace: None,
            max_concurrent_turns: DEFAULT_MAX_CONCURRENT_TURNS,
            heartbeat_minutes: DEFAULT_HEARTBEAT_MINUTES,
            heartbeat_to: None,
            permission_mode: None,
            approval_timeout: crate::approval::DEFAULT_APPROVAL_TIMEOUT.as_secs_f64(),
            approvers: Vec::new(),
            transcription: None,
            session_idle_minutes: DEFAULT_SESSION_IDLE_MINUTES,
            chat_queue: DEFAULT_CHAT_QUEUE,
            requests_per_minute: DEFAULT_REQUESTS_PER_MINUTE,
            messages_per_minute: DEFAULT_MESSAGES_PER_MINUTE,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            max_websockets: DEFAULT_MAX_WEBSOCKETS,
            allowed_origins: Vec::new(),
            header_timeout_secs: DEFAULT_HEADER_TIMEOUT_SECS,
            store: None,
            store_migrate: true,
            chat_lease_secs: crate::store_link::CHAT_LEASE.as_secs_f64(),
            channel_lease_secs: crate::store_link::CHANNEL_LEASE.as_secs_f64(),
            channel_lease_renew_secs: crate::store_link::CHANNEL_LEASE.as_secs_f64() / 3.0,
            store_keep_days: DEFAULT_STORE_KEEP_DAYS,
            media_keep_days: crate::media_retention::DEFAULT_MEDIA_KEEP_DAYS,
            model_config_check: Default::default(),
        }
    }
}

impl GatewaySettings {
    /// Parses `[gateway]` (absent: defaults).
    pub fn parse(table: Option<&toml::Table>) -> Result<Self, GatewayConfigError> {
        let settings: GatewaySettings = match table {
            None => GatewaySettings::default(),
            Some(t) => toml::Value::Table(t.clone())
                .try_into()
                .map_err(|e: toml::de::Error| invalid("gateway", e.message()))?,
        };
        if settings.header_timeout_secs == 0 || settings.max_connections == 0 {
            return Err(invalid(
                "gateway",
                "header_timeout_secs and max_connections must be at least 1",
            ));
        }
        if !(settings.approval_timeout > 0.0 && settings.approval_timeout.is_finite()) {
            return Err(invalid("gateway", "approval_timeout must be a number of seconds above 0"));
        }
        if !(settings.media_keep_days >= 0.0 && settings.media_keep_days.is_finite()) {
            return Err(invalid(
                "gateway",
                "media_keep_days must be a number of days (0 keeps media)",
            ));
        }
        let positive = |v: f64| v > 0.0 && v.is_finite();
        if !(positive(settings.chat_lease_secs)
            && positive(settings.channel_lease_secs)
            && positive(settings.channel_lease_renew_secs)
            && positive(settings.store_keep_days))
        {
            return Err(invalid(
                "gateway",
                "chat_lease_secs, channel_lease_secs, channel_lease_renew_secs and store_keep_days \
                 must be numbers above 0",
            ));
        }
        if settings.channel_lease_renew_secs >= settings.channel_lease_secs {
            return Err(invalid(
                "gateway",
                format!(
                    "channel_lease_renew_secs ({}) must be less than channel_lease_secs ({}): \
                     the holder must renew before its lease runs out",
                    settings.channel_lease_renew_secs, settings.channel_lease_secs
                ),
            ));
        }
        if settings.max_concurrent_turns == 0 {
            return Err(invalid("gateway", "max_concurrent_turns must be at least 1"));
        }
        if !(settings.heartbeat_minutes >= 0.0 && settings.session_idle_minutes > 0.0) {
            return Err(invalid(
                "gateway",
                "heartbeat_minutes must be >= 0 and session_idle_minutes > 0",
            ));
        }
        Ok(settings)
    }

    /// The agent workspace: configured, else `home/workspace`.
    pub fn workspace(&self, home: &Path) -> PathBuf {
        self.workspace.clone().unwrap_or_else(|| home.join("workspace"))
    }

    /// Time between heartbeats; `None` when off.
    pub fn heartbeat_interval(&self) -> Option<Duration> {
        (self.heartbeat_minutes > 0.0)
            .then(|| Duration::from_secs_f64(self.heartbeat_minutes * 60.0))
    }

    /// The database store's lease lengths.
    pub fn leases(&self) -> crate::store_link::Leases {
        crate::store_link::Leases {
            chat: Duration::from_secs_f64(self.chat_lease_secs),
            channel: Duration::from_secs_f64(self.channel_lease_secs),
            channel_renew: Duration::from_secs_f64(self.channel_lease_renew_secs),
        }
    }

    /// How long finished rows stay in the database.
    pub fn store_keep(&self) -> Duration {
        Duration::from_secs_f64(self.store_keep_days * 86_400.0)
    }

    /// How long media stays (`None`: for ever).
    pub fn media_keep(&self) -> Option<Duration> {
        (self.media_keep_days > 0.0)
            .then(|| Duration::from_secs_f64(self.media_keep_days * 86_400.0))
    }

    /// How long an approval request waits for its answer.
    pub fn approval_timeout(&self) -> Duration {
        Duration::from_secs_f64(self.approval_timeout)
    }

    /// How long an idle chat's agent stays in memory.
    pub fn session_idle(&self) -> Duration {
        Duration::from_secs_f64(self.session_idle_minutes * 60.0)
    }

    /// The configured web token, from `token` or the environment.
    pub fn configured_token(&self) -> Option<String> {
        let env = self.token_env.as_deref().unwrap_or(DEFAULT_TOKEN_ENV);
        self.token.clone().or_else(|| std::env::var(env).ok()).filter(|t| !t.trim().is_empty())
    }
}

/// Checks the `[gateway]` and `[channels.*]` keys of the config file at
/// `path` (whose text is `text`): an unknown key or channel is reported as
/// `path:line:column` with the nearest valid name, as the top level is.
pub fn check_file(path: &Path, text: &str) -> Result<(), GatewayConfigError> {
    use toml::Spanned;
    type Keys = BTreeMap<Spanned<String>, toml::Value>;
    #[derive(Deserialize)]
    struct View {
        #[serde(default)]
        gateway: Option<Keys>,
        #[serde(default)]
        channels: BTreeMap<Spanned<String>, Keys>,
    }
    // A file that does not parse is reported by the core config loader.
    let Ok(view) = toml::from_str::<View>(text) else { return Ok(()) };
    let at = |key: &Spanned<String>, section: &str, valid: &[&str], what: &str| {
        let before = &text[..key.span().start.min(text.len())];
        let line = before.matches('\n').count() + 1;
        let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
        let name = key.get_ref();
        let message = match nearest(name, valid) {
            Some(best) => format!("unknown {what} \"{name}\" (did you mean \"{best}\"?)"),
            None => format!("unknown {what} \"{name}\"; valid: {}", valid.join(", ")),
        };
        GatewayConfigError::At {
            path: path.to_path_buf(),
            line,
            column,
            section: section.to_string(),
            message,
        }
    };
    for key in view.gateway.iter().flat_map(|t| t.keys()) {
        if !GATEWAY_KEYS.contains(&key.get_ref().as_str()) {
            return Err(at(key, "gateway", &GATEWAY_KEYS, "key"));
        }
    }
    let names: Vec<&str> = CHANNEL_KEYS.iter().map(|(n, _)| *n).collect();
    for (name, keys) in &view.channels {
        let Some((_, own)) = CHANNEL_KEYS.iter().find(|(n, _)| n == name.get_ref()) else {
            return Err(at(name, "channels", &names, "channel"));
        };
        let mut valid: Vec<&str> = COMMON_KEYS.to_vec();
        valid.extend_from_slice(own);
        for key in keys.keys() {
            if !valid.contains(&key.get_ref().as_str()) {
                return Err(at(key, &format!("channels.{}", name.get_ref()), &valid, "key"));
            }
        }
    }
    Ok(())
}

/// The valid name closest to `name`, when one is close (a typo).
fn nearest<'a>(name: &str, valid: &[&'a str]) -> Option<&'a str> {
    valid
        .iter()
        .map(|v| (strsim::levenshtein(name, v), *v))
        .filter(|(d, _)| *d <= 2.max(name.len() / 4))
        .min()
        .map(|(_, v)| v)
}

/// The channels a gateway started with these `[channels.*]` tables would
/// run: those with `enabled = true`, and the web chat unless configured off.
pub fn enabled_channels(tables: &BTreeMap<String, toml::Table>) -> Vec<String> {
    let mut names: Vec<String> = tables
        .iter()
        .filter(|(_, t)| t.get("enabled").and_then(toml::Value::as_bool) == Some(true))
        .map(|(n, _)| n.clone())
        .collect();
    if !tables.contains_key("web") {
        names.insert(0, "web".into());
    }
    names
}

/// Who may talk to the agent through a channel (OpenClaw's `dmPolicy`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DmPolicy {
    /// Unknown senders get a one-time code for the owner to approve.
    #[default]
    Pairing,
    /// Only senders in `allow_from` (and approved pairings).
    Allowlist,
    /// Anyone.
    Open,
    /// Nobody.
    Disabled,
}

/// `[channels.NAME]`: the keys every channel has, plus its own in `options`.
#[derive(Debug, Clone, Default)]
pub struct ChannelSettings {
    /// The channel's name (`web`, `telegram`, ...).
    pub name: String,
    pub enabled: bool,
    /// Sender ids (or user names) let in without pairing; `*` lets everyone in.
    pub allow_from: Vec<String>,
    pub dm_policy: DmPolicy,
    /// The platform token itself (prefer `token_env`).
    pub token: Option<String>,
    /// Environment variable holding the platform token.
    pub token_env: Option<String>,
    /// The platform's API base URL (tests point it at a local fake).
    pub api_base: Option<String>,
    /// The largest file a person may send, in MB (default 20).
    pub max_file_mb: Option<f64>,
    /// The channel's own keys, checked by the channel.
    pub options: toml::Table,
}

/// The keys [`ChannelSettings`] reads itself.
const COMMON_KEYS: [&str; 7] =
    ["enabled", "allow_from", "dm_policy", "token", "token_env", "api_base", "max_file_mb"];

impl ChannelSettings {
    /// Parses `[channels.NAME]`; other keys stay in `options` for the channel.
    pub fn parse(name: &str, table: &toml::Table) -> Result<Self, GatewayConfigError> {
        let section = format!("channels.{name}");
        let mut options = table.clone();
        let mut common = toml::Table::new();
        for key in COMMON_KEYS {
            if let Some(v) = options.remove(key) {
                common.insert(key.to_string(), v);
            }
        }
        #[derive(Deserialize, Default)]
        #[serde(default)]
        struct Common {
            enabled: bool,
            allow_from: Vec<String>,
            dm_policy: DmPolicy,
            token: Option<String>,
            token_env: Option<String>,
            api_base: Option<String>,
            max_file_mb: Option<f64>,
        }
        let c: Common = toml::Value::Table(common)
            .try_into()
            .map_err(|e: toml::de::Error| invalid(&section, e.message()))?;
        if c.max_file_mb.is_some_and(|mb| !(mb > 0.0 && mb.is_finite())) {
            return Err(invalid(&section, "max_file_mb must be a number of megabytes above 0"));
        }
        Ok(ChannelSettings {
            name: name.to_string(),
            enabled: c.enabled,
            allow_from: c.allow_from,
            dm_policy: c.dm_policy,
            token: c.token,
            token_env: c.token_env,
            api_base: c.api_base,
            max_file_mb: c.max_file_mb,
            options,
        })
    }

    /// The largest file a person may send on this channel, in bytes.
    pub fn max_file_bytes(&self) -> usize {
        self.max_file_mb
            .map_or(crate::media::MAX_INBOUND_BYTES, |mb| (mb * 1_048_576.0).max(1.0) as usize)
    }

    /// Refuses `allow_from` entries that are user names rather than ids:
    /// a name can be taken by anyone, an id cannot.
    pub fn check_allow_from(&self) -> Result<(), GatewayConfigError> {
        match self.allow_from.iter().find(|a| a.starts_with('@')) {
            None => Ok(()),
            Some(name) => Err(invalid(
                &format!("channels.{}", self.name),
                format!(
                    "allow_from takes sender ids, not user names ({name:?} looks like one): \
                     names can be changed or taken by anyone; use the numeric id (the pairing \
                     request and `ferroclaw pairing list` show it)"
                ),
            )),
        }
    }

    /// Parses every `[channels.*]` section.
    pub fn parse_all(
        tables: &BTreeMap<String, toml::Table>,
    ) -> Result<Vec<ChannelSettings>, GatewayConfigError> {
        tables.iter().map(|(name, t)| Self::parse(name, t)).collect()
    }

    /// The platform token from `token` or `token_env` (`default_env` when unset).
    pub fn secret(&self, default_env: &str) -> Option<String> {
        let env = self.token_env.as_deref().unwrap_or(default_env);
        self.token.clone().or_else(|| std::env::var(env).ok()).filter(|t| !t.trim().is_empty())
    }

    /// Refuses keys in `options` that the channel does not know.
    pub fn check_options(&self, known: &[&str]) -> Result<(), GatewayConfigError> {
        match self.options.keys().find(|k| !known.contains(&k.as_str())) {
            None => Ok(()),
            Some(key) => {
                let mut valid: Vec<&str> = COMMON_KEYS.to_vec();
                valid.extend_from_slice(known);
                Err(invalid(
                    &format!("channels.{}", self.name),
                    format!("unknown key {key:?}; valid keys: {}", valid.join(", ")),
                ))
            }
        }
    }

    /// A typed channel option (absent: `None`).
    pub fn option<T: serde::de::DeserializeOwned>(
        &self,
        key: &str,
    ) -> Result<Option<T>, GatewayConfigError> {
        match self.options.get(key) {
            None => Ok(None),
            Some(v) => v.clone().try_into().map(Some).map_err(|e: toml::de::Error| {
                invalid(&format!("channels.{}", self.name), format!("{key}: {}", e.message()))
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_misspelt_channel_key_is_reported_with_line_column_and_a_suggestion() {
        let text = "model = \"x\"\n[channels.web]\nenabeld = true\n";
        let err = check_file(Path::new("config.toml"), text).unwrap_err().to_string();
        assert_eq!(
            err,
            "config.toml:3:1: [channels.web] unknown key \"enabeld\" (did you mean \"enabled\"?)"
        );
        let text = "[gateway]\nprot = 1\n";
        let err = check_file(Path::new("c.toml"), text).unwrap_err().to_string();
        assert!(err.starts_with("c.toml:2:1: [gateway]") && err.contains("\"port\""), "{err}");
        let text = "[channels.telegramm]\nenabled = true\n";
        let err = check_file(Path::new("c.toml"), text).unwrap_err().to_string();
        assert!(err.contains("did you mean \"telegram\""), "{err}");
        let ok = "[gateway]\nport = 1\n[channels.web]\nenabled = true\nopenai_api = false\n";
        check_file(Path::new("c.toml"), ok).unwrap();
    }

    #[test]
    fn redteam_gateway_allow_from_refuses_user_names() {
        let t = table("enabled = true\nallow_from = [\"@alice\"]\n");
        let err = ChannelSettings::parse("telegram", &t).unwrap().check_allow_from().unwrap_err();
        assert!(err.to_string().contains("ids"), "{err}");
    }

    fn table(text: &str) -> toml::Table {
        text.parse().unwrap()
    }

    #[test]
    fn gateway_defaults_are_loopback_port_18790_and_a_30_minute_heartbeat() {
        let s = GatewaySettings::parse(None).unwrap();
        assert_eq!(s.bind.to_string(), "127.0.0.1");
        assert_eq!(s.port, 18790);
        assert_eq!(s.heartbeat_interval(), Some(Duration::from_secs(1800)));
    }

    #[test]
    fn lease_lengths_default_to_todays_and_a_renewal_must_come_before_the_lease_ends() {
        let s = GatewaySettings::parse(None).unwrap();
        assert_eq!(s.leases(), crate::store_link::Leases::default());
        assert_eq!(s.leases().channel_renew, Duration::from_secs(2));
        assert_eq!(s.store_keep(), Duration::from_secs(7 * 86_400));
        assert_eq!(s.media_keep(), Some(Duration::from_secs(30 * 86_400)));
        let forever = GatewaySettings::parse(Some(&table("media_keep_days = 0"))).unwrap();
        assert_eq!(forever.media_keep(), None);
        assert!(GatewaySettings::parse(Some(&table("media_keep_days = -1"))).is_err());
        let t =
            table("chat_lease_secs = 60\nchannel_lease_secs = 10\nchannel_lease_renew_secs = 3");
        let s = GatewaySettings::parse(Some(&t)).unwrap();
        assert_eq!(s.leases().chat, Duration::from_secs(60));
        assert_eq!(s.leases().channel_renew, Duration::from_secs(3));
        let late = table("channel_lease_secs = 5\nchannel_lease_renew_secs = 5");
        let err = GatewaySettings::parse(Some(&late)).unwrap_err().to_string();
        assert!(err.contains("must be less than channel_lease_secs"), "{err}");
        let zero = table("chat_lease_secs = 0");
        assert!(GatewaySettings::parse(Some(&zero)).is_err());
    }

    #[test]
    fn an_unknown_gateway_key_is_named_with_its_section() {
        let err = GatewaySettings::parse(Some(&table("prot = 1"))).unwrap_err().to_string();
        assert!(err.contains("[gateway]") && err.contains("prot"), "{err}");
    }

    #[test]
    fn channel_settings_split_common_keys_from_the_channels_own() {
        let t =
            table("enabled = true\ndm_policy = \"allowlist\"\nallow_from = [\"42\"]\npoll = 3\n");
        let c = ChannelSettings::parse("telegram", &t).unwrap();
        assert!(c.enabled);
        assert_eq!(c.dm_policy, DmPolicy::Allowlist);
        assert_eq!(c.option::<u64>("poll").unwrap(), Some(3));
        let err = c.check_options(&["other"]).unwrap_err().to_string();
        assert!(err.contains("[channels.telegram]") && err.contains("\"poll\""), "{err}");
    }

    #[test]
    fn a_bad_dm_policy_is_refused_with_the_valid_ones() {
        let err = ChannelSettings::parse("web", &table("dm_policy = \"friends\"")).unwrap_err();
        let err = err.to_string();
        assert!(err.contains("friends") && err.contains("pairing"), "{err}");
    }
}
