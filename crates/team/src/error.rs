//! Why a board operation was refused or failed.

use std::path::PathBuf;

/// A refused or failed board operation; the message says what to do.
#[derive(Debug, thiserror::Error)]
pub enum BoardError {
    /// No task has this id.
    #[error("there is no task #{id} on the board (task_list shows the board)")]
    UnknownTask { id: u64 },
    /// The task's file exists but cannot be read as a task.
    #[error("task file {} is unreadable: {problem}", path.display())]
    Unreadable { path: PathBuf, problem: String },
    /// The change would make tasks wait for each other in a circle.
    #[error(
        "refused: that would make a dependency cycle {} (a task cannot wait for itself)",
        chain(cycle)
    )]
    Cycle { cycle: Vec<u64> },
    /// The task cannot start while these tasks are open.
    #[error(
        "task #{id} cannot start: it is blocked by {} (complete those first, or remove the dependency)",
        list(blockers)
    )]
    Blocked { id: u64, blockers: Vec<u64> },
    /// An argument makes no sense (an empty subject).
    #[error("{0}")]
    Invalid(String),
    /// Reading or writing the board failed.
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
}

impl BoardError {
    /// An I/O error about `context` (a path or an operation).
    pub(crate) fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        Self::Io { context: context.into(), source }
    }
}

/// `#1 → #2 → #1`: who waits for whom.
fn chain(ids: &[u64]) -> String {
    ids.iter().map(|id| format!("#{id}")).collect::<Vec<_>>().join(" waits for ")
}

/// `#1, #2`.
pub(crate) fn list(ids: &[u64]) -> String {
    ids.iter().map(|id| format!("#{id}")).collect::<Vec<_>>().join(", ")
}

/// A refused or failed team operation; the message says what to do.
#[derive(Debug, thiserror::Error)]
pub enum TeamError {
    /// Nobody on the team has this name (never a new inbox).
    #[error("{name:?} is not on the team; members: {}", members.join(", "))]
    UnknownMember { name: String, members: Vec<String> },
    /// A teammate of this name exists already (no doubles).
    #[error("{name:?} is already on the team ({status}); pick another name or message it")]
    Exists { name: String, status: String },
    /// An argument makes no sense (a bad name, an empty message).
    #[error("{0}")]
    Invalid(String),
    /// The team is full.
    #[error("the team is full: {max} teammates at most ([team] max_teammates)")]
    Full { max: usize },
    /// No request has this id.
    #[error("there is no pending request {0:?}")]
    UnknownRequest(String),
    /// Reading or writing the team's files failed.
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl TeamError {
    /// An I/O error about `path`.
    pub(crate) fn io(path: &std::path::Path, source: std::io::Error) -> Self {
        Self::Io { path: path.to_path_buf(), source }
    }
}
