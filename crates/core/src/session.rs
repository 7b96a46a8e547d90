//! Sessions: every conversation is an append-only JSONL file under
//! `$FERROCLAW_HOME/sessions/<project>/<id>.jsonl`. The first line is metadata;
//! each later line is one entry, written as it happens, fsynced at turn
//! boundaries. A torn last line (a crash mid-write) is skipped on load and cut
//! off before the next append; a malformed line elsewhere is skipped with a
//! warning. Resuming reads only the tail of a large file.

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use ferroclaw_protocol::{Message, Role, Usage};
use serde::{Deserialize, Serialize};

use crate::clock;

/// Bytes of a transcript's tail read when resuming: about the largest
/// context windows (200k tokens at ~4 characters each, plus JSON overhead):
/// anything older could not be sent anyway.
pub const RESUME_TAIL_BYTES: u64 = 1024 * 1024;

/// The first line of a session file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionMeta {
    pub id: String,
    pub cwd: PathBuf,
    pub model: String,
    /// RFC 3339 UTC.
    pub created: String,
    /// Format version of the file.
    pub version: u32,
    /// For a sub-agent's transcript: the session that started it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
}

/// One line of a session file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Entry {
    Meta(SessionMeta),
    /// A message of the conversation.
    Message {
        ts: u64,
        message: Message,
    },
    /// Tokens used by one model call.
    Usage {
        ts: u64,
        model: String,
        usage: Usage,
    },
    /// A permission decision on a tool call.
    Permission {
        ts: u64,
        tool: String,
        call_id: String,
        decision: String,
    },
    /// An error that ended a request (the conversation stays valid).
    Error {
        ts: u64,
        message: String,
    },
    /// The history was compacted: `replaced` messages gave way to one user
    /// message holding `summary` (see `compaction::compacted_history`).
    /// Resuming starts from the last such entry; the lines before it stay.
    Compaction {
        ts: u64,
        summary: String,
        replaced: usize,
    },
}

/// Problems with session files.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: not a ferroclaw session (first line is not session metadata)")]
    NotASession { path: PathBuf },
    #[error("no session {id:?} in {dir}")]
    NotFound { id: String, dir: PathBuf },
    #[error("session id {id:?} is ambiguous: {matches}")]
    Ambiguous { id: String, matches: String },
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> SessionError + '_ {
    move |source| SessionError::Io { path: path.to_path_buf(), source }
}

/// Where the sessions of every project live.
#[derive(Debug, Clone)]
pub struct SessionStore {
    root: PathBuf,
}

/// A session as listed: id, when, model, first request, size.
#[derive(Debug, Clone, Serialize)]
pub struct SessionSummary {
    pub id: String,
    pub path: PathBuf,
    pub created: String,
    pub model: String,
    pub title: String,
    pub bytes: u64,
    pub modified: u64,
    /// The session that started this one, for sub-agent transcripts.
    pub parent: Option<String>,
}

impl SessionStore {
    /// The store under `home/sessions`.
    pub fn new(home: &Path) -> Self {
        Self { root: home.join("sessions") }
    }

