//! Chat sessions kept in the shared database (several gateways, `[gateway]
//! store`), so gateways on machines that share no folder continue the same
//! conversations.
//!
//! The local JSONL file under `$FERROCLAW_HOME` stays the working copy the
//! agent opens. Before a claimed message runs, [`before_turn`] brings it up
//! to the database's copy (the claim itself read the chat's session, its
//! head and last line, so a copy that is up to date costs no round trip): lines the database has after where the file
//! ends are appended; lines the file has that the database never got (a
//! process died before storing them: they were never acknowledged) are cut
//! off; a file that has nothing in common with the database's copy is
//! replaced by it (written beside it, then renamed over it). After the turn,
//! [`after_turn`] reads the lines the turn appended, which the claim's
//! transaction stores with the answer
//! ([`ferroclaw_store::PgStore::complete_with_session`]). The chat's lease
//! makes its worker the session's only writer meanwhile.
//!
//! A session the database does not have yet, whose file exists here, is
//! taken as it is when the message runs for the first time (a box's history
//! from before it shared a database); on a retry the file holds what a
//! failed attempt wrote, so it is moved aside (`ID.jsonl.unstored-MS`).

use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use ferroclaw_store::{
    PgStore, SessionHead, SessionStart, SessionWrite, StoreError, storable_line,
};

use crate::chats::Chats;
use crate::sessions::SessionKey;

/// Why a session could not be brought up to date or read.
#[derive(Debug, thiserror::Error)]
pub enum SyncError {
    #[error("{0}")]
    Store(#[from] StoreError),
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> SyncError + '_ {
    move |source| SyncError::Io { path: path.to_path_buf(), source }
}

/// A chat's session as a turn found it.
#[derive(Debug, Clone)]
pub struct Synced {
    /// The session the chat talks in.
    pub session: String,
    pub path: PathBuf,
    /// The database's head before the turn (`None`: not stored yet).
    seen: Option<SessionHead>,
    /// The part of the file the database has: the turn's lines follow it.
    keep: SessionHead,
    /// The chat's session is to be recorded even if the turn keeps it (the
    /// database named none).
    record_current: bool,
}

/// Makes the chat's local session file the database's copy, before its
/// claimed message runs. `claimed`: where the turn starts as the claim read
/// it ([`ferroclaw_store::Claim::start`]); `None` when the chat has no
/// recorded session (then one query asks for the session this process
/// names and how far the database has it, and the turn records it, so the
/// chat's next claims bring it). `first_attempt`: the message never ran
/// before, so a local file the database lacks is history to keep, not a
/// failed try.
///
/// With the claim's start, a copy as long as the database's (or longer)
/// is checked and cut without asking the database anything; a shorter one
/// fetches what it lacks with the line to check it against, in one round
/// trip. The file work runs on the blocking pool, off the async runtime.
pub async fn before_turn(
    chats: &Chats,
    store: &PgStore,
    key: &SessionKey,
    claimed: Option<&SessionStart>,
    first_attempt: bool,
) -> Result<Synced, SyncError> {
    let start = match claimed {
        Some(claimed) => Start::claimed(claimed),
        None => Start::ask(chats, store, key).await?,
    };
    // The worker opens the session these names say.
    chats.names.set(key, &start.session);
    let session = start.session;
    let path = session_path(chats, &session);
    let local = local_len(&path).await?;
    let keep = match (start.seen, local) {
        (Some(head), local) => {
            bring_up(store, &session, &path, head, local.unwrap_or(0), start.known).await?;
            head
        }
        (None, Some(_)) if first_attempt => {
            tracing::info!(%session, "session not in the database yet; storing this box's copy with the turn");
            SessionHead::default()
        }
        (None, Some(_)) => {
            let aside = path.with_extension(format!("jsonl.unstored-{}", crate::files::now_ms()));
            tokio::fs::rename(&path, &aside).await.map_err(io(&path))?;
            tracing::warn!(%session, "the session's file holds what an unfinished attempt wrote and the database never stored; moved it to {}", aside.display());
            SessionHead::default()
        }
        (None, None) => SessionHead::default(),
    };
    Ok(Synced { session, path, seen: start.seen, keep, record_current: start.unrecorded })
}

/// Where a turn starts: the chat's session and how far the database has it.
struct Start {
    session: String,
    /// The database's head (`None`: not stored).
    seen: Option<SessionHead>,
    /// A stored line already fetched: the byte where it ends, and the line
    /// (`None`: no line ends there).
    known: Option<(u64, Option<String>)>,
    /// The database records no session for the chat: the turn records it.
    unrecorded: bool,
}

impl Start {
    /// What the claim read: the recorded session, its head and last line.
    fn claimed(claimed: &SessionStart) -> Self {
        let end = |h: SessionHead| u64::try_from(h.bytes).unwrap_or(0);
        Start {
            session: claimed.session.clone(),
            seen: claimed.head,
            known: claimed.head.map(|h| (end(h), claimed.last_line.clone())),
            unrecorded: false,
        }
    }

