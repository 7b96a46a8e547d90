//! Listing a session's checkpoints and rewinding to one: the REPL's
//! `/rewind` and `ferroclaw rewind` both come here. A rewind first takes a
//! checkpoint of the state it leaves (kind `rewind`), so undoing it is a
//! rewind to that checkpoint; then it restores the code (only the files
//! ferroclaw changed since the checkpoint, see [`super::changes`]; the
//! user's own edits stay), appends an [`Entry::Rewind`] for the
//! conversation, and makes the file durable.

use std::path::Path;

use super::{CheckpointError, Checkpoints, ShadowRepo};
use crate::clock;
use crate::session::{CheckpointKind, Entry, SessionLog, for_each_entry};

/// A checkpoint as listed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    /// 1-based, in the order taken: what `/rewind N` names.
    pub number: usize,
    pub id: String,
    pub ts: u64,
    /// The request it comes before, or which rewind.
    pub label: String,
    pub kind: CheckpointKind,
    pub commit: String,
    /// Files changed from this checkpoint to the next (to the workspace as it
    /// is now, for the last), as `M path`, `A path`, `D path`.
    pub changed: Vec<String>,
    /// Files the snapshot left out, with why.
    pub skipped: Vec<String>,
    /// False when the store no longer has its snapshot (pruned): its
    /// conversation can still be rewound, its code not.
    pub kept: bool,
}

/// What a rewind restores.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Restore {
    Code,
    Conversation,
    Both,
}

impl Restore {
    fn code(self) -> bool {
        matches!(self, Restore::Code | Restore::Both)
    }
    fn conversation(self) -> bool {
        matches!(self, Restore::Conversation | Restore::Both)
    }
}

/// Which checkpoint to rewind to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// The checkpoint with this number (see [`Listed::number`]).
    Number(usize),
    /// Back to before the last rewind, restoring what it restored.
    Undo,
}

/// What a rewind did.
#[derive(Debug, Clone)]
pub struct Rewound {
    /// The checkpoint rewound to.
    pub to: Listed,
    /// What was restored.
    pub restored: Restore,
    /// Files the code restore changed (`M path`, `A path`, `D path`).
    pub files: Vec<String>,
    /// Files ferroclaw changed that the restore left alone, each with why
    /// (changed since by someone else).
    pub skipped: Vec<String>,
    /// The number of the checkpoint taken just before, which undoes it.
    pub undo_number: usize,
}

/// The checkpoint and rewind entries of a session file, in order.
struct Marks {
    checkpoints: Vec<Listed>,
    /// The last rewind: the checkpoint it went to, and what it restored.
    last_rewind: Option<(String, Restore)>,
    /// The number of the last `rewind` checkpoint before the last rewind.
    undo: Option<usize>,
    /// Each [`Entry::Changed`]'s commit, with the number of checkpoints
    /// before it (a rewind to #N undoes those with N or more).
    changes: Vec<(usize, String)>,
    /// The numbers of the checkpoints after which changes are recorded.
    recording: Vec<usize>,
}

fn read_marks(path: &Path) -> Result<Marks, CheckpointError> {
    let mut marks = Marks {
        checkpoints: Vec::new(),
        last_rewind: None,
        undo: None,
        changes: Vec::new(),
        recording: Vec::new(),
    };
    let mut last_before_rewind = None;
    for_each_entry(path, |entry| match entry {
        Entry::Checkpoint { ts, id, commit, label, kind, skipped, records_changes, .. } => {
            let number = marks.checkpoints.len() + 1;
            if records_changes {
                marks.recording.push(number);
            }
            if kind == CheckpointKind::Rewind {
                last_before_rewind = Some(number);
            }
            marks.checkpoints.push(Listed {
                number,
                id,
                ts,
                label,
                kind,
                commit,
                changed: Vec::new(),
                skipped,
                kept: false,
            });
        }
        Entry::Rewind { to, code, conversation, .. } => {
            let restored = match (code, conversation) {
                (true, false) => Restore::Code,
                (false, true) => Restore::Conversation,
                _ => Restore::Both,
            };
            marks.last_rewind = Some((to, restored));
            marks.undo = last_before_rewind;
        }
        Entry::Changed { commit, .. } => marks.changes.push((marks.checkpoints.len(), commit)),
        _ => {}
    })?;
    Ok(marks)
}

/// Lists a session's checkpoints with the files each request changed
/// (blocking: snapshots the workspace to compare the last with now; with
/// none, runs nothing).
pub fn list_blocking(
    repo: &ShadowRepo,
    session_path: &Path,
    session_id: &str,
    limits: super::Limits,
) -> Result<Vec<Listed>, CheckpointError> {
    let mut listed = read_marks(session_path)?.checkpoints;
    if listed.is_empty() {
        return Ok(listed);
    }
    repo.prepare()?;
    let kept = repo.kept(session_id)?;
    let mut trees = Vec::with_capacity(listed.len() + 1);
    for c in &mut listed {
        c.kept = kept.contains(&c.commit);
        trees.push(if c.kept { repo.tree_of(&c.commit).ok() } else { None });
    }
    trees.push(repo.snapshot(limits).ok().map(|s| s.tree));
    for (i, c) in listed.iter_mut().enumerate() {
        if let (Some(Some(from)), Some(Some(to))) = (trees.get(i), trees.get(i + 1)) {
            c.changed = repo.changed(from, to)?;
        }
    }
    Ok(listed)
}

