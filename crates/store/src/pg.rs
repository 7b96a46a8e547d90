//! The PostgreSQL backend: a pool of connections (rustls for TLS), the
//! migrations at connect, this process's holder name, and [`Wakeups`].

use std::sync::Arc;
use std::time::Duration;

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod, Runtime};
use futures_util::StreamExt;
use tokio::sync::{Notify, watch};
use tokio_postgres::AsyncMessage;

use crate::sent_here::SentHere;
use crate::tls::StoreTls;
use crate::{StoreError, migrate, redact_url};

/// How long connecting may take before the database counts as unreachable.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Connections per process: a turn uses one for a few milliseconds at its
/// start and end, so a few serve many turns.
const DEFAULT_POOL_SIZE: usize = 16;
/// Wait before a lost `LISTEN` connection is opened again.
const RELISTEN_DELAY: Duration = Duration::from_secs(1);

/// The notification channel that says "a message is waiting".
pub(crate) const INBOUND_CHANNEL: &str = "ferroclaw_inbound";
/// The notification channel that says "an answer is waiting".
pub(crate) const OUTBOUND_CHANNEL: &str = "ferroclaw_outbound";
/// The notification channel that says "a cron job was added, changed or removed".
pub(crate) const CRON_CHANNEL: &str = "ferroclaw_cron";
/// The notification channel that says "an approval request was asked,
/// shown, answered or ended".
pub(crate) const APPROVALS_CHANNEL: &str = "ferroclaw_approvals";

/// How to open the store.
#[derive(Debug, Clone)]
pub struct PgOptions {
    /// Apply missing migrations at connect (`[gateway] store_migrate`, default true).
    pub migrate: bool,
    /// This process's name in leases and claims (default: host, pid and a random part).
    pub holder: Option<String>,
    /// Connections in the pool.
    pub pool_size: usize,
}

impl Default for PgOptions {
    fn default() -> Self {
        PgOptions { migrate: true, holder: None, pool_size: DEFAULT_POOL_SIZE }
    }
}

/// The PostgreSQL store; cheap to clone (clones share the pool).
#[derive(Clone)]
pub struct PgStore {
    pub(crate) pool: Pool,
    pub(crate) config: tokio_postgres::Config,
    pub(crate) tls: StoreTls,
    url: String,
    pub(crate) holder: String,
    /// Answers this holder's workers send themselves ([`crate::sent_here`]).
    pub(crate) sent_here: Arc<SentHere>,
}

impl std::fmt::Debug for PgStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgStore").field("url", &self.url).field("holder", &self.holder).finish()
    }
}

impl PgStore {
    /// Connects to `url`, migrates (unless turned off) and checks the schema.
    /// Unreachable, or a schema this binary cannot use, is an error that says
    /// so with the URL (password hidden).
    pub async fn connect(url: &str, options: PgOptions) -> Result<PgStore, StoreError> {
        PgStore::open(url, options).await.map(|(store, _)| store)
    }

