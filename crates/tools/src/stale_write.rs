//! No lost work: `write` refuses to replace a file that changed on disk
//! since the conversation last read or wrote it (the user saved it, a
//! formatter ran), and an existing file the conversation never read;
//! creating a new file needs no read. `edit` and `multi_edit` replace text
//! in the file as it is now, so they lose nothing: on a file changed since,
//! a replacement whose `old_string` is gone is refused as stale, and one that
//! applies says that the file holds changes the model has not seen. Words
//! and behaviour are Claude Code 2.1.332's, except that Claude Code lets
//! `Write` overwrite an existing file never read.
//!
//! What the conversation knows is kept in the [`ReadLedger`]: each `read`
//! and each write records the file's SHA-256. The ledger outlives
//! compaction; a resumed session rebuilds it with [`ReadLedger::recall`]
//! from the files its history read or wrote that have not changed since the
//! session last wrote its file.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use ferroclaw_protocol::{ContentBlock, Message};
use sha2::{Digest, Sha256};

use crate::{ReadLedger, Sandbox, ToolError};

/// The refusal of a write to an existing file never read (Claude Code's
/// words from the versions that refused it).
pub const NOT_READ_YET: &str = "File has not been read yet. Read it first before writing to it.";
/// Claude Code's refusal of a write to a file changed since it was read.
pub const CHANGED_SINCE_READ: &str = "File has been modified since read, either by the user or by \
     a linter. Read it again before attempting to write it.";

/// The tools whose `path` input names a file the conversation then knows.
const KNOWING_TOOLS: [&str; 4] = ["read", "write", "edit", "multi_edit"];

/// The version recorded for a file changed while the session was away: no
/// content hashes to it, so a write is refused as changed since read.
const CHANGED_WHILE_AWAY: [u8; 32] = [0; 32];

/// Claude Code's note on an edit that applied to a file changed since read.
pub(crate) const APPLIED_TO_CHANGED: &str = "(note: the file had been modified on disk since you \
     last read it — the edit applied cleanly, but the file contains other changes not in your \
     context. Read it before edits that depend on surrounding content.)";

impl ReadLedger {
    /// True when the conversation read or wrote `path` and its content has
    /// changed since (now `current`).
    pub fn changed_since_read(&self, path: &Path, current: &[u8]) -> bool {
        self.lock().versions.get(path).is_some_and(|known| *known != sha256(current))
    }

    /// Before replacing `path` whole, whose content is now `current`
    /// (`None`: it does not exist): refuses when the conversation has not
    /// read it, or when it changed since the conversation last read or
    /// wrote it.
    pub fn check_unchanged(&self, path: &Path, current: Option<&[u8]>) -> Result<(), ToolError> {
        let Some(current) = current else { return Ok(()) };
        match self.lock().versions.get(path) {
            None => Err(ToolError::Failed(NOT_READ_YET.to_string())),
            Some(known) if *known != sha256(current) => {
                Err(ToolError::Failed(CHANGED_SINCE_READ.to_string()))
            }
            Some(_) => Ok(()),
        }
    }

    /// After the conversation wrote `content` to `path` (or read it whole
    /// through another channel, an editor's buffer): that is what it knows.
    pub fn wrote(&self, path: &Path, content: &[u8]) {
        self.lock().versions.insert(path.to_path_buf(), sha256(content));
    }

    /// A new ledger for a sub-agent: it knows the files this conversation
    /// knows (as Claude Code's sub-agents do), and what it reads or writes
    /// stays its own (the parent has not seen it).
    pub fn fork(&self) -> ReadLedger {
        let versions = self.lock().versions.clone();
        let child = ReadLedger::default();
        child.lock().versions = versions;
        child
    }

