//! The gateway: takes messages off the bus, lets in only those the chat's
//! channel admits ([`crate::intake`]), and hands each to its chat's worker
//! ([`crate::chats`]: one per live chat; chats in parallel up to
//! `max_concurrent_turns`, each chat in order). [`Gateway::run`] is start,
//! serve and shut down: on shutdown it stops taking messages, lets the turns
//! in flight and the messages already accepted finish, and returns, in the
//! order of [`SHUTDOWN_ORDER`].

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use ferroclaw_core::journal::{FileJournal, TurnJournal};
use ferroclaw_runtime::Runtime;
use ferroclaw_store::PgStore;
use tokio::sync::{Semaphore, mpsc};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::approval::ApprovalBroker;
use crate::bus::{ANY_CHANNEL, InboundMessage, MessageBus};
use crate::channel::Channel;
use crate::chats::Chats;
use crate::config::{ChannelSettings, GatewaySettings};
use crate::connection::State;
use crate::cron::CronStore;
use crate::idempotency::Requests;
use crate::intake::Intake;
use crate::outbox::Outbox;
use crate::pairing::PairingStore;
use crate::scaleout;
use crate::sessions::{SessionNames, SessionTitles};
use crate::status::{ChannelStatus, GatewayStatus, StatusFile};
use crate::store_link::{SINGLE_HOLDER_CHANNELS, StoreLink};
use crate::web::{WebChannel, WebContext, WebParts};
use crate::worker::Work;

/// How long shutdown waits for turns in flight and accepted messages.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(120);
/// How long shutdown waits for channels to stop receiving.
const CHANNEL_STOP_GRACE: Duration = Duration::from_secs(5);
/// How often the status file is rewritten.
const STATUS_INTERVAL: Duration = Duration::from_secs(5);

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
    /// The web channel, handed the running gateway's [`WebContext`] at start.
    web: Option<Arc<WebChannel>>,
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
            web: None,
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

    /// The web channel (added with [`Gateway::add_channel`] too): its app
    /// is handed what it shows of the running gateway when it starts.
    pub fn set_web(&mut self, web: Arc<WebChannel>) {
        self.web = Some(web);
    }

    /// The web chat's address, shown by `ferroclaw status`.
    pub fn set_web_url(&mut self, url: String) {
        self.web_url = Some(url);
    }

    /// Shows `name` as configured but disabled (`enabled = true` missing).
    pub fn add_disabled_channel(&mut self, name: &str) {
        self.bus.connections().set(name, State::Disabled);
    }

    /// The inbound bus (channels get it in `start`).
    pub fn bus(&self) -> MessageBus {
        self.bus.clone()
    }

    /// Runs until `shutdown` is cancelled, then drains and returns.
    pub async fn run(self, shutdown: CancellationToken) {
        let mut running = self.start().await;
        running.serve(&shutdown).await;
        running.shut_down().await;
    }

    /// Builds the services, starts the channels, resumes interrupted turns
    /// and starts the loops: the scale-out ones, cron, housekeeping, the
    /// heartbeat.
    async fn start(self) -> Running {
        let (link, incoming) = match self.store.clone() {
            Some(store) => {
                let (link, rx) = StoreLink::new(store, self.settings.leases());
                (Some(link), Some(rx))
            }
            None => (None, None),
        };
        let outbox = Outbox::new(self.channels.iter().map(|(c, _)| c.clone()));
        let Stores { approvals, cron, pairing, names, titles } =
            self.stores(&outbox, link.as_deref());
        let store = link.as_ref().map(|l| &l.store);
        let chats = Arc::new(Chats {
            runtime: self.runtime.clone(),
            approvals,
            outbox,
            workspace: self.settings.workspace(&self.home),
            names,
            cron,
            journal: self.journal.clone(),
            requests: Requests::of(store, &self.home),
            store: link.clone(),
            turns: Semaphore::new(self.settings.max_concurrent_turns),
            settings: self.settings.clone(),
            live: Default::default(),
        });
        let channel_settings: Vec<ChannelSettings> =
            self.channels.iter().map(|(_, s)| s.clone()).collect();
        let (intake, admissions) = Intake::new(chats.clone(), pairing.clone(), &channel_settings);
        let drained = CancellationToken::new();
        if let Some(web) = &self.web {
            let parts = WebParts {
                home: self.home.clone(),
                pairing,
                titles,
                connections: self.bus.connections().clone(),
                channels: channel_settings,
                drained: drained.clone(),
            };
            web.attach(Arc::new(WebContext::new(chats.clone(), parts)));
        }
        let running = Running {
            status: StatusReport::new(&self.home, self.web_url.clone(), &self.channels, &self.bus),
            inbound: self.bus.subscribe(ANY_CHANNEL),
            bus: self.bus.clone(),
            chats,
            intake,
            link,
            drained,
            stops: Stops::default(),
            tasks: Tasks::default(),
        };
        let admit =
            running.intake.clone().admit_in_order(admissions, running.stops.admissions.clone());
        tokio::spawn(admit);
        running.start_channels(&self.channels);
        // Turns a killed gateway left unfinished go first, each to its chat.
        running.resume_interrupted().await;
        for message in self.bus.drain(None) {
            running.intake.dispatch(message);
        }
        if let Some(incoming) = incoming {
            running.start_store_loops(incoming);
        }
        running.start_timers();
        running.status.write(&running.chats, true);
        running
    }

    /// The gateway's stores, chosen once: in the shared database when
    /// several gateways share one (`link`), else in the home's files.
    fn stores(&self, outbox: &Outbox, link: Option<&StoreLink>) -> Stores {
        let approvals = ApprovalBroker::new(
            outbox.clone(),
            self.settings.approval_timeout(),
            self.settings.approvers.clone(),
        );
        match link {
            Some(link) => Stores {
                approvals: Arc::new(
                    approvals.with_database(link.store.clone(), link.approval_changes()),
                ),
                cron: CronStore::database(link.store.clone()),
                pairing: PairingStore::database(link.store.clone()),
                names: SessionNames::database(link.store.clone(), Some(&self.home)),
                titles: SessionTitles::database(link.store.clone()),
            },
            None => Stores {
                approvals: Arc::new(approvals),
                cron: CronStore::new(&self.home),
                pairing: PairingStore::new(&self.home),
                names: SessionNames::load(&self.home),
                titles: SessionTitles::load(&self.home),
            },
        }
    }
}

