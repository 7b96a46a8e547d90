//! The gateway: takes messages off the bus, lets in only those the chat's
//! channel admits, and hands each to its chat's worker (one per live chat;
//! chats in parallel up to `max_concurrent_turns`, each chat in order).
//! On shutdown it stops taking messages, lets the turns in flight and the
//! messages already accepted finish, and returns.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use ferroclaw_core::journal::{FileJournal, TurnJournal};
use ferroclaw_runtime::Runtime;
use ferroclaw_store::PgStore;
use ferroclaw_tools::{JobManager, JobSummary};
use tokio::sync::{Semaphore, mpsc};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::approval::{ApprovalBroker, Choice};
use crate::bus::{
    ANY_CHANNEL, BusError, Failure, InboundMessage, MessageBus, OutboundMessage, SYSTEM_CHANNEL,
};
use crate::channel::Channel;
use crate::commands::{ChatCommand, HELP};
use crate::config::{ChannelSettings, GatewaySettings};
use crate::cron::CronStore;
use crate::outbox::Outbox;
use crate::pairing::{Admission, PairingStore};
use crate::scaleout::{self, StoreLink};
use crate::sessions::{SessionKey, SessionNames, SessionTitles};
use crate::status::{ChannelStatus, GatewayStatus, StatusFile};
use crate::web::{Rate, RateLimiter};
use crate::worker::{self, Delivery, Work};

/// How long shutdown waits for turns in flight and accepted messages.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(120);
/// How long shutdown waits for channels to stop receiving.
const CHANNEL_STOP_GRACE: Duration = Duration::from_secs(5);
/// How often the status file is rewritten.
const STATUS_INTERVAL: Duration = Duration::from_secs(5);

/// A chat worker's queue (boxed work: see [`Shared::enqueue`]).
type WorkQueue = mpsc::Sender<Box<Work>>;

/// What the gateway's tasks share.
pub struct Shared {
    pub settings: GatewaySettings,
    /// How each channel's connection stands.
    pub connections: crate::connection::Connections,
    /// `$FERROCLAW_HOME`.
    pub home: PathBuf,
    /// Opens every chat's agent.
    pub runtime: Arc<Runtime>,
    /// Approval requests waiting for an answer in a chat.
    pub approvals: Arc<ApprovalBroker>,
    pub outbox: Outbox,
    /// The agents' workspace (received files go to its `inbox/`).
    pub workspace: PathBuf,
    pub names: SessionNames,
    /// Names given to conversations in the web app.
    pub titles: SessionTitles,
    pub cron: CronStore,
    pub pairing: PairingStore,
    /// Where turns are journalled, to finish them after a crash (see [`crate::resume`]).
    pub journal: Option<Arc<dyn TurnJournal>>,
    /// Permits for turns running at once.
    pub turns: Semaphore,
    channels: HashMap<String, ChannelSettings>,
    /// The queue of every live chat's worker, with the worker's number.
    live: Mutex<HashMap<SessionKey, (u64, WorkQueue)>>,
    next_worker: AtomicU64,
    workers: TaskTracker,
    turns_done: AtomicU64,
    turns_running: AtomicUsize,
    /// The chat that spoke last: where heartbeat findings go by default.
    last_chat: Mutex<Option<SessionKey>>,
    /// Messages by `CHANNEL:SENDER`.
    per_sender: RateLimiter,
    /// The background jobs of every chat with an agent in memory.
    jobs: Mutex<HashMap<SessionKey, JobManager>>,
    /// The shared database, when several gateway processes share the work
    /// (`[gateway] store`); `None`: this process on its own files.
    pub store: Option<Arc<StoreLink>>,
    /// Messages whose admission the shared database decides, in arrival order.
    admissions: mpsc::Sender<InboundMessage>,
    /// Cancelled once a stopping gateway's turns are over: until then the
    /// web channel keeps listening and answers new requests 503.
    pub drained: CancellationToken,
}

