//! Why a worktree operation was refused or failed.

use std::path::PathBuf;

use crate::error::BoardError;

/// A refused or failed worktree operation; the message says what to do.
#[derive(Debug, thiserror::Error)]
pub enum WorktreeError {
    /// The name is empty, too long, or has characters outside `[A-Za-z0-9._-]`.
    #[error(
        "invalid worktree name {name:?}: use 1 to {max} characters from A-Z a-z 0-9 . _ -",
        max = super::NAME_MAX
    )]
    InvalidName { name: String },
    /// The project folder is not inside a git repository.
    #[error("{} is not a git repository, so no worktree can isolate work there (run `git init` and commit first)", project.display())]
    NotARepo { project: PathBuf },
    /// The main checkout has uncommitted changes a new worktree would not have.
    #[error(
        "the main checkout has uncommitted changes ({}); a worktree from HEAD would start without them: commit or stash them first, or pass base_ref",
        files.join(", ")
    )]
    DirtyBase { files: Vec<String> },
    /// The base to branch from is not a commit.
    #[error("base_ref {base:?} is not a commit in this repository{hint}")]
    BadBase { base: String, hint: &'static str },
    /// A worktree of this name is active or kept.
    #[error("a worktree named {name:?} already exists ({status}, {}); choose another name or remove it first", path.display())]
    NameTaken { name: String, status: &'static str, path: PathBuf },
    /// The branch `wt/NAME` exists already (left by an earlier worktree).
    #[error(
        "branch {branch} already exists; delete it (`git branch -D {branch}`) or choose another name"
    )]
    BranchExists { branch: String },
    /// No worktree has this name (or it was removed).
    #[error("there is no worktree named {name:?}{known}")]
    Unknown { name: String, known: String },
    /// Removing would lose uncommitted work.
    #[error(
        "worktree {name:?} has uncommitted changes ({}); commit them, or remove with force: true to discard them",
        files.join(", ")
    )]
    Dirty { name: String, files: Vec<String> },
    /// A git command failed; its own words follow.
    #[error("`git {args}` failed: {stderr}")]
    Git { args: String, stderr: String },
    /// ferroclaw will not run git in this repository (a planted `commondir`, ...).
    #[error("{0}")]
    Refused(String),
    /// The task board refused (unknown task, blocked task).
    #[error(transparent)]
    Board(#[from] BoardError),
    /// The index file exists but cannot be read.
    #[error("worktree index {} is unreadable: {problem}", path.display())]
    Unreadable { path: PathBuf, problem: String },
    /// Reading or writing a file, or starting git, failed.
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
}

impl WorktreeError {
    /// An I/O error about `context` (a path or an operation).
    pub(crate) fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        Self::Io { context: context.into(), source }
    }
}

/// At most five file names, then how many more.
pub(crate) fn some_files(lines: &[String]) -> Vec<String> {
    let mut files: Vec<String> = lines.iter().take(5).cloned().collect();
    if lines.len() > 5 {
        files.push(format!("and {} more", lines.len() - 5));
    }
    files
}