    /// On resuming a conversation whose session file was last written at
    /// `since`: every file of `sandbox` that a `read`, `write`, `edit` or
    /// `multi_edit` of `messages` named, and that has not been modified
    /// since, is known as it is now. A file changed while the session was
    /// away is known as changed, so the model reads it again before
    /// replacing it.
    pub fn recall(&self, messages: &[Message], sandbox: &Sandbox, since: SystemTime) {
        let named: Vec<PathBuf> = messages
            .iter()
            .flat_map(|m| &m.content)
            .filter_map(|block| match block {
                ContentBlock::ToolCall(call) if KNOWING_TOOLS.contains(&call.name.as_str()) => {
                    call.input["path"].as_str().and_then(|p| sandbox.resolve(p).ok())
                }
                _ => None,
            })
            .collect();
        for path in named {
            let Ok(modified) = std::fs::metadata(&path).and_then(|m| m.modified()) else {
                continue;
            };
            if modified > since {
                // Known, as no content: refused as changed since read.
                self.lock().versions.insert(path, CHANGED_WHILE_AWAY);
            } else if let Ok(bytes) =
                crate::own_file::read(&path, crate::file_limit::DEFAULT_MAX_FILE_BYTES)
            {
                self.wrote(&path, &bytes);
            }
        }
    }
}

fn sha256(bytes: &[u8]) -> [u8; 32] {
    Sha256::digest(bytes).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_existing_file_never_read_is_refused_a_new_one_is_not() {
        let ledger = ReadLedger::default();
        let err = ledger.check_unchanged(Path::new("/ws/a"), Some(b"x")).unwrap_err();
        assert_eq!(err.to_string(), NOT_READ_YET);
        assert!(ledger.check_unchanged(Path::new("/ws/new"), None).is_ok());
    }

    #[test]
    fn a_file_changed_since_the_conversation_wrote_it_is_refused() {
        let ledger = ReadLedger::default();
        ledger.wrote(Path::new("/ws/a"), b"mine");
        assert!(ledger.check_unchanged(Path::new("/ws/a"), Some(b"mine")).is_ok());
        let err = ledger.check_unchanged(Path::new("/ws/a"), Some(b"theirs")).unwrap_err();
        assert_eq!(err.to_string(), CHANGED_SINCE_READ);
    }

    #[test]
    fn a_sub_agent_knows_what_its_parent_read_and_keeps_its_own_reads() {
        let parent = ReadLedger::default();
        parent.wrote(Path::new("/ws/a"), b"a");
        let child = parent.fork();
        assert!(child.check_unchanged(Path::new("/ws/a"), Some(b"a")).is_ok());
        child.wrote(Path::new("/ws/b"), b"b");
        assert!(parent.check_unchanged(Path::new("/ws/b"), Some(b"b")).is_err());
    }

    #[test]
    fn a_resumed_conversation_knows_the_files_it_touched_that_did_not_change_while_away() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("kept.txt"), "as left").unwrap();
        std::fs::write(dir.path().join("changed.txt"), "as left").unwrap();
        let since = SystemTime::now();
        let later = since + std::time::Duration::from_secs(5);
        let file = std::fs::File::options().write(true).open(dir.path().join("changed.txt"));
        file.unwrap().set_modified(later).unwrap();
        let call = |path: &str| {
            ContentBlock::ToolCall(ferroclaw_protocol::ToolCall {
                id: path.into(),
                name: "read".into(),
                input: serde_json::json!({"path": path}),
            })
        };
        let history = [Message {
            role: ferroclaw_protocol::Role::Assistant,
            content: vec![call("kept.txt"), call("changed.txt")],
        }];
        let sandbox = Sandbox::new(dir.path(), &[]);
        let ledger = ReadLedger::default();
        ledger.recall(&history, &sandbox, since);
        let kept = sandbox.resolve("kept.txt").unwrap();
        let changed = sandbox.resolve("changed.txt").unwrap();
        assert!(ledger.check_unchanged(&kept, Some(b"as left")).is_ok());
        let err = ledger.check_unchanged(&changed, Some(b"as left")).unwrap_err();
        assert_eq!(err.to_string(), CHANGED_SINCE_READ);
    }
}
