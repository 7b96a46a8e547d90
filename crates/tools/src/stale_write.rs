//! No lost work: `write`, `edit` and `multi_edit` refuse an existing file
//! the conversation never read, and `write` refuses to replace a file that
//! changed on disk since the conversation last read or wrote it (the user
//! saved it, a formatter ran); creating a new file needs no read. `edit`
//! and `multi_edit` replace text in the file as it is now, so on a file
//! changed since they lose nothing: a replacement whose `old_string` is
//! gone is refused as stale, and one that applies says that the file holds
//! changes the model has not seen. One rule, [`ReadLedger::before_change`],
//! serves all three tools (and the editor-buffer versions in ACP). Words and
//! behaviour are Claude Code 2.1.332's.
//!
//! What counts as read: any `read` of the file, with `offset`/`limit` too
//! (as in Claude Code, a partial read counts), and the conversation's own
//! `write`s and edits. As in Claude Code, a sub-agent has a ledger of its
//! own: it reads a file before changing it even when its parent read it,
//! and its reads do not count for the parent. `@path` mentions are not
//! reads: ferroclaw does not put a mentioned text file's content in the
//! prompt (Claude Code does).
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

/// Claude Code's refusal of a write or an edit to an existing file the
/// conversation never read.
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

/// What a tool is about to do to a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// Replace its content whole (`write`).
    Whole,
    /// Replace text in its content as it is now (`edit`, `multi_edit`).
    InPlace,
}

/// What the conversation knows of a file it may change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Known {
    /// The file does not exist yet.
    New,
    /// As the conversation last read or wrote it.
    AsRead,
    /// Changed on disk since (only for [`Change::InPlace`]).
    Changed,
}

impl Known {
    /// The file holds changes the model has not seen.
    pub fn is_stale(self) -> bool {
        self == Known::Changed
    }
}

impl ReadLedger {
    /// Before `change` to `path`, whose content is now `current` (`None`:
    /// it does not exist): refuses an existing file the conversation has not
    /// read, and a file changed since the conversation last read or wrote it
    /// when the change replaces it whole. Else says whether the file changed
    /// since ([`Known::Changed`]: an edit applies only where its text is
    /// still there, and says so).
    pub fn before_change(
        &self,
        path: &Path,
        current: Option<&[u8]>,
        change: Change,
    ) -> Result<Known, ToolError> {
        let Some(current) = current else { return Ok(Known::New) };
        match (self.lock().versions.get(path), change) {
            (None, _) => Err(ToolError::Failed(NOT_READ_YET.to_string())),
            (Some(known), _) if *known == sha256(current) => Ok(Known::AsRead),
            (Some(_), Change::Whole) => Err(ToolError::Failed(CHANGED_SINCE_READ.to_string())),
            (Some(_), Change::InPlace) => Ok(Known::Changed),
        }
    }

    /// After the conversation wrote `content` to `path` (or read it whole
    /// through another channel, an editor's buffer): that is what it knows.
    pub fn wrote(&self, path: &Path, content: &[u8]) {
        self.lock().versions.insert(path.to_path_buf(), sha256(content));
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
    fn an_edit_of_a_file_never_read_is_refused_and_one_changed_since_is_marked_stale() {
        let ledger = ReadLedger::default();
        let err = ledger.before_change(Path::new("/ws/a"), Some(b"x"), Change::InPlace);
        assert_eq!(err.unwrap_err().to_string(), NOT_READ_YET);
        ledger.wrote(Path::new("/ws/a"), b"x");
        let known = ledger.before_change(Path::new("/ws/a"), Some(b"x"), Change::InPlace);
        assert_eq!(known.unwrap(), Known::AsRead);
        let known = ledger.before_change(Path::new("/ws/a"), Some(b"y"), Change::InPlace);
        assert_eq!(known.unwrap(), Known::Changed);
    }

    #[test]
    fn an_existing_file_never_read_is_refused_a_new_one_is_not() {
        let ledger = ReadLedger::default();
        let err = ledger.before_change(Path::new("/ws/a"), Some(b"x"), Change::Whole).unwrap_err();
        assert_eq!(err.to_string(), NOT_READ_YET);
        assert!(ledger.before_change(Path::new("/ws/new"), None, Change::Whole).is_ok());
    }

    #[test]
    fn a_file_changed_since_the_conversation_wrote_it_is_refused() {
        let ledger = ReadLedger::default();
        ledger.wrote(Path::new("/ws/a"), b"mine");
        assert!(ledger.before_change(Path::new("/ws/a"), Some(b"mine"), Change::Whole).is_ok());
        let err =
            ledger.before_change(Path::new("/ws/a"), Some(b"theirs"), Change::Whole).unwrap_err();
        assert_eq!(err.to_string(), CHANGED_SINCE_READ);
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
        assert!(ledger.before_change(&kept, Some(b"as left"), Change::Whole).is_ok());
        let err = ledger.before_change(&changed, Some(b"as left"), Change::Whole).unwrap_err();
        assert_eq!(err.to_string(), CHANGED_SINCE_READ);
    }
}