    async fn open(url: &str, options: PgOptions) -> Result<(PgStore, Vec<i32>), StoreError> {
        let shown = redact_url(url);
        let unreachable = |reason: String| StoreError::Unreachable { url: shown.clone(), reason };
        let mut config: tokio_postgres::Config = url
            .parse()
            .map_err(|e| StoreError::BadUrl { url: shown.clone(), reason: format!("{e}") })?;
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(CONNECT_TIMEOUT);
        }
        let tls = StoreTls::new()?;
        let manager = Manager::from_config(
            config.clone(),
            tls.clone(),
            ManagerConfig { recycling_method: RecyclingMethod::Fast },
        );
        let pool = Pool::builder(manager)
            .max_size(options.pool_size.max(2))
            .runtime(Runtime::Tokio1)
            .create_timeout(Some(CONNECT_TIMEOUT))
            .build()
            .map_err(|e| unreachable(e.to_string()))?;
        let mut client = pool.get().await.map_err(|e| unreachable(describe_pool_error(e)))?;
        let applied = if options.migrate {
            let applied = migrate::migrate(&mut client, &shown).await?;
            if !applied.is_empty() {
                tracing::info!(url = %shown, ?applied, "database schema migrated");
            }
            applied
        } else {
            migrate::check(&shown, migrate::current_version(&client).await?)?;
            Vec::new()
        };
        drop(client);
        let holder = options.holder.unwrap_or_else(default_holder);
        let sent_here = Arc::default();
        Ok((PgStore { pool, config, tls, url: shown, holder, sent_here }, applied))
    }

    /// `ferroclaw gateway migrate`: applies what is missing; returns the
    /// versions applied (empty when it was up to date).
    pub async fn migrate(url: &str) -> Result<Vec<i32>, StoreError> {
        PgStore::open(url, PgOptions::default()).await.map(|(_, applied)| applied)
    }

    /// The schema version of the database.
    pub async fn schema_version(&self) -> Result<i32, StoreError> {
        let client = self.pool.get().await?;
        migrate::current_version(&client).await
    }

    /// This process's name in leases, claims and deliveries.
    pub fn holder(&self) -> &str {
        &self.holder
    }

    /// The database's URL with the password hidden.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// A store on the same database under another holder name (tests play
    /// several processes with one).
    pub fn with_holder(&self, holder: impl Into<String>) -> PgStore {
        PgStore { holder: holder.into(), sent_here: Arc::default(), ..self.clone() }
    }

    /// Starts listening for "work is waiting" and "something changed"
    /// notifications on a connection of its own (opened again when lost).
    /// Workers still look on a slow safety poll: a notification is only a hint.
    pub fn listen(&self) -> Wakeups {
        let signals = Arc::new(Signals {
            inbound: Notify::new(),
            outbound: Notify::new(),
            cron: watch::Sender::new(0),
            approvals: watch::Sender::new(0),
            connected: watch::Sender::new(0),
        });
        let (config, tls) = (self.config.clone(), self.tls.clone());
        let heard = signals.clone();
        let url = self.url.clone();
        let task = tokio::spawn(async move {
            // One line when notifications are lost, one when they are back:
            // an outage is not a line a second.
            let mut lost = false;
            loop {
                let result = listen_once(&config, &tls, &heard, &mut lost, &url).await;
                if let Err(e) = result
                    && !std::mem::replace(&mut lost, true)
                {
                    tracing::warn!(url = %url, "database notifications lost: {e}; listening again until it is back");
                }
                // Whatever was missed meanwhile is found by looking again.
                heard.all();
                tokio::time::sleep(RELISTEN_DELAY).await;
            }
        });
        Wakeups { signals, task }
    }
}

/// What a notification wakes: workers (one at a time) and watchers of
/// cron jobs and approval requests (every one).
struct Signals {
    inbound: Notify,
    outbound: Notify,
    cron: watch::Sender<u64>,
    approvals: watch::Sender<u64>,
    /// Counts the times listening started: the first sign that the
    /// database is back after an outage.
    connected: watch::Sender<u64>,
}

impl Signals {
    fn all(&self) {
        self.inbound.notify_one();
        self.outbound.notify_one();
        self.cron.send_modify(|n| *n += 1);
        self.approvals.send_modify(|n| *n += 1);
    }
}

/// Runs one `LISTEN` connection until it is lost.
/// `lost`: notifications were lost before; said back (once) when listening again.
async fn listen_once(
    config: &tokio_postgres::Config,
    tls: &StoreTls,
    signals: &Signals,
    lost: &mut bool,
    url: &str,
) -> Result<(), StoreError> {
    let (client, mut connection) = config.connect(tls.clone()).await?;
    let mut messages = futures_util::stream::poll_fn(move |cx| connection.poll_message(cx));
    let sql = format!(
        "LISTEN {INBOUND_CHANNEL}; LISTEN {OUTBOUND_CHANNEL}; LISTEN {CRON_CHANNEL}; \
         LISTEN {APPROVALS_CHANNEL}"
    );
    let listen = client.batch_execute(&sql);
    tokio::pin!(listen);
    let mut listening = false;
    loop {
        tokio::select! {
            done = &mut listen, if !listening => {
                done?;
                listening = true;
                if std::mem::take(lost) {
                    tracing::info!(url = %url, "database notifications are back");
                }
                // A change made before the LISTEN took effect was not heard.
                signals.all();
                signals.connected.send_modify(|n| *n += 1);
            }
            message = messages.next() => match message {
                Some(Ok(AsyncMessage::Notification(n))) => match n.channel() {
                    INBOUND_CHANNEL => signals.inbound.notify_one(),
                    OUTBOUND_CHANNEL => signals.outbound.notify_one(),
                    CRON_CHANNEL => signals.cron.send_modify(|n| *n += 1),
                    APPROVALS_CHANNEL => signals.approvals.send_modify(|n| *n += 1),
                    _ => {}
                },
                Some(Ok(_)) => {}
                Some(Err(e)) => return Err(e.into()),
                None => return Err(StoreError::Query("connection closed".into())),
            },
        }
    }
}

