//! Inboxes: one append-only JSONL file per team member,
//! `.agent/team/inbox/NAME.jsonl`, one message per line.
//!
//! # How a message is never lost nor delivered twice
//!
//! **Writing.** A sender takes an exclusive lock on `NAME.lock` (beside the
//! inbox, never renamed), opens the inbox for appending *after* taking the
//! lock, and writes the whole line with one `write` call. Any number of
//! threads and processes can send at once: the lock orders them, so lines
//! never interleave, and no one rewrites the file while a sender holds it
//! (Claude Code's inboxes are one JSON array that each writer rewrites, so two
//! writers at once lose a message). If the file does not end in a newline (a
//! sender died mid-write), the next sender starts with one, so the torn
//! fragment stays a line of its own that readers skip.
//!
//! **Reading.** The inbox's only reader is its owner. It keeps a cursor: a
//! *logical* byte offset, the count of inbox bytes it has consumed since the
//! inbox was created. Reading takes the complete lines past the cursor (a
//! last line without its newline is still being written, or torn: it is left
//! for later); the batch carries the offset it reaches (`through`). The agent
//! puts the batch in its conversation as `<inbox through="N">...</inbox>`,
//! makes its session file durable, and only then saves the cursor
//! (`NAME.cursor`, replaced atomically). So:
//! - dying before the session file is durable re-reads the batch on restart
//!   (the cursor was not saved): nothing is lost;
//! - dying after it but before the cursor is saved: on restart the cursor is
//!   the larger of the saved one and the last `through` found in the
//!   session ([`InboxReader::reconcile`]): nothing is delivered twice.
//!
//! **Compaction.** Past [`COMPACT_AT_BYTES`] of consumed messages the reader
//! rewrites the inbox without them, under the exclusive lock (so no send is
//! in progress), as a temporary file renamed over the old one. The new file
//! starts with a header line `{"compacted_through": N}`: its messages begin at
//! logical offset N. Logical offsets never change, so the cursor needs no
//! update and a crash at any point of a compaction leaves either the old or
//! the new file, both valid for the saved cursor. Inboxes never grow without
//! bound, and reading costs only the unread bytes (Claude Code's delivery
//! stalls near 1 MB).

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};

use crate::error::TeamError;
use ferroclaw_tools::own_file::{self, MAX_STATE_FILE_BYTES};

/// Consumed bytes past which an inbox is rewritten without them (1 MiB:
/// where Claude Code's inboxes were reported to stall).
pub const COMPACT_AT_BYTES: u64 = 1024 * 1024;

/// The five message types (learn-claude-code s09-s10).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MessageType {
    Message,
    Broadcast,
    ShutdownRequest,
    ShutdownResponse,
    PlanApprovalResponse,
    /// A teammate's plan, waiting for the lead's `plan_approval`.
    PlanApprovalRequest,
}

impl MessageType {
    /// The name used in files and tool arguments.
    pub fn as_str(self) -> &'static str {
        match self {
            MessageType::Message => "message",
            MessageType::Broadcast => "broadcast",
            MessageType::ShutdownRequest => "shutdown_request",
            MessageType::ShutdownResponse => "shutdown_response",
            MessageType::PlanApprovalResponse => "plan_approval_response",
            MessageType::PlanApprovalRequest => "plan_approval_request",
        }
    }

    /// The type called `name`, if any.
    pub fn parse(name: &str) -> Option<Self> {
        [
            MessageType::Message,
            MessageType::Broadcast,
            MessageType::ShutdownRequest,
            MessageType::ShutdownResponse,
            MessageType::PlanApprovalResponse,
            MessageType::PlanApprovalRequest,
        ]
        .into_iter()
        .find(|t| t.as_str() == name)
    }
}

/// One line of an inbox.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InboxMessage {
    /// Unique per message: the sender's pid, a time and a counter.
    pub id: String,
    #[serde(rename = "type")]
    pub kind: MessageType,
    pub from: String,
    pub to: String,
    pub content: String,
    /// RFC 3339 UTC.
    pub timestamp: String,
    /// Ties a response to its request (shutdown, plan approval).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
    /// The answer of a response.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approve: Option<bool>,
}

