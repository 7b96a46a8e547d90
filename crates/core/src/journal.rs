//! The turn journal: each finished step of a turn (what started it, every
//! model answer, every tool result), keyed by (session, turn, step) and
//! durable before the next step starts, so a turn whose process died can be
//! finished by another process without paying for the model again.
//!
//! A resumed turn replays the recorded steps in order: a recorded model
//! answer is used instead of calling the provider (exactly-once for the
//! model), a recorded tool result instead of running the tool. A tool call
//! whose result was not recorded (the process died while it ran) runs
//! again: tools are at-least-once, so a tool with side effects may see a
//! call twice. What resumes a turn, and who marks it finished once its
//! answer is on its way, is the caller's business (the gateway); the agent
//! loop only records and replays (see `Agent::journal_turn`).
//!
//! [`TurnJournal`] is the boundary; [`FileJournal`] keeps one append-only
//! JSONL file per turn beside the session files
//! (`sessions/<project>/<session>.turns/<turn>.jsonl`), fsynced after every
//! step; a database backend implements the same four calls on a table keyed
//! by (session, turn, step). [`TurnJournal::prune`] deletes finished turns
//! once older than the time kept (the gateway's `store_keep_days`);
//! unfinished ones stay for resume.
//!
//! ```
//! # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
//! use ferroclaw_core::journal::{FileJournal, Step, TurnJournal};
//! use ferroclaw_protocol::Message;
//!
//! let dir = tempfile::tempdir().unwrap();
//! let journal = FileJournal::new(dir.path());
//! let begin = Step::Begin { input: Message::user("hi"), origin: serde_json::Value::Null, session_len: 0 };
//! journal.record("s1", "telegram-42-7", 0, &begin).await.unwrap();
//! let turn = journal.load("s1", "telegram-42-7").await.unwrap();
//! assert_eq!(turn.steps, vec![begin]);
//! assert_eq!(journal.unfinished().await.unwrap().len(), 1);
//! journal.finish("s1", "telegram-42-7").await.unwrap();
//! assert!(journal.load("s1", "telegram-42-7").await.unwrap().finished);
//! assert!(journal.unfinished().await.unwrap().is_empty());
//! # });
//! ```

use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use ferroclaw_protocol::{ContentBlock, Message, StopReason, Usage};
use serde::{Deserialize, Serialize};

/// Longest turn id kept as is in a file name; longer ones are cut and hashed.
const MAX_TURN_NAME_CHARS: usize = 96;

/// One finished step of a turn. Steps are numbered from 0 in the order the
/// loop finished them; step 0 is always [`Step::Begin`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Step {
    /// The turn began: the user message as the model gets it (after hooks),
    /// what started it (opaque to the loop: the gateway keeps its inbound
    /// message here, to resume it after a restart), and the session file's
    /// length before the turn wrote to it (a resumed turn cuts the file back
    /// to it, then writes the turn again as it replays).
    Begin {
        input: Message,
        #[serde(default)]
        origin: serde_json::Value,
        session_len: u64,
    },
    /// The model's complete answer to one request.
    Model {
        message: Message,
        usage: Usage,
        stop: StopReason,
        /// Tool call id -> why its arguments could not be parsed.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        bad_arguments: Vec<(String, String)>,
    },
    /// One tool call's result, as it went to the model.
    Tool { result: ContentBlock },
}

/// What the journal holds of one turn.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TurnRecord {
    /// The finished steps, in order (empty for a turn never started).
    pub steps: Vec<Step>,
    /// True once [`TurnJournal::finish`] was called: the answer went out.
    pub finished: bool,
}

/// A turn that began and was not finished (its process died).
#[derive(Debug, Clone, PartialEq)]
pub struct Unfinished {
    pub session: String,
    pub turn: String,
    /// The `origin` of its [`Step::Begin`].
    pub origin: serde_json::Value,
}

/// Problems reading or writing the journal.
#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("turn journal: {0}")]
    Backend(String),
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> JournalError + '_ {
    move |source| JournalError::Io { path: path.to_path_buf(), source }
}

