//! What one conversation has already read, so that `read` answers a re-read
//! of an unchanged file with a short note instead of sending the content
//! again (nanobot does the same; it is most of what a long session sends).
//!
//! The note is sound only while the earlier result is still in the
//! conversation, whole. So the ledger trusts a read only after the loop has
//! seen its result in the messages it sends ([`ReadLedger::sync`], before
//! each batch of tool calls), and forgets it as soon as that result is gone
//! or changed: compaction, micro-compaction, the result cap, `/clear` and
//! resuming all reset it without being told. Files are compared by the
//! SHA-256 of their content, so an edit, a write or a command that changed
//! the file always gets the new content.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use ferroclaw_protocol::{ContentBlock, Message, ResultPart, Role};

use crate::ToolOutput;

/// Bytes of a result's first text kept to recognise it later.
const HEAD_BYTES: usize = 48;

/// The reads of one conversation. Clones share the ledger; a new one is
/// empty (a sub-agent, a resumed session, `mcp serve`).
#[derive(Debug, Clone, Default)]
pub struct ReadLedger(Arc<Mutex<Ledger>>);

#[derive(Debug, Default)]
pub(crate) struct Ledger {
    /// Model answers in the conversation when it was last synced.
    turn: u32,
    seen: Vec<Seen>,
    /// Each file's content (SHA-256) as the conversation last read or
    /// wrote it: what `write`, `edit` and `multi_edit` check the disk
    /// against (see [`crate::stale_write`]). Unlike `seen`, kept through
    /// compaction: the model still acts on what it read.
    pub(crate) versions: HashMap<PathBuf, [u8; 32]>,
}

/// One `read` whose result went to the model.
#[derive(Debug)]
struct Seen {
    path: PathBuf,
    sha256: [u8; 32],
    lines: Shown,
    call_id: String,
    turn: u32,
    result: Fingerprint,
    /// Seen intact in the conversation by [`ReadLedger::sync`].
    confirmed: bool,
}

/// What part of a file a read showed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Shown {
    /// Lines `first..=last` (1-based).
    Lines(usize, usize),
    /// All of it (an image, an empty file).
    Whole,
}

impl Shown {
    fn covers(self, other: Shown) -> bool {
        match (self, other) {
            (Shown::Whole, _) => true,
            (Shown::Lines(a, b), Shown::Lines(c, d)) => a <= c && d <= b,
            (Shown::Lines(..), Shown::Whole) => false,
        }
    }
}

/// A file as one `read` found it.
#[derive(Debug)]
pub(crate) struct FileRead {
    pub output: ToolOutput,
    pub sha256: [u8; 32],
    pub lines: Shown,
}

/// Enough of a tool result to tell whether it is still the one returned:
/// each part's kind and length, and the start of the first text.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Fingerprint {
    parts: Vec<(bool, usize)>,
    head: String,
}

impl Fingerprint {
    fn of(content: &[ResultPart]) -> Self {
        let parts = content
            .iter()
            .map(|p| match p {
                ResultPart::Text { text } => (true, text.len()),
                ResultPart::Image { data, .. } => (false, data.len()),
            })
            .collect();
        let head = content
            .iter()
            .find_map(ResultPart::as_text)
            .map(|t| t[..floor_char_boundary(t, HEAD_BYTES)].to_string())
            .unwrap_or_default();
        Self { parts, head }
    }
}

impl ReadLedger {
    /// What `read` returns for `file`: a note when the conversation still
    /// holds an earlier result with the same content and lines (and the
    /// note is shorter), else the content, remembered under `call_id`.
    pub(crate) fn answer(
        &self,
        path: &Path,
        shown: &str,
        file: FileRead,
        call_id: &str,
    ) -> ToolOutput {
        if file.output.is_error {
            return file.output;
        }
        let mut ledger = self.lock();
        ledger.versions.insert(path.to_path_buf(), file.sha256);
        if call_id.is_empty() {
            return file.output;
        }
        let earlier = ledger.seen.iter().find(|s| {
            s.confirmed && s.path == path && s.sha256 == file.sha256 && s.lines.covers(file.lines)
        });
        if let Some(earlier) = earlier {
            let note = note(shown, earlier.turn, &file.sha256, file.lines);
            let content_len: usize = file.output.content.iter().map(part_len).sum();
            if note.len() < content_len {
                return ToolOutput::text(note);
            }
        }
        let turn = ledger.turn;
        ledger.seen.push(Seen {
            path: path.to_path_buf(),
            sha256: file.sha256,
            lines: file.lines,
            call_id: call_id.to_string(),
            turn,
            result: Fingerprint::of(&file.output.content),
            confirmed: false,
        });
        file.output
    }