impl InboxMessage {
    /// A new message with a fresh id and the current time.
    pub fn new(kind: MessageType, from: &str, to: &str, content: &str) -> Self {
        InboxMessage {
            id: new_id("msg"),
            kind,
            from: from.to_string(),
            to: to.to_string(),
            content: content.to_string(),
            timestamp: crate::clock::now(),
            request_id: None,
            approve: None,
        }
    }

    /// One line of an `<inbox>` block.
    pub fn render(&self) -> String {
        let mut line = format!("[{}] from {}", self.kind.as_str(), self.from);
        if let Some(id) = &self.request_id {
            line.push_str(&format!(" (request_id {id})"));
        }
        if let Some(approve) = self.approve {
            line.push_str(if approve { " approved" } else { " rejected" });
        }
        if !self.content.is_empty() {
            line.push_str(": ");
            line.push_str(&self.content);
        }
        line
    }
}

/// A process-unique id such as `msg-4242-1764512345123-7`.
pub fn new_id(prefix: &str) -> String {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    let millis = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    format!("{prefix}-{}-{millis}-{}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed))
}

/// The inbox folder of a team folder.
pub fn inbox_dir(team_dir: &Path) -> PathBuf {
    team_dir.join("inbox")
}

/// Appends `message` to `to`'s inbox in `dir`: one write under the inbox's
/// exclusive lock. The caller checks that `to` is on the team.
pub fn append(dir: &Path, message: &InboxMessage) -> Result<(), TeamError> {
    let mut line = serde_json::to_vec(message)
        .map_err(|e| TeamError::Invalid(format!("cannot encode the message: {e}")))?;
    line.push(b'\n');
    let paths = Paths::new(dir, &message.to);
    std::fs::create_dir_all(dir).map_err(|e| TeamError::io(dir, e))?;
    let _lock = paths.lock(true)?;
    let mut file =
        crate::confined::open_append(&paths.inbox).map_err(|e| TeamError::io(&paths.inbox, e))?;
    let len = file.metadata().map_err(|e| TeamError::io(&paths.inbox, e))?.len();
    if len > 0 && !ends_with_newline(&mut file, len) {
        line.insert(0, b'\n');
    }
    file.write_all(&line).map_err(|e| TeamError::io(&paths.inbox, e))
}

fn ends_with_newline(file: &mut File, len: u64) -> bool {
    let mut last = [0u8];
    file.seek(SeekFrom::Start(len - 1)).is_ok()
        && file.read_exact(&mut last).is_ok()
        && last[0] == b'\n'
}

/// Messages read past the cursor, not yet committed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Batch {
    pub messages: Vec<InboxMessage>,
    /// The logical offset the cursor moves to once the batch is recorded.
    pub through: u64,
    /// Lines that could not be read (torn by a crash, edited by hand).
    pub skipped: usize,
}

impl Batch {
    /// The batch as the `<inbox>` block put before a model request; the
    /// `through` attribute lets a restarted reader find where it was.
    pub fn render(&self) -> String {
        let mut out = format!("<inbox through=\"{}\">\n", self.through);
        for m in &self.messages {
            out.push_str(&m.render());
            out.push('\n');
        }
        out.push_str("</inbox>");
        out
    }
}

/// The owner's reader of one inbox: the committed cursor and what was handed
/// out past it. Shared by the agent's injector and its `read_inbox` tool.
#[derive(Debug)]
pub struct InboxReader {
    paths: Paths,
    state: Mutex<Cursor>,
    /// Consumed bytes past which the inbox is compacted.
    compact_at: u64,
}

#[derive(Debug, Clone, Copy, Default)]
struct Cursor {
    /// Saved in `NAME.cursor`: everything before it is in the session file.
    committed: u64,
    /// Handed to the agent; becomes `committed` once its session is durable.
    handed_out: u64,
    /// The inbox file's length at the last read.
    seen_len: u64,
}

#[derive(Debug, Serialize, Deserialize)]
struct CursorFile {
    offset: u64,
}

