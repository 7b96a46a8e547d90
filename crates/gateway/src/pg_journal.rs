//! The turn journal in the database (several gateways, `[gateway] store`),
//! so a worker on any machine that takes over a message whose worker died
//! replays the steps that one recorded instead of asking the model again or
//! running its tools again.
//!
//! Fewer transactions per message: a step is written only when something
//! that cannot be taken back follows it. A turn's first step (what began
//! it) and a model answer that calls no tool are kept back and written with
//! the next step, if one comes: a model answer that calls tools is written
//! (with what was kept back) before the tools run, and each tool result
//! before the next model call. A turn whose model answered without tools
//! writes nothing: its answer is stored with its message's finish (the
//! queue's `complete` says a message was answered), so the only cost is a
//! second model call when the process dies in the moment between the
//! model's answer and that finish, before anything was sent.
//! `finish` writes nothing either: housekeeping deletes a turn's steps once
//! no waiting message names it ([`ferroclaw_store::PgStore::prune`]).
//! `unfinished` is empty: the inbound queue hands an unacknowledged message
//! to another worker anyway, and a starting gateway must not take up turns
//! live gateways are running.

use std::collections::{HashMap, HashSet};
use std::sync::{Mutex, MutexGuard, PoisonError};

use ferroclaw_core::journal::{JournalError, Step, TurnJournal, TurnRecord, Unfinished};
use ferroclaw_store::{PgStore, StoreError, TurnStep};

/// A turn: (session, turn id).
type TurnKey = (String, String);

/// The turn journal in `store`'s database.
pub struct PgJournal {
    store: PgStore,
    /// Steps kept back, by turn, in order: written with the next step that
    /// must be on record, or never.
    held: Mutex<HashMap<TurnKey, Vec<TurnStep>>>,
    /// Turns whose message is handed out for the first time: nothing to load.
    fresh: Mutex<HashSet<TurnKey>>,
}

impl PgJournal {
    /// The journal in `store`'s database.
    pub fn new(store: PgStore) -> PgJournal {
        PgJournal { store, held: Mutex::default(), fresh: Mutex::default() }
    }

    fn held(&self) -> MutexGuard<'_, HashMap<TurnKey, Vec<TurnStep>>> {
        self.held.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn fresh(&self) -> MutexGuard<'_, HashSet<TurnKey>> {
        self.fresh.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// True when what follows `step` cannot be taken back, so it must be on
/// record first: tools run after a model answer that calls them, and the
/// model is asked again after a tool result.
fn must_be_on_record(step: &Step) -> bool {
    match step {
        Step::Begin { .. } => false,
        Step::Model { message, .. } => message.tool_calls().next().is_some(),
        Step::Tool { .. } => true,
    }
}

#[async_trait::async_trait]
impl TurnJournal for PgJournal {
    async fn load(&self, session: &str, turn: &str) -> Result<TurnRecord, JournalError> {
        // `finished` is not read back: in the database, a message is
        // answered when its answer is stored with it (`complete`), and a
        // message handed out again was not, whatever the journal says (its
        // finish was stored and its answer was not: the database went away
        // in between). Its turn replays from the journal, model answers
        // included, and its answer is stored this time.
        let key = (session.to_string(), turn.to_string());
        if self.fresh().remove(&key) {
            return Ok(TurnRecord::default());
        }
        let (rows, _finished) = self.store.load_steps(session, turn).await.map_err(backend)?;
        let mut steps = Vec::with_capacity(rows.len());
        for (expected, row) in rows.into_iter().enumerate() {
            // A gap means a step was lost: what follows it cannot be replayed.
            if usize::try_from(row.step).ok() != Some(expected) {
                break;
            }
            match serde_json::from_value(row.body) {
                Ok(step) => steps.push(step),
                Err(e) => {
                    tracing::warn!("turn {turn} of {session}: step {expected} unreadable: {e}");
                    break;
                }
            }
        }
        Ok(TurnRecord { steps, finished: false })
    }

