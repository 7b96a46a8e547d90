//! Housekeeping: rows that only record the past are deleted once older
//! than the time kept, in small rounds (one statement over every table, each
//! round its own short transaction, so claims and deliveries never wait
//! long), by one process at a time (an advisory lock; another process
//! finding it taken skips the round).
//!
//! Answers never delivered go after the same time: an answer bound to a
//! connection whose gateway is gone (a web chat's page, an API request) is
//! taken by no other process, and one that waited that long is news to
//! nobody. Each chat that lost answers so is named in one warning.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::{PgStore, StoreError};

/// The advisory lock a pruning round runs under (any fixed number; "fchk").
const PRUNE_LOCK: i64 = 0x6663_686b;

/// How many rows a round deleted, by table.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Pruned {
    /// Inbound messages finished before the cut.
    pub inbound: u64,
    /// Answers delivered before the cut.
    pub outbound: u64,
    /// Answers stored before the cut and never delivered, by chat
    /// (`CHANNEL:CHAT_ID`): dropped, each chat named in a warning.
    pub undelivered: BTreeMap<String, u64>,
    /// Cron run records started before the cut.
    pub cron_runs: u64,
    /// Turns whose journal steps (or finish mark) went: recorded before the
    /// cut, and no message still waiting names them.
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
            + self.undelivered.values().sum::<u64>()
            + self.cron_runs
            + self.turns
            + self.approvals
            + self.pairing_requests
    }
}

/// One round: at most `$2` rows of each table older than `$1` seconds, in
/// one statement (data-modifying `WITH` parts all run, on one snapshot), so
/// a round is one transaction and one round trip whatever the tables hold.
///
/// A turn's journal steps go by the files journal's rule: a finished turn's
/// steps go, an unfinished one's stay for the worker that resumes it. In the
/// database a turn is finished when its message is answered (the queue's
/// finish stores the answer and marks the message done; the journal writes
/// no mark of its own, to save a transaction per message), so the steps of
/// a turn recorded before the cut go unless a message still waiting names
/// the turn (`metadata.turn` in its body: the id every worker holding the
/// message computes alike). Marks written by [`PgStore::finish_turn`] go at
/// the same age.
const ROUND: &str = "
    WITH gone_inbound AS (
        DELETE FROM inbound WHERE ctid IN (SELECT ctid FROM inbound
            WHERE done_at < now() - make_interval(secs => $1) LIMIT $2)
        RETURNING 1),
    gone_outbound AS (
        DELETE FROM outbound WHERE ctid IN (SELECT ctid FROM outbound
            WHERE delivered_at < now() - make_interval(secs => $1) LIMIT $2)
        RETURNING 1),
    gone_undelivered AS (
        DELETE FROM outbound WHERE ctid IN (SELECT ctid FROM outbound
            WHERE delivered_at IS NULL AND created_at < now() - make_interval(secs => $1)
            LIMIT $2)
        RETURNING chat),
    gone_cron_runs AS (
        DELETE FROM cron_runs WHERE ctid IN (SELECT ctid FROM cron_runs
            WHERE started_at < now() - make_interval(secs => $1) LIMIT $2)
        RETURNING 1),
    gone_steps AS (
        DELETE FROM turn_steps s USING (
            SELECT DISTINCT b.session, b.turn FROM turn_steps b
            WHERE b.recorded_at < now() - make_interval(secs => $1)
              AND NOT EXISTS (SELECT 1 FROM inbound i
                              WHERE i.done_at IS NULL AND i.body #>> '{metadata,turn}' = b.turn)
            LIMIT $2) g
        WHERE s.session = g.session AND s.turn = g.turn
        RETURNING s.session, s.turn),
    gone_marks AS (
        DELETE FROM turns_finished WHERE ctid IN (SELECT ctid FROM turns_finished
            WHERE finished_at < now() - make_interval(secs => $1) LIMIT $2)
        RETURNING session, turn),
    gone_approvals AS (
        DELETE FROM approvals WHERE ctid IN (SELECT ctid FROM approvals
            WHERE created_at < now() - make_interval(secs => $1) LIMIT $2)
        RETURNING 1),
    gone_pairing AS (
        DELETE FROM pairing_requests WHERE ctid IN (SELECT ctid FROM pairing_requests
            WHERE created_at < now() - make_interval(secs => $1) LIMIT $2)
        RETURNING 1)
    SELECT (SELECT count(*) FROM gone_inbound), (SELECT count(*) FROM gone_outbound),
           (SELECT count(*) FROM gone_cron_runs),
           (SELECT count(*) FROM (SELECT session, turn FROM gone_steps
                                  UNION SELECT session, turn FROM gone_marks) t),
           (SELECT count(*) FROM gone_approvals), (SELECT count(*) FROM gone_pairing),
           (SELECT coalesce(array_agg(chat), '{}') FROM gone_undelivered)";

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
            let undelivered: Vec<String> = row.get(6);
            let full =
                (0..6).any(|i| n(i) >= batch as u64) || undelivered.len() as u64 >= batch as u64;
            pruned.inbound += n(0);
            pruned.outbound += n(1);
            pruned.cron_runs += n(2);
            pruned.turns += n(3);
            pruned.approvals += n(4);
            pruned.pairing_requests += n(5);
            for chat in undelivered {
                *pruned.undelivered.entry(chat).or_default() += 1;
            }
            // A table that gave a whole batch may hold more.
            if !full {
                warn_undelivered(&pruned.undelivered, keep);
                return Ok(Some(pruned));
            }
        }
    }
}

/// One warning per chat whose answers were dropped undelivered.
fn warn_undelivered(dropped: &BTreeMap<String, u64>, keep: Duration) {
    let days = keep.as_secs_f64() / 86_400.0;
    for (chat, answers) in dropped {
        tracing::warn!(
            %chat,
            answers,
            "housekeeping: {answers} answer(s) to {chat} not delivered within {days:.1} day(s) \
             (store_keep_days) dropped"
        );
    }
}
