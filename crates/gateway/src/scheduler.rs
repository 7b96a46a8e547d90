//! The gateway's clocks: the cron loop (jobs from `cron/jobs.json`, or the
//! database's `cron_jobs` when several gateways share one) and the
//! heartbeat. Both hand their work to chat workers like any message, in
//! sessions of their own (`cron:JOB_ID`, `heartbeat:main`). With a shared
//! database, each cron run is leased like a chat's turn (a run whose
//! gateway died is run again by another as soon as the database sees that
//! gateway gone, or once the lease runs out), and housekeeping prunes old
//! finished rows.

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use ferroclaw_store::{Changes, CronClaim};
use tokio::sync::{Notify, oneshot};
use tokio_util::sync::CancellationToken;

use crate::bus::InboundMessage;
use crate::chats::Chats;
use crate::cron::{CronJob, ScheduleKind};
use crate::files::now_ms;
use crate::heartbeat::{self, HEARTBEAT_FILE};
use crate::sessions::SessionKey;
use crate::store_link::StoreLink;
use crate::worker::{Delivery, Work, WorkResult};
use ferroclaw_tools::repo_file::{MAX_REPO_FILE_BYTES, read_repo_text};

/// How often the cron loop reads the jobs file: the finest schedule is one
/// second. (With a shared database it does not poll: it sleeps until the
/// next slot, and a change to the jobs wakes it.)
const CRON_TICK: Duration = Duration::from_millis(500);
/// How long the cron loop waits before asking an unreachable database again.
const CRON_RETRY: Duration = Duration::from_secs(2);
/// How often old rows are pruned from a shared database (the first round a
/// minute after start).
const HOUSEKEEPING_EVERY: Duration = Duration::from_secs(600);
/// Tests only: the housekeeping period in milliseconds (the first round
/// too), so a test of pruning need not wait [`HOUSEKEEPING_EVERY`].
const HOUSEKEEPING_TEST_ENV: &str = "FERROCLAW_TEST_HOUSEKEEPING_MS";
/// Rows deleted per table and transaction when pruning.
const PRUNE_BATCH: i64 = 1000;

/// Jobs running in this process, and a signal each time one ends.
#[derive(Default)]
struct Running {
    jobs: Mutex<HashSet<String>>,
    ended: Notify,
}

