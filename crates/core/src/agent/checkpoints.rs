//! The agent's side of checkpoints (see [`crate::checkpoint`]): a snapshot
//! before the first call of a request that may change files, and `/rewind`.

use std::sync::Arc;

use ferroclaw_protocol::AgentEvent;
use ferroclaw_tools::Tool;

use super::{Agent, EventSink, emit};
use crate::checkpoint::{self, CheckpointError, Checkpoints, Listed, Restore, Rewound, Target};
use crate::clock;
use crate::permission::SELF_STATE_TOOLS;
use crate::session::{CheckpointKind, Entry, RESUME_TAIL_BYTES};

/// A call as checked before it runs: its tool and input, or why it may not.
type Checked = Result<(Arc<dyn Tool>, serde_json::Value), String>;

/// A request's checkpoint, not taken yet.
#[derive(Debug)]
pub(super) struct Due {
    /// The request's first line, what the checkpoint is listed as.
    label: String,
    /// Messages in the conversation before the request (the history its
    /// conversation rewind goes back to).
    start: usize,
}

/// True when running `tool` may change the workspace.
fn changes_files(tool: &Arc<dyn Tool>) -> bool {
    !tool.read_only() && !SELF_STATE_TOOLS.contains(&tool.name())
}

impl Agent {
    /// Turns checkpoints on (`Some`) or off for the requests to come.
    pub fn set_checkpoints(&mut self, checkpoints: Option<Checkpoints>) {
        self.checkpoints = checkpoints;
    }

    /// True when requests are checkpointed.
    pub fn has_checkpoints(&self) -> bool {
        self.checkpoints.is_some()
    }

    /// Arms the checkpoint of the request about to start (before its
    /// message is recorded): it is taken only if a call of the request may
    /// change files, just before that call runs (see
    /// [`checkpoint_before_change`](Self::checkpoint_before_change)), so a
    /// request that only talks or reads never runs git.
    pub(super) fn checkpoint_due(&mut self, request: &str) {
        self.checkpoint_due = self.checkpoints.as_ref().map(|_| Due {
            label: request.lines().next().unwrap_or_default().chars().take(200).collect(),
            start: self.messages.len(),
        });
    }

    /// The conversation was replaced (compaction): a rewind of the request's
    /// checkpoint goes back to the new history, the old one being gone.
    pub(super) fn checkpoint_history_replaced(&mut self) {
        if let Some(due) = &mut self.checkpoint_due {
            due.start = self.messages.len();
        }
    }

    /// Snapshots the workspace, once per request, just before the first of
    /// `checked` calls allowed to run that may change files (a tool that is
    /// not read-only, other than those changing only the agent's own state),
    /// and records the checkpoint in the session file. A failure is reported
    /// once and turns checkpoints off for the session; the request goes on.
    pub(super) async fn checkpoint_before_change(
        &mut self,
        checked: &[Checked],
        events: &EventSink,
    ) {
        if self.checkpoint_due.is_none() || !checked.iter().flatten().any(|(t, _)| changes_files(t))
        {
            return;
        }
        let (Some(due), Some(mut checkpoints)) =
            (self.checkpoint_due.take(), self.checkpoints.take())
        else {
            return;
        };
        let taking = due.label.clone();
        let done = tokio::task::spawn_blocking(move || {
            let taken = checkpoints.take(&taking);
            (checkpoints, taken)
        })
        .await;
        let (checkpoints, taken) = match done {
            Ok(done) => done,
            Err(e) => {
                tracing::error!("checkpoint task failed: {e}");
                return;
            }
        };
        match taken {
            Ok(taken) => {
                if !taken.skipped.is_empty() {
                    tracing::info!("checkpoint left out: {}", taken.skipped.join("; "));
                }
                self.log(Entry::Checkpoint {
                    ts: clock::unix_seconds(),
                    id: checkpoint::new_id(),
                    commit: taken.commit,
                    label: due.label,
                    kind: CheckpointKind::Request,
                    skipped: taken.skipped,
                    back: self.messages.len().saturating_sub(due.start),
                });
                self.checkpoints = Some(checkpoints);
            }
            Err(e) => emit(
                events,
                AgentEvent::Error {
                    message: format!("checkpoints are off for this session: {e}"),
                    fatal: false,
                },
            ),
        }
    }

    /// This session's checkpoints, oldest first, with the files each
    /// request changed.
    pub async fn checkpoints(&self) -> Result<Vec<Listed>, CheckpointError> {
        let Some(checkpoints) = &self.checkpoints else {
            return Err(CheckpointError::Rewind(
                "checkpoints are off for this session ([checkpoints] enabled = false, or git is missing)".into(),
            ));
        };
        checkpoint::rewind::list(checkpoints, &self.session).await
    }

    /// Rewinds to a checkpoint: the code, the conversation, or both (see
    /// [`checkpoint::rewind`]); the conversation is reloaded from the file.
    pub async fn rewind(
        &mut self,
        target: Target,
        what: Restore,
    ) -> Result<Rewound, CheckpointError> {
        let Some(checkpoints) = &mut self.checkpoints else {
            return Err(CheckpointError::Rewind(
                "checkpoints are off for this session ([checkpoints] enabled = false, or git is missing)".into(),
            ));
        };
        let rewound =
            checkpoint::rewind::rewind(checkpoints, &mut self.session, target, what).await?;
        if rewound.restored != Restore::Code {
            self.messages = std::sync::Arc::new(self.session.conversation(RESUME_TAIL_BYTES)?);
            if let Some(learner) = &mut self.remembering.learner {
                learner.restart_at(self.messages.len());
            }
        }
        Ok(rewound)
    }
}