/// Where turns are journalled. One worker handles a turn at a time (the
/// gateway's per-chat order, or a database lease), so implementations need
/// not arbitrate between writers of the same turn.
#[async_trait]
pub trait TurnJournal: Send + Sync {
    /// The recorded steps of `turn` in `session`, oldest first (a step that
    /// was being written when the process died is left out).
    async fn load(&self, session: &str, turn: &str) -> Result<TurnRecord, JournalError>;
    /// Records step number `step` (0, 1, 2, ... within the turn); durable
    /// when this returns.
    async fn record(
        &self,
        session: &str,
        turn: &str,
        step: u32,
        body: &Step,
    ) -> Result<(), JournalError>;
    /// Marks the turn finished: it is never resumed, and a message that
    /// would start it again is a duplicate.
    async fn finish(&self, session: &str, turn: &str) -> Result<(), JournalError>;
    /// Turns that began and were not finished, for a process that starts
    /// to take up (the files backend: the gateway on this box died). A
    /// backend whose queue hands unacknowledged messages to another worker
    /// anyway (a database) returns none, so a turn is not taken up twice.
    async fn unfinished(&self) -> Result<Vec<Unfinished>, JournalError>;
    /// Says that `turn` in `session` never started before (its message is
    /// handed out for the first time), so its next `load` has nothing to
    /// find: a backend may answer that one from memory. The default does nothing.
    fn never_started(&self, _session: &str, _turn: &str) {}
    /// Deletes what the journal holds of turns finished longer than `keep`
    /// ago (an unfinished turn stays, however old, for the process that
    /// resumes it); how many turns went. The default deletes nothing: a
    /// database's housekeeping prunes its journal with its other tables.
    async fn prune(&self, _keep: std::time::Duration) -> Result<usize, JournalError> {
        Ok(0)
    }
}

/// One line of a journal file.
#[derive(Serialize, Deserialize)]
#[serde(tag = "line", rename_all = "snake_case")]
enum Line {
    Step { turn: String, step: u32, body: Step },
    Finished { turn: String },
}

/// The journal in files beside one project's sessions: one JSONL file per
/// turn, `<session>.turns/<turn>.jsonl`, each line a step (or the finish
/// mark), each fsynced as it is written. A torn last line (a crash
/// mid-write) is skipped on load and cut off before the next write.
#[derive(Debug, Clone)]
pub struct FileJournal {
    dir: PathBuf,
}

impl FileJournal {
    /// A journal in `dir`, the folder of a project's session files
    /// ([`crate::SessionStore::project_dir`]).
    pub fn new(dir: &Path) -> Self {
        FileJournal { dir: dir.to_path_buf() }
    }

    /// The file of one turn.
    pub fn path_of(&self, session: &str, turn: &str) -> PathBuf {
        self.dir.join(format!("{session}.turns")).join(format!("{}.jsonl", file_name(turn)))
    }

    /// Writes `line` (not yet synced: see [`durable`]).
    fn append(&self, session: &str, line: &Line) -> Result<(Arc<File>, PathBuf), JournalError> {
        let turn = match line {
            Line::Step { turn, .. } | Line::Finished { turn } => turn,
        };
        let path = self.path_of(session, turn);
        let encode = |e| JournalError::Io { path: path.clone(), source: std::io::Error::other(e) };
        let mut bytes = serde_json::to_vec(line).map_err(encode)?;
        if crate::redact::contains_secret(&String::from_utf8_lossy(&bytes)) {
            let mut value = serde_json::to_value(line).map_err(encode)?;
            crate::redact::redact_json(&mut value);
            bytes = serde_json::to_vec(&value).map_err(encode)?;
        }
        bytes.push(b'\n');
        let dir = path.parent().unwrap_or(&self.dir);
        let created = !path.exists();
        if created {
            crate::private_files::create_dir_all(dir).map_err(io(dir))?;
        }
        let mut options = crate::private_files::options();
        options.create(true).read(true).append(true);
        let mut file = ferroclaw_tools::own_file::open_with(&path, options).map_err(io(&path))?;
        cut_torn_line(&mut file).map_err(io(&path))?;
        file.write_all(&bytes).map_err(io(&path))?;
        if created {
            // The new file's name must survive a crash too.
            File::open(dir).and_then(|d| d.sync_all()).map_err(io(dir))?;
        }
        Ok((Arc::new(file), path))
    }

