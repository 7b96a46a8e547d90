//! What outlives a conversation: every answered request is indexed for
//! `session_search`, and a conversation past [`CONSOLIDATE_AFTER_MESSAGES`]
//! has its older half summarised into `HISTORY.md` and `MEMORY.md` in the
//! background (nanobot's consolidation), without holding up the user.

use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinHandle;

use super::{Agent, Report};
use crate::clock;
use crate::memory::{CONSOLIDATE_AFTER_MESSAGES, MemoryStore, consolidate, consolidation_split};
use crate::recall::Recall;

/// How long ending a session waits for consolidations still running.
const FINISH_WAIT: Duration = Duration::from_secs(60);

/// The agent's long-term memory hooks.
#[derive(Default)]
pub struct Remembering {
    /// The index of past requests (`None`: off).
    pub recall: Option<Arc<Recall>>,
    /// MEMORY.md and HISTORY.md (`None`: no consolidation).
    pub store: Option<MemoryStore>,
    /// Messages before this index were consolidated already.
    consolidated: usize,
    /// Background work (consolidations, skill reviews) to wait for at the end.
    pub(super) running: Vec<JoinHandle<()>>,
    /// Skill learning (`None`: off).
    pub(super) learner: Option<super::learn::Learner>,
}

impl Remembering {
    /// Recall and consolidation into `store`.
    pub fn new(recall: Option<Arc<Recall>>, store: Option<MemoryStore>) -> Self {
        Self { recall, store, consolidated: 0, running: Vec::new(), learner: None }
    }

    /// Learns skills from finished segments with `learner`.
    pub fn with_learner(mut self, learner: super::learn::Learner) -> Self {
        self.learner = Some(learner);
        self
    }

    /// The history was replaced (compaction): start counting afresh.
    pub(super) fn history_replaced(&mut self) {
        self.consolidated = 0;
        if let Some(learner) = &mut self.learner {
            learner.history_replaced();
        }
    }
}

impl Agent {
    /// After a request: index it, and consolidate older messages if the
    /// conversation grew past the threshold.
    pub(super) fn remember(&mut self, request: &str, report: &Report) {
        if !report.is_error()
            && let Some(recall) = &self.remembering.recall
            && let Err(e) = recall.index_turn(
                &self.session.meta().id,
                &self.workspace,
                request,
                &report.text,
                clock::unix_seconds(),
            )
        {
            tracing::warn!("cannot index the request for session_search: {e}");
        }
        let Some(store) = self.remembering.store.clone() else { return };
        let from = self.remembering.consolidated.min(self.messages.len());
        let Some(cut) = consolidation_split(&self.messages[from..], CONSOLIDATE_AFTER_MESSAGES)
        else {
            return;
        };
        let older = self.messages[from..from + cut].to_vec();
        self.remembering.consolidated = from + cut;
        let (provider, model) = (self.provider.clone(), self.model.clone());
        self.remembering.running.retain(|h| !h.is_finished());
        self.remembering.running.push(tokio::spawn(async move {
            match consolidate(provider, model, store, older).await {
                Ok(done) if done.memory_refused.is_some() => {
                    tracing::warn!(
                        "memory update refused: {}",
                        done.memory_refused.unwrap_or_default()
                    );
                }
                Ok(_) => tracing::info!("older messages consolidated into memory"),
                Err(e) => tracing::warn!("memory consolidation failed: {e}"),
            }
        }));
    }

    /// Runs the SessionEnd hooks and waits (a bounded time) for
    /// consolidations still running; call when the session ends so a
    /// one-shot run does not drop them.
    pub async fn finish(&mut self) {
        self.hook_session_end("other").await;
        self.learn(crate::learning::SegmentEnd::SessionEnd, None);
        for handle in self.remembering.running.drain(..) {
            let _ = tokio::time::timeout(FINISH_WAIT, handle).await;
        }
        if let Some(jobs) = &self.jobs {
            jobs.shutdown();
        }
    }
}