/// Lists the checkpoints of the session `log` writes.
pub async fn list(
    checkpoints: &Checkpoints,
    log: &SessionLog,
) -> Result<Vec<Listed>, CheckpointError> {
    let repo = checkpoints.repo.clone();
    let path = log.path().to_path_buf();
    let id = log.meta().id.clone();
    let limits = checkpoints.settings.limits();
    blocking(move || list_blocking(&repo, &path, &id, limits)).await
}

/// Rewinds the session `log` writes to `target`, restoring `what`. The
/// conversation part is an entry in the file: whoever holds the messages
/// reloads them (see [`SessionLog::conversation`]).
pub async fn rewind(
    checkpoints: &mut Checkpoints,
    log: &mut SessionLog,
    target: Target,
    what: Restore,
) -> Result<Rewound, CheckpointError> {
    let path = log.path().to_path_buf();
    let marks = blocking(move || read_marks(&path)).await?;
    let (number, what) = match target {
        Target::Number(n) => (n, what),
        Target::Undo => match (marks.undo, &marks.last_rewind) {
            (Some(n), Some((_, restored))) => (n, *restored),
            _ => {
                return Err(CheckpointError::Rewind(
                    "nothing to undo: this session has no rewind".into(),
                ));
            }
        },
    };
    let count = marks.checkpoints.len();
    let Some(to) = number.checked_sub(1).and_then(|i| marks.checkpoints.get(i)).cloned() else {
        return Err(CheckpointError::Rewind(if count == 0 {
            "this session has no checkpoints yet (one is taken before each request that may change files)".into()
        } else {
            format!(
                "no checkpoint #{number}: this session has #1 to #{count} (list them with /rewind or `ferroclaw rewind --list`)"
            )
        }));
    };
    if !checkpoints.prepared {
        let mut preparing = checkpoints.clone();
        *checkpoints = blocking(move || preparing.prepare().map(|()| preparing)).await?;
    }
    let repo = checkpoints.repo.clone();
    let session_id = log.meta().id.clone();
    let kept = {
        let repo = repo.clone();
        blocking(move || repo.kept(&session_id)).await?
    };
    if what.code() && !kept.contains(&to.commit) {
        return Err(CheckpointError::Rewind(format!(
            "checkpoint #{number}'s files were pruned from the store; rewind its conversation only (--conversation)"
        )));
    }
    // The state left behind, so that this rewind can be undone.
    let label = format!("before rewinding to #{number}");
    let mut taking = checkpoints.clone();
    let taking_label = label.clone();
    let (taking, taken) = blocking(move || {
        let taken = taking.take(&taking_label);
        Ok((taking, taken))
    })
    .await?;
    *checkpoints = taking;
    let taken = taken?;
    let undo_id = super::new_id();
    log.append(&Entry::Checkpoint {
        ts: clock::unix_seconds(),
        id: undo_id,
        commit: taken.commit.clone(),
        label,
        kind: CheckpointKind::Rewind,
        skipped: taken.skipped,
        back: 0,
        records_changes: true,
    })?;
    let (mut files, mut skipped) = (Vec::new(), Vec::new());
    if what.code() {
        let (commit, now) = (to.commit.clone(), taken.commit.clone());
        let changes: Vec<String> = marks
            .changes
            .iter()
            .filter(|(after, _)| *after >= number)
            .map(|(_, c)| c.clone())
            .collect();
        let whole = !marks.recording.contains(&number);
        let mut recording = checkpoints.clone();
        let (undone, change) = blocking(move || {
            let current = repo.tree_of(&now)?;
            if whole {
                // A session from before changes were recorded: the whole
                // workspace goes back.
                let target = repo.tree_of(&commit)?;
                let files = repo.changed(&current, &target)?;
                repo.restore(&target)?;
                return Ok((super::changes::Undone { files, skipped: Vec::new() }, None));
            }
            let undone = super::changes::undo(&repo, &changes, &current)?;
            let after = recording.snapshot_tree(&[])?;
            let change = match after == current {
                true => None,
                false => Some(recording.record_change(&current, &after)?),
            };
            Ok((undone, change))
        })
        .await?;
        if let Some(commit) = change {
            log.append(&Entry::Changed { ts: clock::unix_seconds(), commit })?;
        }
        (files, skipped) = (undone.files, undone.skipped);
        checkpoints.forget_last();
    }
    log.append(&Entry::Rewind {
        ts: clock::unix_seconds(),
        to: to.id.clone(),
        code: what.code(),
        conversation: what.conversation(),
    })?;
    log.commit().await?;
    Ok(Rewound { to, restored: what, files, skipped, undo_number: count + 1 })
}

async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, CheckpointError> + Send + 'static,
) -> Result<T, CheckpointError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| CheckpointError::Rewind(format!("the checkpoint task failed: {e}")))?
}
