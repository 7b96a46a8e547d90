//! Cron in the database: job definitions, and each run's slot claimed once
//! (`(job, slot)` is the key), so a job runs once however many gateways run,
//! with a record of who ran it and how it ended.
//!
//! A run is leased like a chat's turn: its process renews the lease while
//! the job runs ([`PgStore::renew_cron_run`]). An unfinished run is judged
//! by the rule of every lease (`ferroclaw_lease_held`): one whose process is
//! gone (registered, and its liveness lock free: see [`crate::Liveness`]) is
//! taken over by another process at once, one whose lease ran out (a hung
//! process, or one that never registered) then, and none in the grace after
//! the database server restarts; the taker runs the job again for that slot
//! ([`PgStore::take_over_cron_runs`]).
//! Every change to the jobs notifies the other processes (`LISTEN/NOTIFY`,
//! [`crate::Wakeups::cron`]).

use std::time::Duration;

use serde_json::Value;

use crate::pg::CRON_CHANNEL;
use crate::{PgStore, StoreError};

/// The advisory lock job edits run under (any fixed number; "fccj").
const CRON_LOCK: i64 = 0x6663_636a;
/// Tries a run of one slot gets, its first included: a job whose run kills
/// its process every time is not passed from process to process for ever.
pub const CRON_RUN_ATTEMPTS: i32 = 3;

/// What [`PgStore::take_over_cron_runs`] found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TakenOver {
    /// Runs whose process stopped renewing them: this process runs them now.
    pub runs: Vec<CronClaim>,
    /// When the next lease of a run another process holds runs out, from
    /// now (`None`: no run is going on elsewhere).
    pub next_expiry: Option<Duration>,
}

/// A slot this process won: run the job, then [`PgStore::finish_cron_run`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CronClaim {
    pub job: String,
    /// The slot's time (milliseconds since the epoch).
    pub slot: i64,
}

impl PgStore {
    /// Claims `job`'s run at `slot_ms`; `None` when another process has it.
    pub async fn claim_cron_slot(
        &self,
        job: &str,
        slot_ms: i64,
    ) -> Result<Option<CronClaim>, StoreError> {
        let client = self.pool.get().await?;
        let statement = client
            .prepare_cached(
                "INSERT INTO cron_runs (job, slot, holder) VALUES ($1, $2, $3)
                 ON CONFLICT (job, slot) DO NOTHING RETURNING 1",
            )
            .await?;
        let row = client.query_opt(&statement, &[&job, &slot_ms, &self.holder()]).await?;
        Ok(row.map(|_| CronClaim { job: job.to_string(), slot: slot_ms }))
    }