impl Running {
    fn ids(&self) -> HashSet<String> {
        self.jobs.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    fn start(&self, id: &str) {
        self.jobs.lock().unwrap_or_else(PoisonError::into_inner).insert(id.to_string());
    }

    fn end(&self, id: &str) {
        self.jobs.lock().unwrap_or_else(PoisonError::into_inner).remove(id);
        self.ended.notify_one();
    }
}

/// Runs due cron jobs until `stop`. On files it reads the jobs file every
/// [`CRON_TICK`]; with a shared database it sleeps until the next slot, a
/// change to the jobs (a notification), a run of this process ending, the
/// liveness check while a job runs elsewhere, or the safety poll, whichever
/// is first.
pub async fn run_cron(chats: Arc<Chats>, stop: CancellationToken) {
    let running: Arc<Running> = Arc::default();
    // The last problem reported: the same one is logged once, not every tick.
    let mut last_problem: Option<String> = None;
    let mut tick = tokio::time::interval(CRON_TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let mut changes: Option<Changes> = chats.store.as_ref().map(|link| link.cron_changes());
    let mut sleep = Duration::ZERO;
    loop {
        match &mut changes {
            None => tokio::select! {
                () = stop.cancelled() => return,
                _ = tick.tick() => {}
            },
            Some(changes) => tokio::select! {
                () = stop.cancelled() => return,
                _ = changes.wait(sleep) => {}
                () = running.ended.notified() => {}
            },
        }
        // Several gateways: one that does not serve the database's model
        // config (or has not registered yet) runs no jobs.
        if chats.store.as_ref().is_some_and(|link| !link.takes_turns()) {
            sleep = Duration::from_secs(1);
            continue;
        }
        let (due, next_due) = match claim_due_jobs(&chats, &running).await {
            Ok(found) => {
                if last_problem.take().is_some() {
                    tracing::info!("cron: the jobs file is readable again");
                }
                found
            }
            Err(e) => {
                let problem = e.to_string();
                if last_problem.as_ref() != Some(&problem) {
                    tracing::error!("cron: {problem} (jobs do not run until this is fixed)");
                    last_problem = Some(problem);
                }
                sleep = CRON_RETRY;
                continue;
            }
        };
        let Some(link) = chats.store.clone() else {
            for job in due {
                start_job(&chats, job, running.clone(), None);
            }
            continue;
        };
        for job in due {
            claim_and_start(&chats, &link, job, &running);
        }
        let expiry = retry_runs_of_dead_processes(&chats, &link, &running).await;
        let until_due = next_due.map(|at| Duration::from_millis(at.saturating_sub(now_ms())));
        sleep = [Some(crate::store_link::safety_poll()), until_due, expiry]
            .into_iter()
            .flatten()
            .min()
            .unwrap_or(CRON_RETRY);
    }
}

/// Several gateways: the one that claims the slot runs the job.
fn claim_and_start(
    chats: &Arc<Chats>,
    link: &Arc<StoreLink>,
    job: CronJob,
    running: &Arc<Running>,
) {
    let (chats, link, running) = (chats.clone(), link.clone(), running.clone());
    tokio::spawn(async move {
        let slot = job.state.last_run_at_ms.unwrap_or_default() as i64;
        match link.store.claim_cron_run(&job.id, slot, link.leases.chat).await {
            Ok(Some(claim)) => start_job(&chats, job, running, Some((link.clone(), claim))),
            Ok(None) => tracing::info!(
                job = %job.id,
                "cron slot run by another gateway, or the job still runs there; skipped here"
            ),
            Err(e) => tracing::error!(job = %job.id, "cron slot not claimed ({e}); skipped"),
        }
    });
}

/// Takes over the cron runs whose process is gone (or stopped renewing
/// their lease) and runs each job again for its slot; returns when to look
/// again while a run goes on elsewhere: within the liveness check (its
/// process may die meanwhile), or when its lease runs out if that is sooner.
async fn retry_runs_of_dead_processes(
    chats: &Arc<Chats>,
    link: &Arc<StoreLink>,
    running: &Arc<Running>,
) -> Option<Duration> {
    let taken = match link.store.take_over_cron_runs(link.leases.chat).await {
        Ok(taken) => taken,
        Err(e) => {
            tracing::warn!("cron: runs of stopped gateways not looked at: {e}");
            return Some(CRON_RETRY);
        }
    };
    if !taken.runs.is_empty() {
        let jobs = match chats.cron.load().await {
            Ok(file) => file.jobs,
            Err(e) => {
                tracing::warn!("cron: {e}");
                Vec::new()
            }
        };
        for claim in taken.runs {
            match jobs.iter().find(|j| j.id == claim.job) {
                Some(job) => {
                    tracing::warn!(job = %claim.job, "cron run of a gateway that is gone or stopped renewing it; running it again here");
                    start_job(chats, job.clone(), running.clone(), Some((link.clone(), claim)));
                }
                None => {
                    if let Err(e) = link.store.finish_cron_run(&claim, "error: job removed").await {
                        tracing::warn!("cron: {e}");
                    }
                }
            }
        }
    }
    // A little after the lease ends, so that it has ended by the database's clock.
    taken.next_expiry.map(|d| (d + Duration::from_millis(50)).min(ferroclaw_store::LIVENESS_CHECK))
}

/// Finds jobs whose slot has come, records each slot and computes the next
/// one, and saves that before anything runs: a restart never repeats a slot.
/// Also returns when the next slot of a job not running here comes (ms).
async fn claim_due_jobs(
    chats: &Chats,
    running: &Running,
) -> Result<(Vec<CronJob>, Option<u64>), crate::cron::CronError> {
    let now = now_ms();
    let running = running.ids();
    let file = chats.cron.load().await?;
    let needs_claim = file.jobs.iter().any(|j| {
        j.enabled && !running.contains(&j.id) && j.state.next_run_at_ms.is_none_or(|t| t <= now)
    });
    if !needs_claim {
        return Ok((Vec::new(), next_slot(&file.jobs, &running)));
    }
    chats
        .cron
        .update(|file| {
            let mut due = Vec::new();
            for job in file.jobs.iter_mut().filter(|j| j.enabled && !running.contains(&j.id)) {
                match job.state.next_run_at_ms {
                    // A job added by hand without a next run: schedule it.
                    None => job.state.next_run_at_ms = job.schedule.next_after(now).ok().flatten(),
                    Some(slot) if slot <= now => {
                        job.state.last_run_at_ms = Some(slot);
                        job.state.next_run_at_ms = match job.schedule.next_after(now.max(slot)) {
                            Ok(next) => next,
                            Err(e) => {
                                job.state.last_status = Some("error".into());
                                job.state.last_error = Some(e.to_string());
                                None
                            }
                        };
                        due.push(job.clone());
                    }
                    Some(_) => {}
                }
            }
            let next = next_slot(&file.jobs, &running);
            Ok((due, next))
        })
        .await
}

/// The earliest next slot of the enabled jobs not running here.
fn next_slot(jobs: &[CronJob], running: &HashSet<String>) -> Option<u64> {
    jobs.iter()
        .filter(|j| j.enabled && !running.contains(&j.id))
        .filter_map(|j| j.state.next_run_at_ms)
        .min()
}

/// Runs one job as a turn in its own session and records how it went.
/// With a shared database, `record` is the run's claim: its lease is renewed
/// while the job runs, and its run record is finished with the outcome.
fn start_job(
    chats: &Arc<Chats>,
    job: CronJob,
    running: Arc<Running>,
    record: Option<(Arc<StoreLink>, CronClaim)>,
) {
    running.start(&job.id);
    let key = SessionKey::new("cron", job.id.clone());
    let delivery = match (&job.payload.channel, &job.payload.to) {
        (Some(channel), Some(to)) if job.payload.deliver => {
            Delivery::To(SessionKey::new(channel.clone(), to.clone()))
        }
        _ => Delivery::Nowhere,
    };
    let content = format!("[Scheduled job \"{}\"] {}", job.name, job.payload.message);
    let message = InboundMessage::new("cron", "cron", job.id.clone(), content);
    let (done, result) = oneshot::channel();
    let work = Work { message, delivery, quiet_if_ok: false, done: Some(done) };
    tracing::info!(job = %job.id, name = %job.name, "cron job due");
    let queued = chats.enqueue(key, work);
    let chats = chats.clone();
    tokio::spawn(async move {
        let outcome = match (queued, &record) {
            (Err(e), _) => WorkResult::Failed(e.to_string()),
            (Ok(()), None) => {
                result.await.unwrap_or(WorkResult::Failed("the gateway stopped".into()))
            }
            (Ok(()), Some((link, claim))) => hold_run(link, claim, result).await,
        };
        let recorded = chats.cron.update(|file| {
            if let Some(i) = file.jobs.iter().position(|j| j.id == job.id) {
                let j = &mut file.jobs[i];
                match &outcome {
                    WorkResult::Answered(_) => {
                        j.state.last_status = Some("ok".into());
                        j.state.last_error = None;
                    }
                    WorkResult::Failed(e) => {
                        j.state.last_status = Some("error".into());
                        j.state.last_error = Some(e.clone());
                    }
                }
                if j.schedule.kind == ScheduleKind::At && j.state.next_run_at_ms.is_none() {
                    if j.delete_after_run {
                        file.jobs.remove(i);
                    } else {
                        j.enabled = false;
                    }
                }
            }
            Ok(())
        });
        if let Err(e) = recorded.await {
            tracing::warn!("cron: cannot record the run of {}: {e}", job.id);
        }
        if let Some((link, claim)) = record {
            let how = match &outcome {
                WorkResult::Answered(_) => "ok".to_string(),
                WorkResult::Failed(e) => format!("error: {e}"),
            };
            if let Err(e) = link.store.finish_cron_run(&claim, &how).await {
                tracing::warn!("cron: cannot record the end of {}'s run: {e}", job.id);
            }
        }
        running.end(&job.id);
    });
}

/// Waits for the run of `claim` to end, renewing its lease every third of it.
async fn hold_run(
    link: &StoreLink,
    claim: &CronClaim,
    mut result: oneshot::Receiver<WorkResult>,
) -> WorkResult {
    let lease = link.leases.chat;
    loop {
        tokio::select! {
            outcome = &mut result => {
                return outcome.unwrap_or(WorkResult::Failed("the gateway stopped".into()));
            }
            () = tokio::time::sleep(lease / 3) => {}
        }
        match link.store.renew_cron_run(claim, lease).await {
            Ok(true) => {}
            Ok(false) => tracing::warn!(job = %claim.job, "cron run taken over by another gateway"),
            Err(e) => tracing::warn!(job = %claim.job, "cron run lease not renewed: {e}"),
        }
    }
}

/// Beats every `heartbeat_minutes` until `stop`.
pub async fn run_heartbeat(chats: Arc<Chats>, workspace: PathBuf, stop: CancellationToken) {
    let Some(interval) = chats.settings.heartbeat_interval() else { return };
    let path = workspace.join(HEARTBEAT_FILE);
    let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + interval, interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let mut beating: Option<oneshot::Receiver<WorkResult>> = None;
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            _ = tick.tick() => {}
        }
        // One beat at a time: skip while the last one still runs.
        if let Some(rx) = &mut beating
            && rx.try_recv().is_err_and(|e| e == oneshot::error::TryRecvError::Empty)
        {
            continue;
        }
        let Ok(content) = read_repo_text(&path, MAX_REPO_FILE_BYTES) else { continue };
        // Several gateways: one beat per interval, by whoever claims it.
        if let Some(link) = &chats.store {
            if !link.takes_turns() {
                continue;
            }
            let slot = (now_ms() / interval.as_millis().max(1) as u64) as i64;
            if !matches!(link.store.claim_cron_slot("heartbeat", slot).await, Ok(Some(_))) {
                continue;
            }
        }
        let Some(prompt) = heartbeat::prompt(&path, &content) else { continue };
        let target = chats
            .settings
            .heartbeat_to
            .as_deref()
            .and_then(SessionKey::parse_address)
            .or_else(|| chats.last_chat());
        let delivery = target.map_or(Delivery::Nowhere, Delivery::To);
        let (done, result) = oneshot::channel();
        let message = InboundMessage::new("heartbeat", "heartbeat", "main", prompt);
        let work = Work { message, delivery, quiet_if_ok: true, done: Some(done) };
        tracing::info!("heartbeat");
        match chats.enqueue(SessionKey::new("heartbeat", "main"), work) {
            Ok(()) => beating = Some(result),
            Err(e) => tracing::warn!("heartbeat skipped: {e}"),
        }
    }
}

