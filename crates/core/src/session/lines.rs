//! Reading a session file line by line: a line is bytes that may be torn,
//! invalid UTF-8 or not JSON, and each such line is skipped and reported,
//! never a reason to fail the whole file.

use std::fs::File;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::Path;

use ferroclaw_protocol::Message;

use super::{Entry, SessionError, io};

/// One line of a session file: `Ok(None)` for an entry type this version
/// does not know (written by a newer one); `Err` says why it is unreadable.
pub(super) fn parse_line(bytes: &[u8]) -> Result<Option<Entry>, String> {
    let text = std::str::from_utf8(bytes).map_err(|e| format!("invalid UTF-8 ({e})"))?;
    let text = text.trim_end();
    match serde_json::from_str::<Entry>(text) {
        Ok(entry) => Ok(Some(entry)),
        Err(_) if serde_json::from_str::<serde_json::Value>(text).is_ok() => Ok(None),
        Err(e) => Err(format!("not a session entry ({e})")),
    }
}

/// The offset just after the last newline: the end of the complete lines.
pub(crate) fn complete_end(file: &mut File, len: u64) -> std::io::Result<u64> {
    let mut end = len;
    let mut buf = [0u8; 4096];
    while end > 0 {
        let start = end.saturating_sub(buf.len() as u64);
        let n = (end - start) as usize;
        file.seek(SeekFrom::Start(start))?;
        file.read_exact(&mut buf[..n])?;
        if let Some(i) = buf[..n].iter().rposition(|&b| b == b'\n') {
            return Ok(start + i as u64 + 1);
        }
        end = start;
    }
    Ok(0)
}

/// The 1-based line number of the line starting at byte `at` (read again
/// from the start: only done to report a damaged line).
pub(super) fn line_number(path: &Path, at: u64) -> Option<usize> {
    let file = ferroclaw_tools::own_file::open(path).ok()?;
    let mut reader = BufReader::new(file.take(at));
    let mut count = 0;
    loop {
        let chunk = reader.fill_buf().ok()?;
        if chunk.is_empty() {
            return Some(count + 1);
        }
        count += chunk.iter().filter(|b| **b == b'\n').count();
        let n = chunk.len();
        reader.consume(n);
    }
}

/// What [`read_messages`] found in a window of the file.
pub(super) struct Window {
    pub(super) messages: Vec<Message>,
    /// Unreadable lines: the byte where each starts, and why.
    pub(super) bad: Vec<(u64, String)>,
    /// Bytes of the body before the window.
    pub(super) skipped: u64,
    /// Entries parsed (any type).
    pub(super) entries: usize,
    /// The model of the last usage entry.
    pub(super) model: Option<String>,
    /// A rewind named a checkpoint before the window, or a branch dropped
    /// messages from before it (read a wider one).
    pub(super) unresolved_rewind: bool,
}

/// The conversation as entries build it: every message read, and which of
/// them are the history now. A compaction starts the history afresh; a
/// rewind makes it what it was at a checkpoint; a branch drops its last
/// messages. Nothing is ever deleted from the file (or from here) to go back.
#[derive(Default)]
struct History {
    read: Vec<Option<Message>>,
    /// Indexes into `read`, oldest first.
    current: Vec<usize>,
    /// The history at each checkpoint seen.
    at_checkpoint: std::collections::HashMap<String, Vec<usize>>,
}

impl History {
    fn push(&mut self, message: Message) {
        self.read.push(Some(message));
        self.current.push(self.read.len() - 1);
    }

    /// False when the checkpoint was not seen.
    fn rewind_to(&mut self, checkpoint: &str) -> bool {
        match self.at_checkpoint.get(checkpoint) {
            Some(history) => {
                self.current = history.clone();
                true
            }
            None => false,
        }
    }

    /// Drops the last `n` messages of the history; false when it held
    /// fewer (they began before the window: read a wider one).
    fn drop_last(&mut self, n: usize) -> bool {
        let held = self.current.len();
        self.current.truncate(held.saturating_sub(n));
        n <= held
    }

    fn into_messages(mut self) -> Vec<Message> {
        self.current.iter().filter_map(|&i| self.read[i].take()).collect()
    }
}

