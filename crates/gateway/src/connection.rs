//! How each channel's connection to its platform stands, as the channel
//! itself reports it (connected, reconnecting after an error, stopped) or as
//! the configuration says (disabled), for the web app's operate view,
//! `/api/status` and `ferroclaw status`.
//!
//! ```
//! use ferroclaw_gateway::connection::{Connections, State};
//!
//! let connections = Connections::default();
//! connections.set("telegram", State::Connected);
//! connections.set("telegram", State::Reconnecting { error: "HTTP 502".into() });
//! assert_eq!(connections.get("telegram"), Some(State::Reconnecting { error: "HTTP 502".into() }));
//! ```

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

use serde::Serialize;

/// One channel's connection.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum State {
    /// Started, not yet through to the platform.
    Connecting,
    /// Receiving messages (for the web channel: listening).
    Connected,
    /// Lost or refused; trying again.
    Reconnecting { error: String },
    /// Not running: it could not start, or gave up.
    Stopped { error: String },
    /// In the configuration without `enabled = true`.
    Disabled,
}

impl State {
    /// The state in a few words, as the operate view shows it.
    pub fn describe(&self) -> String {
        match self {
            State::Connecting => "connecting".into(),
            State::Connected => "connected".into(),
            State::Reconnecting { error } => format!("reconnecting (last error: {error})"),
            State::Stopped { error } => format!("stopped: {error}"),
            State::Disabled => "disabled".into(),
        }
    }
}

/// A state and since when it holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Entry {
    #[serde(flatten)]
    pub state: State,
    /// Milliseconds since the epoch when the channel entered it.
    pub since_ms: u64,
}

/// Every channel's connection; cheap to clone (all clones share the states).
#[derive(Debug, Clone, Default)]
pub struct Connections {
    states: Arc<Mutex<BTreeMap<String, Entry>>>,
}

impl Connections {
    /// Records `channel`'s state (its `since` moves only when the kind of
    /// state changes, so a retry with a new error keeps the outage's start).
    pub fn set(&self, channel: &str, state: State) {
        let mut states = self.states.lock().unwrap_or_else(PoisonError::into_inner);
        let since_ms = match states.get(channel) {
            Some(old) if std::mem::discriminant(&old.state) == std::mem::discriminant(&state) => {
                old.since_ms
            }
            _ => crate::files::now_ms(),
        };
        states.insert(channel.to_string(), Entry { state, since_ms });
    }

    /// `channel`'s state, if it reported one.
    pub fn get(&self, channel: &str) -> Option<State> {
        self.entry(channel).map(|e| e.state)
    }

    /// The channels with a state, by name.
    pub fn names(&self) -> Vec<String> {
        self.states.lock().unwrap_or_else(PoisonError::into_inner).keys().cloned().collect()
    }

    /// `channel`'s state and since when.
    pub fn entry(&self, channel: &str) -> Option<Entry> {
        self.states.lock().unwrap_or_else(PoisonError::into_inner).get(channel).cloned()
    }
}
