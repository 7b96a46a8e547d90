//! `$FERROCLAW_HOME/gateway/state.json`: what a running gateway is doing,
//! rewritten every few seconds, for `ferroclaw status`.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::files::{read_json, write_json_atomically};

/// One channel as the gateway runs it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ChannelStatus {
    pub name: String,
    pub running: bool,
    /// Its connection in words (`connected`, `reconnecting (last error: ...)`).
    #[serde(default)]
    pub state: Option<String>,
}

/// A snapshot of a gateway.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct GatewayStatus {
    pub pid: u32,
    /// False once it stopped cleanly.
    pub running: bool,
    pub started_at_ms: u64,
    pub updated_at_ms: u64,
    #[serde(default)]
    pub web_url: Option<String>,
    pub channels: Vec<ChannelStatus>,
    /// Chats with an agent in memory.
    pub live_sessions: usize,
    pub turns_running: usize,
    pub turns_done: u64,
}

impl GatewayStatus {
    /// True when it says it runs and its process exists.
    pub fn is_alive(&self) -> bool {
        self.running && Path::new(&format!("/proc/{}", self.pid)).exists()
    }
}

/// The status file of one home.
#[derive(Debug, Clone)]
pub struct StatusFile {
    path: PathBuf,
}

impl StatusFile {
    /// `home/gateway/state.json`.
    pub fn new(home: &Path) -> Self {
        StatusFile { path: home.join("gateway").join("state.json") }
    }

    /// The last snapshot written, if any.
    pub fn read(&self) -> Option<GatewayStatus> {
        read_json::<Option<GatewayStatus>>(&self.path).ok().flatten()
    }

    /// Writes a snapshot (a failure is logged: status is best effort).
    pub fn write(&self, status: &GatewayStatus) {
        if let Err(e) = write_json_atomically(&self.path, status) {
            tracing::warn!("{}: {e}", self.path.display());
        }
    }
}
