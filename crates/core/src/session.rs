//! Sessions: every conversation is an append-only JSONL file under
//! `$FERROCLAW_HOME/sessions/<project>/<id>.jsonl`. The first line is metadata;
//! each later line is one entry, written as it happens, fsynced at turn
//! boundaries. A torn last line (a crash mid-write) is skipped on load and cut
//! off before the next append; a malformed line elsewhere (bad JSON, invalid
//! UTF-8) is skipped with a warning naming its line; a damaged metadata line
//! is rebuilt from the rest. Resuming reads only the tail of a large file and
//! repairs what a killed process left half-done (see [`repair`]). One process
//! writes a session at a time: opening it takes an exclusive lock on the
//! file, and a second opener is refused with [`SessionError::Busy`].

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use ferroclaw_protocol::{Message, Role, Usage};
use serde::{Deserialize, Serialize};

use crate::clock;

pub mod commit;
mod lines;
mod release;
pub mod repair;

pub(crate) use lines::complete_end;
pub use lines::for_each_entry;
use lines::{line_number, parse_line, read_messages};
pub use repair::{INTERRUPTED_RESULT, Repairs};

/// Bytes of a transcript's tail read when resuming: about the largest
/// context windows (200k tokens at ~4 characters each, plus JSON overhead):
/// anything older could not be sent anyway.
pub const RESUME_TAIL_BYTES: u64 = 1024 * 1024;

/// New ids drawn before [`SessionStore::create`] gives up on clashes (each
/// clash is one chance in 65,536 per session started in the same second).
const MAX_ID_CLASHES: u32 = 16;

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
    /// A hook ran ([`crate::hooks`]): which, and what came of it.
    Hook {
        ts: u64,
        event: String,
        command: String,
        /// `None` when it timed out, did not start, or died by a signal.
        exit_code: Option<i32>,
        result: String,
        duration_ms: u64,
    },
    /// The workspace was snapshotted as `commit` in the checkpoint store
    /// (see [`crate::checkpoint`]): before the first call of a request that
    /// may change files, or before a rewind (so that it can be undone).
    Checkpoint {
        ts: u64,
        /// Unique within the session; what [`Entry::Rewind`] names.
        id: String,
        commit: String,
        /// The request it comes before, or which rewind.
        label: String,
        #[serde(default)]
        kind: CheckpointKind,
        /// Files left out of the snapshot, each with why.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        skipped: Vec<String>,
        /// Messages of its request written before it (the request itself,
        /// the model's answer asking for the call): a conversation rewind
        /// goes back to before them, to where the request began.
        #[serde(default, skip_serializing_if = "is_zero")]
        back: usize,
        /// The changes made after it are recorded as [`Entry::Changed`], so
        /// a rewind restores only those (false: a session from before, whose
        /// rewind restores the whole workspace).
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        records_changes: bool,
    },
    /// A rewind to checkpoint `to`: with `conversation`, the history from
    /// here on is what it was at that checkpoint (the lines between stay in
    /// the file); with `code`, the workspace was restored to its snapshot.
    Rewind {
        ts: u64,
        to: String,
        code: bool,
        conversation: bool,
    },
    /// The conversation went back to an earlier point to go on from there
    /// (an API client's regenerate or edit): its last `dropped` messages
    /// left the history; the messages after this entry follow. The lines
    /// before stay in the file.
    Branch {
        ts: u64,
        dropped: usize,
    },
    /// Files ferroclaw changed (a batch of tool calls, or a rewind): in the
    /// checkpoint store, `commit` is the workspace after, its parent before
    /// (see [`crate::checkpoint::changes`]). A rewind restores only these.
    Changed {
        ts: u64,
        commit: String,
    },
}

/// Why a checkpoint was taken.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CheckpointKind {
    /// Before a request that may change files.
    #[default]
    Request,
    /// Before a rewind, to undo it.
    Rewind,
}