/// Parses the message entries of the complete lines in `[start, end)`. When
/// `start` falls inside a line, that partial line is skipped.
pub(super) fn read_messages(
    file: &mut File,
    start: u64,
    end: u64,
    body_start: u64,
) -> std::io::Result<Window> {
    file.seek(SeekFrom::Start(start))?;
    let mut reader = BufReader::new(file.take(end - start));
    let mut read = Window {
        messages: Vec::new(),
        bad: Vec::new(),
        skipped: start - body_start,
        entries: 0,
        model: None,
        unresolved_rewind: false,
    };
    let mut history = History::default();
    let mut at = start;
    if start > body_start {
        // Possibly mid-line: drop up to the next newline.
        let mut partial = Vec::new();
        let n = reader.read_until(b'\n', &mut partial)? as u64;
        read.skipped += n;
        at += n;
    }
    let mut line = Vec::new();
    loop {
        line.clear();
        let n = reader.read_until(b'\n', &mut line)? as u64;
        if n == 0 {
            break;
        }
        match parse_line(&line) {
            Ok(Some(entry)) => {
                read.entries += 1;
                match entry {
                    Entry::Message { message, .. } => history.push(message),
                    Entry::Compaction { summary, .. } => {
                        history.current.clear();
                        history.push(Message::user(summary));
                    }
                    Entry::Branch { dropped, .. } if !history.drop_last(dropped) => {
                        read.unresolved_rewind = true;
                    }
                    Entry::Usage { model, .. } => read.model = Some(model),
                    Entry::Checkpoint { id, back, .. } => {
                        let before = history.current.len().saturating_sub(back);
                        history.at_checkpoint.insert(id, history.current[..before].to_vec());
                    }
                    Entry::Rewind { to, conversation: true, .. } if !history.rewind_to(&to) => {
                        read.unresolved_rewind = true;
                        tracing::warn!("a rewind names checkpoint {to}, not found before it");
                    }
                    _ => {}
                }
            }
            Ok(None) => read.entries += 1, // a newer entry type
            Err(why) => read.bad.push((at, why)),
        }
        at += n;
    }
    read.messages = history.into_messages();
    Ok(read)
}

/// Streams a session's entries in order, for `sessions show`; unreadable
/// lines are skipped with a warning naming them, and their numbers returned.
pub fn for_each_entry(path: &Path, mut f: impl FnMut(Entry)) -> Result<Vec<usize>, SessionError> {
    let file = ferroclaw_tools::own_file::open(path).map_err(io(path))?;
    let mut reader = BufReader::new(file);
    let mut skipped = Vec::new();
    let mut line = Vec::new();
    for number in 1.. {
        line.clear();
        if reader.read_until(b'\n', &mut line).map_err(io(path))? == 0 {
            break;
        }
        match parse_line(&line) {
            Ok(Some(entry)) => f(entry),
            Ok(None) => {}
            Err(why) => {
                tracing::warn!("{}: line {number} skipped: {why}", path.display());
                skipped.push(number);
            }
        }
    }
    Ok(skipped)
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use ferroclaw_protocol::Message;

    use crate::session::{Entry, SessionLog, SessionStore};

    #[test]
    fn a_branch_drops_the_messages_it_left_even_when_they_began_before_the_tail_read() {
        let home = tempfile::tempdir().unwrap();
        let mut log = SessionStore::new(home.path()).create(Path::new("/p"), "m/m").unwrap();
        for i in 0..50 {
            log.append_message(&Message::user(format!("question {i} {}", "x".repeat(100))))
                .unwrap();
            log.append_message(&Message::assistant(format!("answer {i}"))).unwrap();
        }
        // Back to before the last 60 messages, then on with another question.
        log.append(&Entry::Branch { ts: 1, dropped: 60 }).unwrap();
        log.append_message(&Message::user("another question")).unwrap();
        let path = log.path().to_path_buf();
        drop(log);
        for tail in [500, 1 << 20] {
            let messages = SessionLog::resume(&path, tail).unwrap().messages;
            let last: Vec<String> = messages.iter().rev().take(3).map(Message::text).collect();
            assert!(last[0] == "another question" && last[1] == "answer 19", "{tail}: {last:?}");
            assert!(!messages.iter().any(|m| m.text() == "answer 20"), "{tail}");
        }
    }
}