    /// Asked of the database (the claim found no recorded session; one may
    /// have been recorded since): the session, its head and, when the chat
    /// talks in the session this process names, the stored line ending
    /// where this process's copy of it ends. The local copy's length goes
    /// with the question so that the check comes back in the same round trip.
    async fn ask(chats: &Chats, store: &PgStore, key: &SessionKey) -> Result<Self, SyncError> {
        let here = chats.names.current(key);
        let here_len = local_len(&session_path(chats, &here)).await?.unwrap_or(0);
        let asked = i64::try_from(here_len).unwrap_or(i64::MAX);
        let (recorded, seen, here_line) =
            store.chat_session_start(&key.address(), &here, asked).await?;
        let known = here_line
            .zip(seen)
            .map(|(line, h)| (here_len.min(u64::try_from(h.bytes).unwrap_or(0)), line));
        Ok(Start { unrecorded: recorded.is_none(), session: recorded.unwrap_or(here), seen, known })
    }
}

/// The length of the file at `path`; `None` when there is none.
async fn local_len(path: &Path) -> Result<Option<u64>, SyncError> {
    match tokio::fs::metadata(path).await {
        Ok(m) => Ok(Some(m.len())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io(path)(e)),
    }
}

/// Runs `work` on the file at `path` on the blocking pool.
async fn on_file<T: Send + 'static>(
    path: &Path,
    work: impl FnOnce(&Path) -> std::io::Result<T> + Send + 'static,
) -> Result<T, SyncError> {
    let owned = path.to_path_buf();
    tokio::task::spawn_blocking(move || work(&owned))
        .await
        .map_err(|e| std::io::Error::other(e.to_string()))
        .and_then(|r| r)
        .map_err(io(path))
}

/// What a turn added, to store with its answer.
#[derive(Debug, Clone, Default)]
pub struct Added {
    /// The session's new lines.
    pub write: Option<SessionWrite>,
    /// The chat's session, when it changed (`/new`): (chat, session).
    pub current: Option<(String, String)>,
}

/// What the turn added to the chat's session, read from its file.
pub fn after_turn(chats: &Chats, key: &SessionKey, synced: &Synced) -> Result<Added, SyncError> {
    let write = match lines_from(&synced.path, synced.keep.bytes as u64)? {
        Tail::Missing => None,
        Tail::Lines(lines) => Some(SessionWrite {
            session: synced.session.clone(),
            seen: synced.seen,
            keep: synced.keep,
            lines,
        }),
        // Cut back before where it began (never in practice): store it whole.
        Tail::Cut => Some(SessionWrite {
            session: synced.session.clone(),
            seen: synced.seen,
            keep: SessionHead::default(),
            lines: read_lines(&synced.path).map_err(io(&synced.path))?.0,
        }),
    };
    let now = chats.names.current(key);
    let current = (now != synced.session || synced.record_current).then(|| (key.address(), now));
    Ok(Added { write, current })
}

/// Where this process keeps session `id`.
pub fn session_path(chats: &Chats, id: &str) -> PathBuf {
    chats.runtime.sessions().path_of(&chats.runtime.config().workspace, id)
}

/// Brings the file at `path` (`len` bytes) up to the database's `head`.
/// `known`: a stored line fetched already, with the byte where it ends.
///
/// The file agrees with the database when the stored line ending at
/// `min(len, head.bytes)` ends there in the file too: then what the
/// database never stored is cut, or what the file lacks appended (fetched
/// with that line, in one round trip); else the database's copy replaces it.
async fn bring_up(
    store: &PgStore,
    session: &str,
    path: &Path,
    head: SessionHead,
    len: u64,
    known: Option<(u64, Option<String>)>,
) -> Result<(), SyncError> {
    let stored = u64::try_from(head.bytes).unwrap_or(0);
    let at = len.min(stored);
    // The line to check the file against, and (when it is behind) what follows it.
    let (line, more) = match known {
        _ if at == 0 => (None, None),
        Some((end, line)) if end == at => (line, None),
        _ if at < stored => {
            let mut from = store.session_lines_from(session, at as i64).await?.into_iter();
            match from.next() {
                Some((end, line)) if end == at as i64 => {
                    (Some(line), Some(from.map(|(_, l)| l).collect::<Vec<_>>()))
                }
                _ => (None, None),
            }
        }
        _ => (store.session_line_ending_at(session, at as i64).await?, None),
    };
    let common = match line {
        Some(line) => on_file(path, move |p| has_line_ending_at(p, &line, at)).await?,
        None => false,
    };
    if common {
        if len > stored {
            on_file(path, move |p| {
                let file = std::fs::OpenOptions::new().write(true).open(p)?;
                file.set_len(stored)?;
                file.sync_data()
            })
            .await?;
            tracing::info!(%session, "cut {} bytes the database never stored", len - stored);
        } else if len < stored {
            let more = match more {
                Some(more) => more,
                None => store.session_lines_after(session, at as i64).await?,
            };
            on_file(path, move |p| append_lines(p, &more)).await?;
        }
        return Ok(());
    }
    // Nothing in common: the database's copy, whole.
    let all = match stored {
        0 => Vec::new(),
        _ => store.session_lines_after(session, 0).await?,
    };
    on_file(path, move |p| write_lines_atomically(p, &all)).await?;
    if len > 0 {
        tracing::info!(%session, "replaced this box's copy of the session with the database's");
    }
    Ok(())
}