/// [`Entry::Message`] borrowing its message, for writing (the same line).
#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum MessageLine<'a> {
    Message { ts: u64, message: &'a Message },
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
    #[error("no session {id:?} in {dir} (`ferroclaw sessions list` shows this project's)")]
    NotFound { id: String, dir: PathBuf },
    #[error("session id {id:?} is ambiguous: {matches}; give more of the id")]
    Ambiguous { id: String, matches: String },
    #[error(
        "session {id} is in use by another ferroclaw process ({path}); wait for it to end, \
         or start a new session (without --continue/--resume)"
    )]
    Busy { id: String, path: PathBuf },
    #[error(
        "session {id} was written by another ferroclaw process while this one was idle \
         ({path}); it is opened again from its file for the next message"
    )]
    Changed { id: String, path: PathBuf },
}

/// Ids named when a prefix matches several sessions (newest first); the
/// rest are counted, so a short prefix does not print hundreds of ids.
const AMBIGUOUS_SHOWN: usize = 5;

fn is_zero(n: &usize) -> bool {
    *n == 0
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
        // An id has 16 random bits per second: when many sessions start in
        // the same second and one draws a taken id, it draws again.
        let mut clashes = 0;
        loop {
            match self.create_named(cwd, &clock::session_id(), model) {
                Err(SessionError::Io { source, .. })
                    if source.kind() == std::io::ErrorKind::AlreadyExists
                        && clashes < MAX_ID_CLASHES =>
                {
                    clashes += 1;
                }
                other => return other,
            }
        }
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
        lock(&file, &path, &meta.id)?;
        let mut log = SessionLog {
            path,
            file: Some(Arc::new(file)),
            released: release::Stamp::default(),
            stale: false,
            meta,
            written_before_resume: None,
            failed: None,
            cut_back_to: None,
        };
        // Not synced here: the first turn's commit makes it durable with the
        // rest, and a file a crash left empty is taken up again (see `resume`).
        if let Err(e) = log.append(&Entry::Meta(log.meta.clone())) {
            // A full disk: leave no empty session behind to list or resume.
            let _ = std::fs::remove_file(&log.path);
            return Err(e);
        }
        Ok(log)
    }

    /// The most recently written session of a project.
    pub fn latest(&self, cwd: &Path) -> Option<PathBuf> {
        self.list(cwd).into_iter().next().map(|s| s.path)
    }

    /// Finds a session by id or unique id prefix, in this project first, then in all.
    pub fn find(&self, cwd: &Path, id: &str) -> Result<PathBuf, SessionError> {
        let id = id.trim_end_matches(".jsonl");
        // An id names a file in a project's folder (an editor's
        // `session/load` sends any text): never a path out of it.
        if id.is_empty() || id.starts_with('.') || id.contains(['/', '\\', '\0']) {
            return Err(SessionError::NotFound { id: id.to_string(), dir: self.root.clone() });
        }
        let direct = self.project_dir(cwd).join(format!("{id}.jsonl"));
        if direct.is_file() {
            return Ok(direct);
        }
        let here = self.project_dir(cwd);
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
        // A prefix that matches in this project means this project's session.
        if matches.iter().any(|p| p.parent() == Some(here.as_path())) {
            matches.retain(|p| p.parent() == Some(here.as_path()));
        }
        match matches.len() {
            1 => Ok(matches.remove(0)),
            0 => Err(SessionError::NotFound { id: id.to_string(), dir: self.root.clone() }),
            n => {
                // Ids start with their time: newest first, the first few named.
                let mut ids: Vec<String> = matches
                    .iter()
                    .filter_map(|p| p.file_stem())
                    .map(|s| s.to_string_lossy().into_owned())
                    .collect();
                ids.sort_unstable_by(|a, b| b.cmp(a));
                ids.truncate(AMBIGUOUS_SHOWN);
                let mut matches = ids.join(", ");
                if n > AMBIGUOUS_SHOWN {
                    matches.push_str(&format!(" and {} more", n - AMBIGUOUS_SHOWN));
                }
                Err(SessionError::Ambiguous { id: id.to_string(), matches })
            }
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
            .filter_map(|e| match summarise(&e.path()) {
                Ok(summary) => Some(summary),
                // A FIFO or a device where a session should be: said, and skipped.
                Err(e @ SessionError::Io { .. }) => {
                    tracing::warn!("session skipped: {e}");
                    None
                }
                Err(_) => None,
            })
            .filter(|s| s.parent.is_none())
            .collect();
        out.sort_by(|a, b| b.modified.cmp(&a.modified).then(b.id.cmp(&a.id)));
        out
    }
}

