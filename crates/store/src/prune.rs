//! Housekeeping: rows that only record the past are deleted once older
//! than the time kept, in small rounds (one statement over every table, each
//! round its own short transaction, so claims and deliveries never wait
//! long), by one process at a time (an advisory lock; another process
//! finding it taken skips the round).

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

/// One round: at most `$2` rows of each table older than `$1` seconds, in
/// one statement (data-modifying `WITH` parts all run, on one snapshot), so
/// a round is one transaction and one round trip whatever the tables hold.
/// A finished turn's journal steps go with it.
const ROUND: &str = "
    WITH gone_inbound AS (
        DELETE FROM inbound WHERE ctid IN (SELECT ctid FROM inbound
            WHERE done_at < now() - make_interval(secs => $1) LIMIT $2)
        RETURNING 1),
    gone_outbound AS (
        DELETE FROM outbound WHERE ctid IN (SELECT ctid FROM outbound
            WHERE delivered_at < now() - make_interval(secs => $1) LIMIT $2)
        RETURNING 1),
    gone_cron_runs AS (
        DELETE FROM cron_runs WHERE ctid IN (SELECT ctid FROM cron_runs
            WHERE started_at < now() - make_interval(secs => $1) LIMIT $2)
        RETURNING 1),
    gone_turns AS (
        DELETE FROM turns_finished WHERE ctid IN (SELECT ctid FROM turns_finished
            WHERE finished_at < now() - make_interval(secs => $1) LIMIT $2)
        RETURNING session, turn),
    gone_steps AS (
        DELETE FROM turn_steps s USING gone_turns g
        WHERE s.session = g.session AND s.turn = g.turn RETURNING 1),
    gone_approvals AS (
        DELETE FROM approvals WHERE ctid IN (SELECT ctid FROM approvals
            WHERE created_at < now() - make_interval(secs => $1) LIMIT $2)
        RETURNING 1),
    gone_pairing AS (
        DELETE FROM pairing_requests WHERE ctid IN (SELECT ctid FROM pairing_requests
            WHERE created_at < now() - make_interval(secs => $1) LIMIT $2)
        RETURNING 1)
    SELECT (SELECT count(*) FROM gone_inbound), (SELECT count(*) FROM gone_outbound),
           (SELECT count(*) FROM gone_cron_runs), (SELECT count(*) FROM gone_turns),
           (SELECT count(*) FROM gone_approvals), (SELECT count(*) FROM gone_pairing)";

impl PgStore {
    /// Deletes what finished longer than `keep` ago, in rounds of at most
    /// `batch` rows per table (each round one short transaction); `None`
    /// when another process is pruning now.
    pub async fn prune(&self, keep: Duration, batch: i64) -> Result<Option<Pruned>, StoreError> {
        let secs = keep.as_secs_f64();
        let batch = batch.max(1);
        let mut pruned = Pruned::default();
        let mut client = self.pool.get().await?;
        loop {
            let tx = client.transaction().await?;
            let locked: bool =
                tx.query_one("SELECT pg_try_advisory_xact_lock($1)", &[&PRUNE_LOCK]).await?.get(0);
            if !locked {
                return Ok(None);
            }
            let row = tx.query_one(ROUND, &[&secs, &batch]).await?;
            tx.commit().await?;
            let n = |i: usize| row.get::<_, i64>(i).max(0) as u64;
            let round = Pruned {
                inbound: n(0),
                outbound: n(1),
                cron_runs: n(2),
                turns: n(3),
                approvals: n(4),
                pairing_requests: n(5),
            };
            pruned.inbound += round.inbound;
            pruned.outbound += round.outbound;
            pruned.cron_runs += round.cron_runs;
            pruned.turns += round.turns;
            pruned.approvals += round.approvals;
            pruned.pairing_requests += round.pairing_requests;
            // A table that gave a whole batch may hold more.
            let full = (0..6).any(|i| n(i) >= batch as u64);
            if !full {
                return Ok(Some(pruned));
            }
        }
    }
}
