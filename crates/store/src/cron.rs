//! Cron in the database: job definitions, and each run's slot claimed once
//! (`(job, slot)` is the key), so a job runs once however many gateways run,
//! with a record of who ran it and how it ended.

use serde_json::Value;

use crate::{PgStore, StoreError};

/// The advisory lock job edits run under (any fixed number; "fccj").
const CRON_LOCK: i64 = 0x6663_636a;

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
        let row = client
            .query_opt(
                "INSERT INTO cron_runs (job, slot, holder) VALUES ($1, $2, $3)
                 ON CONFLICT (job, slot) DO NOTHING RETURNING 1",
                &[&job, &slot_ms, &self.holder()],
            )
            .await?;
        Ok(row.map(|_| CronClaim { job: job.to_string(), slot: slot_ms }))
    }

    /// Claims `job`'s run at `slot_ms` unless a run of it is still going
    /// (started less than `stale` ago and not finished, in any process):
    /// `None` when another process has the slot or the job still runs.
    pub async fn claim_cron_slot_if_idle(
        &self,
        job: &str,
        slot_ms: i64,
        stale: std::time::Duration,
    ) -> Result<Option<CronClaim>, StoreError> {
        let client = self.pool.get().await?;
        let row = client
            .query_opt(
                "INSERT INTO cron_runs (job, slot, holder)
                 SELECT $1, $2, $3 WHERE NOT EXISTS (
                     SELECT 1 FROM cron_runs WHERE job = $1 AND finished_at IS NULL
                       AND started_at > now() - make_interval(secs => $4))
                 ON CONFLICT (job, slot) DO NOTHING RETURNING 1",
                &[&job, &slot_ms, &self.holder(), &stale.as_secs_f64()],
            )
            .await?;
        Ok(row.map(|_| CronClaim { job: job.to_string(), slot: slot_ms }))
    }

    /// Records how the run of `claim` ended (`ok`, or the error).
    pub async fn finish_cron_run(
        &self,
        claim: &CronClaim,
        outcome: &str,
    ) -> Result<(), StoreError> {
        let client = self.pool.get().await?;
        client
            .execute(
                "UPDATE cron_runs SET finished_at = now(), outcome = $3 WHERE job = $1 AND slot = $2",
                &[&claim.job, &claim.slot, &outcome],
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
        let rows = client
            .query(
                "SELECT slot, holder, outcome FROM cron_runs WHERE job = $1 ORDER BY slot DESC",
                &[&job],
            )
            .await?;
        Ok(rows.into_iter().map(|r| (r.get(0), r.get(1), r.get(2))).collect())
    }

    /// Saves (adds or replaces) job `id`.
    pub async fn save_cron_job(&self, id: &str, body: &Value) -> Result<(), StoreError> {
        let client = self.pool.get().await?;
        client
            .execute(
                "INSERT INTO cron_jobs (id, body) VALUES ($1, $2)
                 ON CONFLICT (id) DO UPDATE SET body = excluded.body, updated_at = now()",
                &[&id, body],
            )
            .await?;
        Ok(())
    }

    /// Removes job `id`; false when there was none.
    pub async fn remove_cron_job(&self, id: &str) -> Result<bool, StoreError> {
        let client = self.pool.get().await?;
        Ok(client.execute("DELETE FROM cron_jobs WHERE id = $1", &[&id]).await? == 1)
    }

    /// Every job, by id.
    pub async fn cron_jobs(&self) -> Result<Vec<(String, Value)>, StoreError> {
        let client = self.pool.get().await?;
        let rows =
            client.query("SELECT id, body FROM cron_jobs ORDER BY created_at, id", &[]).await?;
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
        for (id, _) in before.iter().filter(|(id, _)| jobs.iter().all(|(j, _)| j != id)) {
            tx.execute("DELETE FROM cron_jobs WHERE id = $1", &[id]).await?;
        }
        for (id, body) in &jobs {
            if before.iter().any(|(b, old)| b == id && old == body) {
                continue;
            }
            tx.execute(
                "INSERT INTO cron_jobs (id, body) VALUES ($1, $2)
                 ON CONFLICT (id) DO UPDATE SET body = excluded.body, updated_at = now()",
                &[id, body],
            )
            .await?;
        }
        tx.commit().await?;
        Ok(Ok(out))
    }
}