/// What the gateway keeps, each store in the files or the database.
struct Stores {
    approvals: Arc<ApprovalBroker>,
    cron: CronStore,
    pairing: PairingStore,
    names: SessionNames,
    titles: SessionTitles,
}

/// A started gateway: its services, and the tasks it runs with what stops them.
struct Running {
    chats: Arc<Chats>,
    intake: Arc<Intake>,
    link: Option<Arc<StoreLink>>,
    bus: MessageBus,
    /// Every channel's messages.
    inbound: mpsc::Receiver<InboundMessage>,
    /// Cancelled once the turns are over (the web channel answers 503 until then).
    drained: CancellationToken,
    status: StatusReport,
    stops: Stops,
    tasks: Tasks,
}

/// What stops each group of tasks.
#[derive(Default)]
struct Stops {
    channels: CancellationToken,
    timers: CancellationToken,
    admissions: CancellationToken,
    claims: CancellationToken,
    deliveries: CancellationToken,
}

/// The tasks a shutdown waits for, by group.
#[derive(Default)]
struct Tasks {
    channels: TaskTracker,
    store: TaskTracker,
    timers: TaskTracker,
}

/// One step of a stopping gateway; [`SHUTDOWN_ORDER`] puts them in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    /// No new messages: the bus closes, and what it still holds is dispatched.
    CloseBus,
    /// Channels stop receiving; cron and the heartbeat stop.
    StopReceiving,
    /// Waiting approval requests are denied (nobody is left to answer) and
    /// their turns end.
    DenyApprovals,
    /// Nothing more is claimed from the shared queue or admitted; the
    /// messages claimed here finish (another process takes over the rest).
    FinishClaims,
    /// Every chat's worker finishes what it accepted, then stops.
    FinishChats,
    /// A last round of deliveries for the turns that just finished.
    LastDeliveries,
    /// The web channel stops answering 503 and closes its listener.
    Drained,
    /// The channels' and timers' tasks end.
    EndTasks,
}