/// Prunes rows older than `[gateway] store_keep_days` from the shared
/// database (on files: finished turns' journal files), and media older than
/// `media_keep_days` (the workspace's inbox; the database's kept files), now
/// and then, until `stop`. Every process
/// runs this; one at a time prunes the rows (the others find the lock taken).
pub async fn run_housekeeping(chats: Arc<Chats>, stop: CancellationToken) {
    let keep = chats.settings.store_keep();
    let media_keep = chats.settings.media_keep();
    if chats.store.is_none() && media_keep.is_none() && chats.journal.is_none() {
        return;
    }
    let test_period = std::env::var(HOUSEKEEPING_TEST_ENV)
        .ok()
        .and_then(|ms| ms.parse::<u64>().ok())
        .filter(|&ms| ms > 0)
        .map(Duration::from_millis);
    let (first, every) = match test_period {
        Some(period) => (period, period),
        None => (Duration::from_secs(60), HOUSEKEEPING_EVERY),
    };
    let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + first, every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            _ = tick.tick() => {}
        }
        if let Some(link) = &chats.store {
            match link.store.prune(keep, PRUNE_BATCH).await {
                Ok(Some(pruned)) if pruned.total() > 0 => {
                    tracing::info!(?pruned, "housekeeping: old rows pruned from the database");
                }
                Ok(_) => {}
                Err(e) => tracing::warn!("housekeeping: {e}"),
            }
        }
        // Finished turns' journal files, on files (the database's go above).
        if let Some(journal) = &chats.journal {
            match journal.prune(keep).await {
                Ok(0) => {}
                Ok(n) => tracing::info!(turns = n, "housekeeping: finished turns' journals pruned"),
                Err(e) => tracing::warn!("housekeeping: turn journal not pruned: {e}"),
            }
        }
        if let Some(media_keep) = media_keep {
            prune_media(&chats, media_keep).await;
        }
    }
}

/// Deletes the media older than `keep`: files in the workspace's inbox, and
/// the files kept in the shared database.
async fn prune_media(chats: &Chats, keep: Duration) {
    let workspace = chats.workspace.clone();
    let inbox =
        tokio::task::spawn_blocking(move || crate::media_retention::prune_inbox(&workspace, keep))
            .await;
    match inbox {
        Ok(Ok(0)) => {}
        Ok(Ok(n)) => tracing::info!(files = n, "housekeeping: old files pruned from the inbox"),
        Ok(Err(e)) => tracing::warn!("housekeeping: inbox not pruned: {e}"),
        Err(e) => tracing::warn!("housekeeping: inbox not pruned: {e}"),
    }
    if let Some(link) = &chats.store {
        match link.store.prune_media(keep, PRUNE_BATCH).await {
            Ok(0) => {}
            Ok(n) => tracing::info!(files = n, "housekeeping: old media pruned from the database"),
            Err(e) => tracing::warn!("housekeeping: media not pruned: {e}"),
        }
    }
}
