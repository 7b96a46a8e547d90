//! The live chats: one worker per chat with work to do ([`crate::worker`]),
//! started by its first message and retired after a quiet spell, and what
//! their turns use (the runtime, the outbox, approvals, the chat's session
//! name, the journal, the shared database). Whoever gives a chat work (the
//! gateway's intake, the scale-out claim loop, cron, the heartbeat, a
//! hand-over, a resumed turn) does it through [`Chats::enqueue`].

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use ferroclaw_core::journal::TurnJournal;
use ferroclaw_runtime::Runtime;
use ferroclaw_tools::{JobManager, JobSummary};
use serde_json::json;
use tokio::sync::{Semaphore, mpsc};
use tokio_util::task::TaskTracker;

use crate::approval::ApprovalBroker;
use crate::bus::{BusError, InboundMessage};
use crate::config::GatewaySettings;
use crate::cron::CronStore;
use crate::handover::{HANDED, Handed};
use crate::idempotency::Requests;
use crate::outbox::Outbox;
use crate::sessions::{SessionKey, SessionNames};
use crate::store_link::StoreLink;
use crate::worker::{self, Delivery, Work};

/// A chat worker's queue (boxed work: see [`Chats::enqueue`]).
type WorkQueue = mpsc::Sender<Box<Work>>;

/// The live chats and what their turns use.
pub struct Chats {
    pub settings: GatewaySettings,
    /// Opens every chat's agent.
    pub runtime: Arc<Runtime>,
    /// Approval requests waiting for an answer in a chat.
    pub approvals: Arc<ApprovalBroker>,
    pub outbox: Outbox,
    /// The agents' workspace (received files go to its `inbox/`).
    pub workspace: PathBuf,
    /// Which session each chat talks in.
    pub names: SessionNames,
    pub cron: CronStore,
    /// Where turns are journalled, to finish them after a crash (see [`crate::resume`]).
    pub journal: Option<Arc<dyn TurnJournal>>,
    /// The OpenAI API's answers by `Idempotency-Key`.
    pub requests: Requests,
    /// The shared database, when several gateway processes share the work
    /// (`[gateway] store`); `None`: this process on its own files.
    pub store: Option<Arc<StoreLink>>,
    /// Permits for turns running at once.
    pub turns: Semaphore,
    /// The workers and their counters.
    pub live: LiveChats,
}

/// The chats with a worker now, and what is counted of them.
#[derive(Default)]
pub struct LiveChats {
    /// The queue of every live chat's worker, with the worker's number.
    queues: Mutex<HashMap<SessionKey, (u64, WorkQueue)>>,
    next_worker: AtomicU64,
    workers: TaskTracker,
    turns_done: AtomicU64,
    turns_running: AtomicUsize,
    /// The chat that spoke last: where heartbeat findings go by default.
    last_chat: Mutex<Option<SessionKey>>,
    /// The background jobs of every chat with an agent in memory.
    jobs: Mutex<HashMap<SessionKey, JobManager>>,
}

impl Chats {
    /// Queues `work` for `key`'s worker, starting one when the chat has none.
    pub fn enqueue(self: &Arc<Self>, key: SessionKey, work: Work) -> Result<(), BusError> {
        // Boxed: a queue's buffer is a block of slots, kept while the chat
        // lives, so each slot is a pointer rather than a whole `Work`.
        let mut work = Box::new(work);
        let mut live = self.live.queues.lock().unwrap_or_else(PoisonError::into_inner);
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
            let number = self.live.next_worker.fetch_add(1, Ordering::Relaxed);
            self.live.workers.spawn(worker::run(key.clone(), number, rx, self.clone()));
            live.insert(key.clone(), (number, tx));
        }
    }

    /// Gives `handed` to chat `to`'s worker (see [`crate::handover`]); with
    /// several gateways through the shared queue, like a message.
    pub fn hand_over(self: &Arc<Self>, to: &SessionKey, handed: Handed) {
        let from = handed.from.clone();
        let mut message =
            InboundMessage::new(to.channel.clone(), &from, to.chat_id.clone(), handed.text.clone());
        message.metadata.insert(HANDED.into(), json!(handed));
        let queued = match &self.store {
            Some(link) => link.accept(message),
            None => {
                let delivery = Delivery::To(to.clone());
                self.enqueue(to.clone(), Work { message, delivery, quiet_if_ok: false, done: None })
            }
        };
        if let Err(e) = queued {
            tracing::warn!(chat = %to.address(), "what {from} said here was not delivered: {e}");
        }
    }

    /// Forgets an idle worker unless a message arrived meanwhile; true when it may stop.
    pub fn retire(&self, key: &SessionKey, number: u64, rx: &mpsc::Receiver<Box<Work>>) -> bool {
        let mut live = self.live.queues.lock().unwrap_or_else(PoisonError::into_inner);
        if !rx.is_empty() {
            return false;
        }
        if live.get(key).is_some_and(|(n, _)| *n == number) {
            live.remove(key);
        }
        true
    }

    /// Closes every chat's queue: each worker finishes what it accepted, then
    /// stops. Waits up to `grace` for them; false when some did not finish.
    pub async fn finish_all(&self, grace: Duration) -> bool {
        self.live.queues.lock().unwrap_or_else(PoisonError::into_inner).clear();
        self.live.workers.close();
        tokio::time::timeout(grace, self.live.workers.wait()).await.is_ok()
    }

    /// Chats with an agent in memory.
    pub fn live_sessions(&self) -> usize {
        self.live.queues.lock().unwrap_or_else(PoisonError::into_inner).len()
    }

    pub(crate) fn turn_started(&self) {
        self.live.turns_running.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn turn_finished(&self) {
        self.live.turns_running.fetch_sub(1, Ordering::Relaxed);
        self.live.turns_done.fetch_add(1, Ordering::Relaxed);
    }

    /// Turns running now and turns finished since start.
    pub fn turn_counts(&self) -> (usize, u64) {
        (
            self.live.turns_running.load(Ordering::Relaxed),
            self.live.turns_done.load(Ordering::Relaxed),
        )
    }

    /// Lists `key`'s background jobs for [`Chats::jobs_of`] while its agent is open.
    pub(crate) fn watch_jobs(&self, key: &SessionKey, jobs: JobManager) {
        self.live.jobs.lock().unwrap_or_else(PoisonError::into_inner).insert(key.clone(), jobs);
    }

    pub(crate) fn forget_jobs(&self, key: &SessionKey) {
        self.live.jobs.lock().unwrap_or_else(PoisonError::into_inner).remove(key);
    }

    /// The background jobs `key`'s agent started (none when it is not open).
    pub fn jobs_of(&self, key: &SessionKey) -> Vec<JobSummary> {
        let jobs = self.live.jobs.lock().unwrap_or_else(PoisonError::into_inner);
        jobs.get(key).map(JobManager::jobs).unwrap_or_default()
    }

    /// The chat that spoke last.
    pub fn last_chat(&self) -> Option<SessionKey> {
        self.live.last_chat.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// Remembers `key` as the chat that spoke last.
    pub(crate) fn spoke(&self, key: &SessionKey) {
        *self.live.last_chat.lock().unwrap_or_else(PoisonError::into_inner) = Some(key.clone());
    }
}
