//! The turn journal's steps: what a turn produced (what started it, the
//! model's answers, each tool result), keyed by `(session, turn, step)`, so
//! a worker that takes over a turn another worker died in replays the
//! finished steps instead of calling the model or the tools again. The
//! first record of a step wins: a replay never overwrites what was recorded.
//! A finished turn is marked so, and is never resumed. Housekeeping
//! ([`PgStore::prune`]) deletes a turn's steps once they are older than the
//! time kept and no waiting message names the turn: a turn whose message
//! was answered is finished whether or not it was marked (the gateway's
//! journal marks nothing; the queue's finish says it).
//!
//! The shapes follow `ferroclaw_core::journal::TurnJournal` (turn ids are
//! text, step bodies JSON): implementing it over these calls is a few lines,
//! in the gateway (which sees both crates), on a newtype over [`PgStore`]:
//!
//! ```text
//! load(s, t)        -> load_steps(s, t), each body serde_json::from_value into a Step
//! record(s, t, n, b)-> record_step(s, t, n as i32, &serde_json::to_value(b)?)
//! finish(s, t)      -> finish_turn(s, t), or nothing (the message's finish says it)
//! unfinished()      -> Ok(vec![])  (the inbound queue hands an unfinished message
//!                                   to another worker; unfinished_turns() is there
//!                                   for status and tests)
//! ```

use serde_json::Value;

use crate::{PgStore, StoreError};

/// One recorded step.
#[derive(Debug, Clone, PartialEq)]
pub struct TurnStep {
    pub step: i32,
    pub body: Value,
}

impl PgStore {
    /// Records step `step` of `turn` in `session`; false when it was recorded before.
    pub async fn record_step(
        &self,
        session: &str,
        turn: &str,
        step: i32,
        body: &Value,
    ) -> Result<bool, StoreError> {
        let client = self.pool.get().await?;
        let statement = client
            .prepare_cached(
                "INSERT INTO turn_steps (session, turn, step, body) VALUES ($1, $2, $3, $4)
                 ON CONFLICT (session, turn, step) DO NOTHING",
            )
            .await?;
        let n = client.execute(&statement, &[&session, &turn, &step, body]).await?;
        Ok(n == 1)
    }

    /// Records several steps of `turn` in `session` in one statement (a
    /// turn's steps kept back until one must be on record); each one
    /// recorded before is left as it was. How many were new.
    pub async fn record_steps(
        &self,
        session: &str,
        turn: &str,
        steps: &[TurnStep],
    ) -> Result<u64, StoreError> {
        let numbers: Vec<i32> = steps.iter().map(|s| s.step).collect();
        let bodies: Vec<&Value> = steps.iter().map(|s| &s.body).collect();
        let client = self.pool.get().await?;
        let statement = client
            .prepare_cached(
                "INSERT INTO turn_steps (session, turn, step, body)
                 SELECT $1, $2, step, body FROM unnest($3::int[], $4::jsonb[]) AS s(step, body)
                 ON CONFLICT (session, turn, step) DO NOTHING",
            )
            .await?;
        Ok(client.execute(&statement, &[&session, &turn, &numbers, &bodies]).await?)
    }

    /// The recorded steps of `turn` in `session`, in order, and whether it finished.
    pub async fn load_steps(
        &self,
        session: &str,
        turn: &str,
    ) -> Result<(Vec<TurnStep>, bool), StoreError> {
        let client = self.pool.get().await?;
        // One round trip: a row per step (none when there are none), each
        // saying whether the turn finished.
        let statement = client
            .prepare_cached(
                "SELECT s.step, s.body, f.finished
                 FROM (SELECT EXISTS (SELECT 1 FROM turns_finished
                                      WHERE session = $1 AND turn = $2) AS finished) f
                 LEFT JOIN turn_steps s ON s.session = $1 AND s.turn = $2
                 ORDER BY s.step",
            )
            .await?;
        let rows = client.query(&statement, &[&session, &turn]).await?;
        let finished = rows.first().is_some_and(|r| r.get::<_, bool>(2));
        let steps = rows
            .into_iter()
            .filter_map(|r| Some(TurnStep { step: r.get::<_, Option<i32>>(0)?, body: r.get(1) }))
            .collect();
        Ok((steps, finished))
    }

    /// Marks `turn` finished (its answer is on its way): never resumed again.
    pub async fn finish_turn(&self, session: &str, turn: &str) -> Result<(), StoreError> {
        let client = self.pool.get().await?;
        let statement = client
            .prepare_cached(
                "INSERT INTO turns_finished (session, turn) VALUES ($1, $2) ON CONFLICT DO NOTHING",
            )
            .await?;
        client.execute(&statement, &[&session, &turn]).await?;
        Ok(())
    }

    /// Turns that began (step 0 recorded) and did not finish: (session,
    /// turn, step 0's body), oldest first.
    pub async fn unfinished_turns(&self) -> Result<Vec<(String, String, Value)>, StoreError> {
        let client = self.pool.get().await?;
        let rows = client
            .query(
                "SELECT s.session, s.turn, s.body FROM turn_steps s
                 WHERE s.step = 0
                   AND NOT EXISTS (SELECT 1 FROM turns_finished f
                                   WHERE f.session = s.session AND f.turn = s.turn)
                 ORDER BY s.recorded_at",
                &[],
            )
            .await?;
        Ok(rows.into_iter().map(|r| (r.get(0), r.get(1), r.get(2))).collect())
    }
}