    fn read(&self, session: &str, turn: &str) -> Result<TurnRecord, JournalError> {
        let path = self.path_of(session, turn);
        match ferroclaw_tools::own_file::open(&path) {
            Ok(file) => Ok(read_lines(file, &path).0),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(TurnRecord::default()),
            Err(e) => Err(io(&path)(e)),
        }
    }

    /// Deletes the files of turns finished (their finish mark written) and
    /// not written for `keep`, and `.turns` folders left empty.
    fn prune_finished(&self, keep: std::time::Duration) -> Result<usize, JournalError> {
        let mut pruned = 0;
        let sessions = match std::fs::read_dir(&self.dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
            Err(e) => return Err(io(&self.dir)(e)),
        };
        let now = std::time::SystemTime::now();
        for entry in sessions.flatten() {
            if !entry.file_name().to_string_lossy().ends_with(".turns") {
                continue;
            }
            let folder = entry.path();
            for file in std::fs::read_dir(&folder).into_iter().flatten().flatten() {
                let path = file.path();
                // Old first (a look at the folder entry), then finished (a read).
                let old = file.metadata().ok().filter(std::fs::Metadata::is_file).and_then(|m| {
                    now.duration_since(m.modified().ok()?).ok().filter(|age| *age >= keep)
                });
                if old.is_none() {
                    continue;
                }
                let Ok(opened) = ferroclaw_tools::own_file::open(&path) else { continue };
                if read_lines(opened, &path).0.finished && std::fs::remove_file(&path).is_ok() {
                    pruned += 1;
                }
            }
            // Only an empty folder goes (a turn journalled meanwhile keeps it).
            let _ = std::fs::remove_dir(&folder);
        }
        Ok(pruned)
    }

    fn scan(&self) -> Result<Vec<Unfinished>, JournalError> {
        let mut out = Vec::new();
        let sessions = match std::fs::read_dir(&self.dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
            Err(e) => return Err(io(&self.dir)(e)),
        };
        for entry in sessions.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let Some(session) = name.strip_suffix(".turns") else { continue };
            for file in std::fs::read_dir(entry.path()).into_iter().flatten().flatten() {
                let path = file.path();
                let opened = match ferroclaw_tools::own_file::open(&path) {
                    Ok(file) => file,
                    Err(e) => {
                        tracing::warn!("turn journal skipped: {e}");
                        continue;
                    }
                };
                let (record, turn) = read_lines(opened, &path);
                if let (false, Some(Step::Begin { origin, .. }), Some(turn)) =
                    (record.finished, record.steps.first(), turn)
                {
                    let origin = origin.clone();
                    out.push(Unfinished { session: session.to_string(), turn, origin });
                }
            }
        }
        out.sort_by(|a, b| (&a.session, &a.turn).cmp(&(&b.session, &b.turn)));
        Ok(out)
    }
}

#[async_trait]
impl TurnJournal for FileJournal {
    async fn load(&self, session: &str, turn: &str) -> Result<TurnRecord, JournalError> {
        let (journal, session, turn) = (self.clone(), session.to_string(), turn.to_string());
        blocking(move || journal.read(&session, &turn)).await
    }

    async fn record(
        &self,
        session: &str,
        turn: &str,
        step: u32,
        body: &Step,
    ) -> Result<(), JournalError> {
        let line = Line::Step { turn: turn.to_string(), step, body: body.clone() };
        let (journal, session) = (self.clone(), session.to_string());
        durable(blocking(move || journal.append(&session, &line)).await?).await
    }

    async fn finish(&self, session: &str, turn: &str) -> Result<(), JournalError> {
        let line = Line::Finished { turn: turn.to_string() };
        let (journal, session) = (self.clone(), session.to_string());
        durable(blocking(move || journal.append(&session, &line)).await?).await
    }

    async fn unfinished(&self) -> Result<Vec<Unfinished>, JournalError> {
        let journal = self.clone();
        blocking(move || journal.scan()).await
    }

