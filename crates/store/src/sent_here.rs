//! Answers the worker that made them sends itself.
//!
//! An answer to a connection this process holds (a web chat's socket, an
//! API request waiting on it) would otherwise make a round trip through the
//! `outbound` table: stored with its message's finish, then taken by this
//! process's delivery loop in a transaction of its own. Instead the worker
//! says so before it finishes the message ([`PgStore::send_myself`]); the
//! finish then wakes no deliverer, and once it committed the worker sends the
//! answer at once ([`PgStore::sent_by_worker`] says whether it may). The row
//! is still stored with the finish, so an answer whose commit was never
//! confirmed (the database went away at that moment) is left to the delivery
//! loop, which sends it if it was stored: never lost, never sent twice.
//!
//! A row its worker sent is marked delivered in this process's next
//! transaction that finishes a message, or by the delivery loop's next take
//! ([`PgStore::take_outbound`] leaves it out of what it returns).
//! In order: an answer is sent by its worker only when no earlier answer of
//! its chat for this process waits in the table (checked in the finish's
//! transaction); else the delivery loop sends them all, oldest first.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

use crate::PgStore;

/// What the worker does with its answer once the finish returned
/// ([`PgStore::sent_by_worker`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendIt {
    /// It is stored and nothing of its chat waits before it: send it now
    /// (after whatever the delivery loop is sending).
    Now,
    /// Not known to be stored, or an earlier answer of its chat waits: the
    /// delivery loop sends it (wake it), if it was stored.
    ByTheLoop,
}

/// What became of an answer a worker said it would send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reserved {
    /// Its finish has not committed (yet, or not known to).
    Pending,
    /// Stored; `in_order`: nothing of its chat waited before it.
    Stored { in_order: bool },
    /// The delivery loop took it (so it is stored) and left it to the worker.
    TakenByLoop,
    /// Sent by its worker; not yet marked delivered in the table.
    Sent,
    /// Sent, and being marked delivered by a finish's transaction.
    Marking,
}

/// The answers this process's workers send themselves (one per [`PgStore`]
/// holder; clones share it).
#[derive(Debug, Default)]
pub(crate) struct SentHere {
    state: Mutex<HashMap<String, Reserved>>,
}

impl SentHere {
    fn state(&self) -> MutexGuard<'_, HashMap<String, Reserved>> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// True when a worker will send the answer keyed `key` itself.
    pub(crate) fn reserved(&self, key: &str) -> bool {
        self.state().contains_key(key)
    }

    /// Keys sent by their workers and not yet marked delivered, for one
    /// transaction to mark (each is marked by one: concurrent finishes do
    /// not wait on one another's rows); and every key sent and not known to
    /// be marked, which a check for waiting answers leaves out.
    pub(crate) fn to_mark(&self) -> (Vec<String>, Vec<String>) {
        let mut state = self.state();
        let mut mark = Vec::new();
        let mut sent = Vec::new();
        for (key, r) in state.iter_mut() {
            if *r == Reserved::Sent {
                *r = Reserved::Marking;
                mark.push(key.clone());
            }
            if *r == Reserved::Marking {
                sent.push(key.clone());
            }
        }
        (mark, sent)
    }

    /// The transaction that was to mark `keys` did not commit: another will.
    pub(crate) fn not_marked(&self, keys: &[String]) {
        let mut state = self.state();
        for key in keys {
            if let Some(r @ Reserved::Marking) = state.get_mut(key) {
                *r = Reserved::Sent;
            }
        }
    }

    /// The finish that stored `key` committed.
    pub(crate) fn stored(&self, key: &str, in_order: bool) {
        if let Some(r @ Reserved::Pending) = self.state().get_mut(key) {
            *r = Reserved::Stored { in_order };
        }
    }

    /// These sent keys are marked delivered in the table now.
    pub(crate) fn marked(&self, keys: &[String]) {
        let mut state = self.state();
        for key in keys {
            if state.get(key) == Some(&Reserved::Marking) {
                state.remove(key);
            }
        }
    }

