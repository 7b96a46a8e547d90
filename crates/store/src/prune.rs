//! Housekeeping: rows that only record the past are deleted once older
//! than the time kept, in small batches (each its own short transaction, so
//! claims and deliveries never wait long), by one process at a time (an
//! advisory lock; another process finding it taken skips the round).

use std::time::Duration;

use crate::{PgStore, StoreError};

/// The advisory lock a pruning round runs under (any fixed number; "fchk").
const PRUNE_LOCK: i64 = 0x6663_686b;

/// How many rows a round deleted, by table.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Pruned {
    /// Inbound messages finished before the cut.
    pub inbound: u64,
    /// Answers delivered before the cut.
    pub outbound: u64,
    /// Cron run records started before the cut.
    pub cron_runs: u64,
    /// Finished turns (with their journal steps) finished before the cut.
    pub turns: u64,
    /// Approval requests ended before the cut.
    pub approvals: u64,
    /// Pairing codes older than the cut.
    pub pairing_requests: u64,
}

impl Pruned {
    /// Rows deleted in all.
    pub fn total(&self) -> u64 {
        self.inbound
            + self.outbound
            + self.cron_runs
            + self.turns
            + self.approvals
            + self.pairing_requests
    }
}

/// `(field, statement)`: each deletes one batch (`$1` seconds kept, `$2` batch
/// size) and returns the rows it deleted.
const BATCHES: [(&str, &str); 6] = [
    (
        "inbound",
        "WITH gone AS (DELETE FROM inbound WHERE ctid IN (
             SELECT ctid FROM inbound WHERE done_at < now() - make_interval(secs => $1) LIMIT $2)
         RETURNING 1) SELECT count(*) FROM gone",
    ),
    (
        "outbound",
        "WITH gone AS (DELETE FROM outbound WHERE ctid IN (
             SELECT ctid FROM outbound WHERE delivered_at < now() - make_interval(secs => $1) LIMIT $2)
         RETURNING 1) SELECT count(*) FROM gone",
    ),
    (
        "cron_runs",
        "WITH gone AS (DELETE FROM cron_runs WHERE ctid IN (
             SELECT ctid FROM cron_runs WHERE started_at < now() - make_interval(secs => $1) LIMIT $2)
         RETURNING 1) SELECT count(*) FROM gone",
    ),
    (
        "turns",
        "WITH gone AS (DELETE FROM turns_finished WHERE ctid IN (
             SELECT ctid FROM turns_finished WHERE finished_at < now() - make_interval(secs => $1) LIMIT $2)
             RETURNING session, turn),
         steps AS (DELETE FROM turn_steps s USING gone g
                   WHERE s.session = g.session AND s.turn = g.turn RETURNING 1)
         SELECT count(*) FROM gone",
    ),
    (
        "approvals",
        "WITH gone AS (DELETE FROM approvals WHERE ctid IN (
             SELECT ctid FROM approvals WHERE created_at < now() - make_interval(secs => $1) LIMIT $2)
         RETURNING 1) SELECT count(*) FROM gone",
    ),
    (
        "pairing_requests",
        "WITH gone AS (DELETE FROM pairing_requests WHERE ctid IN (
             SELECT ctid FROM pairing_requests WHERE created_at < now() - make_interval(secs => $1) LIMIT $2)
         RETURNING 1) SELECT count(*) FROM gone",
    ),
];

impl PgStore {
    /// Deletes what finished longer than `keep` ago, `batch` rows per
    /// transaction; `None` when another process is pruning now.
    pub async fn prune(&self, keep: Duration, batch: i64) -> Result<Option<Pruned>, StoreError> {
        let secs = keep.as_secs_f64();
        let batch = batch.max(1);
        let mut pruned = Pruned::default();
        let mut client = self.pool.get().await?;
        for (field, sql) in BATCHES {
            loop {
                let tx = client.transaction().await?;
                let locked: bool = tx
                    .query_one("SELECT pg_try_advisory_xact_lock($1)", &[&PRUNE_LOCK])
                    .await?
                    .get(0);
                if !locked {
                    return Ok(None);
                }
                let n: i64 = tx.query_one(sql, &[&secs, &batch]).await?.get(0);
                tx.commit().await?;
                let n = n.max(0) as u64;
                *match field {
                    "inbound" => &mut pruned.inbound,
                    "outbound" => &mut pruned.outbound,
                    "cron_runs" => &mut pruned.cron_runs,
                    "turns" => &mut pruned.turns,
                    "approvals" => &mut pruned.approvals,
                    _ => &mut pruned.pairing_requests,
                } += n;
                if n < batch as u64 {
                    break;
                }
            }
        }
        Ok(Some(pruned))
    }
}