    async fn prune(&self, keep: std::time::Duration) -> Result<usize, JournalError> {
        let journal = self.clone();
        blocking(move || journal.prune_finished(keep)).await
    }
}

/// Waits until what was written to `file` is on disk, through the
/// process's group committer (the one session files use): many chats
/// finishing steps at once share its syncs.
async fn durable((file, path): (Arc<File>, PathBuf)) -> Result<(), JournalError> {
    crate::session::commit::GroupCommit::global().commit(file).await.map_err(io(&path))
}

/// Runs file work off the async threads (each write waits for the disk).
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, JournalError> + Send + 'static,
) -> Result<T, JournalError> {
    tokio::task::spawn_blocking(f)
        .await
        .unwrap_or_else(|e| Err(JournalError::Backend(format!("journal writer stopped: {e}"))))
}

/// The steps of a journal file in order, and its turn id. A line that does
/// not parse (a torn last line) is skipped; so is a step out of sequence
/// (the file's steps are the prefix numbered 0, 1, 2, ...).
fn read_lines(file: File, path: &Path) -> (TurnRecord, Option<String>) {
    let mut record = TurnRecord::default();
    let mut turn_id = None;
    let mut reader = BufReader::new(file);
    let mut line = Vec::new();
    loop {
        line.clear();
        match reader.read_until(b'\n', &mut line) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) => {
                tracing::warn!("{}: {e}", path.display());
                break;
            }
        }
        match serde_json::from_slice::<Line>(&line) {
            Ok(Line::Step { turn, step, body }) if step as usize == record.steps.len() => {
                turn_id = Some(turn);
                record.steps.push(body);
            }
            Ok(Line::Step { step, .. }) => {
                tracing::warn!("{}: step {step} out of sequence, skipped", path.display());
            }
            Ok(Line::Finished { turn }) => {
                turn_id = Some(turn);
                record.finished = true;
            }
            Err(e) if line.ends_with(b"\n") => {
                tracing::warn!("{}: a damaged line skipped: {e}", path.display());
            }
            Err(_) => {} // torn last line: cut before the next write
        }
    }
    (record, turn_id)
}

/// Cuts a torn last line (no newline at its end), so the next line starts
/// on its own.
fn cut_torn_line(file: &mut File) -> std::io::Result<()> {
    let len = file.metadata()?.len();
    let end = crate::session::complete_end(file, len)?;
    if end < len {
        file.set_len(end)?;
    }
    Ok(())
}