/// True when the file's bytes just before `at` are `line` and its newline,
/// preceded by the file's start or another newline.
fn has_line_ending_at(path: &Path, line: &str, at: u64) -> std::io::Result<bool> {
    let want = line.len() as u64 + 1;
    if at < want {
        return Ok(false);
    }
    let start = at - want;
    let mut file = ferroclaw_tools::own_file::open(path)?;
    let (from, extra) = if start > 0 { (start - 1, 1) } else { (0, 0) };
    file.seek(SeekFrom::Start(from))?;
    let mut bytes = vec![0; (want + extra) as usize];
    file.read_exact(&mut bytes)?;
    let (before, rest) = bytes.split_at(extra as usize);
    Ok(before.iter().all(|b| *b == b'\n')
        && rest.ends_with(b"\n")
        && &rest[..rest.len() - 1] == line.as_bytes())
}

/// What a file holds after a byte offset.
enum Tail {
    /// No file.
    Missing,
    /// The complete lines after the offset (a torn last line left out).
    Lines(Vec<String>),
    /// The file is shorter, or the offset is not at a line's end.
    Cut,
}

fn lines_from(path: &Path, from: u64) -> Result<Tail, SyncError> {
    let mut file = match ferroclaw_tools::own_file::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Tail::Missing),
        Err(e) => return Err(io(path)(e)),
    };
    let len = file.metadata().map_err(io(path))?.len();
    if len < from {
        return Ok(Tail::Cut);
    }
    let start = from.saturating_sub(1);
    file.seek(SeekFrom::Start(start)).map_err(io(path))?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes).map_err(io(path))?;
    let body = if from > 0 {
        match bytes.split_first() {
            Some((b'\n', rest)) => rest,
            _ => return Ok(Tail::Cut),
        }
    } else {
        &bytes[..]
    };
    Ok(Tail::Lines(complete_lines(body).0))
}

/// The complete lines of `bytes` (as the database holds them) and whether a
/// torn last line (no newline) was left out.
fn complete_lines(bytes: &[u8]) -> (Vec<String>, bool) {
    let end = bytes.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
    let lines = bytes[..end]
        .split(|b| *b == b'\n')
        .take(bytes[..end].iter().filter(|b| **b == b'\n').count())
        .map(storable_line)
        .collect();
    (lines, end < bytes.len())
}

/// A session file's complete lines, and whether a torn last line was left out.
pub fn read_lines(path: &Path) -> std::io::Result<(Vec<String>, bool)> {
    let mut bytes = Vec::new();
    ferroclaw_tools::own_file::open(path)?.read_to_end(&mut bytes)?;
    Ok(complete_lines(&bytes))
}

/// The file `lines` make, each with its newline.
fn joined(lines: &[String]) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(lines.iter().map(|l| l.len() + 1).sum());
    for line in lines {
        bytes.extend_from_slice(line.as_bytes());
        bytes.push(b'\n');
    }
    bytes
}

fn append_lines(path: &Path, lines: &[String]) -> std::io::Result<()> {
    let mut file = ferroclaw_core::private_files::options().append(true).open(path)?;
    file.write_all(&joined(lines))?;
    file.sync_data()
}

