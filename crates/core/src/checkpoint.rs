//! Checkpoints: before each request that may change files, the workspace is
//! snapshotted into a shadow git store under `$FERROCLAW_HOME/checkpoints/`
//! (see [`shadow`]; never the user's repository), so edits made by any tool,
//! `bash` included, can be rewound. Each snapshot is an
//! [`Entry::Checkpoint`](crate::session::Entry::Checkpoint) in the session
//! file, just before the request's message; a rewind is an
//! [`Entry::Rewind`](crate::session::Entry::Rewind) after it (the file stays
//! append-only: a rewound conversation is the history as it was at the
//! checkpoint, see `session::lines`). Listing and restoring are in [`rewind`];
//! a rewind restores only what ferroclaw changed, recorded per batch of
//! tool calls in [`changes`].
//!
//! ```no_run
//! # fn main() -> Result<(), ferroclaw_core::checkpoint::CheckpointError> {
//! use ferroclaw_core::checkpoint::{Settings, ShadowRepo};
//! let repo = ShadowRepo::open("/home/me/.ferroclaw".as_ref(), "/work/proj".as_ref(), "s1")?;
//! let snap = repo.snapshot(Settings::default().limits())?;
//! let commit = repo.commit("s1", &snap.tree, "before: fix the bug")?;
//! # Ok(()) }
//! ```

use std::path::{Path, PathBuf};

use serde::Deserialize;

pub mod changes;
pub mod rewind;
pub mod shadow;

pub use rewind::{Listed, Restore, Rewound, Target};
pub use shadow::{Limits, ShadowRepo, Snapshot};

/// Checkpoints kept per session by default (newest first).
pub const DEFAULT_KEEP: usize = 100;
/// Days a checkpoint is kept by default.
pub const DEFAULT_MAX_AGE_DAYS: u64 = 30;
/// Files larger than this are not captured by default (build outputs,
/// datasets and media rarely belong in an undo history).
pub const DEFAULT_MAX_FILE_BYTES: u64 = 10 * 1024 * 1024;
/// More new or changed files than this in one snapshot and it is skipped
/// (a workspace that is really a home folder or an unignored `node_modules`).
pub const DEFAULT_MAX_FILES: usize = 50_000;

/// `[checkpoints]` in config.toml.
#[derive(Debug, Clone, Copy, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CheckpointsSection {
    /// Snapshot the workspace before each request (default true).
    pub enabled: Option<bool>,
    /// Checkpoints kept per session (default 100).
    pub keep: Option<usize>,
    /// Days checkpoints are kept (default 30).
    pub max_age_days: Option<u64>,
    /// Files larger than this many bytes are skipped (default 10 MiB).
    pub max_file_bytes: Option<u64>,
    /// Snapshots with more new or changed files than this are skipped (default 50,000).
    pub max_files: Option<usize>,
}

/// The settings in effect, defaults filled in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Settings {
    pub enabled: bool,
    pub keep: usize,
    pub max_age_days: u64,
    pub max_file_bytes: u64,
    pub max_files: usize,
}

impl Default for Settings {
    fn default() -> Self {
        Settings::from_section(None)
    }
}

impl Settings {
    /// The section's values over the defaults.
    pub fn from_section(section: Option<&CheckpointsSection>) -> Settings {
        let s = section.copied().unwrap_or_default();
        Settings {
            enabled: s.enabled.unwrap_or(true),
            keep: s.keep.unwrap_or(DEFAULT_KEEP).max(1),
            max_age_days: s.max_age_days.unwrap_or(DEFAULT_MAX_AGE_DAYS),
            max_file_bytes: s.max_file_bytes.unwrap_or(DEFAULT_MAX_FILE_BYTES),
            max_files: s.max_files.unwrap_or(DEFAULT_MAX_FILES),
        }
    }

    /// What one snapshot takes in.
    pub fn limits(&self) -> Limits {
        Limits { max_file_bytes: self.max_file_bytes, max_files: self.max_files }
    }
}

/// Problems taking or restoring checkpoints.
#[derive(Debug, thiserror::Error)]
pub enum CheckpointError {
    #[error("checkpoints need git, which could not be started: {source}")]
    Spawn {
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("git {args} failed in the checkpoint store: {stderr}")]
    Git { args: String, stderr: String },
    #[error(
        "{count} new or changed files (more than max_files = {max} under [checkpoints]); no checkpoint taken"
    )]
    TooManyFiles { count: usize, max: usize },
    #[error("{0}")]
    Session(#[from] crate::session::SessionError),
    #[error("{0}")]
    Rewind(String),
}

