//! The agent's side of checkpoints (see [`crate::checkpoint`]): a snapshot
//! before each request that may change files, and `/rewind`.

use ferroclaw_protocol::AgentEvent;

use super::{Agent, EventSink, emit};
use crate::checkpoint::{self, CheckpointError, Checkpoints, Listed, Restore, Rewound, Target};
use crate::clock;
use crate::permission::PermissionMode;
use crate::session::{CheckpointKind, Entry, RESUME_TAIL_BYTES};

impl Agent {
    /// Turns checkpoints on (`Some`) or off for the requests to come.
    pub fn set_checkpoints(&mut self, checkpoints: Option<Checkpoints>) {
        self.checkpoints = checkpoints;
    }

    /// True when requests are checkpointed.
    pub fn has_checkpoints(&self) -> bool {
        self.checkpoints.is_some()
    }

    /// True when a request could change files: some tool offered writes
    /// and plan mode is off.
    fn may_change_files(&self) -> bool {
        self.permissions.mode() != PermissionMode::Plan
            && self.tools.names().iter().any(|n| self.tools.get(n).is_some_and(|t| !t.read_only()))
    }

    /// Snapshots the workspace before a request that may change files and
    /// records the checkpoint in the session file, just before the request.
    /// A failure is reported once and turns checkpoints off for the session;
    /// the request goes on.
    pub(super) async fn checkpoint_before_request(&mut self, request: &str, events: &EventSink) {
        if self.checkpoints.is_none() || !self.may_change_files() {
            return;
        }
        let Some(mut checkpoints) = self.checkpoints.take() else { return };
        let label: String = request.lines().next().unwrap_or_default().chars().take(200).collect();
        let taking = label.clone();
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
                    label,
                    kind: CheckpointKind::Request,
                    skipped: taken.skipped,
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