/// Wakes the process's workers when another process (or this one) stored
/// work for them, and tells watchers that cron jobs or approval requests
/// changed. Stops listening when dropped.
pub struct Wakeups {
    signals: Arc<Signals>,
    task: tokio::task::JoinHandle<()>,
}

impl Wakeups {
    /// Resolves when an inbound message may be waiting.
    pub async fn inbound(&self) {
        self.signals.inbound.notified().await;
    }

    /// Resolves when an answer may be waiting for delivery.
    pub async fn outbound(&self) {
        self.signals.outbound.notified().await;
    }

    /// Wakes this process's deliverer without the database (an answer a
    /// worker stored without a notification is left to it).
    pub fn wake_outbound(&self) {
        self.signals.outbound.notify_one();
    }

    /// Changes to cron jobs from now on (any process's).
    pub fn cron(&self) -> Changes {
        Changes(self.signals.cron.subscribe())
    }

    /// Changes to approval requests from now on (any process's).
    pub fn approvals(&self) -> Changes {
        Changes(self.signals.approvals.subscribe())
    }

    /// Each time listening starts again from now on: the database is back
    /// (what waits out an outage tries again at once instead of at its
    /// next backoff).
    pub fn connected(&self) -> Changes {
        Changes(self.signals.connected.subscribe())
    }
}

impl Drop for Wakeups {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Says that something of one kind changed in the database (from
/// [`Wakeups::cron`] or [`Wakeups::approvals`]). A watcher looks, then
/// waits: a change made after it subscribed is never missed, and no
/// periodic query is needed beyond a slow safety poll (a notification is
/// only a hint: the tables are the record).
#[derive(Clone)]
pub struct Changes(watch::Receiver<u64>);

impl Changes {
    /// The same changes, counted from now (for a second watcher).
    pub fn fresh(&self) -> Changes {
        let mut rx = self.0.clone();
        rx.borrow_and_update();
        Changes(rx)
    }

    /// Waits for a change not waited for yet, at most `at_most`; true when
    /// one came (false: the time ran out, or nobody listens any more).
    pub async fn wait(&mut self, at_most: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + at_most;
        match tokio::time::timeout_at(deadline, self.0.changed()).await {
            Ok(Ok(())) => true,
            Ok(Err(_)) => {
                tokio::time::sleep_until(deadline).await;
                false
            }
            Err(_) => false,
        }
    }
}

fn describe_pool_error(e: deadpool_postgres::PoolError) -> String {
    match e {
        deadpool_postgres::PoolError::Backend(e) => {
            // "error connecting to server: Connection refused (os error 111)"
            let mut text = e.to_string();
            let mut source = std::error::Error::source(&e);
            while let Some(s) = source {
                text = format!("{text}: {s}");
                source = s.source();
            }
            text
        }
        deadpool_postgres::PoolError::Timeout(_) => "timed out connecting".into(),
        other => other.to_string(),
    }
}

/// `host-pid-random`: unique per process, readable in the tables.
fn default_holder() -> String {
    let host = std::fs::read_to_string("/etc/hostname")
        .ok()
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "host".into());
    format!("{host}-{}-{:06x}", std::process::id(), fastrand::u32(..0x100_0000))
}