#[derive(Debug, Serialize, Deserialize)]
struct Header {
    compacted_through: u64,
}

impl InboxReader {
    /// The reader of `name`'s inbox in `dir`, from its saved cursor.
    pub fn open(dir: &Path, name: &str) -> Self {
        let paths = Paths::new(dir, name);
        let committed = own_file::read(&paths.cursor, MAX_STATE_FILE_BYTES)
            .ok()
            .and_then(|bytes| serde_json::from_slice::<CursorFile>(&bytes).ok())
            .map_or(0, |c| c.offset);
        InboxReader {
            paths,
            state: Mutex::new(Cursor { committed, handed_out: committed, seen_len: 0 }),
            compact_at: COMPACT_AT_BYTES,
        }
    }

    /// Compacts past `bytes` of consumed messages instead of
    /// [`COMPACT_AT_BYTES`] (tests and the stress test).
    pub fn with_compact_at(mut self, bytes: u64) -> Self {
        self.compact_at = bytes;
        self
    }

    /// Moves the cursor to `through` if the session already holds messages
    /// that far (the last `<inbox through="N">` in it): the process died
    /// after recording them but before saving the cursor.
    pub fn reconcile(&self, through: u64) -> Result<(), TeamError> {
        let committed = {
            let mut state = self.lock_state();
            if through <= state.committed {
                return Ok(());
            }
            state.handed_out = state.handed_out.max(through);
            state.handed_out
        };
        self.save(committed)?;
        self.lock_state().committed = committed;
        Ok(())
    }

    /// True when the inbox changed since the last read (one stat: what an
    /// idle teammate's poll costs).
    pub fn has_new(&self) -> bool {
        let seen = self.lock_state().seen_len;
        std::fs::metadata(&self.paths.inbox).is_ok_and(|m| m.len() != seen)
    }

    /// The complete messages past what was handed out; marks them handed
    /// out (not committed: see [`commit`](Self::commit)). Empty when none.
    pub fn read(&self) -> Result<Batch, TeamError> {
        let from = self.lock_state().handed_out;
        let (batch, len) = self.read_from(from)?;
        let mut state = self.lock_state();
        state.handed_out = state.handed_out.max(batch.through);
        state.seen_len = len;
        Ok(batch)
    }

    /// Reads without handing out (for `/inbox` and `ferroclaw team`).
    pub fn peek(&self) -> Result<Batch, TeamError> {
        let from = self.lock_state().handed_out;
        Ok(self.read_from(from)?.0)
    }

    /// True when messages were handed out and not yet committed.
    pub fn has_uncommitted(&self) -> bool {
        let state = self.lock_state();
        state.handed_out > state.committed
    }

    /// Saves the cursor at what was handed out: call once the session file
    /// holding those messages is durable. Compacts the inbox when enough
    /// consumed bytes piled up.
    pub fn commit(&self) -> Result<(), TeamError> {
        let target = self.lock_state().handed_out;
        if target == self.lock_state().committed {
            return Ok(());
        }
        self.save(target)?;
        self.lock_state().committed = target;
        self.compact_if_needed(target)
    }

    /// The saved cursor.
    pub fn committed(&self) -> u64 {
        self.lock_state().committed
    }

