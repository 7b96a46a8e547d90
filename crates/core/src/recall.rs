//! Recall: every finished request (the user's text and the final answer) is
//! indexed in an embedded SQLite database with full-text search (FTS5, BM25
//! ranking) at `$FERROCLAW_HOME/recall.db`, and the `session_search` tool
//! ([`SessionSearchTool`]) lets the model find what was said in earlier
//! sessions, with the session id to resume or read.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use ferroclaw_tools::tool_input::{parse, schema_for};
use ferroclaw_tools::{Tool, ToolContext, ToolError, ToolOutput};
use rusqlite::config::DbConfig;
use rusqlite::{Connection, params};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use crate::clock;

/// Default number of hits `session_search` returns.
pub const DEFAULT_SEARCH_LIMIT: usize = 5;
/// Most hits `session_search` returns.
pub const MAX_SEARCH_LIMIT: usize = 20;
/// Characters of an answer stored for recall: long answers are cut, since
/// what matters for finding a session is its topic, not every line.
pub const MAX_INDEXED_CHARS: usize = 20_000;

/// A recall database problem.
#[derive(Debug, thiserror::Error)]
pub enum RecallError {
    #[error("recall database {path}: {source}")]
    Sqlite {
        path: PathBuf,
        #[source]
        source: rusqlite::Error,
    },
    #[error("cannot create {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// One search result.
#[derive(Debug, Clone, PartialEq)]
pub struct Hit {
    pub session_id: String,
    pub cwd: String,
    /// Unix seconds when the request finished.
    pub ts: u64,
    /// The matching part of the request or answer, terms in `[brackets]`.
    pub snippet: String,
    /// The request's first line, for context.
    pub request: String,
}

/// WAL pages (4 KiB each) written before they are copied into the database
/// (with two fsyncs): about a hundred indexed requests. Small enough that a
/// process opening the index reads the leftover WAL quickly.
const WAL_CHECKPOINT_PAGES: u32 = 256;

/// The recall index.
pub struct Recall {
    path: PathBuf,
    conn: Mutex<Connection>,
}

impl std::fmt::Debug for Recall {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recall").field("path", &self.path).finish()
    }
}

impl Recall {
    /// Opens (creating when needed) `home/recall.db`.
    pub fn open(home: &Path) -> Result<Recall, RecallError> {
        crate::private_files::create_home(home)
            .map_err(|source| RecallError::Io { path: home.to_path_buf(), source })?;
        // Created 0600 before SQLite opens it; its -wal and -shm files copy that mode.
        let path = home.join("recall.db");
        crate::private_files::options()
            .create(true)
            .append(true)
            .open(&path)
            .and_then(|_| crate::private_files::tighten(&path))
            .map_err(|source| RecallError::Io { path: path.clone(), source })?;
        Self::open_file(&path)
    }

    /// The process's one connection to `home/recall.db`, opened on first
    /// use and shared by every agent after (a gateway serving hundreds of
    /// chats holds one connection, not one per chat with its WAL files).
    pub fn shared(home: &Path) -> Result<Arc<Recall>, RecallError> {
        use std::collections::HashMap;
        use std::sync::{OnceLock, Weak};
        static OPEN: OnceLock<Mutex<HashMap<PathBuf, Weak<Recall>>>> = OnceLock::new();
        let mut open = OPEN
            .get_or_init(Mutex::default)
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let path = home.join("recall.db");
        if let Some(recall) = open.get(&path).and_then(Weak::upgrade) {
            return Ok(recall);
        }
        let recall = Arc::new(Self::open(home)?);
        open.retain(|_, weak| weak.strong_count() > 0);
        open.insert(path, Arc::downgrade(&recall));
        Ok(recall)
    }

