//! What the web app sees of the running gateway: the handles its pages and
//! API read and change (conversations, approvals, cron jobs, pairing, the
//! channels' state, the chats' jobs and counts), handed to the web channel
//! once when the gateway starts ([`super::WebChannel::attach`]).

use std::path::PathBuf;
use std::sync::Arc;

use ferroclaw_runtime::Runtime;
use ferroclaw_tools::JobSummary;
use tokio_util::sync::CancellationToken;

use crate::approval::ApprovalBroker;
use crate::chats::Chats;
use crate::config::ChannelSettings;
use crate::connection::Connections;
use crate::cron::CronStore;
use crate::history::History;
use crate::idempotency::Requests;
use crate::outbox::Outbox;
use crate::pairing::PairingStore;
use crate::sessions::{SessionKey, SessionNames, SessionTitles};
use crate::store_link::StoreLink;

/// The running gateway, as the web app uses it.
pub struct WebContext {
    pub runtime: Arc<Runtime>,
    /// `$FERROCLAW_HOME`.
    pub home: PathBuf,
    /// The agents' workspace.
    pub workspace: PathBuf,
    /// The shared database, when several gateways share the work.
    pub store: Option<Arc<StoreLink>>,
    pub approvals: Arc<ApprovalBroker>,
    pub outbox: Outbox,
    pub cron: CronStore,
    pub pairing: PairingStore,
    /// Names given to conversations in the web app.
    pub titles: SessionTitles,
    pub names: SessionNames,
    /// How each channel's connection stands.
    pub connections: Connections,
    /// Cancelled once a stopping gateway's turns are over: until then the
    /// web channel keeps listening and answers new requests 503.
    pub drained: CancellationToken,
    channels: Vec<ChannelSettings>,
    chats: Arc<Chats>,
}

/// What the gateway hands the web app besides its chats.
pub struct WebParts {
    pub home: PathBuf,
    pub pairing: PairingStore,
    pub titles: SessionTitles,
    pub connections: Connections,
    pub channels: Vec<ChannelSettings>,
    pub drained: CancellationToken,
}

impl WebContext {
    pub fn new(chats: Arc<Chats>, parts: WebParts) -> WebContext {
        let WebParts { home, pairing, titles, connections, mut channels, drained } = parts;
        channels.sort_by(|a, b| a.name.cmp(&b.name));
        WebContext {
            runtime: chats.runtime.clone(),
            home,
            workspace: chats.workspace.clone(),
            store: chats.store.clone(),
            approvals: chats.approvals.clone(),
            outbox: chats.outbox.clone(),
            cron: chats.cron.clone(),
            pairing,
            titles,
            names: chats.names.clone(),
            connections,
            drained,
            channels,
            chats,
        }
    }

    /// What people read of their conversations.
    pub fn history(&self) -> History {
        let store = self.store.as_ref().map(|link| &link.store);
        History::of(store, &self.runtime, &self.titles, &self.names)
    }

    /// The OpenAI API's answers by `Idempotency-Key`.
    pub fn requests(&self) -> Requests {
        self.chats.requests.clone()
    }

    /// The channels the gateway runs, with their settings, by name.
    pub fn channel_settings(&self) -> &[ChannelSettings] {
        &self.channels
    }

    /// The background jobs `key`'s agent started (none when it is not open).
    pub fn jobs_of(&self, key: &SessionKey) -> Vec<JobSummary> {
        self.chats.jobs_of(key)
    }

    /// Chats with an agent in memory.
    pub fn live_sessions(&self) -> usize {
        self.chats.live_sessions()
    }

    /// Turns running now and turns finished since start.
    pub fn turn_counts(&self) -> (usize, u64) {
        self.chats.turn_counts()
    }
}
