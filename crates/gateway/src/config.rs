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
/// Minutes a chat's agent stays in memory after its last message; it is
/// reopened from its session file when the chat speaks again.
pub const DEFAULT_SESSION_IDLE_MINUTES: f64 = 30.0;
/// Messages one chat may have waiting before it is told "busy".
pub const DEFAULT_CHAT_QUEUE: usize = 16;
/// The variable read for the web token when `token_env` is not set.
pub const DEFAULT_TOKEN_ENV: &str = "FERROCLAW_GATEWAY_TOKEN";

/// A configuration problem in `[gateway]` or `[channels.*]`.
#[derive(Debug, thiserror::Error)]
pub enum GatewayConfigError {
    #[error("config.toml [{section}]: {message}")]
    Invalid { section: String, message: String },
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
    /// How gateway agents run tools: nobody can be asked, so calls that would
    /// ask are refused unless this mode allows them (`accept-edits`, `bypass`).
    pub permission_mode: Option<PermissionMode>,
    pub session_idle_minutes: f64,
    pub chat_queue: usize,
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
            session_idle_minutes: DEFAULT_SESSION_IDLE_MINUTES,
            chat_queue: DEFAULT_CHAT_QUEUE,
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
    /// The channel's own keys, checked by the channel.
    pub options: toml::Table,
}

/// The keys [`ChannelSettings`] reads itself.
const COMMON_KEYS: [&str; 6] =
    ["enabled", "allow_from", "dm_policy", "token", "token_env", "api_base"];

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
        }
        let c: Common = toml::Value::Table(common)
            .try_into()
            .map_err(|e: toml::de::Error| invalid(&section, e.message()))?;
        Ok(ChannelSettings {
            name: name.to_string(),
            enabled: c.enabled,
            allow_from: c.allow_from,
            dm_policy: c.dm_policy,
            token: c.token,
            token_env: c.token_env,
            api_base: c.api_base,
            options,
        })
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