impl Shared {
    /// Queues `work` for `key`'s worker, starting one when the chat has none.
    pub fn enqueue(self: &Arc<Self>, key: SessionKey, work: Work) -> Result<(), BusError> {
        // Boxed: a queue's buffer is a block of slots, kept while the chat
        // lives, so each slot is a pointer rather than a whole `Work`.
        let mut work = Box::new(work);
        let mut live = self.live.lock().unwrap_or_else(PoisonError::into_inner);
        loop {
            if let Some((_, tx)) = live.get(&key) {
                match tx.try_send(work) {
                    Ok(()) => return Ok(()),
                    Err(mpsc::error::TrySendError::Full(_)) => return Err(BusError::Busy),
                    Err(mpsc::error::TrySendError::Closed(w)) => {
                        live.remove(&key);
                        work = w;
                        continue;
                    }
                }
            }
            let (tx, rx) = mpsc::channel(self.settings.chat_queue.max(1));
            let number = self.next_worker.fetch_add(1, Ordering::Relaxed);
            self.workers.spawn(worker::run(key.clone(), number, rx, self.clone()));
            live.insert(key.clone(), (number, tx));
        }
    }

    /// Forgets an idle worker unless a message arrived meanwhile; true when it may stop.
    pub fn retire(&self, key: &SessionKey, number: u64, rx: &mpsc::Receiver<Box<Work>>) -> bool {
        let mut live = self.live.lock().unwrap_or_else(PoisonError::into_inner);
        if !rx.is_empty() {
            return false;
        }
        if live.get(key).is_some_and(|(n, _)| *n == number) {
            live.remove(key);
        }
        true
    }

    /// Chats with an agent in memory.
    pub fn live_sessions(&self) -> usize {
        self.live.lock().unwrap_or_else(PoisonError::into_inner).len()
    }

