//! The agent's side of checkpoints (see [`crate::checkpoint`]): a snapshot
//! before the first call of a request that may change files, the changes
//! each batch of calls made (what a rewind restores), and `/rewind`.

use std::path::PathBuf;
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

/// A batch of calls about to run, as the workspace was before it.
#[derive(Debug)]
pub(super) struct Before {
    tree: String,
    /// The files its `write`, `edit` and `multi_edit` calls name (relative
    /// to the workspace), staged even when gitignored.
    force: Vec<PathBuf>,
}

/// Tools whose `path` input names the one file they change.
const FILE_TOOLS: [&str; 3] = ["write", "edit", "multi_edit"];

/// True when running `tool` may change the workspace.
fn changes_files(tool: &Arc<dyn Tool>) -> bool {
    !tool.read_only() && !SELF_STATE_TOOLS.contains(&tool.name())
}

impl Agent {
    /// Turns checkpoints on (`Some`) or off for the requests to come.
    pub fn set_checkpoints(&mut self, checkpoints: Option<Checkpoints>) {
        self.checkpoints = checkpoints;
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

    /// Snapshots the workspace before a batch of `checked` calls of which
    /// one may change files (a tool that is not read-only, other than those
    /// changing only the agent's own state). The first such batch of a
    /// request makes the request's checkpoint, recorded in the session file.
    /// A failure is reported once and turns checkpoints off for the
    /// session; the request goes on. Give the result to
    /// [`checkpoint_after_change`](Self::checkpoint_after_change).
    pub(super) async fn checkpoint_before_change(
        &mut self,
        checked: &[Checked],
        events: &EventSink,
    ) -> Option<Before> {
        if !checked.iter().flatten().any(|(t, _)| changes_files(t)) {
            return None;
        }
        let mut checkpoints = self.checkpoints.take()?;
        let force = self.file_tool_paths(checked, checkpoints.repo().work_tree());
        let due = self.checkpoint_due.take();
        let label = due.as_ref().map(|d| d.label.clone());
        let staged = force.clone();
        let done = tokio::task::spawn_blocking(move || {
            let taken = match label {
                Some(label) => checkpoints.take_with(&label, &staged).map(Some),
                None => checkpoints.snapshot_tree(&staged).map(|tree| {
                    Some(checkpoint::Taken { commit: String::new(), tree, skipped: Vec::new() })
                }),
            };
            (checkpoints, taken)
        })
        .await;
        let (checkpoints, taken) = match done {
            Ok(done) => done,
            Err(e) => {
                tracing::error!("checkpoint task failed: {e}");
                return None;
            }
        };
        match taken {
            Ok(Some(taken)) => {
                if let Some(due) = due {
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
                        records_changes: true,
                    });
                }
                self.checkpoints = Some(checkpoints);
                Some(Before { tree: taken.tree, force })
            }
            Ok(None) => None,
            Err(e) => {
                emit(
                    events,
                    AgentEvent::Error {
                        message: format!("checkpoints are off for this session: {e}"),
                        fatal: false,
                    },
                );
                None
            }
        }
    }

    /// After a batch of calls: when the workspace differs from `before`,
    /// records the change in the session file (what a rewind restores).
    pub(super) async fn checkpoint_after_change(&mut self, before: Before) {
        let Some(mut checkpoints) = self.checkpoints.clone() else { return };
        let recorded = tokio::task::spawn_blocking(move || {
            let after = checkpoints.snapshot_tree(&before.force)?;
            match after == before.tree {
                true => Ok(None),
                false => checkpoints.record_change(&before.tree, &after).map(Some),
            }
        })
        .await;
        match recorded {
            Ok(Ok(Some(commit))) => {
                self.log(Entry::Changed { ts: clock::unix_seconds(), commit });
            }
            Ok(Ok(None)) => {}
            Ok(Err(e)) => tracing::warn!("recording the files a call changed: {e}"),
            Err(e) => tracing::error!("checkpoint task failed: {e}"),
        }
    }

    /// The files `checked`'s `write`, `edit` and `multi_edit` calls name,
    /// relative to the checkpointed `work_tree` (others are outside it).
    fn file_tool_paths(&self, checked: &[Checked], work_tree: &std::path::Path) -> Vec<PathBuf> {
        let sandbox = ferroclaw_tools::Sandbox::new(&self.workspace, &self.allowed_dirs);
        let root = std::fs::canonicalize(work_tree).unwrap_or_else(|_| work_tree.to_path_buf());
        checked
            .iter()
            .flatten()
            .filter(|(tool, _)| FILE_TOOLS.contains(&tool.name()))
            .filter_map(|(_, input)| sandbox.resolve(input["path"].as_str()?).ok())
            .filter_map(|path| path.strip_prefix(&root).ok().map(PathBuf::from))
            .collect()
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
            self.messages = Arc::new(self.session.conversation(RESUME_TAIL_BYTES)?);
            if let Some(learner) = &mut self.remembering.learner {
                learner.restart_at(self.messages.len());
            }
        }
        Ok(rewound)
    }
}