/// The order a gateway stops in (each step's reasons are in the test below).
const SHUTDOWN_ORDER: [Step; 8] = [
    Step::CloseBus,
    Step::StopReceiving,
    Step::DenyApprovals,
    Step::FinishClaims,
    Step::FinishChats,
    Step::LastDeliveries,
    Step::Drained,
    Step::EndTasks,
];

impl Running {
    /// Starts every channel: the single-holder ones (Telegram, Discord,
    /// Slack) on a scale-out gateway only while it holds their lease.
    fn start_channels(&self, channels: &[(Arc<dyn Channel>, ChannelSettings)]) {
        for (channel, _) in channels {
            let (channel, bus, stop) =
                (channel.clone(), self.bus.clone(), self.stops.channels.clone());
            if let Some(link) = &self.link
                && SINGLE_HOLDER_CHANNELS.contains(&channel.name())
            {
                self.tasks.channels.spawn(scaleout::hold_channel(link.clone(), channel, bus, stop));
                continue;
            }
            self.tasks.channels.spawn(async move {
                tracing::info!(channel = channel.name(), "channel starting");
                let connections = bus.connections().clone();
                connections.set(channel.name(), State::Connecting);
                if let Err(e) = channel.start(bus, stop).await {
                    tracing::error!("{e}");
                    connections.set(channel.name(), State::Stopped { error: e.to_string() });
                }
            });
        }
    }

    /// Queues every turn the journal holds unfinished, each to its chat.
    async fn resume_interrupted(&self) {
        let Some(journal) = &self.chats.journal else { return };
        for (key, message) in crate::resume::interrupted(journal.as_ref()).await {
            if let Err(e) = self.chats.enqueue(key, Work::reply(message)) {
                tracing::warn!("interrupted turn not resumed: {e}");
            }
        }
    }

    /// The scale-out loops: storing admitted messages, claiming, delivering.
    fn start_store_loops(&self, incoming: mpsc::Receiver<InboundMessage>) {
        let Some(link) = &self.link else { return };
        tracing::info!(
            url = link.store.url(),
            holder = link.store.holder(),
            "sharing the work through the database"
        );
        let (chats, tasks, stops) = (&self.chats, &self.tasks.store, &self.stops);
        tasks.spawn(scaleout::store_loop(
            chats.clone(),
            link.clone(),
            incoming,
            stops.deliveries.clone(),
        ));
        tasks.spawn(scaleout::claim_loop(chats.clone(), link.clone(), stops.claims.clone()));
        tasks.spawn(scaleout::delivery_loop(chats.clone(), link.clone(), stops.deliveries.clone()));
    }

    /// Cron, housekeeping, approvals asked elsewhere, the worktree log, the heartbeat.
    fn start_timers(&self) {
        let (chats, timers, stop) = (&self.chats, &self.tasks.timers, &self.stops.timers);
        timers.spawn(crate::scheduler::run_cron(chats.clone(), stop.clone()));
        timers.spawn(crate::scheduler::run_housekeeping(chats.clone(), stop.clone()));
        timers.spawn(chats.approvals.clone().show_asked_elsewhere(stop.clone()));
        timers.spawn(crate::worktree_log::run(stop.clone()));
        let workspace = chats.workspace.clone();
        timers.spawn(crate::scheduler::run_heartbeat(chats.clone(), workspace, stop.clone()));
    }

    /// Takes messages off the bus until `shutdown`, rewriting the status file now and then.
    async fn serve(&mut self, shutdown: &CancellationToken) {
        let mut status_tick = tokio::time::interval(STATUS_INTERVAL);
        loop {
            tokio::select! {
                biased;
                () = shutdown.cancelled() => break,
                message = self.inbound.recv() => match message {
                    Some(m) => self.intake.dispatch(m),
                    None => break,
                },
                _ = status_tick.tick() => self.status.write(&self.chats, true),
            }
        }
    }

    /// Stops, step by step in [`SHUTDOWN_ORDER`].
    async fn shut_down(mut self) {
        tracing::info!("shutting down: no new messages; finishing turns in flight");
        for step in SHUTDOWN_ORDER {
            self.step(step).await;
        }
        self.status.write(&self.chats, false);
        tracing::info!("gateway stopped");
    }