    pub(crate) fn turn_started(&self) {
        self.turns_running.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn turn_finished(&self) {
        self.turns_running.fetch_sub(1, Ordering::Relaxed);
        self.turns_done.fetch_add(1, Ordering::Relaxed);
    }

    /// The channels the gateway runs, with their settings, by name.
    pub fn channel_settings(&self) -> Vec<ChannelSettings> {
        let mut out: Vec<ChannelSettings> = self.channels.values().cloned().collect();
        out.sort_by(|a, b| a.name.cmp(&b.name));
        out
    }

    /// Turns running now and turns finished since start.
    pub fn turn_counts(&self) -> (usize, u64) {
        (self.turns_running.load(Ordering::Relaxed), self.turns_done.load(Ordering::Relaxed))
    }

    /// Lists `key`'s background jobs for [`Shared::jobs_of`] while its agent is open.
    pub(crate) fn watch_jobs(&self, key: &SessionKey, jobs: JobManager) {
        self.jobs.lock().unwrap_or_else(PoisonError::into_inner).insert(key.clone(), jobs);
    }

    pub(crate) fn forget_jobs(&self, key: &SessionKey) {
        self.jobs.lock().unwrap_or_else(PoisonError::into_inner).remove(key);
    }

    /// The background jobs `key`'s agent started (none when it is not open).
    pub fn jobs_of(&self, key: &SessionKey) -> Vec<JobSummary> {
        let jobs = self.jobs.lock().unwrap_or_else(PoisonError::into_inner);
        jobs.get(key).map(JobManager::jobs).unwrap_or_default()
    }

    /// The chat that spoke last.
    pub fn last_chat(&self) -> Option<SessionKey> {
        self.last_chat.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// Takes one message off the bus: admission, `/help`, then the chat's queue.
    fn dispatch(self: &Arc<Self>, message: InboundMessage) {
        if message.channel == SYSTEM_CHANNEL {
            let Some(key) = SessionKey::parse_address(&message.chat_id) else {
                tracing::warn!(
                    "system message for {:?} dropped: not CHANNEL:CHAT_ID",
                    message.chat_id
                );
                return;
            };
            let work = Work {
                message,
                delivery: Delivery::To(key.clone()),
                quiet_if_ok: false,
                done: None,
            };
            if let Err(e) = self.enqueue(key, work) {
                tracing::warn!("system message dropped: {e}");
            }
            return;
        }
        let Some(settings) = self.channels.get(&message.channel) else {
            tracing::warn!("message from unknown channel {:?} dropped", message.channel);
            return;
        };
        let Some(admission) = self.pairing.admit_now(settings, &message) else {
            // The shared database decides: asked off this loop, in arrival order.
            if let Err(e) = self.admissions.try_send(message) {
                tracing::warn!("message dropped: too many waiting for admission ({e})");
            }
            return;
        };
        self.admitted(message, admission);
    }

    /// The rest of [`Shared::dispatch`] once the channel's policy decided.
    fn admitted(self: &Arc<Self>, mut message: InboundMessage, admission: Admission) {
        match admission {
            Admission::Allow => {}
            Admission::Refuse(text) => {
                tracing::info!(channel = %message.channel, sender = %message.sender, "message refused by dm_policy");
                if let Some(text) = text {
                    self.reply_now(&message, text);
                }
                return;
            }
        }
        // The web token holder is limited per address by the web channel.
        let owner = message.channel == "web" && message.sender == crate::web::OWNER;
        if !owner
            && let Rate::Limited { retry_after_secs, first } =
                self.per_sender.check(&format!("{}:{}", message.channel, message.sender))
        {
            tracing::info!(channel = %message.channel, sender = %message.sender, "message dropped: sender over the rate limit");
            // Told once per flood, so a flood gets no flood of answers.
            if first {
                let text = format!(
                    "You're sending messages faster than I can take them; try again in {retry_after_secs} s."
                );
                let reply = OutboundMessage::reply(&message, text).failed(Failure::Busy);
                let outbox = self.outbox.clone();
                tokio::spawn(async move { outbox.send(reply).await });
            }
            return;
        }
        match ChatCommand::parse(&message.content) {
            Some(ChatCommand::Help) => {
                self.reply_now(&message, HELP.into());
                return;
            }
            // Answered at once: the chat's worker is waiting for it.
            Some(ChatCommand::Decide { id, choice }) => {
                self.decide(message, id, choice);
                return;
            }
            _ => {}
        }
        // Named once, here: whoever answers it (after a restart too) uses this id.
        crate::resume::turn_id(&mut message);
        let key = SessionKey::new(message.channel.clone(), message.chat_id.clone());
        // A stateless API request's one-off chat is no place for heartbeat findings.
        if !crate::api_turn::is_stateless_chat(&key) {
            *self.last_chat.lock().unwrap_or_else(PoisonError::into_inner) = Some(key.clone());
        }
        let copy = (message.channel.clone(), message.chat_id.clone(), message.id.clone());
        // Several gateways: into the shared queue, for whichever process is free.
        let queued = match &self.store {
            Some(link) => link.accept(message),
            None => {
                // Queued for its chat is as kept as a message gets on files.
                if let Some(receipt) = message.receipt.take() {
                    receipt.confirm();
                }
                self.enqueue(key, Work::reply(message))
            }
        };
        if let Err(e) = queued {
            let (channel, chat_id, id) = copy;
            let busy = OutboundMessage {
                channel,
                chat_id,
                content: e.to_string(),
                media: Vec::new(),
                reply_to: Some(id),
                failure: Some(Failure::from(&e)),
            };
            let outbox = self.outbox.clone();
            tokio::spawn(async move { outbox.send(busy).await });
        }
    }

    /// `/approve`, `/deny` or a button press: answers the request and tells the sender.
    fn decide(&self, message: InboundMessage, id: String, choice: Choice) {
        let approvals = self.approvals.clone();
        tokio::spawn(async move { approvals.answer(&message, &id, choice).await });
    }

    fn reply_now(&self, message: &InboundMessage, text: String) {
        let outbox = self.outbox.clone();
        let reply = OutboundMessage::reply(message, text);
        tokio::spawn(async move {
            if let Err(e) = outbox.send(reply).await {
                tracing::warn!("reply not delivered: {e}");
            }
        });
    }
}

/// The always-on assistant: channels, bus, chat workers, cron and heartbeat.
pub struct Gateway {
    home: PathBuf,
    settings: GatewaySettings,
    runtime: Arc<Runtime>,
    channels: Vec<(Arc<dyn Channel>, ChannelSettings)>,
    bus: MessageBus,
    web_url: Option<String>,
    journal: Option<Arc<dyn TurnJournal>>,
    store: Option<PgStore>,
}

impl Gateway {
    /// A gateway for `home` (`$FERROCLAW_HOME`) opening agents from `runtime`.
    pub fn new(home: PathBuf, settings: GatewaySettings, runtime: Arc<Runtime>) -> Self {
        // Turns are journalled beside the chats' session files by default.
        let sessions = runtime.sessions().project_dir(&runtime.config().workspace);
        let journal: Arc<dyn TurnJournal> = Arc::new(FileJournal::new(&sessions));
        Gateway {
            home,
            settings,
            runtime,
            journal: Some(journal),
            channels: Vec::new(),
            bus: MessageBus::default(),
            web_url: None,
            store: None,
        }
    }

    /// Shares the work with the other gateway processes on `store`'s
    /// database (see [`crate::scaleout`]); without it the gateway runs on its own.
    pub fn set_store(&mut self, store: PgStore) {
        // Steps go where every gateway on the database can replay them.
        self.journal = Some(Arc::new(scaleout::PgJournal::new(store.clone())));
        self.store = Some(store);
    }

    /// Adds a channel, admitted by `settings` (its `dm_policy` and `allow_from`).
    pub fn add_channel(&mut self, channel: Arc<dyn Channel>, settings: ChannelSettings) {
        self.channels.push((channel, settings));
    }

    /// Replaces the turn journal (a database's; `None`: turns are not
    /// journalled, and a turn cut by a crash is lost).
    pub fn set_journal(&mut self, journal: Option<Arc<dyn TurnJournal>>) {
        self.journal = journal;
    }

    /// The web chat's address, shown by `ferroclaw status`.
    pub fn set_web_url(&mut self, url: String) {
        self.web_url = Some(url);
    }

    /// Shows `name` as configured but disabled (`enabled = true` missing).
    pub fn add_disabled_channel(&mut self, name: &str) {
        self.bus.connections().set(name, crate::connection::State::Disabled);
    }

    /// The inbound bus (channels get it in `start`).
    pub fn bus(&self) -> MessageBus {
        self.bus.clone()
    }

    /// Runs until `shutdown` is cancelled, then drains and returns.
    pub async fn run(self, shutdown: CancellationToken) {
        let (link, incoming) = match self.store.clone() {
            Some(store) => {
                let (link, rx) = StoreLink::new(store, self.settings.leases());
                (Some(link), Some(rx))
            }
            None => (None, None),
        };
        let outbox = Outbox::new(self.channels.iter().map(|(c, _)| c.clone()));
        let mut approvals = ApprovalBroker::new(
            outbox.clone(),
            self.settings.approval_timeout(),
            self.settings.approvers.clone(),
        );
        let mut cron = CronStore::new(&self.home);
        let mut pairing = PairingStore::new(&self.home);
        let mut names = SessionNames::load(&self.home);
        let mut titles = SessionTitles::load(&self.home);
        // Several gateways: pairing, cron jobs, approvals, chats' sessions
        // and titles live in the database.
        if let (Some(store), Some(link)) = (&self.store, &link) {
            approvals = approvals.with_database(store.clone(), link.approval_changes());
            cron = CronStore::database(store.clone());
            pairing = PairingStore::database(store.clone());
            names = SessionNames::database(store.clone(), Some(&self.home));
            titles = SessionTitles::database(store.clone());
        }
        let approvals = Arc::new(approvals);
        let (admissions, admissions_rx) = mpsc::channel(crate::bus::DEFAULT_QUEUE_CAPACITY);
        let shared = Arc::new(Shared {
            runtime: self.runtime,
            approvals,
            outbox,
            workspace: self.settings.workspace(&self.home),
            names,
            titles,
            cron,
            pairing,
            admissions,
            journal: self.journal,
            turns: Semaphore::new(self.settings.max_concurrent_turns),
            channels: self
                .channels
                .iter()
                .map(|(c, s)| (c.name().to_string(), s.clone()))
                .collect(),
            live: Mutex::new(HashMap::new()),
            next_worker: AtomicU64::new(0),
            workers: TaskTracker::new(),
            turns_done: AtomicU64::new(0),
            turns_running: AtomicUsize::new(0),
            last_chat: Mutex::new(None),
            per_sender: RateLimiter::new(self.settings.messages_per_minute),
            jobs: Mutex::new(HashMap::new()),
            connections: self.bus.connections().clone(),
            store: link.clone(),
            home: self.home.clone(),
            settings: self.settings,
            drained: CancellationToken::new(),
        });
        let admissions_stop = CancellationToken::new();
        tokio::spawn(admit_in_order(shared.clone(), admissions_rx, admissions_stop.clone()));
        let mut inbound = self.bus.subscribe(ANY_CHANNEL);
        let status = StatusFile::new(&self.home);
        let started_at_ms = crate::files::now_ms();
        let channel_names: Vec<String> =
            self.channels.iter().map(|(c, _)| c.name().to_string()).collect();
        let channel_stop = CancellationToken::new();
        let channel_tasks = TaskTracker::new();
        for (channel, _) in &self.channels {
            channel.attach(&shared);
        }
        for (channel, _) in &self.channels {
            let (channel, bus, stop) = (channel.clone(), self.bus.clone(), channel_stop.clone());
            if let Some(link) = &link
                && scaleout::SINGLE_HOLDER_CHANNELS.contains(&channel.name())
            {
                channel_tasks.spawn(scaleout::hold_channel(link.clone(), channel, bus, stop));
                continue;
            }
            channel_tasks.spawn(async move {
                tracing::info!(channel = channel.name(), "channel starting");
                let connections = bus.connections().clone();
                connections.set(channel.name(), crate::connection::State::Connecting);
                if let Err(e) = channel.start(bus, stop).await {
                    tracing::error!("{e}");
                    let error = e.to_string();
                    connections.set(channel.name(), crate::connection::State::Stopped { error });
                }
            });
        }
        // Turns a killed gateway left unfinished go first, each to its chat.
        crate::resume::resume_interrupted(&shared).await;
        for message in self.bus.drain(None) {
            shared.dispatch(message);
        }
        let claims_stop = CancellationToken::new();
        let deliveries_stop = CancellationToken::new();
        let store_tasks = TaskTracker::new();
        if let (Some(link), Some(incoming)) = (&link, incoming) {
            tracing::info!(
                url = link.store.url(),
                holder = link.store.holder(),
                "sharing the work through the database"
            );
            store_tasks.spawn(scaleout::store_loop(
                shared.clone(),
                link.clone(),
                incoming,
                deliveries_stop.clone(),
            ));
            store_tasks.spawn(scaleout::claim_loop(
                shared.clone(),
                link.clone(),
                claims_stop.clone(),
            ));
            store_tasks.spawn(scaleout::delivery_loop(
                shared.clone(),
                link.clone(),
                deliveries_stop.clone(),
            ));
        }
        let timers_stop = CancellationToken::new();
        let timers = TaskTracker::new();
        timers.spawn(crate::scheduler::run_cron(shared.clone(), timers_stop.clone()));
        timers.spawn(crate::scheduler::run_housekeeping(shared.clone(), timers_stop.clone()));
        timers.spawn(shared.approvals.clone().show_asked_elsewhere(timers_stop.clone()));
        timers.spawn(crate::worktree_log::run(timers_stop.clone()));
        let workspace = shared.settings.workspace(&self.home);
        timers.spawn(crate::scheduler::run_heartbeat(
            shared.clone(),
            workspace,
            timers_stop.clone(),
        ));
        let snapshot = |running: bool| GatewayStatus {
            pid: std::process::id(),
            running,
            started_at_ms,
            updated_at_ms: crate::files::now_ms(),
            web_url: self.web_url.clone(),
            channels: channel_names
                .iter()
                .map(|n| ChannelStatus {
                    name: n.clone(),
                    running,
                    state: shared.connections.get(n).map(|s| s.describe()),
                })
                .collect(),
            live_sessions: shared.live_sessions(),
            turns_running: shared.turns_running.load(Ordering::Relaxed),
            turns_done: shared.turns_done.load(Ordering::Relaxed),
        };
        status.write(&snapshot(true));
        let mut status_tick = tokio::time::interval(STATUS_INTERVAL);
        loop {
            tokio::select! {
                biased;
                () = shutdown.cancelled() => break,
                message = inbound.recv() => match message {
                    Some(m) => shared.dispatch(m),
                    None => break,
                },
                _ = status_tick.tick() => status.write(&snapshot(true)),
            }
        }
        tracing::info!("shutting down: no new messages; finishing turns in flight");
        self.bus.close();
        while let Ok(message) = inbound.try_recv() {
            shared.dispatch(message);
        }
        channel_stop.cancel();
        timers_stop.cancel();
        // Nobody is left to answer: waiting calls are denied and their turns end.
        shared.approvals.close();
        // Messages claimed here finish; nothing more is claimed.
        claims_stop.cancel();
        admissions_stop.cancel();
        if let Some(link) = &link {
            link.claims.close();
            if tokio::time::timeout(SHUTDOWN_GRACE, link.claims.wait()).await.is_err() {
                tracing::warn!(
                    "some claimed messages did not finish; another process takes them over"
                );
            }
        }
        // Closing every queue lets each worker finish what it accepted, then stop.
        shared.live.lock().unwrap_or_else(PoisonError::into_inner).clear();
        shared.workers.close();
        if tokio::time::timeout(SHUTDOWN_GRACE, shared.workers.wait()).await.is_err() {
            tracing::warn!("some turns did not finish within {}s", SHUTDOWN_GRACE.as_secs());
        }
        // A last round of deliveries for the turns that just finished.
        deliveries_stop.cancel();
        store_tasks.close();
        let _ = tokio::time::timeout(CHANNEL_STOP_GRACE, store_tasks.wait()).await;
        // The web channel stops answering 503 and closes its listener.
        shared.drained.cancel();
        timers.close();
        channel_tasks.close();
        let _ = tokio::time::timeout(CHANNEL_STOP_GRACE, async {
            timers.wait().await;
            channel_tasks.wait().await;
        })
        .await;
        status.write(&snapshot(false));
        tracing::info!("gateway stopped");
    }
}

/// Admits the messages the shared database must decide on (pairing and
/// allow-lists), one at a time so a sender's messages keep their order,
/// then dispatches them as [`Shared::dispatch`] does, until `stop`.
async fn admit_in_order(
    shared: Arc<Shared>,
    mut rx: mpsc::Receiver<InboundMessage>,
    stop: CancellationToken,
) {
    loop {
        let message = tokio::select! {
            () = stop.cancelled() => return,
            message = rx.recv() => match message {
                Some(m) => m,
                None => return,
            },
        };
        let Some(settings) = shared.channels.get(&message.channel) else { continue };
        let admission = shared.pairing.admit(settings, &message).await;
        shared.admitted(message, admission);
    }
}