    async fn record(
        &self,
        session: &str,
        turn: &str,
        step: u32,
        body: &Step,
    ) -> Result<(), JournalError> {
        let number = i32::try_from(step).map_err(|e| backend_text(e.to_string()))?;
        let value = serde_json::to_value(body).map_err(|e| backend_text(e.to_string()))?;
        let key = (session.to_string(), turn.to_string());
        let steps = {
            let mut held = self.held();
            let steps = held.entry(key.clone()).or_default();
            steps.push(TurnStep { step: number, body: value });
            if !must_be_on_record(body) {
                return Ok(());
            }
            held.remove(&key).unwrap_or_default()
        };
        self.store.record_steps(session, turn, &steps).await.map_err(backend)?;
        Ok(())
    }

    async fn finish(&self, session: &str, turn: &str) -> Result<(), JournalError> {
        let key = (session.to_string(), turn.to_string());
        self.fresh().remove(&key);
        self.held().remove(&key);
        Ok(())
    }

    async fn unfinished(&self) -> Result<Vec<Unfinished>, JournalError> {
        Ok(Vec::new())
    }

    fn never_started(&self, session: &str, turn: &str) {
        self.fresh().insert((session.to_string(), turn.to_string()));
    }
}

fn backend(e: StoreError) -> JournalError {
    backend_text(e.to_string())
}

fn backend_text(e: String) -> JournalError {
    JournalError::Backend(e)
}

#[cfg(test)]
mod tests {
    use ferroclaw_protocol::{ContentBlock, Message, StopReason, ToolCall, Usage};
    use ferroclaw_store::PgOptions;
    use ferroclaw_testkit::PgCluster;

    use super::*;

    fn model(message: Message) -> Step {
        Step::Model {
            message,
            usage: Usage::default(),
            stop: StopReason::EndTurn,
            bad_arguments: Vec::new(),
        }
    }

    /// What must survive the process is on record before it matters: the
    /// model's call for a tool (and what began the turn) before the tool
    /// runs, the tool's result before the model is asked again. A model
    /// answer that ends the turn is never written (its message's finish
    /// stores it), and what was recorded still replays should the message
    /// come back (the queue, not the journal, says what was answered).
    #[tokio::test]
    async fn steps_are_on_record_before_a_tool_runs_and_a_final_answer_costs_no_write() {
        let Some(pg) = PgCluster::shared() else { return };
        let url = pg.database("journal_finish");
        let store = PgStore::connect(&url, PgOptions::default()).await.unwrap();
        let journal = PgJournal::new(store);
        let begin = Step::Begin {
            input: Message::user("hi"),
            origin: serde_json::Value::Null,
            session_len: 0,
        };
        let calls = model(Message {
            role: ferroclaw_protocol::Role::Assistant,
            content: vec![ContentBlock::ToolCall(ToolCall {
                id: "c1".into(),
                name: "bash".into(),
                input: serde_json::json!({"command": "ls"}),
            })],
        });
        let result = Step::Tool { result: ContentBlock::tool_result("c1", "a.txt", false) };
        let done = model(Message::assistant("one file"));
        journal.record("s", "t", 0, &begin).await.unwrap();
        assert!(journal.load("s", "t").await.unwrap().steps.is_empty(), "kept back");
        journal.record("s", "t", 1, &calls).await.unwrap();
        assert_eq!(journal.load("s", "t").await.unwrap().steps, [begin.clone(), calls.clone()]);
        journal.record("s", "t", 2, &result).await.unwrap();
        journal.record("s", "t", 3, &done).await.unwrap();
        journal.finish("s", "t").await.unwrap();
        let record = journal.load("s", "t").await.unwrap();
        assert_eq!(record.steps, [begin.clone(), calls, result], "the final answer is not written");
        assert!(!record.finished, "the queue, not the journal, says what was answered");

        // A turn the model answers at once writes nothing at all.
        journal.record("s", "t2", 0, &begin).await.unwrap();
        journal.record("s", "t2", 1, &done).await.unwrap();
        journal.finish("s", "t2").await.unwrap();
        assert!(journal.load("s", "t2").await.unwrap().steps.is_empty());
        assert!(journal.held().is_empty());
    }
}