    /// Opens (creating when needed) the database at `path`.
    pub fn open_file(path: &Path) -> Result<Recall, RecallError> {
        let err = |source| RecallError::Sqlite { path: path.to_path_buf(), source };
        let conn = Connection::open(path).map_err(err)?;
        conn.busy_timeout(std::time::Duration::from_secs(5)).map_err(err)?;
        // WAL with synchronous = NORMAL: a commit is a write, not an fsync (a
        // crash can lose the last few indexed requests, never corrupt the
        // index). The session files are what must survive; this index is a
        // convenience over them, and an fsync per answered request would
        // bound a busy gateway by the disk. The WAL is not checkpointed
        // when the connection closes (that cost a one-shot run four fsyncs
        // for one indexed request) but every WAL_CHECKPOINT_PAGES pages.
        conn.set_db_config(DbConfig::SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, true).map_err(err)?;
        conn.execute_batch(&format!(
            "PRAGMA journal_mode = WAL;
             PRAGMA synchronous = NORMAL;
             PRAGMA wal_autocheckpoint = {WAL_CHECKPOINT_PAGES};
             CREATE VIRTUAL TABLE IF NOT EXISTS turns USING fts5(
                 user, answer,
                 session_id UNINDEXED, cwd UNINDEXED, ts UNINDEXED,
                 tokenize = 'porter unicode61'
             );",
        ))
        .map_err(err)?;
        Ok(Recall { path: path.to_path_buf(), conn: Mutex::new(conn) })
    }

    fn err(&self, source: rusqlite::Error) -> RecallError {
        RecallError::Sqlite { path: self.path.clone(), source }
    }

    fn conn(&self) -> std::sync::MutexGuard<'_, Connection> {
        // A panic while holding the lock leaves a usable connection.
        self.conn.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Indexes one finished request: the user's text and the final answer.
    pub fn index_turn(
        &self,
        session_id: &str,
        cwd: &Path,
        user: &str,
        answer: &str,
        ts: u64,
    ) -> Result<(), RecallError> {
        self.conn()
            .execute(
                "INSERT INTO turns (user, answer, session_id, cwd, ts) VALUES (?1, ?2, ?3, ?4, ?5)",
                params![
                    crate::context::cap(user, MAX_INDEXED_CHARS),
                    crate::context::cap(answer, MAX_INDEXED_CHARS),
                    session_id,
                    cwd.to_string_lossy(),
                    ts as i64
                ],
            )
            .map(|_| ())
            .map_err(|e| self.err(e))
    }

    /// The best `limit` matches for `query`, best first (BM25). Any text is
    /// a valid query: it is split into words, each matched as a term (or a
    /// prefix, with a trailing `*`), any of them sufficing.
    pub fn search(&self, query: &str, limit: usize) -> Result<Vec<Hit>, RecallError> {
        let Some(expr) = fts_query(query) else {
            return Ok(Vec::new());
        };
        let conn = self.conn();
        let mut stmt = conn
            .prepare(
                "SELECT session_id, cwd, ts, snippet(turns, -1, '[', ']', '…', 16), user
                 FROM turns WHERE turns MATCH ?1 ORDER BY bm25(turns, 2.0, 1.0) LIMIT ?2",
            )
            .map_err(|e| self.err(e))?;
        let rows = stmt
            .query_map(params![expr, limit as i64], |row| {
                let user: String = row.get(4)?;
                Ok(Hit {
                    session_id: row.get(0)?,
                    cwd: row.get(1)?,
                    ts: row.get::<_, i64>(2)?.max(0) as u64,
                    snippet: row.get::<_, String>(3)?.replace('\n', " "),
                    request: user.lines().next().unwrap_or_default().chars().take(100).collect(),
                })
            })
            .map_err(|e| self.err(e))?;
        rows.collect::<Result<Vec<_>, _>>().map_err(|e| self.err(e))
    }

    /// Number of indexed requests.
    pub fn len(&self) -> Result<u64, RecallError> {
        self.conn()
            .query_row("SELECT count(*) FROM turns", [], |r| r.get::<_, i64>(0))
            .map(|n| n.max(0) as u64)
            .map_err(|e| self.err(e))
    }