/// Writes `lines` as the session file at `path` (private; readers see the
/// old file or the new one, never half of one).
pub fn write_lines_atomically(path: &Path, lines: &[String]) -> std::io::Result<()> {
    let dir = path.parent().ok_or_else(|| std::io::Error::other("no parent folder"))?;
    ferroclaw_core::private_files::create_dir_all(dir)?;
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("session");
    let tmp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    let write = || -> std::io::Result<()> {
        let mut file = ferroclaw_core::private_files::options()
            .create(true)
            .write(true)
            .truncate(true)
            .open(&tmp)?;
        file.write_all(&joined(lines))?;
        file.sync_data()?;
        std::fs::rename(&tmp, path)
    };
    write().inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_read_whole_and_a_torn_last_line_is_left_out() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl");
        std::fs::write(&path, "{\"a\":1}\n{\"b\":2}\n{\"c\":").unwrap();
        assert_eq!(
            read_lines(&path).unwrap(),
            (vec!["{\"a\":1}".into(), "{\"b\":2}".into()], true)
        );
        let Tail::Lines(after) = lines_from(&path, 8).unwrap() else { panic!() };
        assert_eq!(after, ["{\"b\":2}"]);
        assert!(matches!(lines_from(&path, 5).unwrap(), Tail::Cut), "not at a line's end");
        assert!(matches!(lines_from(&path, 99).unwrap(), Tail::Cut));
        assert!(matches!(lines_from(&dir.path().join("none"), 0).unwrap(), Tail::Missing));
        assert!(has_line_ending_at(&path, "{\"b\":2}", 16).unwrap());
        assert!(has_line_ending_at(&path, "{\"a\":1}", 8).unwrap());
        assert!(!has_line_ending_at(&path, "\"b\":2}", 16).unwrap(), "a line's end is not a line");
        write_lines_atomically(&path, &["x".into(), "y".into()]).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "x\ny\n");
    }

    #[tokio::test]
    async fn a_local_copy_is_brought_up_to_the_databases_whatever_state_it_is_in() {
        let Some(pg) = ferroclaw_testkit::PgCluster::shared() else { return };
        let store = PgStore::connect(&pg.database("bring_up"), Default::default()).await.unwrap();
        let stored: Vec<String> = ["{\"type\":\"meta\"}", "one", "two"].map(String::from).into();
        let write = SessionWrite {
            session: "s".into(),
            seen: None,
            keep: SessionHead::default(),
            lines: stored.clone(),
        };
        assert!(store.write_session(&write).await.unwrap());
        let head = store.session_head("s").await.unwrap().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl");
        let whole = "{\"type\":\"meta\"}\none\ntwo\n";
        for (local, why) in [
            ("", "empty"),
            ("{\"type\":\"meta\"}\n", "behind: the rest fetched"),
            ("{\"type\":\"meta\"}\none\ntwo\nunstored\n", "ahead: what was never stored is cut"),
            ("{\"type\":\"meta\"}\none\ntwo\n{\"torn", "a torn line"),
            ("{\"type\":\"meta\",\"x\":1}\nother\n", "another machine's history"),
            (whole, "the same"),
        ] {
            std::fs::write(&path, local).unwrap();
            bring_up(&store, "s", &path, head, local.len() as u64, None).await.unwrap();
            assert_eq!(std::fs::read_to_string(&path).unwrap(), whole, "{why}");
        }
        std::fs::remove_file(&path).unwrap();
        bring_up(&store, "s", &path, head, 0, None).await.unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), whole, "no file");
    }

    /// What a claim brings (the database's head and last line) is enough to
    /// check and cut a copy as long as the database's or longer: the turn
    /// starts without asking the database anything. A shorter copy asks
    /// (here it cannot: the database is away).
    #[tokio::test]
    async fn a_copy_as_long_as_the_databases_is_checked_against_the_claims_last_line_alone() {
        let Some(pg) = ferroclaw_testkit::PgCluster::start() else { return };
        let store = PgStore::connect(&pg.database("claimed"), Default::default()).await.unwrap();
        let stored: Vec<String> = ["{\"type\":\"meta\"}", "one", "two"].map(String::from).into();
        let write = SessionWrite {
            session: "s".into(),
            seen: None,
            keep: SessionHead::default(),
            lines: stored,
        };
        assert!(store.write_session(&write).await.unwrap());
        let head = store.session_head("s").await.unwrap().unwrap();
        let claimed = Some((head.bytes as u64, Some("two".to_string())));
        pg.stop();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl");
        let whole = "{\"type\":\"meta\"}\none\ntwo\n";
        for (local, why) in [
            (whole.to_string(), "the same"),
            (format!("{whole}unstored\n"), "ahead: what was never stored is cut"),
            (format!("{whole}{{\"torn"), "a torn line"),
        ] {
            std::fs::write(&path, &local).unwrap();
            let len = local.len() as u64;
            bring_up(&store, "s", &path, head, len, claimed.clone()).await.unwrap();
            assert_eq!(std::fs::read_to_string(&path).unwrap(), whole, "{why}");
        }
        let behind = "{\"type\":\"meta\"}\n";
        std::fs::write(&path, behind).unwrap();
        let len = behind.len() as u64;
        assert!(
            bring_up(&store, "s", &path, head, len, claimed.clone()).await.is_err(),
            "a copy that lacks lines fetches them"
        );
        pg.start_again();
        bring_up(&store, "s", &path, head, len, claimed).await.unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), whole, "behind: the rest fetched");
    }
}
