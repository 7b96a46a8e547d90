//! The gateway's clocks: the cron loop (jobs from `cron/jobs.json`, or the
//! database's `cron_jobs` when several gateways share one) and the
//! heartbeat. Both hand their work to chat workers like any message, in
//! sessions of their own (`cron:JOB_ID`, `heartbeat:main`). With a shared
//! database, housekeeping too: old finished rows are pruned.

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use crate::bus::InboundMessage;
use crate::cron::{CronJob, ScheduleKind};
use crate::files::now_ms;
use crate::gateway::Shared;
use crate::heartbeat::{self, HEARTBEAT_FILE};
use crate::sessions::SessionKey;
use crate::worker::{Delivery, Work, WorkResult};

/// How often the cron loop looks at the jobs (file or table): the finest
/// schedule is one second.
const CRON_TICK: Duration = Duration::from_millis(500);
/// How often old rows are pruned from a shared database (the first round a
/// minute after start).
const HOUSEKEEPING_EVERY: Duration = Duration::from_secs(600);
/// A job's run unfinished for longer than this (its process died) no longer
/// keeps other gateways from running the job's next slots.
const STILL_RUNNING: Duration = Duration::from_secs(3600);
/// Rows deleted per transaction when pruning.
const PRUNE_BATCH: i64 = 1000;

/// Runs due cron jobs until `stop`.
pub async fn run_cron(shared: Arc<Shared>, stop: CancellationToken) {
    let running: Arc<Mutex<HashSet<String>>> = Arc::default();
    // The last problem reported: the same one is logged once, not every tick.
    let mut last_problem: Option<String> = None;
    let mut tick = tokio::time::interval(CRON_TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            _ = tick.tick() => {}
        }
        let due = match claim_due_jobs(&shared, &running).await {
            Ok(due) => {
                if last_problem.take().is_some() {
                    tracing::info!("cron: the jobs file is readable again");
                }
                due
            }
            Err(e) => {
                let problem = e.to_string();
                if last_problem.as_ref() != Some(&problem) {
                    tracing::error!("cron: {problem} (jobs do not run until this is fixed)");
                    last_problem = Some(problem);
                }
                continue;
            }
        };
        for job in due {
            match shared.store.clone() {
                None => start_job(&shared, job, running.clone(), None),
                // Several gateways: the one that claims the slot runs it.
                Some(link) => {
                    let (shared, running) = (shared.clone(), running.clone());
                    tokio::spawn(async move {
                        let slot = job.state.last_run_at_ms.unwrap_or_default() as i64;
                        let claimed =
                            link.store.claim_cron_slot_if_idle(&job.id, slot, STILL_RUNNING).await;
                        match claimed {
                            Ok(Some(claim)) => {
                                let record = Some((link.clone(), claim));
                                start_job(&shared, job, running, record)
                            }
                            Ok(None) => tracing::info!(
                                job = %job.id,
                                "cron slot run by another gateway, or the job still runs there; skipped here"
                            ),
                            Err(e) => {
                                tracing::error!(job = %job.id, "cron slot not claimed ({e}); skipped")
                            }
                        }
                    });
                }
            }
        }
    }
}

/// Finds jobs whose slot has come, records each slot and computes the next
/// one, and saves that before anything runs: a restart never repeats a slot.
async fn claim_due_jobs(
    shared: &Shared,
    running: &Mutex<HashSet<String>>,
) -> Result<Vec<CronJob>, crate::cron::CronError> {
    let now = now_ms();
    let running = running.lock().unwrap_or_else(PoisonError::into_inner).clone();
    let file = shared.cron.load().await?;
    let needs_claim = file.jobs.iter().any(|j| {
        j.enabled && !running.contains(&j.id) && j.state.next_run_at_ms.is_none_or(|t| t <= now)
    });
    if !needs_claim {
        return Ok(Vec::new());
    }
    shared
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
            Ok(due)
        })
        .await
}

/// Runs one job as a turn in its own session and records how it went.
/// With a shared database, `record` is the slot's claim: its run record is
/// finished with the outcome.
fn start_job(
    shared: &Arc<Shared>,
    job: CronJob,
    running: Arc<Mutex<HashSet<String>>>,
    record: Option<(Arc<crate::scaleout::StoreLink>, ferroclaw_store::CronClaim)>,
) {
    running.lock().unwrap_or_else(PoisonError::into_inner).insert(job.id.clone());
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
    let queued = shared.enqueue(key, work);
    let shared = shared.clone();
    tokio::spawn(async move {
        let outcome = match queued {
            Err(e) => WorkResult::Failed(e.to_string()),
            Ok(()) => result.await.unwrap_or(WorkResult::Failed("the gateway stopped".into())),
        };
        let recorded = shared.cron.update(|file| {
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
        running.lock().unwrap_or_else(PoisonError::into_inner).remove(&job.id);
    });
}

/// Beats every `heartbeat_minutes` until `stop`.
pub async fn run_heartbeat(shared: Arc<Shared>, workspace: PathBuf, stop: CancellationToken) {
    let Some(interval) = shared.settings.heartbeat_interval() else { return };
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
        let Ok(content) = std::fs::read_to_string(&path) else { continue };
        // Several gateways: one beat per interval, by whoever claims it.
        if let Some(link) = &shared.store {
            let slot = (now_ms() / interval.as_millis().max(1) as u64) as i64;
            if !matches!(link.store.claim_cron_slot("heartbeat", slot).await, Ok(Some(_))) {
                continue;
            }
        }
        let Some(prompt) = heartbeat::prompt(&path, &content) else { continue };
        let target = shared
            .settings
            .heartbeat_to
            .as_deref()
            .and_then(SessionKey::parse_address)
            .or_else(|| shared.last_chat());
        let delivery = target.map_or(Delivery::Nowhere, Delivery::To);
        let (done, result) = oneshot::channel();
        let message = InboundMessage::new("heartbeat", "heartbeat", "main", prompt);
        let work = Work { message, delivery, quiet_if_ok: true, done: Some(done) };
        tracing::info!("heartbeat");
        match shared.enqueue(SessionKey::new("heartbeat", "main"), work) {
            Ok(()) => beating = Some(result),
            Err(e) => tracing::warn!("heartbeat skipped: {e}"),
        }
    }
}

/// Prunes rows older than `[gateway] store_keep_days` from the shared
/// database now and then, until `stop` (nothing to do on files). Every
/// process runs this; one at a time prunes (the others find the lock taken).
pub async fn run_housekeeping(shared: Arc<Shared>, stop: CancellationToken) {
    let Some(link) = shared.store.clone() else { return };
    let keep = shared.settings.store_keep();
    let first = tokio::time::Instant::now() + Duration::from_secs(60);
    let mut tick = tokio::time::interval_at(first, HOUSEKEEPING_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            _ = tick.tick() => {}
        }
        match link.store.prune(keep, PRUNE_BATCH).await {
            Ok(Some(pruned)) if pruned.total() > 0 => {
                tracing::info!(?pruned, "housekeeping: old rows pruned from the database")
            }
            Ok(_) => {}
            Err(e) => tracing::warn!("housekeeping: {e}"),
        }
    }
}
