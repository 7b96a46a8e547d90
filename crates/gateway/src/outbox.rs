//! The way out: every enabled channel by name, so the agent's answers, the
//! `message` tool, cron and heartbeat can reach any chat.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::bus::OutboundMessage;
use crate::channel::{Channel, ChannelError};

/// The channels messages can be sent through; cheap to clone.
#[derive(Clone, Default)]
pub struct Outbox {
    channels: Arc<BTreeMap<String, Arc<dyn Channel>>>,
}

impl Outbox {
    /// An outbox over these channels.
    pub fn new(channels: impl IntoIterator<Item = Arc<dyn Channel>>) -> Self {
        let map = channels.into_iter().map(|c| (c.name().to_string(), c)).collect();
        Outbox { channels: Arc::new(map) }
    }

    /// The channel called `name`.
    pub fn channel(&self, name: &str) -> Option<&Arc<dyn Channel>> {
        self.channels.get(name)
    }

    /// Names of the channels, sorted.
    pub fn names(&self) -> Vec<String> {
        self.channels.keys().cloned().collect()
    }

    /// Delivers `message` through its channel.
    pub async fn send(&self, message: OutboundMessage) -> Result<(), ChannelError> {
        match self.channels.get(&message.channel) {
            Some(channel) => channel.send(message).await,
            None => Err(ChannelError::Config {
                channel: message.channel.clone(),
                message: format!(
                    "no such channel is enabled (enabled: {})",
                    self.names().join(", ")
                ),
            }),
        }
    }
}