    async fn step(&mut self, step: Step) {
        match step {
            Step::CloseBus => {
                self.bus.close();
                while let Ok(message) = self.inbound.try_recv() {
                    self.intake.dispatch(message);
                }
            }
            Step::StopReceiving => {
                self.stops.channels.cancel();
                self.stops.timers.cancel();
            }
            Step::DenyApprovals => self.chats.approvals.close(),
            Step::FinishClaims => {
                self.stops.claims.cancel();
                self.stops.admissions.cancel();
                if let Some(link) = &self.link {
                    link.claims.close();
                    if tokio::time::timeout(SHUTDOWN_GRACE, link.claims.wait()).await.is_err() {
                        tracing::warn!(
                            "some claimed messages did not finish; another process takes them over"
                        );
                    }
                }
            }
            Step::FinishChats => {
                if !self.chats.finish_all(SHUTDOWN_GRACE).await {
                    tracing::warn!(
                        "some turns did not finish within {}s",
                        SHUTDOWN_GRACE.as_secs()
                    );
                }
            }
            Step::LastDeliveries => {
                self.stops.deliveries.cancel();
                self.tasks.store.close();
                let _ = tokio::time::timeout(CHANNEL_STOP_GRACE, self.tasks.store.wait()).await;
            }
            Step::Drained => self.drained.cancel(),
            Step::EndTasks => {
                self.tasks.timers.close();
                self.tasks.channels.close();
                let (timers, channels) = (&self.tasks.timers, &self.tasks.channels);
                let _ = tokio::time::timeout(CHANNEL_STOP_GRACE, async {
                    timers.wait().await;
                    channels.wait().await;
                })
                .await;
            }
        }
    }
}

/// The status file `ferroclaw status` reads.
struct StatusReport {
    file: StatusFile,
    started_at_ms: u64,
    web_url: Option<String>,
    channels: Vec<String>,
    connections: crate::connection::Connections,
}

impl StatusReport {
    fn new(
        home: &std::path::Path,
        web_url: Option<String>,
        channels: &[(Arc<dyn Channel>, ChannelSettings)],
        bus: &MessageBus,
    ) -> StatusReport {
        StatusReport {
            file: StatusFile::new(home),
            started_at_ms: crate::files::now_ms(),
            web_url,
            channels: channels.iter().map(|(c, _)| c.name().to_string()).collect(),
            connections: bus.connections().clone(),
        }
    }

    fn write(&self, chats: &Chats, running: bool) {
        let (turns_running, turns_done) = chats.turn_counts();
        self.file.write(&GatewayStatus {
            pid: std::process::id(),
            running,
            started_at_ms: self.started_at_ms,
            updated_at_ms: crate::files::now_ms(),
            web_url: self.web_url.clone(),
            channels: self
                .channels
                .iter()
                .map(|n| ChannelStatus {
                    name: n.clone(),
                    running,
                    state: self.connections.get(n).map(|s| s.describe()),
                })
                .collect(),
            live_sessions: chats.live_sessions(),
            turns_running,
            turns_done,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(step: Step) -> usize {
        SHUTDOWN_ORDER.iter().position(|s| *s == step).expect("every step is in the order")
    }

    #[test]
    fn each_shutdown_step_comes_after_what_it_needs() {
        let needs = [
            (Step::CloseBus, Step::FinishChats, "messages still on the bus reach their chats"),
            (Step::StopReceiving, Step::FinishChats, "cron and the heartbeat give no new work"),
            (
                Step::DenyApprovals,
                Step::FinishChats,
                "a turn waiting for an answer would hold the grace",
            ),
            (Step::FinishClaims, Step::FinishChats, "a claimed message runs in its chat's worker"),
            (Step::FinishChats, Step::LastDeliveries, "the last turns' answers are delivered"),
            (
                Step::LastDeliveries,
                Step::Drained,
                "a page gets its answer before the listener closes",
            ),
            (Step::Drained, Step::EndTasks, "the web channel's task ends once drained"),
        ];
        for (before, after, why) in needs {
            assert!(at(before) < at(after), "{before:?} must come before {after:?}: {why}");
        }
        assert_eq!(SHUTDOWN_ORDER.len(), 8, "every step once");
    }
}
