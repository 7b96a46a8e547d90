//! Writing the coordination files (task board, inboxes, team config,
//! worktree index and events) without ever following a link. They live in
//! the project's `.agent/`, which a cloned repository can ship and a
//! sandboxed command can write: a link there (`inbox/bob.jsonl ->
//! ~/.bashrc`, `tasks -> ~/.bashrc.d`) would otherwise have this process,
//! which runs unconfined, write text the model chose outside the project.
//! Every folder from the project down, and the file, is opened beneath the
//! project with [`Beneath`]; a link on the way is refused.

use std::fs::File;
use std::path::{Component, Path, PathBuf};

use ferroclaw_tools::{Beneath, ToolError};

/// The project holding the `.agent` folder on `path`'s way (the file's own
/// folder when there is none), opened, and `path` relative to it.
fn beneath(path: &Path) -> std::io::Result<(Beneath, PathBuf)> {
    let parts: Vec<Component> = path.components().collect();
    let cut = match parts.iter().rposition(|c| c.as_os_str() == ".agent") {
        Some(i) => i,
        None => parts.len().saturating_sub(1),
    };
    let root: PathBuf = parts[..cut].iter().collect();
    let rel: PathBuf = parts[cut..].iter().collect();
    let root = if root.as_os_str().is_empty() { PathBuf::from(".") } else { root };
    Ok((Beneath::open(&root).map_err(to_io)?, rel))
}

/// Replaces `path` with `bytes` atomically (temp file, fsync, rename),
/// creating its folders.
pub(crate) fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let (root, rel) = beneath(path)?;
    root.write_atomic(&rel, bytes).map(drop).map_err(to_io)
}

/// Writes `bytes` as `path` unless something (a link included) is there.
pub(crate) fn create_new(path: &Path, bytes: &[u8]) -> std::io::Result<bool> {
    let (root, rel) = beneath(path)?;
    root.create_new(&rel, bytes).map_err(to_io)
}

/// Opens `path` to append to, creating it and its folders.
pub(crate) fn open_append(path: &Path) -> std::io::Result<File> {
    let (root, rel) = beneath(path)?;
    root.open_append(&rel).map_err(to_io)
}

/// The error as I/O, keeping its kind (a missing file stays `NotFound`).
fn to_io(e: ToolError) -> std::io::Error {
    match e {
        ToolError::Io { context, source } => {
            std::io::Error::new(source.kind(), format!("{context}: {source}"))
        }
        other => std::io::Error::other(other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn a_link_in_the_projects_agent_folder_is_refused_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let project = dir.path().join("project");
        let outside = dir.path().join("outside");
        std::fs::create_dir_all(project.join(".agent/team/inbox")).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(outside.join("rc"), "mine\n").unwrap();
        std::os::unix::fs::symlink(outside.join("rc"), project.join(".agent/team/inbox/bob.jsonl"))
            .unwrap();
        std::os::unix::fs::symlink(&outside, project.join(".agent/tasks")).unwrap();

        let inbox = project.join(".agent/team/inbox/bob.jsonl");
        assert!(open_append(&inbox).is_err(), "a linked file");
        assert!(write_atomic(&project.join(".agent/tasks/task_1.json"), b"{}").is_err());
        assert!(create_new(&project.join(".agent/tasks/.gitignore"), b"*").is_err());
        assert_eq!(std::fs::read_to_string(outside.join("rc")).unwrap(), "mine\n");
        assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 1, "nothing made outside");

        let mut ok = open_append(&project.join(".agent/team/inbox/carol.jsonl")).unwrap();
        ok.write_all(b"{}\n").unwrap();
        write_atomic(&project.join(".agent/board/task_1.json"), b"{}").unwrap();
        assert!(project.join(".agent/board/task_1.json").is_file());
    }
}