    /// Before a batch of tool calls: keeps the reads whose results are in
    /// `messages` exactly as they were returned, forgets the others (cut,
    /// compacted away, cleared), and counts the model's answers so far.
    pub fn sync(&self, messages: &[Message]) {
        let mut ledger = self.lock();
        ledger.turn = messages.iter().filter(|m| m.role == Role::Assistant).count() as u32;
        if ledger.seen.is_empty() {
            return;
        }
        let by_id: HashMap<&str, usize> =
            ledger.seen.iter().enumerate().map(|(i, s)| (s.call_id.as_str(), i)).collect();
        let mut intact = vec![false; ledger.seen.len()];
        for block in messages.iter().flat_map(|m| &m.content) {
            if let ContentBlock::ToolResult { tool_call_id, content, is_error: false } = block
                && let Some(&i) = by_id.get(tool_call_id.as_str())
            {
                intact[i] = Fingerprint::of(content) == ledger.seen[i].result;
            }
        }
        let mut keep = intact.into_iter();
        ledger.seen.retain_mut(|s| {
            let kept = keep.next().unwrap_or(false);
            s.confirmed = kept;
            kept
        });
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, Ledger> {
        // The ledger holds no invariant a panic elsewhere could break.
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// The short answer to a re-read.
fn note(shown: &str, turn: u32, sha256: &[u8; 32], lines: Shown) -> String {
    let hash: String = sha256[..4].iter().map(|b| format!("{b:02x}")).collect();
    let what = match lines {
        Shown::Lines(first, last) => format!("lines {first}-{last} are"),
        Shown::Whole => "its content is".to_string(),
    };
    format!(
        "{shown} is unchanged since your read in turn {turn} (sha256 {hash}…): \
         {what} in that earlier result, not repeated here."
    )
}

fn part_len(part: &ResultPart) -> usize {
    match part {
        ResultPart::Text { text } => text.len(),
        ResultPart::Image { data, .. } => data.len(),
    }
}

/// The largest char boundary of `s` at or below `max`.
fn floor_char_boundary(s: &str, max: usize) -> usize {
    let mut end = max.min(s.len());
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    end
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(text: &str) -> FileRead {
        FileRead { output: ToolOutput::text(text), sha256: [7; 32], lines: Shown::Lines(1, 40) }
    }

    /// The conversation after one read whose result the loop sent as `sent`.
    fn conversation(sent: ToolOutput) -> Vec<Message> {
        vec![
            Message::assistant("reading"),
            Message {
                role: Role::User,
                content: vec![ContentBlock::ToolResult {
                    tool_call_id: "c1".into(),
                    content: sent.content,
                    is_error: false,
                }],
            },
        ]
    }

    /// Reads `text` as call `c1`, syncs with what was sent, reads it again.
    fn reread(text: &str, sent: impl FnOnce(ToolOutput) -> ToolOutput) -> ToolOutput {
        let ledger = ReadLedger::default();
        let path = Path::new("/ws/notes.txt");
        ledger.sync(&[Message::assistant("reading")]);
        let first = ledger.answer(path, "notes.txt", file(text), "c1");
        ledger.sync(&conversation(sent(first)));
        ledger.answer(path, "notes.txt", file(text), "c2")
    }

    #[test]
    fn a_reread_of_what_the_conversation_holds_is_a_note() {
        let text = "x".repeat(1_000);
        let again = reread(&text, |sent| sent);
        assert!(
            again.joined_text().starts_with("notes.txt is unchanged since your read in turn 1")
        );
    }

    #[test]
    fn a_result_cut_by_the_cap_or_cleared_by_micro_compaction_is_not_relied_on() {
        let text = "x".repeat(5_000);
        let cut = reread(&text, |sent| crate::cap_result(sent, 2_000));
        assert_eq!(cut.joined_text(), text);
        let cleared = reread(&text, |_| ToolOutput::text("[Previous: used read]"));
        assert_eq!(cleared.joined_text(), text);
    }

    #[test]
    fn a_read_not_yet_seen_in_the_conversation_is_answered_in_full() {
        let ledger = ReadLedger::default();
        let path = Path::new("/ws/notes.txt");
        let text = "x".repeat(1_000);
        ledger.answer(path, "notes.txt", file(&text), "c1");
        assert_eq!(ledger.answer(path, "notes.txt", file(&text), "c2").joined_text(), text);
    }

    #[test]
    fn a_short_file_is_sent_again_rather_than_a_longer_note() {
        assert_eq!(reread("tiny\n", |sent| sent).joined_text(), "tiny\n");
    }
}
