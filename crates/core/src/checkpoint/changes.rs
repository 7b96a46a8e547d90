//! What ferroclaw itself changed, so that a rewind touches nothing else.
//!
//! Around each batch of tool calls that may change files, the workspace is
//! snapshotted before and after (the files `write`, `edit` and `multi_edit`
//! name are staged even when gitignored); when the two differ, the pair is
//! kept as one commit (the after tree, its parent the before tree) and
//! recorded as an [`Entry::Changed`](crate::session::Entry::Changed). A
//! rewind's own restore is recorded the same way, so an undo is a rewind
//! too. Rewinding to a checkpoint then undoes the changes recorded after
//! it, file by file ([`undo`]): each file goes back to what it was before
//! the first of them, if it is still what the last of them left; a file
//! changed since (by the user, an editor, a formatter) is kept and named.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use super::{CheckpointError, ShadowRepo};

/// A file's entry in a tree: its mode and object id.
type TreeEntry = (String, String);

/// What [`undo`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Undone {
    /// Files written back or removed, as `M path`, `A path`, `D path`.
    pub files: Vec<String>,
    /// Files left as they are, each with why.
    pub skipped: Vec<String>,
}

impl ShadowRepo {
    /// Keeps the change from tree `before` to tree `after` as one commit
    /// (parent: `before`'s commit) under the session's refs; its id.
    pub fn commit_change(
        &self,
        session: &str,
        before: &str,
        after: &str,
    ) -> Result<String, CheckpointError> {
        let parent = self.run(&["commit-tree", before, "-m", "before a change"], None)?;
        let parent = String::from_utf8_lossy(&parent).trim().to_string();
        let commit = self.run(&["commit-tree", after, "-p", &parent, "-m", "a change"], None)?;
        let commit = String::from_utf8_lossy(&commit).trim().to_string();
        let name = format!("refs/checkpoints/{}/{commit}", super::shadow::ref_component(session));
        self.run(&["update-ref", &name, &commit], None)?;
        Ok(commit)
    }

    /// The trees before and after a change kept by [`commit_change`](Self::commit_change).
    fn change_trees(&self, commit: &str) -> Result<(String, String), CheckpointError> {
        Ok((self.tree_of(&format!("{commit}^"))?, self.tree_of(commit)?))
    }

    /// `path`'s entry in `tree`, `None` when absent.
    fn entry(&self, tree: &str, path: &str) -> Result<Option<TreeEntry>, CheckpointError> {
        let out = self.run(&["ls-tree", "-z", tree, "--", path], None)?;
        let line = String::from_utf8_lossy(&out);
        let Some((meta, _)) = line.split_once('\t') else { return Ok(None) };
        let mut fields = meta.split(' ');
        match (fields.next(), fields.next(), fields.next()) {
            (Some(mode), Some("blob"), Some(oid)) => Ok(Some((mode.into(), oid.into()))),
            _ => Ok(None),
        }
    }

    /// Makes `path` in the workspace hold `entry` (a file, executable or
    /// not, or a link), or removes it for `None`.
    fn write_back(&self, path: &str, entry: Option<&TreeEntry>) -> Result<(), CheckpointError> {
        let full = self.work_tree().join(path);
        let io = |source| CheckpointError::Io { path: full.clone(), source };
        let _ = std::fs::remove_file(&full);
        let Some((mode, oid)) = entry else { return Ok(()) };
        let bytes = self.run(&["cat-file", "blob", oid], None)?;
        if let Some(parent) = full.parent() {
            std::fs::create_dir_all(parent).map_err(io)?;
        }
        if mode == "120000" {
            let target = <std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(&bytes);
            return std::os::unix::fs::symlink(Path::new(target), &full).map_err(io);
        }
        std::fs::write(&full, &bytes).map_err(io)?;
        if mode == "100755" {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&full, std::fs::Permissions::from_mode(0o755)).map_err(io)?;
        }
        Ok(())
    }
}

/// Undoes `changes` (commits of [`ShadowRepo::commit_change`], oldest
/// first) in the workspace whose tree is `now`: every file they touched
/// goes back to its content before the first of them, unless it changed
/// since the last of them (then it is kept, and named in `skipped`).
/// Blocking.
pub fn undo(repo: &ShadowRepo, changes: &[String], now: &str) -> Result<Undone, CheckpointError> {
    let mut first_before = BTreeMap::new();
    let mut last_after = BTreeMap::new();
    for commit in changes {
        let (before, after) = repo.change_trees(commit)?;
        for line in repo.changed(&before, &after)? {
            let Some((_, path)) = line.split_once(' ') else { continue };
            first_before.entry(path.to_string()).or_insert_with(|| before.clone());
            last_after.insert(path.to_string(), after.clone());
        }
    }
    let mut undone = Undone::default();
    let paths: BTreeSet<&String> = first_before.keys().collect();
    for path in paths {
        let target = repo.entry(&first_before[path], path)?;
        let left = repo.entry(&last_after[path], path)?;
        let current = repo.entry(now, path)?;
        if current != left {
            undone.skipped.push(format!("{path} (changed since ferroclaw changed it; kept)"));
            continue;
        }
        if current == target {
            continue;
        }
        repo.write_back(path, target.as_ref())?;
        let mark = match (&current, &target) {
            (_, None) => "D",
            (None, Some(_)) => "A",
            _ => "M",
        };
        undone.files.push(format!("{mark} {path}"));
    }
    Ok(undone)
}
