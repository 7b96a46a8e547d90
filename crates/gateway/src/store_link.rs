//! This process's link to the shared database (`[gateway] store`): the
//! database handle, its notifications, the lease lengths, and the live parts
//! of messages received here (an event tap and a stop button cannot travel
//! through the database). The loops that use it are in the `scaleout` module.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use ferroclaw_store::{Changes, PgStore, Wakeups};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::bus::{BusError, DEFAULT_QUEUE_CAPACITY, EventTap, InboundMessage};

/// How long a worker holds a chat without renewing: a process that dies
/// mid-turn delays that chat by at most this long. Renewed every third of it.
pub const CHAT_LEASE: Duration = Duration::from_secs(30);
/// Tests only: the chat lease in milliseconds, so a test of a killed
/// process need not wait [`CHAT_LEASE`] for the takeover.
const CHAT_LEASE_TEST_ENV: &str = "FERROCLAW_TEST_CHAT_LEASE_MS";
/// How long a process holds a single-holder channel without renewing: the
/// longest a channel is silent after its process dies (the target is
/// a failover under 10 s). Renewed every third of it.
pub const CHANNEL_LEASE: Duration = Duration::from_secs(6);
/// How often the claim and delivery loops, the cron loop and the approvals
/// look at the database when no notification came: a notification says at
/// once that a message or an answer is waiting or that jobs or requests
/// changed, so this only bounds what a lost one costs.
pub const SAFETY_POLL: Duration = Duration::from_secs(30);
/// Tests only: [`SAFETY_POLL`] in milliseconds (a test that must not pass
/// by polling sets it to an hour).
const SAFETY_POLL_TEST_ENV: &str = "FERROCLAW_TEST_SAFETY_POLL_MS";
/// Messages admitted and not yet stored, at most: while the database is
/// away they wait here (in arrival order); when this is full, channels are
/// told "busy, try again" (the API answers 429 with `Retry-After`) instead
/// of acknowledging what could not be kept.
pub const STORE_BUFFER: usize = DEFAULT_QUEUE_CAPACITY;
/// The first and the longest wait before asking an unreachable database again.
pub(crate) const RETRY_FIRST: Duration = Duration::from_millis(100);
pub(crate) const RETRY_MAX: Duration = Duration::from_secs(2);

/// A test's shorter chat lease (`FERROCLAW_TEST_CHAT_LEASE_MS`, at least
/// 300), which wins over `[gateway] chat_lease_secs`.
fn test_chat_lease() -> Option<Duration> {
    std::env::var(CHAT_LEASE_TEST_ENV)
        .ok()
        .and_then(|ms| ms.parse::<u64>().ok())
        .filter(|&ms| ms >= 300)
        .map(Duration::from_millis)
}

/// [`SAFETY_POLL`], or a test's (`FERROCLAW_TEST_SAFETY_POLL_MS`).
pub fn safety_poll() -> Duration {
    std::env::var(SAFETY_POLL_TEST_ENV)
        .ok()
        .and_then(|ms| ms.parse::<u64>().ok())
        .filter(|&ms| ms > 0)
        .map_or(SAFETY_POLL, Duration::from_millis)
}

/// Channels that must run in one process at a time.
pub const SINGLE_HOLDER_CHANNELS: [&str; 3] = ["telegram", "discord", "slack"];

/// How long leases last and how often they are renewed (`[gateway]
/// chat_lease_secs`, `channel_lease_secs`, `channel_lease_renew_secs`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Leases {
    /// A chat's lease; renewed every third of it.
    pub chat: Duration,
    /// A single-holder channel's lease.
    pub channel: Duration,
    /// How often the channel's holder renews it (less than `channel`).
    pub channel_renew: Duration,
}

impl Default for Leases {
    fn default() -> Self {
        Leases { chat: CHAT_LEASE, channel: CHANNEL_LEASE, channel_renew: CHANNEL_LEASE / 3 }
    }
}

/// What of a message cannot be stored: its event tap and its stop button.
pub(crate) type LiveParts = (Option<EventTap>, Option<CancellationToken>);

/// This process's link to the shared database.
pub struct StoreLink {
    pub store: PgStore,
    pub(crate) wakeups: Wakeups,
    /// The live parts (event tap, stop button) of messages received here and
    /// not yet answered, by message id: they cannot travel through the database.
    live: Mutex<HashMap<String, LiveParts>>,
    /// Admitted messages on their way into the database, in arrival order.
    incoming: mpsc::Sender<InboundMessage>,
    /// The claimed messages running here (shutdown waits for them).
    pub claims: TaskTracker,
    /// Lease lengths.
    pub leases: Leases,
    /// This process's registration (set once, when the claim loop starts).
    pub registered: std::sync::OnceLock<crate::liveness::Registered>,
    /// Held by the delivery loop from a take until its answers are sent, and
    /// by a worker sending its own answer: an answer a worker sends itself
    /// never overtakes an earlier one of its chat the loop took.
    pub(crate) sending: tokio::sync::Mutex<()>,
}

impl StoreLink {
    /// A link over `store`, and the receiving end of its incoming queue (for the store loop).
    pub fn new(
        store: PgStore,
        mut leases: Leases,
    ) -> (Arc<StoreLink>, mpsc::Receiver<InboundMessage>) {
        if let Some(chat) = test_chat_lease() {
            leases.chat = chat;
        }
        let (incoming, rx) = mpsc::channel(STORE_BUFFER);
        let wakeups = store.listen();
        let link = StoreLink {
            store,
            wakeups,
            live: Mutex::new(HashMap::new()),
            incoming,
            claims: TaskTracker::new(),
            leases,
            registered: std::sync::OnceLock::new(),
            sending: tokio::sync::Mutex::new(()),
        };
        (Arc::new(link), rx)
    }

    /// Queues an admitted message for the database; a full queue is busy.
    pub(crate) fn accept(&self, mut message: InboundMessage) -> Result<(), BusError> {
        let live = (message.tap.take(), message.cancel.take());
        let id = message.id.clone();
        if live.0.is_some() || live.1.is_some() {
            self.live().insert(id.clone(), live);
        }
        self.incoming.try_send(message).map_err(|e| {
            self.live().remove(&id);
            match e {
                mpsc::error::TrySendError::Full(_) => BusError::Busy,
                mpsc::error::TrySendError::Closed(_) => BusError::Closed,
            }
        })
    }

    /// Whether this process takes turns (registered, and serving the
    /// database's model config): cron runs and heartbeats ask this.
    pub fn takes_turns(&self) -> bool {
        self.registered.get().is_some_and(|r| r.takes_turns)
    }

    /// Changes to cron jobs, in any process, from now on.
    pub fn cron_changes(&self) -> Changes {
        self.wakeups.cron()
    }

    /// Changes to approval requests, in any process, from now on.
    pub fn approval_changes(&self) -> Changes {
        self.wakeups.approvals()
    }

    pub(crate) fn live(&self) -> std::sync::MutexGuard<'_, HashMap<String, LiveParts>> {
        self.live.lock().unwrap_or_else(PoisonError::into_inner)
    }
}