    fn lock_state(&self) -> std::sync::MutexGuard<'_, Cursor> {
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The batch past `from`, and the file's length.
    fn read_from(&self, from: u64) -> Result<(Batch, u64), TeamError> {
        let nothing = (Batch { through: from, ..Batch::default() }, 0);
        if !self.paths.inbox.exists() {
            return Ok(nothing);
        }
        let _lock = self.paths.lock(false)?;
        let mut file = match own_file::open(&self.paths.inbox) {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(nothing),
            Err(e) => return Err(TeamError::io(&self.paths.inbox, e)),
        };
        let io = |e| TeamError::io(&self.paths.inbox, e);
        let len = file.metadata().map_err(io)?.len();
        // Only the header and the unread bytes are read, never the whole file.
        let mut head = vec![0u8; HEADER_MAX.min(len as usize)];
        file.read_exact(&mut head).map_err(io)?;
        let (base, body_start) = header(&head);
        // Bytes before `from` in this file's numbering (a cursor before the
        // file's base was compacted away: impossible unless the cursor file
        // was lost, and then those messages were consumed).
        let start = body_start as u64 + from.saturating_sub(base);
        let mut batch = Batch { through: from.max(base), ..Batch::default() };
        if start >= len {
            return Ok((batch, len));
        }
        let mut bytes = Vec::with_capacity((len - start) as usize);
        file.seek(SeekFrom::Start(start)).map_err(io)?;
        file.read_to_end(&mut bytes).map_err(io)?;
        let unread = &bytes[..];
        // Only complete lines: a last line without its newline is being
        // written or was torn, and is left for a later read.
        let Some(end) = unread.iter().rposition(|&b| b == b'\n') else { return Ok((batch, len)) };
        for line in unread[..end].split(|&b| b == b'\n') {
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            match serde_json::from_slice::<InboxMessage>(line) {
                Ok(message) => batch.messages.push(message),
                Err(e) => {
                    tracing::warn!(
                        "{}: skipped an unreadable line: {e}",
                        self.paths.inbox.display()
                    );
                    batch.skipped += 1;
                }
            }
        }
        batch.through = from.max(base) + (end as u64 + 1);
        Ok((batch, len))
    }

    fn save(&self, offset: u64) -> Result<(), TeamError> {
        let json = serde_json::to_vec(&CursorFile { offset })
            .map_err(|e| TeamError::Invalid(e.to_string()))?;
        crate::config::write_atomic(&self.paths.cursor, &json)
    }

    /// Rewrites the inbox without the consumed messages once they pass
    /// [`COMPACT_AT_BYTES`], under the exclusive lock.
    fn compact_if_needed(&self, cursor: u64) -> Result<(), TeamError> {
        let consumed_in_file = |bytes: &[u8]| {
            let (base, _) = header(bytes);
            cursor.saturating_sub(base)
        };
        let len = std::fs::metadata(&self.paths.inbox).map_or(0, |m| m.len());
        if len < self.compact_at {
            return Ok(());
        }
        let _lock = self.paths.lock(true)?;
        let mut bytes = Vec::new();
        own_file::open(&self.paths.inbox)
            .and_then(|mut file| file.read_to_end(&mut bytes))
            .map_err(|e| TeamError::io(&self.paths.inbox, e))?;
        if consumed_in_file(&bytes) < self.compact_at {
            return Ok(());
        }
        let (base, body_start) = header(&bytes);
        let keep_from = (body_start as u64 + cursor.saturating_sub(base)).min(bytes.len() as u64);
        let mut out = serde_json::to_vec(&Header { compacted_through: cursor })
            .map_err(|e| TeamError::Invalid(e.to_string()))?;
        out.push(b'\n');
        out.extend_from_slice(&bytes[keep_from as usize..]);
        crate::config::write_atomic(&self.paths.inbox, &out)
    }
}

/// Longest compaction header line read (`{"compacted_through": N}` is under 50 bytes).
const HEADER_MAX: usize = 64;

/// The logical offset the file's messages start at, and where they start in
/// the file (after the compaction header, if any).
fn header(bytes: &[u8]) -> (u64, usize) {
    let Some(newline) = bytes.iter().position(|&b| b == b'\n') else { return (0, 0) };
    match serde_json::from_slice::<Header>(&bytes[..newline]) {
        Ok(h) => (h.compacted_through, newline + 1),
        Err(_) => (0, 0),
    }
}

/// The files of one inbox.
#[derive(Debug, Clone)]
struct Paths {
    inbox: PathBuf,
    lock: PathBuf,
    cursor: PathBuf,
}

impl Paths {
    fn new(dir: &Path, name: &str) -> Self {
        Paths {
            inbox: dir.join(format!("{name}.jsonl")),
            lock: dir.join(format!("{name}.lock")),
            cursor: dir.join(format!("{name}.cursor")),
        }
    }