/// Reads the metadata and the first user request of a session file. A
/// damaged metadata line is rebuilt from the entries after it.
fn summarise(path: &Path) -> Result<SessionSummary, SessionError> {
    let file = ferroclaw_tools::own_file::open(path).map_err(io(path))?;
    let md = file.metadata().map_err(io(path))?;
    let mut reader = BufReader::new(file);
    let mut lines = std::iter::from_fn(|| {
        let mut buf = Vec::new();
        match reader.read_until(b'\n', &mut buf) {
            Ok(0) | Err(_) => None,
            Ok(_) => Some(parse_line(&buf)),
        }
    });
    let first = lines.next();
    let entries: Vec<Entry> = lines.take(50).filter_map(|e| e.ok().flatten()).collect();
    let meta = match first {
        Some(Ok(Some(Entry::Meta(m)))) => m,
        _ if !entries.is_empty() => rebuilt_meta(path, &entries),
        _ => return Err(SessionError::NotASession { path: path.to_path_buf() }),
    };
    let title = entries
        .into_iter()
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

/// Metadata for a file whose first line is damaged: the id from the file
/// name, the model from the last usage entry seen, the rest unknown (an empty
/// `cwd` is filled in by whoever opens it, see [`SessionLog::adopt_cwd`]).
fn rebuilt_meta(path: &Path, entries: &[Entry]) -> SessionMeta {
    let id = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    let model = entries
        .iter()
        .rev()
        .find_map(|e| match e {
            Entry::Usage { model, .. } => Some(model.clone()),
            _ => None,
        })
        .unwrap_or_default();
    SessionMeta {
        parent: id.split_once('.').map(|(parent, _)| parent.to_string()),
        id,
        cwd: PathBuf::new(),
        model,
        created: String::new(),
        version: 1,
    }
}

/// Reads the conversation from at most about `tail_bytes` before `end`,
/// widening the window until it starts at a user request and every rewind
/// in it finds its checkpoint.
fn read_tail(
    file: &mut File,
    end: u64,
    body_start: u64,
    tail_bytes: u64,
) -> std::io::Result<lines::Window> {
    let mut window = tail_bytes.max(1);
    loop {
        let start = end.saturating_sub(window).max(body_start);
        let mut read = read_messages(file, start, end, body_start)?;
        if read.unresolved_rewind && start > body_start {
            window = window.saturating_mul(2);
            continue;
        }
        let boundary =
            read.messages.iter().position(|m| m.role == Role::User && !m.is_tool_results());
        match boundary {
            Some(i) => {
                read.messages.drain(..i);
                return Ok(read);
            }
            None if start == body_start => {
                read.skipped = 0;
                return Ok(read);
            }
            None => window = window.saturating_mul(2),
        }
    }
}

/// How long a session file's lock found held is tried again before the
/// session counts as in use. A child process between its fork and its exec
/// holds a copy of each of the parent's descriptors (closed at exec), so a
/// log just closed (a gateway chat's file released after its turn while
/// another chat's command starts) keeps its lock for that moment; another
/// ferroclaw using the session holds it far longer.
const LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(1);

/// Takes the one-writer lock of a session file (released when it closes).
fn lock(file: &File, path: &Path, id: &str) -> Result<(), SessionError> {
    let deadline = std::time::Instant::now() + LOCK_WAIT;
    loop {
        match file.try_lock() {
            Ok(()) => return Ok(()),
            Err(std::fs::TryLockError::WouldBlock) if std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            Err(std::fs::TryLockError::WouldBlock) => {
                return Err(SessionError::Busy { id: id.to_string(), path: path.to_path_buf() });
            }
            Err(std::fs::TryLockError::Error(e)) => return Err(io(path)(e)),
        }
    }
}

/// An open session file, appended to as the conversation happens.
#[derive(Debug)]
pub struct SessionLog {
    path: PathBuf,
    /// Shared with the group committer while a sync is pending; `None`
    /// while released (an idle gateway chat holds no descriptor; see
    /// [`SessionLog::release`]).
    file: Option<Arc<File>>,
    /// The file as it was when released (length, inode, change times): a
    /// reopen that finds another finds another process's writes.
    released: release::Stamp,
    /// Set when a reopen found the file changed by another process: this
    /// log's conversation is out of date and must be opened again.
    stale: bool,
    meta: SessionMeta,
    /// When the file was last written before [`SessionLog::resume`] opened
    /// it (`None` for a new session): files the conversation knew and that
    /// have not changed since are still known (see `ReadLedger::recall`).
    written_before_resume: Option<std::time::SystemTime>,
    /// The first append that failed since the last commit (ENOSPC, EIO):
    /// the next [`SessionLog::commit`] fails with it, so a request whose
    /// lines were not all stored is not reported done.
    failed: Option<(std::io::ErrorKind, String)>,
    /// Where the file ended before a failed append: the next append cuts
    /// back to it first, so a torn fragment never sits mid-file.
    cut_back_to: Option<u64>,
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
    /// The lines of the conversation skipped as unreadable, `line N: why`.
    pub skipped_lines: Vec<String>,
    /// What was repaired in the loaded conversation.
    pub repairs: Repairs,
    /// True when the metadata line was damaged and rebuilt from the rest.
    pub rebuilt_meta: bool,
}

impl SessionLog {
    /// The session's metadata.
    pub fn meta(&self) -> &SessionMeta {
        &self.meta
    }

    /// When the file was last written before it was resumed (`None`: a new
    /// session).
    pub fn written_before_resume(&self) -> Option<std::time::SystemTime> {
        self.written_before_resume
    }

    /// The session file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends one entry as one line (a single write, so a crash tears at most
    /// it), with known secret values redacted (see [`crate::redact`]).
    pub fn append(&mut self, entry: &Entry) -> Result<(), SessionError> {
        self.append_line(entry)
    }

    /// Appends a message of the conversation (serialised where it is, not copied).
    pub fn append_message(&mut self, message: &Message) -> Result<(), SessionError> {
        self.append_line(&MessageLine::Message { ts: clock::unix_seconds(), message })
    }

    fn append_line(&mut self, entry: &impl Serialize) -> Result<(), SessionError> {
        let encode =
            |e| SessionError::Io { path: self.path.clone(), source: std::io::Error::other(e) };
        let mut line = serde_json::to_vec(entry).map_err(encode)?;
        // Valid UTF-8 (serde_json wrote it), so this borrows rather than copies.
        if crate::redact::contains_secret(&String::from_utf8_lossy(&line)) {
            let mut value = serde_json::to_value(entry).map_err(encode)?;
            crate::redact::redact_json(&mut value);
            line = serde_json::to_vec(&value).map_err(encode)?;
        }
        line.push(b'\n');
        // After a failed line the rest of the request is not written either,
        // so the file keeps what a crash at that line would have left (a
        // prefix, which loading repairs), never later lines over a hole.
        if let (Some(_), Some((kind, message))) = (self.cut_back_to, &self.failed) {
            let message = format!("not written after an earlier line failed: {message}");
            return Err(io(&self.path)(std::io::Error::new(*kind, message)));
        }
        let file = self.handle()?.clone();
        if let Some(len) = self.cut_back_to {
            file.set_len(len).map_err(io(&self.path))?;
            self.cut_back_to = None;
        }
        let before = file.metadata().map(|m| m.len());
        (&*file).write_all(&line).map_err(|e| {
            self.failed.get_or_insert_with(|| (e.kind(), e.to_string()));
            self.cut_back_to = before.as_ref().ok().copied();
            io(&self.path)(e)
        })
    }

    /// Flushes the file to disk now, on this thread (see [`SessionLog::commit`]
    /// for turn boundaries).
    pub fn sync(&mut self) -> Result<(), SessionError> {
        self.take_failure()?;
        let Some(file) = &self.file else { return Ok(()) }; // released: synced before
        file.sync_data().map_err(io(&self.path))
    }

    /// The append failure since the last commit or sync, once.
    fn take_failure(&mut self) -> Result<(), SessionError> {
        match self.failed.take() {
            None => Ok(()),
            Some((kind, message)) => {
                let message = format!("a line could not be written: {message}");
                let source = std::io::Error::new(kind, message);
                Err(SessionError::Io { path: self.path.clone(), source })
            }
        }
    }

    /// Makes everything appended so far durable through the process's group
    /// committer (see [`commit`]): called at turn boundaries. The async
    /// thread is free meanwhile, and many sessions ending turns at once
    /// share the syncer's batches.
    /// An append that failed since the last commit fails it, whatever the
    /// sync says.
    pub async fn commit(&mut self) -> Result<(), SessionError> {
        self.take_failure()?;
        let Some(file) = self.file.clone() else { return Ok(()) }; // released: committed before
        commit::GroupCommit::global().commit(file).await.map_err(io(&self.path))
    }

    /// The file's length in bytes now (0 when it cannot be read).
    pub fn len(&self) -> u64 {
        match &self.file {
            Some(file) => file.metadata().map_or(0, |m| m.len()),
            None => self.released.len,
        }
    }

    /// True when nothing was written yet.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Cuts the file back to `len` bytes, a line boundary it had (a turn
    /// resumed from its journal is written again from where it began).
    pub fn truncate(&mut self, len: u64) -> Result<(), SessionError> {
        self.cut_back_to = None;
        self.handle()?.set_len(len).map_err(io(&self.path))
    }

    /// True when the file has a line ending at byte `len` (0 counts): where
    /// it can be cut back to without tearing a line.
    pub fn ends_line_at(&self, len: u64) -> bool {
        use std::os::unix::fs::FileExt;
        let mut byte = [0u8];
        // Read through a handle of its own: a new session's is append-only.
        len == 0
            || ferroclaw_tools::own_file::open(&self.path)
                .and_then(|f| f.read_at(&mut byte, len - 1))
                .is_ok_and(|n| n == 1 && byte[0] == b'\n')
    }

    /// Fills in the folder of a session whose metadata had to be rebuilt.
    pub fn adopt_cwd(&mut self, cwd: &Path) {
        if self.meta.cwd.as_os_str().is_empty() {
            self.meta.cwd = cwd.to_path_buf();
        }
    }

    /// The conversation as the file has it now (after a rewind, say), read
    /// and repaired as [`resume`](Self::resume) would.
    pub fn conversation(&self, tail_bytes: u64) -> Result<Vec<Message>, SessionError> {
        let path = &self.path;
        let mut file = ferroclaw_tools::own_file::open(path).map_err(io(path))?;
        let len = file.metadata().map_err(io(path))?.len();
        let mut first = Vec::new();
        BufReader::new(&mut file).take(1 << 20).read_until(b'\n', &mut first).map_err(io(path))?;
        let end = complete_end(&mut file, len).map_err(io(path))?;
        let body_start = (first.len() as u64).min(end);
        let mut messages =
            read_tail(&mut file, end, body_start, tail_bytes).map_err(io(path))?.messages;
        repair::repair(&mut messages);
        Ok(messages)
    }

    /// Opens a session to continue it: takes its lock, reads the metadata
    /// line and at most about `tail_bytes` of the newest entries (widening the
    /// window until it starts at a user request), repairs the conversation
    /// (see [`repair`]), and cuts off a torn last line so that the next append
    /// starts on a fresh line.
    pub fn resume(path: &Path, tail_bytes: u64) -> Result<Resumed, SessionError> {
        let mut options = OpenOptions::new();
        options.read(true).append(true);
        let mut file = ferroclaw_tools::own_file::open_with(path, options).map_err(io(path))?;
        let stem = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
        lock(&file, path, &stem)?;
        let metadata = file.metadata().map_err(io(path))?;
        let (len, written_before_resume) = (metadata.len(), metadata.modified().ok());
        let mut first = Vec::new();
        BufReader::new(&mut file).take(1 << 20).read_until(b'\n', &mut first).map_err(io(path))?;
        let meta = match parse_line(&first) {
            Ok(Some(Entry::Meta(m))) => Some(m),
            _ => None,
        };
        let end = complete_end(&mut file, len).map_err(io(path))?;
        let body_start = (first.len() as u64).min(end);
        let mut bad_lines = usize::from(end < len);
        let read = read_tail(&mut file, end, body_start, tail_bytes).map_err(io(path))?;
        bad_lines += read.bad.len();
        let mut skipped_lines = Vec::with_capacity(read.bad.len());
        for (at, why) in &read.bad {
            let line = line_number(path, *at)
                .map_or_else(|| format!("byte {at}"), |n| format!("line {n}"));
            tracing::warn!("{}: {line} skipped: {why}", path.display());
            skipped_lines.push(format!("{line}: {why}"));
        }
        let was_rebuilt = meta.is_none();
        let meta = match meta {
            Some(m) => m,
            None if read.entries > 0 => {
                tracing::warn!(
                    "{}: line 1 (the session metadata) is damaged; rebuilt it from the rest",
                    path.display()
                );
                let usage = read.model.iter().map(|m| Entry::Usage {
                    ts: 0,
                    model: m.clone(),
                    usage: Usage::default(),
                });
                rebuilt_meta(path, &usage.collect::<Vec<_>>())
            }
            // Nothing complete in it: created, then a crash before its first
            // turn was made durable. It starts afresh under its name.
            None if end == 0 => {
                tracing::warn!(
                    "{}: empty (cut short when it was created); started afresh",
                    path.display()
                );
                rebuilt_meta(path, &[])
            }
            None => return Err(SessionError::NotASession { path: path.to_path_buf() }),
        };
        let mut messages = read.messages;
        let repairs = repair::repair(&mut messages);
        if repairs.any() {
            tracing::info!("{}: repaired on load: {repairs:?}", path.display());
        }
        if end < len {
            file.set_len(end).map_err(io(path))?;
            tracing::warn!(path = %path.display(), "cut off a torn last line ({} bytes)", len - end);
        }
        let mut log = SessionLog {
            path: path.to_path_buf(),
            file: Some(Arc::new(file)),
            released: release::Stamp::default(),
            stale: false,
            meta,
            written_before_resume,
            failed: None,
            cut_back_to: None,
        };
        if end == 0 {
            log.append(&Entry::Meta(log.meta.clone()))?;
        }
        Ok(Resumed {
            log,
            messages,
            skipped_bytes: read.skipped,
            bad_lines,
            skipped_lines,
            repairs,
            rebuilt_meta: was_rebuilt,
        })
    }
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
        drop(log);
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
    fn a_session_id_cannot_name_a_file_outside_the_sessions_folder() {
        let (d, store) = store();
        let cwd = Path::new("/work/proj");
        let log = store.create(cwd, "anthropic/x").unwrap();
        let outside = d.path().join("outside.jsonl");
        std::fs::copy(log.path(), &outside).unwrap();
        let up = store.project_dir(cwd).components().count() - d.path().components().count();
        let id = format!("{}outside", "../".repeat(up));
        assert!(store.project_dir(cwd).join(format!("{id}.jsonl")).is_file(), "the path exists");
        for id in [id.as_str(), "..", "", "a/../../outside"] {
            assert!(matches!(store.find(cwd, id), Err(SessionError::NotFound { .. })), "{id:?}");
        }
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
        drop(r);
        let again = SessionLog::resume(&path, RESUME_TAIL_BYTES).unwrap();
        // Two user turns in a row are merged into one on load.
        let mut merged = Message::user("one");
        merged.content.extend(Message::user("two").content);
        assert_eq!(again.messages, vec![merged]);
        assert_eq!(again.bad_lines, 0);
    }

    #[tokio::test]
    async fn a_failed_append_fails_the_commit_stops_the_request_and_the_next_append_cuts_its_fragment()
     {
        let (_d, store) = store();
        let mut log = store.create(Path::new("/p"), "m/m").unwrap();
        log.append_message(&Message::user("one")).unwrap();
        let writable = log.file.clone();
        // The disk refuses the next line (an injected writer error), and a
        // fragment of it is left behind, as ENOSPC leaves a short write.
        log.file = Some(Arc::new(File::open(log.path()).unwrap()));
        assert!(log.append_message(&Message::assistant("lost")).is_err());
        OpenOptions::new()
            .append(true)
            .open(log.path())
            .unwrap()
            .write_all(br#"{"type":"message","ts":1,"mess"#)
            .unwrap();
        log.file = writable;
        // The disk works again, but the request's later lines are refused:
        // no line is stored over the hole the lost one left.
        assert!(log.append_message(&Message::assistant("two")).is_err());
        let err = log.commit().await.unwrap_err().to_string();
        assert!(err.contains("a line could not be written"), "{err}");
        log.append_message(&Message::assistant("three")).unwrap();
        log.commit().await.unwrap();
        let text = std::fs::read_to_string(log.path()).unwrap();
        assert!(!text.contains("\"mess\"") && !text.contains("lost"), "{text}");
        assert!(!text.contains("two"), "{text}");
        let path = log.path().to_path_buf();
        drop(log);
        let again = SessionLog::resume(&path, RESUME_TAIL_BYTES).unwrap();
        assert_eq!(again.messages, vec![Message::user("one"), Message::assistant("three")]);
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
        drop(log);
        let r = SessionLog::resume(&path, 2000).unwrap();
        assert!(r.skipped_bytes > 0);
        assert!(r.messages.len() < 800);
        assert_eq!(r.messages[0].role, Role::User);
        assert!(!r.messages[0].is_tool_results(), "never starts on orphaned tool results");
        assert_eq!(r.messages.last().unwrap().text(), "answer 199");
    }

    #[test]
    fn a_session_open_for_writing_cannot_be_opened_again_until_closed() {
        let (_d, store) = store();
        let mut log = store.create(Path::new("/p"), "m/m").unwrap();
        log.append_message(&Message::user("one")).unwrap();
        let path = log.path().to_path_buf();
        assert!(matches!(
            SessionLog::resume(&path, RESUME_TAIL_BYTES),
            Err(SessionError::Busy { .. })
        ));
        drop(log);
        let r = SessionLog::resume(&path, RESUME_TAIL_BYTES).unwrap();
        assert!(matches!(
            SessionLog::resume(&path, RESUME_TAIL_BYTES),
            Err(SessionError::Busy { .. })
        ));
        drop(r);
    }

    #[test]
    fn a_session_closed_while_a_child_process_is_between_fork_and_exec_opens_again() {
        use std::io::{Read, Write};
        use std::os::unix::process::CommandExt;
        let (_d, store) = store();
        let log = store.create(Path::new("/p"), "m/m").unwrap();
        let path = log.path().to_path_buf();
        // A command another chat starts: its child holds a copy of every
        // descriptor, the log's locked one too, until it execs.
        let (mut forked, mut child_end) = std::os::unix::net::UnixStream::pair().unwrap();
        let mut command = std::process::Command::new("true");
        // SAFETY: the closure only writes to a socket and sleeps (system calls).
        unsafe {
            command.pre_exec(move || {
                child_end.write_all(b"x")?;
                std::thread::sleep(std::time::Duration::from_millis(300));
                Ok(())
            });
        }
        let spawner = std::thread::spawn(move || command.status().unwrap());
        forked.read_exact(&mut [0]).unwrap();
        drop(log);
        let reopened = SessionLog::resume(&path, RESUME_TAIL_BYTES);
        assert!(reopened.is_ok(), "{:?}", reopened.err());
        assert!(spawner.join().unwrap().success());
    }

    #[test]
    fn invalid_utf8_lines_are_skipped_and_a_lost_metadata_line_is_rebuilt() {
        let (_d, store) = store();
        let mut log = store.create(Path::new("/p"), "m/m").unwrap();
        log.append_message(&Message::user("one")).unwrap();
        log.append_message(&Message::assistant("two")).unwrap();
        let path = log.path().to_path_buf();
        drop(log);
        let text = std::fs::read(&path).unwrap();
        let body = &text[text.iter().position(|b| *b == b'\n').unwrap() + 1..];
        let mut damaged = b"\xff\xfe not json\n".to_vec();
        damaged.extend_from_slice(body);
        damaged.extend_from_slice(b"{\"type\":\"error\",\"ts\":1,\"message\":\"\xc3\x28\"}\n");
        std::fs::write(&path, damaged).unwrap();
        let r = SessionLog::resume(&path, RESUME_TAIL_BYTES).unwrap();
        assert!(r.rebuilt_meta);
        assert_eq!(r.bad_lines, 1);
        assert_eq!(r.messages, vec![Message::user("one"), Message::assistant("two")]);
        assert_eq!(r.log.meta().id, path.file_stem().unwrap().to_string_lossy());
        drop(r);
        let mut shown = 0;
        let skipped = for_each_entry(&path, |_| shown += 1).unwrap();
        assert_eq!((shown, skipped), (2, vec![1, 4]));
        assert_eq!(store.list(Path::new("/p")).len(), 1, "still listed");
    }

    #[test]
    fn a_session_file_a_crash_left_empty_or_torn_starts_afresh_under_its_name() {
        let (_d, store) = store();
        let cwd = Path::new("/p");
        for content in [&b""[..], br#"{"type":"meta","id":"#] {
            let path = store.path_of(cwd, "chat-1");
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, content).unwrap();
            let mut r = SessionLog::resume(&path, RESUME_TAIL_BYTES).unwrap();
            assert!(r.rebuilt_meta && r.messages.is_empty());
            r.log.adopt_cwd(cwd);
            r.log.append_message(&Message::user("hello")).unwrap();
            drop(r);
            let again = SessionLog::resume(&path, RESUME_TAIL_BYTES).unwrap();
            assert!(!again.rebuilt_meta, "its metadata line was written again");
            assert_eq!(again.log.meta().id, "chat-1");
            assert_eq!(again.messages, vec![Message::user("hello")]);
            drop(again);
            std::fs::remove_file(&path).unwrap();
        }
    }

    #[test]
    fn a_session_can_be_cut_back_only_where_a_line_ends() {
        let (_d, store) = store();
        let mut log = store.create(Path::new("/p"), "m/m").unwrap();
        let meta = log.len();
        log.append_message(&Message::user("one")).unwrap();
        assert!(log.ends_line_at(0) && log.ends_line_at(meta) && log.ends_line_at(log.len()));
        assert!(!log.ends_line_at(meta - 1), "inside the metadata line");
        assert!(!log.ends_line_at(log.len() + 1), "past the end");
    }

    #[test]
    fn a_file_that_is_not_a_session_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.jsonl");
        std::fs::write(&p, "hello\n").unwrap();
        assert!(matches!(SessionLog::resume(&p, 100), Err(SessionError::NotASession { .. })));
    }

    #[test]
    fn sessions_that_draw_the_same_id_in_the_same_second_both_start() {
        let home = tempfile::tempdir().unwrap();
        let store = SessionStore::new(home.path());
        fastrand::seed(7);
        let first = store.create(home.path(), "m").unwrap();
        fastrand::seed(7);
        let second = store.create(home.path(), "m").unwrap();
        assert_ne!(first.meta().id, second.meta().id);
        assert!(first.path().is_file() && second.path().is_file());
    }
}