    /// Claims `job`'s run at `slot_ms`, leased for `lease`, unless a run of
    /// it is still going (unfinished, its lease live, in any process):
    /// `None` when another process has the slot or the job still runs. The
    /// other processes are told (to look again when the lease would end).
    pub async fn claim_cron_run(
        &self,
        job: &str,
        slot_ms: i64,
        lease: Duration,
    ) -> Result<Option<CronClaim>, StoreError> {
        let client = self.pool.get().await?;
        let statement = client
            .prepare_cached(
                "WITH claimed AS (
                     INSERT INTO cron_runs (job, slot, holder, lease_until)
                     SELECT $1, $2, $3, now() + make_interval(secs => $4) WHERE NOT EXISTS (
                         SELECT 1 FROM cron_runs WHERE job = $1 AND finished_at IS NULL
                           AND lease_until > now())
                     ON CONFLICT (job, slot) DO NOTHING RETURNING 1)
                 SELECT pg_notify($5, '') FROM claimed",
            )
            .await?;
        let row = client
            .query_opt(
                &statement,
                &[&job, &slot_ms, &self.holder(), &lease.as_secs_f64(), &CRON_CHANNEL],
            )
            .await?;
        Ok(row.map(|_| CronClaim { job: job.to_string(), slot: slot_ms }))
    }

    /// Keeps the run of `claim` this process's for `lease` more; false when
    /// it is not this process's any more (another took it over).
    pub async fn renew_cron_run(
        &self,
        claim: &CronClaim,
        lease: Duration,
    ) -> Result<bool, StoreError> {
        let client = self.pool.get().await?;
        let statement = client
            .prepare_cached(
                "UPDATE cron_runs SET lease_until = now() + make_interval(secs => $4)
                 WHERE job = $1 AND slot = $2 AND holder = $3 AND finished_at IS NULL",
            )
            .await?;
        let renewed = client
            .execute(&statement, &[&claim.job, &claim.slot, &self.holder(), &lease.as_secs_f64()])
            .await?;
        Ok(renewed == 1)
    }

    /// Takes over, leased for `lease`, the unfinished runs whose lease no
    /// longer holds (its process is gone, or it ran out; each run at
    /// most [`CRON_RUN_ATTEMPTS`] times in all), and says when the next live
    /// lease of another process runs out. One statement; two processes
    /// never take the same run, and the others are told of a takeover.
    pub async fn take_over_cron_runs(&self, lease: Duration) -> Result<TakenOver, StoreError> {
        let client = self.pool.get().await?;
        let statement = client
            .prepare_cached(
                "WITH taken AS (
                     UPDATE cron_runs SET holder = $1, started_at = now(),
                         lease_until = now() + make_interval(secs => $2), attempts = attempts + 1
                     WHERE finished_at IS NULL AND attempts < $3
                       AND NOT ferroclaw_lease_held(lease_until, holder, $2)
                     RETURNING job, slot),
                 told AS (SELECT pg_notify($4, '') WHERE EXISTS (SELECT 1 FROM taken))
                 SELECT job, slot, NULL::float8 FROM taken, told
                 UNION ALL
                 SELECT NULL, NULL, extract(epoch FROM min(lease_until) - now())::float8
                 FROM cron_runs
                 WHERE finished_at IS NULL AND lease_until > now() AND holder <> $1",
            )
            .await?;
        let rows = client
            .query(
                &statement,
                &[&self.holder(), &lease.as_secs_f64(), &CRON_RUN_ATTEMPTS, &CRON_CHANNEL],
            )
            .await?;
        let mut out = TakenOver::default();
        for row in rows {
            match (row.get::<_, Option<String>>(0), row.get::<_, Option<i64>>(1)) {
                (Some(job), Some(slot)) => out.runs.push(CronClaim { job, slot }),
                _ => {
                    out.next_expiry =
                        row.get::<_, Option<f64>>(2).map(|s| Duration::from_secs_f64(s.max(0.0)));
                }
            }
        }
        Ok(out)
    }

    /// Records how the run of `claim` ended (`ok`, or the error); nothing
    /// when another process took the run over meanwhile.
    pub async fn finish_cron_run(
        &self,
        claim: &CronClaim,
        outcome: &str,
    ) -> Result<(), StoreError> {
        let client = self.pool.get().await?;
        client
            .execute(
                "UPDATE cron_runs SET finished_at = now(), outcome = $3
                 WHERE job = $1 AND slot = $2 AND holder = $4",
                &[&claim.job, &claim.slot, &outcome, &self.holder()],
            )
            .await?;
        Ok(())
    }

    /// The runs of `job`, newest first: (slot, holder, outcome).
    pub async fn cron_runs(
        &self,
        job: &str,
    ) -> Result<Vec<(i64, String, Option<String>)>, StoreError> {
        let client = self.pool.get().await?;
        let statement = client
            .prepare_cached(
                "SELECT slot, holder, outcome FROM cron_runs WHERE job = $1 ORDER BY slot DESC",
            )
            .await?;
        let rows = client.query(&statement, &[&job]).await?;
        Ok(rows.into_iter().map(|r| (r.get(0), r.get(1), r.get(2))).collect())
    }

    /// Saves (adds or replaces) job `id`.
    pub async fn save_cron_job(&self, id: &str, body: &Value) -> Result<(), StoreError> {
        let client = self.pool.get().await?;
        client
            .execute(
                "WITH saved AS (
                     INSERT INTO cron_jobs (id, body) VALUES ($1, $2)
                     ON CONFLICT (id) DO UPDATE SET body = excluded.body, updated_at = now()
                     RETURNING 1)
                 SELECT pg_notify($3, '') FROM saved",
                &[&id, body, &CRON_CHANNEL],
            )
            .await?;
        Ok(())
    }

    /// Removes job `id`; false when there was none.
    pub async fn remove_cron_job(&self, id: &str) -> Result<bool, StoreError> {
        let client = self.pool.get().await?;
        let statement = client
            .prepare_cached(
                "WITH gone AS (DELETE FROM cron_jobs WHERE id = $1 RETURNING 1)
                 SELECT pg_notify($2, '') FROM gone",
            )
            .await?;
        let removed = client.execute(&statement, &[&id, &CRON_CHANNEL]).await?;
        Ok(removed == 1)
    }

    /// Every job, by id.
    pub async fn cron_jobs(&self) -> Result<Vec<(String, Value)>, StoreError> {
        let client = self.pool.get().await?;
        let statement =
            client.prepare_cached("SELECT id, body FROM cron_jobs ORDER BY created_at, id").await?;
        let rows = client.query(&statement, &[]).await?;
        Ok(rows.into_iter().map(|r| (r.get(0), r.get(1))).collect())
    }

    /// Reads every job, lets `change` edit the list, and writes what it
    /// changed (added, replaced, removed), as one transaction that no other
    /// process's edit interleaves with: the jobs file's read-change-write, for
    /// several processes. `change` failing writes nothing and is returned as is.
    pub async fn edit_cron_jobs<T, E>(
        &self,
        change: impl FnOnce(&mut Vec<(String, Value)>) -> Result<T, E>,
    ) -> Result<Result<T, E>, StoreError> {
        let mut client = self.pool.get().await?;
        let tx = client.transaction().await?;
        tx.execute("SELECT pg_advisory_xact_lock($1)", &[&CRON_LOCK]).await?;
        let rows = tx.query("SELECT id, body FROM cron_jobs ORDER BY created_at, id", &[]).await?;
        let before: Vec<(String, Value)> = rows.into_iter().map(|r| (r.get(0), r.get(1))).collect();
        let mut jobs = before.clone();
        let out = match change(&mut jobs) {
            Ok(out) => out,
            Err(e) => {
                tx.rollback().await?;
                return Ok(Err(e));
            }
        };
        let mut changed = false;
        for (id, _) in before.iter().filter(|(id, _)| jobs.iter().all(|(j, _)| j != id)) {
            tx.execute("DELETE FROM cron_jobs WHERE id = $1", &[id]).await?;
            changed = true;
        }
        for (id, body) in &jobs {
            if before.iter().any(|(b, old)| b == id && old == body) {
                continue;
            }
            changed = true;
            tx.execute(
                "INSERT INTO cron_jobs (id, body) VALUES ($1, $2)
                 ON CONFLICT (id) DO UPDATE SET body = excluded.body, updated_at = now()",
                &[id, body],
            )
            .await?;
        }
        if changed {
            // Delivered at commit, to every process's scheduler.
            tx.execute("SELECT pg_notify($1, '')", &[&CRON_CHANNEL]).await?;
        }
        tx.commit().await?;
        Ok(Ok(out))
    }
}