    /// The folder of one project's sessions: its path with separators as `-`.
    pub fn project_dir(&self, cwd: &Path) -> PathBuf {
        let key: String = cwd
            .to_string_lossy()
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() || c == '.' || c == '_' { c } else { '-' })
            .collect();
        self.root.join(key)
    }

    /// Starts a new session file for `cwd` and writes its metadata line.
    pub fn create(&self, cwd: &Path, model: &str) -> Result<SessionLog, SessionError> {
        self.create_named(cwd, &clock::session_id(), model)
    }

    /// Starts a session with exactly this id (the gateway names one per
    /// chat); fails if a file with that id exists.
    pub fn create_named(
        &self,
        cwd: &Path,
        id: &str,
        model: &str,
    ) -> Result<SessionLog, SessionError> {
        let meta = SessionMeta {
            id: id.to_string(),
            cwd: cwd.to_path_buf(),
            model: model.to_string(),
            created: clock::now_rfc3339(),
            version: 1,
            parent: None,
        };
        self.create_with(meta)
    }

    /// The file a session with this id has in a project (it may not exist).
    pub fn path_of(&self, cwd: &Path, id: &str) -> PathBuf {
        self.project_dir(cwd).join(format!("{id}.jsonl"))
    }

    /// Starts a sub-agent's transcript beside its parent's: id `PARENT.LABEL`.
    pub fn create_child(
        &self,
        parent: &SessionMeta,
        label: &str,
        model: &str,
    ) -> Result<SessionLog, SessionError> {
        let meta = SessionMeta {
            id: format!("{}.{label}", parent.id),
            cwd: parent.cwd.clone(),
            model: model.to_string(),
            created: clock::now_rfc3339(),
            version: 1,
            parent: Some(parent.id.clone()),
        };
        self.create_with(meta)
    }

    fn create_with(&self, meta: SessionMeta) -> Result<SessionLog, SessionError> {
        let dir = self.project_dir(&meta.cwd);
        crate::private_files::create_dir_all(&dir).map_err(io(&dir))?;
        let path = dir.join(format!("{}.jsonl", meta.id));
        let file = crate::private_files::options()
            .create_new(true)
            .append(true)
            .open(&path)
            .map_err(io(&path))?;
        let mut log = SessionLog { path, file, meta };
        log.append(&Entry::Meta(log.meta.clone()))?;
        log.sync()?;
        Ok(log)
    }

    /// The most recently written session of a project.
    pub fn latest(&self, cwd: &Path) -> Option<PathBuf> {
        self.list(cwd).into_iter().next().map(|s| s.path)
    }

    /// Finds a session by id or unique id prefix, in this project first, then in all.
    pub fn find(&self, cwd: &Path, id: &str) -> Result<PathBuf, SessionError> {
        let id = id.trim_end_matches(".jsonl");
        let direct = self.project_dir(cwd).join(format!("{id}.jsonl"));
        if direct.is_file() {
            return Ok(direct);
        }
        let mut matches = Vec::new();
        for dir in std::fs::read_dir(&self.root).into_iter().flatten().flatten() {
            for file in std::fs::read_dir(dir.path()).into_iter().flatten().flatten() {
                let name = file.file_name().to_string_lossy().into_owned();
                let stem = name.trim_end_matches(".jsonl");
                // Sub-agent transcripts (`PARENT.LABEL`) only when asked for by such an id.
                let child = stem.contains('.') && !id.contains('.');
                if name.ends_with(".jsonl") && name.starts_with(id) && !child {
                    matches.push(file.path());
                }
            }
        }
        match matches.len() {
            1 => Ok(matches.remove(0)),
            0 => Err(SessionError::NotFound { id: id.to_string(), dir: self.root.clone() }),
            _ => Err(SessionError::Ambiguous {
                id: id.to_string(),
                matches: matches
                    .iter()
                    .filter_map(|p| p.file_stem())
                    .map(|s| s.to_string_lossy().into_owned())
                    .collect::<Vec<_>>()
                    .join(", "),
            }),
        }
    }

    /// A project's sessions, newest first (sub-agent transcripts left out).
    /// Reads only the first lines of each.
    pub fn list(&self, cwd: &Path) -> Vec<SessionSummary> {
        let mut out: Vec<SessionSummary> = std::fs::read_dir(self.project_dir(cwd))
            .into_iter()
            .flatten()
            .flatten()
            .filter(|e| e.path().extension().is_some_and(|x| x == "jsonl"))
            .filter_map(|e| summarise(&e.path()).ok())
            .filter(|s| s.parent.is_none())
            .collect();
        out.sort_by(|a, b| b.modified.cmp(&a.modified).then(b.id.cmp(&a.id)));
        out
    }
}

/// Reads the metadata and the first user request of a session file.
fn summarise(path: &Path) -> Result<SessionSummary, SessionError> {
    let file = File::open(path).map_err(io(path))?;
    let md = file.metadata().map_err(io(path))?;
    let mut lines = BufReader::new(file).lines();
    let meta = match lines.next().and_then(Result::ok).map(|l| serde_json::from_str::<Entry>(&l)) {
        Some(Ok(Entry::Meta(m))) => m,
        _ => {
            return Err(SessionError::NotASession { path: path.to_path_buf() });
        }
    };
    let title = lines
        .take(50)
        .map_while(Result::ok)
        .filter_map(|l| serde_json::from_str::<Entry>(&l).ok())
        .find_map(|e| match e {
            Entry::Message { message, .. }
                if message.role == Role::User && !message.is_tool_results() =>
            {
                Some(message.text())
            }
            _ => None,
        })
        .unwrap_or_default();
    let modified = md
        .modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_secs());
    Ok(SessionSummary {
        id: meta.id,
        path: path.to_path_buf(),
        created: meta.created,
        model: meta.model,
        title: title.lines().next().unwrap_or_default().chars().take(80).collect(),
        bytes: md.len(),
        modified,
        parent: meta.parent,
    })
}

/// An open session file, appended to as the conversation happens.
#[derive(Debug)]
pub struct SessionLog {
    path: PathBuf,
    file: File,
    meta: SessionMeta,
}