    /// Of the answers the delivery loop just took (and marked delivered),
    /// keeps those nobody else sends: a worker's own answer is its worker's
    /// to send, or was sent by it already.
    pub(crate) fn for_the_loop<T>(&self, taken: Vec<T>, key: impl Fn(&T) -> &str) -> Vec<T> {
        let mut state = self.state();
        taken
            .into_iter()
            .filter(|answer| match state.get_mut(key(answer)) {
                None => true,
                Some(Reserved::Sent | Reserved::Marking) => {
                    state.remove(key(answer));
                    false
                }
                Some(r) => {
                    *r = Reserved::TakenByLoop;
                    false
                }
            })
            .collect()
    }
}

impl SentHere {
    fn reserve(&self, key: &str) {
        self.state().insert(key.to_string(), Reserved::Pending);
    }

    fn decide(&self, key: &str) -> SendIt {
        let mut state = self.state();
        match state.get(key).copied() {
            Some(Reserved::Stored { in_order: true }) => {
                state.insert(key.to_string(), Reserved::Sent);
                SendIt::Now
            }
            // Stored, and marked delivered by the loop's take, which left it here.
            Some(Reserved::TakenByLoop) => {
                state.remove(key);
                SendIt::Now
            }
            Some(Reserved::Sent | Reserved::Marking) => SendIt::ByTheLoop,
            // Behind an earlier answer, or not known to be stored: the loop
            // takes it (if it is there) with the ones before it.
            Some(Reserved::Stored { in_order: false } | Reserved::Pending) | None => {
                state.remove(key);
                SendIt::ByTheLoop
            }
        }
    }
}

impl PgStore {
    /// Says that this process's worker sends the answer keyed `key` itself
    /// once the finish that stores it commits (its origin is this process),
    /// before it calls [`complete_with_session`](PgStore::complete_with_session).
    /// Then ask [`sent_by_worker`](PgStore::sent_by_worker).
    pub fn send_myself(&self, key: &str) {
        self.sent_here.reserve(key);
    }

    /// Whether the worker sends the answer keyed `key` now (after the finish
    /// that stores it returned, whatever it returned), or leaves it to the
    /// delivery loop. [`SendIt::Now`] is said once per key.
    pub fn sent_by_worker(&self, key: &str) -> SendIt {
        self.sent_here.decide(key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stored_answer_is_sent_by_its_worker_and_left_out_of_the_loops_take_until_marked() {
        let here = SentHere::default();
        here.reserve("a");
        here.stored("a", true);
        assert_eq!(here.decide("a"), SendIt::Now);
        assert_eq!(here.decide("a"), SendIt::ByTheLoop, "said once");
        // Taken by the loop before it was marked: not sent again.
        assert_eq!(here.for_the_loop(vec!["a", "other"], |k| k), ["other"]);
        assert!(!here.reserved("a") && here.to_mark().0.is_empty());
        // Or marked by the next finish, one transaction per key.
        here.reserve("b");
        here.stored("b", true);
        assert_eq!(here.decide("b"), SendIt::Now);
        let b = vec!["b".to_string()];
        assert_eq!(here.to_mark(), (b.clone(), b.clone()));
        assert_eq!(here.to_mark(), (vec![], b.clone()), "being marked; still left out of checks");
        here.not_marked(&b);
        assert_eq!(here.to_mark().0, b, "rolled back: marked by the next");
        here.marked(&b);
        assert!(!here.reserved("b"));
    }

    #[test]
    fn an_answer_the_loop_took_before_its_worker_heard_the_commit_is_sent_by_the_worker_once() {
        let here = SentHere::default();
        here.reserve("a");
        assert!(here.for_the_loop(vec!["a"], |k| k).is_empty(), "the worker's to send");
        // The commit's answer was lost, or came after: the take proved it stored.
        here.stored("a", false);
        assert_eq!(here.decide("a"), SendIt::Now);
        assert!(!here.reserved("a"));
    }

    #[test]
    fn an_answer_not_known_stored_or_behind_an_earlier_one_is_left_to_the_loop() {
        let here = SentHere::default();
        here.reserve("unconfirmed");
        assert_eq!(here.decide("unconfirmed"), SendIt::ByTheLoop);
        here.reserve("behind");
        here.stored("behind", false);
        assert_eq!(here.decide("behind"), SendIt::ByTheLoop);
        // Neither is reserved any more: the loop's take sends them.
        assert_eq!(here.for_the_loop(vec!["unconfirmed", "behind"], |k| k).len(), 2);
    }
}