/// One session's checkpointing, as the agent loop uses it.
#[derive(Debug, Clone)]
pub struct Checkpoints {
    repo: ShadowRepo,
    settings: Settings,
    session: String,
    /// The tree and commit of the last checkpoint taken here (a request
    /// that changed nothing reuses its commit).
    last: Option<(String, String)>,
    pruned: bool,
    /// The store exists and its settings are written (see [`ShadowRepo::prepare`]).
    prepared: bool,
}

/// A checkpoint just taken.
#[derive(Debug, Clone)]
pub struct Taken {
    pub commit: String,
    /// The snapshot's tree.
    pub tree: String,
    pub skipped: Vec<String>,
}

impl Checkpoints {
    /// Checkpointing of `workspace` for `session`, in `home`'s store, which
    /// is created now if need be.
    pub fn open(
        home: &Path,
        workspace: &Path,
        session: &str,
        settings: Settings,
    ) -> Result<Checkpoints, CheckpointError> {
        let mut checkpoints = Checkpoints::new(home, workspace, session, settings);
        checkpoints.repo.prepare()?;
        checkpoints.prepared = true;
        Ok(checkpoints)
    }

    /// [`open`](Self::open) without touching the disk: the store is created
    /// by the first checkpoint taken, so a session that changes no file
    /// never runs git (what an agent is opened with).
    pub fn new(home: &Path, workspace: &Path, session: &str, settings: Settings) -> Checkpoints {
        Checkpoints {
            repo: ShadowRepo::at(home, workspace, session),
            settings,
            session: session.to_string(),
            last: None,
            pruned: false,
            prepared: false,
        }
    }

    /// The shadow store.
    pub fn repo(&self) -> &ShadowRepo {
        &self.repo
    }

    /// Snapshots the workspace and keeps it as a commit (blocking: run it in
    /// `spawn_blocking`). Prunes old checkpoints the first time.
    pub fn take(&mut self, label: &str) -> Result<Taken, CheckpointError> {
        self.take_with(label, &[])
    }

    /// [`take`](Self::take), staging `force` (paths relative to the
    /// workspace) even when gitignored: the files ferroclaw's tools are
    /// about to change.
    pub fn take_with(&mut self, label: &str, force: &[PathBuf]) -> Result<Taken, CheckpointError> {
        self.prepare()?;
        let snap = self.repo.snapshot_with(self.settings.limits(), force)?;
        let commit = match &self.last {
            Some((tree, commit)) if *tree == snap.tree => commit.clone(),
            _ => {
                let commit = self.repo.commit(&self.session, &snap.tree, label)?;
                self.last = Some((snap.tree.clone(), commit.clone()));
                commit
            }
        };
        if !self.pruned {
            self.pruned = true;
            let max_age = self.settings.max_age_days.saturating_mul(86_400);
            if let Err(e) =
                self.repo.prune(self.settings.keep, max_age, crate::clock::unix_seconds())
            {
                tracing::warn!("pruning old checkpoints: {e}");
            }
        }
        Ok(Taken { commit, tree: snap.tree, skipped: snap.skipped })
    }

    /// The tree of the workspace now, `force` staged as in
    /// [`take_with`](Self::take_with); no checkpoint is made (blocking).
    pub fn snapshot_tree(&mut self, force: &[PathBuf]) -> Result<String, CheckpointError> {
        self.prepare()?;
        Ok(self.repo.snapshot_with(self.settings.limits(), force)?.tree)
    }

    /// Keeps the change from tree `before` to tree `after` (see
    /// [`changes`]); the commit an [`Entry::Changed`](crate::session::Entry::Changed) names.
    pub fn record_change(&self, before: &str, after: &str) -> Result<String, CheckpointError> {
        self.repo.commit_change(&self.session, before, after)
    }

    /// Creates the store on first use (blocking).
    pub fn prepare(&mut self) -> Result<(), CheckpointError> {
        if !self.prepared {
            self.repo.prepare()?;
            self.prepared = true;
        }
        Ok(())
    }

    /// The same checkpointing for another session of the workspace (`/new`, `/resume`).
    pub fn for_session(&self, session: &str) -> Checkpoints {
        Checkpoints {
            repo: self.repo.with_session(session),
            settings: self.settings,
            session: session.to_string(),
            last: None,
            pruned: self.pruned,
            prepared: self.prepared,
        }
    }

    /// Forgets the last tree (after a restore the workspace changed under it).
    pub fn forget_last(&mut self) {
        self.last = None;
    }
}

/// A new checkpoint id: 8 hex digits, unique within a session.
pub fn new_id() -> String {
    format!("{:08x}", fastrand::u32(..))
}

#[cfg(test)]
mod tests;