/// What resuming a session recovered.
#[derive(Debug)]
pub struct Resumed {
    pub log: SessionLog,
    /// The conversation to continue, oldest first.
    pub messages: Vec<Message>,
    /// Bytes of older transcript not loaded (0 when all was read).
    pub skipped_bytes: u64,
    /// Lines that could not be parsed (a torn last line included).
    pub bad_lines: usize,
}

impl SessionLog {
    /// The session's metadata.
    pub fn meta(&self) -> &SessionMeta {
        &self.meta
    }

    /// The session file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends one entry as one line (a single write, so a crash tears at most
    /// it), with known secret values redacted (see [`crate::redact`]).
    pub fn append(&mut self, entry: &Entry) -> Result<(), SessionError> {
        let encode =
            |e| SessionError::Io { path: self.path.clone(), source: std::io::Error::other(e) };
        let mut line = serde_json::to_vec(entry).map_err(encode)?;
        if crate::redact::contains_secret(&String::from_utf8_lossy(&line)) {
            let mut value = serde_json::to_value(entry).map_err(encode)?;
            crate::redact::redact_json(&mut value);
            line = serde_json::to_vec(&value).map_err(encode)?;
        }
        line.push(b'\n');
        self.file.write_all(&line).map_err(io(&self.path))
    }

    /// Appends a message of the conversation.
    pub fn append_message(&mut self, message: &Message) -> Result<(), SessionError> {
        self.append(&Entry::Message { ts: clock::unix_seconds(), message: message.clone() })
    }

    /// Flushes the file to disk: called at turn boundaries.
    pub fn sync(&mut self) -> Result<(), SessionError> {
        self.file.sync_data().map_err(io(&self.path))
    }

    /// Opens a session to continue it: reads the metadata line and at most
    /// about `tail_bytes` of the newest entries (widening the window until it
    /// starts at a user request), and cuts off a torn last line so that the
    /// next append starts on a fresh line.
    pub fn resume(path: &Path, tail_bytes: u64) -> Result<Resumed, SessionError> {
        let mut file = OpenOptions::new().read(true).append(true).open(path).map_err(io(path))?;
        let len = file.metadata().map_err(io(path))?.len();
        let mut first = String::new();
        BufReader::new(&mut file).take(1 << 20).read_line(&mut first).map_err(io(path))?;
        let meta = match serde_json::from_str::<Entry>(first.trim_end()) {
            Ok(Entry::Meta(m)) => m,
            _ => {
                return Err(SessionError::NotASession { path: path.to_path_buf() });
            }
        };
        let body_start = first.len() as u64;
        let end = complete_end(&mut file, len).map_err(io(path))?;
        let mut bad_lines = usize::from(end < len);
        let mut window = tail_bytes.max(1);
        let (messages, skipped_bytes) = loop {
            let start = end.saturating_sub(window).max(body_start);
            let (msgs, bad, skipped) =
                read_messages(&mut file, start, end, body_start).map_err(io(path))?;
            let boundary = msgs.iter().position(|m| m.role == Role::User && !m.is_tool_results());
            match boundary {
                Some(i) => {
                    bad_lines += bad;
                    break (msgs[i..].to_vec(), skipped);
                }
                None if start == body_start => {
                    bad_lines += bad;
                    break (msgs, 0);
                }
                None => window = window.saturating_mul(2),
            }
        };
        if end < len {
            file.set_len(end).map_err(io(path))?;
            tracing::warn!(path = %path.display(), "cut off a torn last line ({} bytes)", len - end);
        }
        Ok(Resumed {
            log: SessionLog { path: path.to_path_buf(), file, meta },
            messages,
            skipped_bytes,
            bad_lines,
        })
    }
}