/// A turn id as a file name: safe characters kept, others `-`; a changed
/// or long id gets a hash, so two ids never share a file.
fn file_name(turn: &str) -> String {
    let mut name: String = turn
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '_' || c == '-' { c } else { '-' })
        .collect();
    if name.len() > MAX_TURN_NAME_CHARS || name != turn {
        name.truncate(MAX_TURN_NAME_CHARS);
        let hash =
            turn.bytes().fold(0x811c_9dc5u32, |h, b| (h ^ u32::from(b)).wrapping_mul(0x0100_0193));
        name.push_str(&format!("-{hash:08x}"));
    }
    name
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferroclaw_protocol::ToolCall;

    fn begin() -> Step {
        Step::Begin {
            input: Message::user("run it"),
            origin: serde_json::json!({"chat": 42}),
            session_len: 120,
        }
    }

    fn model(id: &str) -> Step {
        let call = ToolCall { id: id.into(), name: "bash".into(), input: serde_json::json!({}) };
        Step::Model {
            message: Message {
                role: ferroclaw_protocol::Role::Assistant,
                content: vec![ContentBlock::ToolCall(call)],
            },
            usage: Usage { input_tokens: 10, output_tokens: 5, ..Default::default() },
            stop: StopReason::ToolUse,
            bad_arguments: Vec::new(),
        }
    }

    fn tool(id: &str) -> Step {
        Step::Tool { result: ContentBlock::tool_result(id, "ok", false) }
    }

    #[tokio::test]
    async fn steps_come_back_in_the_order_they_were_recorded() {
        let dir = tempfile::tempdir().unwrap();
        let journal = FileJournal::new(dir.path());
        let steps = [begin(), model("c1"), tool("c1"), model("c2")];
        for (i, step) in steps.iter().enumerate() {
            journal.record("s", "t/1", i as u32, step).await.unwrap();
        }
        let record = journal.load("s", "t/1").await.unwrap();
        assert_eq!(record.steps, steps);
        assert!(!record.finished);
        assert_eq!(journal.load("s", "other").await.unwrap(), TurnRecord::default());
        let open = journal.unfinished().await.unwrap();
        assert_eq!(
            open,
            vec![Unfinished {
                session: "s".into(),
                turn: "t/1".into(),
                origin: serde_json::json!({"chat": 42})
            }]
        );
    }

    #[tokio::test]
    async fn a_torn_last_line_is_skipped_and_cut_before_the_next_step() {
        let dir = tempfile::tempdir().unwrap();
        let journal = FileJournal::new(dir.path());
        journal.record("s", "t", 0, &begin()).await.unwrap();
        journal.record("s", "t", 1, &model("c1")).await.unwrap();
        let path = journal.path_of("s", "t");
        let mut file = std::fs::OpenOptions::new().append(true).open(&path).unwrap();
        file.write_all(br#"{"line":"step","turn":"t","step":2,"body":{"kind":"to"#).unwrap();
        drop(file);
        assert_eq!(journal.load("s", "t").await.unwrap().steps, [begin(), model("c1")]);
        journal.record("s", "t", 2, &tool("c1")).await.unwrap();
        assert_eq!(journal.load("s", "t").await.unwrap().steps, [begin(), model("c1"), tool("c1")]);
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text.lines().count(), 3, "{text}");
    }

    #[tokio::test]
    async fn a_finished_turn_is_not_resumed() {
        let dir = tempfile::tempdir().unwrap();
        let journal = FileJournal::new(dir.path());
        journal.record("s", "a", 0, &begin()).await.unwrap();
        journal.record("s", "b", 0, &begin()).await.unwrap();
        journal.finish("s", "a").await.unwrap();
        assert!(journal.load("s", "a").await.unwrap().finished);
        let open: Vec<String> =
            journal.unfinished().await.unwrap().into_iter().map(|u| u.turn).collect();
        assert_eq!(open, ["b"]);
    }

    /// A long-running gateway's journal does not grow with every turn it
    /// ever ran: a finished turn's file goes once older than the time kept,
    /// an unfinished one stays (however old) to be resumed.
    #[tokio::test]
    async fn finished_turns_are_pruned_after_the_time_kept_and_unfinished_ones_stay() {
        let dir = tempfile::tempdir().unwrap();
        let journal = FileJournal::new(dir.path());
        journal.record("s", "done", 0, &begin()).await.unwrap();
        journal.record("s", "done", 1, &model("c1")).await.unwrap();
        journal.finish("s", "done").await.unwrap();
        journal.record("s", "running", 0, &begin()).await.unwrap();
        journal.record("other", "done-too", 0, &begin()).await.unwrap();
        journal.finish("other", "done-too").await.unwrap();
        let week = std::time::Duration::from_secs(7 * 86_400);
        assert_eq!(journal.prune(week).await.unwrap(), 0, "nothing is a week old");
        assert!(journal.load("s", "done").await.unwrap().finished);
        assert_eq!(journal.prune(std::time::Duration::ZERO).await.unwrap(), 2);
        assert_eq!(journal.load("s", "done").await.unwrap(), TurnRecord::default());
        assert!(!dir.path().join("other.turns").exists(), "an emptied folder goes");
        let open: Vec<String> =
            journal.unfinished().await.unwrap().into_iter().map(|u| u.turn).collect();
        assert_eq!(open, ["running"], "the unfinished turn is still resumed");
        assert_eq!(journal.load("s", "running").await.unwrap().steps, [begin()]);
    }

    #[test]
    fn turn_ids_that_differ_get_different_files() {
        assert_eq!(file_name("telegram-42-7"), "telegram-42-7");
        assert_ne!(file_name("a/b"), file_name("a:b"));
        assert!(file_name(&"x".repeat(500)).len() < 120);
    }
}
