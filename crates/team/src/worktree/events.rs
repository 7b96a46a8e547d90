//! Worktree lifecycle events: each one is appended as a JSON line to
//! `.agent/worktrees/events.jsonl` (learn-claude-code's format: `event`,
//! `ts`, `task`, `worktree`, `error`) and published on a small in-process bus
//! ([`subscribe`]) that the REPL and the gateway listen to.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use serde::{Deserialize, Serialize};
use tokio::sync::broadcast;

use super::error::WorktreeError;
use ferroclaw_tools::own_file::{self, MAX_STATE_FILE_BYTES};

/// Events a slow subscriber may fall behind by before it misses some (it is
/// told how many it missed; the file has them all).
const BUS_CAPACITY: usize = 256;

/// One lifecycle event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorktreeEvent {
    /// `worktree.create.before|after|failed`, `worktree.remove.before|after|failed`,
    /// `worktree.keep`, `task.completed`.
    pub event: String,
    /// When, RFC 3339 UTC.
    pub ts: String,
    /// The task bound to the worktree, if any.
    #[serde(default)]
    pub task: Option<u64>,
    /// The worktree's name.
    pub worktree: String,
    /// Why a `*.failed` event failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The project whose worktree it is (bus only, not written: the file
    /// lives in that project).
    #[serde(skip)]
    pub project: PathBuf,
}

impl WorktreeEvent {
    /// One line for a human: `12:30:00 worktree.create.after auth (task #3)`.
    pub fn line(&self) -> String {
        let time = self.ts.get(11..19).unwrap_or(&self.ts);
        let mut line = format!("{time} {} {}", self.event, self.worktree);
        if let Some(task) = self.task {
            line.push_str(&format!(" (task #{task})"));
        }
        if let Some(error) = &self.error {
            line.push_str(&format!(": {error}"));
        }
        line
    }
}

fn bus() -> &'static broadcast::Sender<WorktreeEvent> {
    static BUS: OnceLock<broadcast::Sender<WorktreeEvent>> = OnceLock::new();
    BUS.get_or_init(|| broadcast::channel(BUS_CAPACITY).0)
}

/// Every worktree event of this process from now on, whichever project.
pub fn subscribe() -> broadcast::Receiver<WorktreeEvent> {
    bus().subscribe()
}

/// Appends `event` to `file` (one `write` of one line on an append-only
/// file, so lines of concurrent writers never mix) and publishes it.
pub(crate) fn record(file: &Path, event: WorktreeEvent) -> Result<(), WorktreeError> {
    let mut line = serde_json::to_string(&event).map_err(|e| WorktreeError::Unreadable {
        path: file.to_path_buf(),
        problem: format!("cannot encode an event: {e}"),
    })?;
    line.push('\n');
    let context = || format!("cannot append to {}", file.display());
    let mut out =
        crate::confined::open_append(file).map_err(|e| WorktreeError::io(context(), e))?;
    out.write_all(line.as_bytes()).map_err(|e| WorktreeError::io(context(), e))?;
    // No receiver is fine: nobody listens in a one-shot run.
    let _ = bus().send(event);
    Ok(())
}

/// The last `limit` events of `file`, oldest first; a torn or foreign line
/// is skipped.
pub(crate) fn recent(file: &Path, limit: usize) -> Result<Vec<WorktreeEvent>, WorktreeError> {
    let text = match own_file::read_text(file, MAX_STATE_FILE_BYTES) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(WorktreeError::io(format!("cannot read {}", file.display()), e)),
    };
    let events: Vec<WorktreeEvent> =
        text.lines().filter_map(|l| serde_json::from_str(l).ok()).collect();
    let skip = events.len().saturating_sub(limit);
    Ok(events.into_iter().skip(skip).collect())
}