/// The offset just after the last newline: the end of the complete lines.
fn complete_end(file: &mut File, len: u64) -> std::io::Result<u64> {
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

/// Parses the message entries of the complete lines in `[start, end)`. When
/// `start` falls inside a line, that partial line is skipped. Returns the
/// messages, the number of unparsable lines and the bytes skipped before.
fn read_messages(
    file: &mut File,
    start: u64,
    end: u64,
    body_start: u64,
) -> std::io::Result<(Vec<Message>, usize, u64)> {
    file.seek(SeekFrom::Start(start))?;
    let mut reader = BufReader::new(file.take(end - start));
    let mut skipped = start - body_start;
    if start > body_start {
        // Possibly mid-line: drop up to the next newline.
        let mut partial = Vec::new();
        skipped += reader.read_until(b'\n', &mut partial)? as u64;
    }
    let mut messages = Vec::new();
    let mut bad = 0;
    let mut line = String::new();
    loop {
        line.clear();
        if reader.read_line(&mut line)? == 0 {
            break;
        }
        match serde_json::from_str::<Entry>(line.trim_end()) {
            Ok(Entry::Message { message, .. }) => messages.push(message),
            Ok(Entry::Compaction { summary, .. }) => {
                messages.clear();
                messages.push(Message::user(summary));
            }
            Ok(_) => {}
            Err(_) if serde_json::from_str::<serde_json::Value>(&line).is_ok() => {} // a newer entry type
            Err(e) => {
                bad += 1;
                tracing::warn!("skipping a malformed session line: {e}");
            }
        }
    }
    Ok((messages, bad, skipped))
}

/// Streams a session's entries in order, for `sessions show`; bad lines are skipped.
pub fn for_each_entry(path: &Path, mut f: impl FnMut(Entry)) -> Result<(), SessionError> {
    let file = File::open(path).map_err(io(path))?;
    for line in BufReader::new(file).lines() {
        let line = line.map_err(io(path))?;
        if let Ok(entry) = serde_json::from_str::<Entry>(&line) {
            f(entry);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferroclaw_protocol::ContentBlock;

    fn store() -> (tempfile::TempDir, SessionStore) {
        let dir = tempfile::tempdir().unwrap();
        let store = SessionStore::new(dir.path());
        (dir, store)
    }

    #[test]
    fn a_session_round_trips_and_the_latest_is_found() {
        let (_d, store) = store();
        let cwd = Path::new("/work/proj");
        let mut log = store.create(cwd, "anthropic/x").unwrap();
        log.append_message(&Message::user("hello")).unwrap();
        log.append_message(&Message::assistant("hi")).unwrap();
        log.sync().unwrap();
        let path = log.path().to_path_buf();
        assert_eq!(store.latest(cwd), Some(path.clone()));
        let r = SessionLog::resume(&path, RESUME_TAIL_BYTES).unwrap();
        assert_eq!(r.messages, vec![Message::user("hello"), Message::assistant("hi")]);
        assert_eq!(r.log.meta().model, "anthropic/x");
        let listed = store.list(cwd);
        assert_eq!(listed[0].title, "hello");
        let id = &listed[0].id;
        assert_eq!(store.find(Path::new("/elsewhere"), &id[..17]).unwrap(), path);
    }

    #[test]
    fn a_torn_last_line_is_skipped_and_cut_before_the_next_append() {
        let (_d, store) = store();
        let mut log = store.create(Path::new("/p"), "m/m").unwrap();
        log.append_message(&Message::user("one")).unwrap();
        let path = log.path().to_path_buf();
        drop(log);
        let mut f = OpenOptions::new().append(true).open(&path).unwrap();
        f.write_all(br#"{"type":"message","ts":1,"message":{"role":"assis"#).unwrap();
        drop(f);
        let mut r = SessionLog::resume(&path, RESUME_TAIL_BYTES).unwrap();
        assert_eq!(r.messages, vec![Message::user("one")]);
        assert_eq!(r.bad_lines, 1);
        r.log.append_message(&Message::user("two")).unwrap();
        let again = SessionLog::resume(&path, RESUME_TAIL_BYTES).unwrap();
        assert_eq!(again.messages, vec![Message::user("one"), Message::user("two")]);
        assert_eq!(again.bad_lines, 0);
    }

    #[test]
    fn resume_reads_only_the_tail_and_starts_at_a_user_request() {
        let (_d, store) = store();
        let mut log = store.create(Path::new("/p"), "m/m").unwrap();
        for i in 0..200 {
            log.append_message(&Message::user(format!("question {i}"))).unwrap();
            let call = ContentBlock::ToolCall(ferroclaw_protocol::ToolCall {
                id: format!("c{i}"),
                name: "read".into(),
                input: serde_json::json!({"path": "x"}),
            });
            log.append_message(&Message { role: Role::Assistant, content: vec![call] }).unwrap();
            log.append_message(&Message {
                role: Role::User,
                content: vec![ContentBlock::tool_result(format!("c{i}"), "x".repeat(100), false)],
            })
            .unwrap();
            log.append_message(&Message::assistant(format!("answer {i}"))).unwrap();
        }
        let path = log.path().to_path_buf();
        let r = SessionLog::resume(&path, 2000).unwrap();
        assert!(r.skipped_bytes > 0);
        assert!(r.messages.len() < 800);
        assert_eq!(r.messages[0].role, Role::User);
        assert!(!r.messages[0].is_tool_results(), "never starts on orphaned tool results");
        assert_eq!(r.messages.last().unwrap().text(), "answer 199");
    }

    #[test]
    fn a_file_that_is_not_a_session_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.jsonl");
        std::fs::write(&p, "hello\n").unwrap();
        assert!(matches!(SessionLog::resume(&p, 100), Err(SessionError::NotASession { .. })));
    }
}