    /// True when nothing is indexed.
    pub fn is_empty(&self) -> Result<bool, RecallError> {
        self.len().map(|n| n == 0)
    }
}

/// An FTS5 expression from free text: each word quoted (so no character is
/// FTS syntax), a trailing `*` kept as a prefix match, words joined by OR so
/// that BM25 ranks the sessions matching most of them first.
fn fts_query(query: &str) -> Option<String> {
    let terms: Vec<String> = query
        .split(|c: char| !(c.is_alphanumeric() || c == '*' || c == '_'))
        .filter_map(|w| {
            let prefix = w.ends_with('*');
            let word: String = w.chars().filter(|c| *c != '*').collect();
            (!word.is_empty())
                .then(|| if prefix { format!("\"{word}\"*") } else { format!("\"{word}\"") })
        })
        .collect();
    (!terms.is_empty()).then(|| terms.join(" OR "))
}

/// `session_search`'s input.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct SessionSearchArgs {
    query: String,
    #[schemars(range(min = 1, max = MAX_SEARCH_LIMIT))]
    limit: Option<u64>,
}

/// `session_search(query, limit?)`.
pub struct SessionSearchTool {
    recall: Arc<Recall>,
}

impl SessionSearchTool {
    /// A tool searching `recall`.
    pub fn new(recall: Arc<Recall>) -> Self {
        Self { recall }
    }
}

#[async_trait]
impl Tool for SessionSearchTool {
    fn name(&self) -> &str {
        "session_search"
    }

    fn description(&self) -> &str {
        "Searches earlier sessions of all projects (what the user asked, what you answered), \
         best first, with each session's id, date and folder: for when the user refers to \
         earlier work. Words match in any order and form; end one with * for a prefix."
    }

    fn input_schema(&self) -> Value {
        schema_for::<SessionSearchArgs>()
    }

    fn read_only(&self) -> bool {
        true
    }

    async fn execute(&self, input: Value, _ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let args: SessionSearchArgs = parse(input)?;
        let query = args.query.as_str();
        let limit =
            args.limit.map_or(DEFAULT_SEARCH_LIMIT, |n| (n as usize).clamp(1, MAX_SEARCH_LIMIT));
        let hits =
            self.recall.search(query, limit).map_err(|e| ToolError::Failed(e.to_string()))?;
        if hits.is_empty() {
            return Ok(ToolOutput::text(format!("no earlier session mentions {query:?}")));
        }
        Ok(ToolOutput::text(render_hits(&hits)))
    }
}

/// One block per hit: id, date, folder, request, snippet.
pub fn render_hits(hits: &[Hit]) -> String {
    let mut out = String::new();
    for h in hits {
        out.push_str(&format!(
            "session {} · {} · {}\n  asked: {}\n  match: {}\n",
            h.session_id,
            &clock::rfc3339(h.ts)[..10],
            h.cwd,
            h.request,
            h.snippet
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn free_text_becomes_a_safe_fts_expression() {
        assert_eq!(fts_query("release \"tags"), Some("\"release\" OR \"tags\"".into()));
        assert_eq!(fts_query("deploy* AND (x"), Some("\"deploy\"* OR \"AND\" OR \"x\"".into()));
        assert_eq!(fts_query("  -- ()"), None);
    }

    #[test]
    fn fts5_is_compiled_into_the_bundled_sqlite() {
        let dir = tempfile::tempdir().unwrap();
        let r = Recall::open(dir.path()).unwrap();
        assert!(r.is_empty().unwrap());
        assert!(dir.path().join("recall.db").is_file());
    }

    #[test]
    fn every_agent_of_a_process_shares_one_recall_connection() {
        let dir = tempfile::tempdir().unwrap();
        let a = Recall::shared(dir.path()).unwrap();
        let b = Recall::shared(dir.path()).unwrap();
        assert!(Arc::ptr_eq(&a, &b));
        let other = tempfile::tempdir().unwrap();
        assert!(!Arc::ptr_eq(&a, &Recall::shared(other.path()).unwrap()));
    }
}