    /// Takes the inbox's lock (exclusive to write or compact, shared to read).
    fn lock(&self, exclusive: bool) -> Result<File, TeamError> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&self.lock)
            .map_err(|e| TeamError::io(&self.lock, e))?;
        let locked = if exclusive { file.lock() } else { file.lock_shared() };
        locked.map_err(|e| TeamError::io(&self.lock, e))?;
        Ok(file)
    }
}

/// The last `through` offset of an `<inbox through="N">` block in `text`.
pub fn last_through(text: &str) -> Option<u64> {
    let marker = "<inbox through=\"";
    let at = text.rfind(marker)? + marker.len();
    let rest = &text[at..];
    rest[..rest.find('"')?].parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn send(dir: &Path, to: &str, content: &str) {
        append(dir, &InboxMessage::new(MessageType::Message, "lead", to, content)).unwrap();
    }

    fn contents(batch: &Batch) -> Vec<&str> {
        batch.messages.iter().map(|m| m.content.as_str()).collect()
    }

    #[test]
    fn a_message_is_read_once_and_a_new_reader_starts_at_the_committed_cursor() {
        let dir = tempfile::tempdir().unwrap();
        send(dir.path(), "alice", "one");
        send(dir.path(), "alice", "two");
        let reader = InboxReader::open(dir.path(), "alice");
        assert_eq!(contents(&reader.read().unwrap()), ["one", "two"]);
        assert!(reader.read().unwrap().messages.is_empty(), "handed out once");
        // Not committed: a restarted reader sees them again (nothing lost).
        assert_eq!(InboxReader::open(dir.path(), "alice").read().unwrap().messages.len(), 2);
        reader.commit().unwrap();
        send(dir.path(), "alice", "three");
        let restarted = InboxReader::open(dir.path(), "alice");
        assert_eq!(contents(&restarted.read().unwrap()), ["three"]);
    }

    #[test]
    fn reconcile_skips_what_the_session_already_holds() {
        let dir = tempfile::tempdir().unwrap();
        send(dir.path(), "bob", "one");
        let reader = InboxReader::open(dir.path(), "bob");
        let batch = reader.read().unwrap();
        let block = batch.render();
        // The process dies here: the block is in the session, the cursor is not saved.
        let restarted = InboxReader::open(dir.path(), "bob");
        restarted.reconcile(last_through(&block).unwrap()).unwrap();
        send(dir.path(), "bob", "two");
        assert_eq!(contents(&restarted.read().unwrap()), ["two"]);
    }

    #[test]
    fn a_torn_last_line_waits_and_a_torn_middle_line_is_skipped() {
        let dir = tempfile::tempdir().unwrap();
        send(dir.path(), "carol", "one");
        let path = dir.path().join("carol.jsonl");
        let mut file = OpenOptions::new().append(true).open(&path).unwrap();
        file.write_all(b"{\"id\":\"torn").unwrap();
        let reader = InboxReader::open(dir.path(), "carol");
        let batch = reader.read().unwrap();
        assert_eq!(contents(&batch), ["one"], "the torn line is not read yet");
        // The next sender starts on a new line; the fragment is skipped.
        send(dir.path(), "carol", "two");
        let batch = reader.read().unwrap();
        assert_eq!(contents(&batch), ["two"]);
        assert_eq!(batch.skipped, 1);
    }

    #[test]
    fn compaction_drops_consumed_messages_and_keeps_the_cursor_valid() {
        let dir = tempfile::tempdir().unwrap();
        let big = "x".repeat(4096);
        for _ in 0..(COMPACT_AT_BYTES / 4096 + 2) {
            send(dir.path(), "dave", &big);
        }
        let reader = InboxReader::open(dir.path(), "dave");
        let all = reader.read().unwrap();
        reader.commit().unwrap();
        let len = std::fs::metadata(dir.path().join("dave.jsonl")).unwrap().len();
        assert!(len < 100, "compacted to its header, got {len} bytes");
        send(dir.path(), "dave", "after");
        let restarted = InboxReader::open(dir.path(), "dave");
        assert_eq!(restarted.committed(), all.through);
        assert_eq!(contents(&restarted.read().unwrap()), ["after"]);
    }
}
