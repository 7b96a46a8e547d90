//! The SQLite database under `$FERROCLAW_HOME/index/<project key>.db`: its
//! schema, where it lives, and how it is opened.
//!
//! The database runs in WAL mode: one writer at a time (each update is one
//! `BEGIN IMMEDIATE` transaction; a second writer waits up to
//! [`BUSY_TIMEOUT`]), and readers are never blocked by it. The file is never
//! replaced: a schema from another version is dropped and rebuilt inside a
//! transaction.

use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::Connection;
use sha2::{Digest, Sha256};

use crate::Error;

/// Bumped whenever the tables change; an index with another version is rebuilt.
pub const SCHEMA_VERSION: &str = "2";

/// How long a writer waits for another writer before giving up.
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS files(
    id INTEGER PRIMARY KEY,
    path TEXT NOT NULL UNIQUE,
    language TEXT NOT NULL,
    hash TEXT NOT NULL,
    size INTEGER NOT NULL,
    mtime_ns INTEGER NOT NULL,
    is_test INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS symbols(
    id INTEGER PRIMARY KEY,
    file_id INTEGER NOT NULL REFERENCES files(id) ON DELETE CASCADE,
    parent_id INTEGER,
    kind TEXT NOT NULL,
    name TEXT NOT NULL,
    qualified TEXT NOT NULL,
    start_line INTEGER NOT NULL,
    end_line INTEGER NOT NULL,
    signature TEXT NOT NULL,
    doc TEXT,
    is_test INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS symbols_name ON symbols(name);
CREATE INDEX IF NOT EXISTS symbols_file ON symbols(file_id);
CREATE TABLE IF NOT EXISTS sites(
    id INTEGER PRIMARY KEY,
    file_id INTEGER NOT NULL REFERENCES files(id) ON DELETE CASCADE,
    caller_id INTEGER REFERENCES symbols(id) ON DELETE CASCADE,
    kind TEXT NOT NULL,
    name TEXT NOT NULL,
    qualifier TEXT,
    line INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS sites_name ON sites(name);
CREATE INDEX IF NOT EXISTS sites_file ON sites(file_id);
CREATE INDEX IF NOT EXISTS sites_caller ON sites(caller_id);
CREATE TABLE IF NOT EXISTS edges(
    site_id INTEGER NOT NULL REFERENCES sites(id) ON DELETE CASCADE,
    target_id INTEGER NOT NULL REFERENCES symbols(id) ON DELETE CASCADE,
    confidence REAL NOT NULL,
    exact INTEGER NOT NULL,
    PRIMARY KEY(site_id, target_id)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS edges_target ON edges(target_id);
CREATE TABLE IF NOT EXISTS imports(
    id INTEGER PRIMARY KEY,
    file_id INTEGER NOT NULL REFERENCES files(id) ON DELETE CASCADE,
    alias TEXT NOT NULL,
    path TEXT NOT NULL,
    line INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS imports_file ON imports(file_id);
";

const DROP: &str = "
DROP TABLE IF EXISTS edges; DROP TABLE IF EXISTS sites; DROP TABLE IF EXISTS imports;
DROP TABLE IF EXISTS symbols; DROP TABLE IF EXISTS files; DROP TABLE IF EXISTS meta;
";

/// The index file for the project at `workspace`:
/// `<home>/index/<folder name>-<16 hex of the path's SHA-256>.db`.
pub fn db_path(home: &Path, workspace: &Path) -> PathBuf {
    let canonical = workspace.canonicalize().unwrap_or_else(|_| workspace.to_path_buf());
    let digest = Sha256::digest(canonical.to_string_lossy().as_bytes());
    let hex: String = digest.iter().take(8).map(|b| format!("{b:02x}")).collect();
    let name: String = canonical
        .file_name()
        .map(|n| {
            n.to_string_lossy().chars().map(|c| if c.is_alphanumeric() { c } else { '_' }).collect()
        })
        .unwrap_or_else(|| "root".to_string());
    home.join("index").join(format!("{name}-{hex}.db"))
}

/// Opens (creating when `create`) the database at `path` with the schema in place.
pub(crate) fn open(path: &Path, create: bool) -> Result<Connection, Error> {
    if !create && !path.exists() {
        return Err(Error::NoIndex(path.to_path_buf()));
    }
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| Error::Io(dir.display().to_string(), e))?;
    }
    let conn = Connection::open(path).map_err(|e| Error::Db(path.display().to_string(), e))?;
    let ctx = |e| Error::Db(path.display().to_string(), e);
    conn.busy_timeout(BUSY_TIMEOUT).map_err(ctx)?;
    conn.pragma_update(None, "journal_mode", "WAL").map_err(ctx)?;
    conn.pragma_update(None, "synchronous", "NORMAL").map_err(ctx)?;
    conn.pragma_update(None, "foreign_keys", "ON").map_err(ctx)?;
    let version: Option<String> =
        conn.query_row("SELECT value FROM meta WHERE key = 'schema'", [], |r| r.get(0)).ok();
    if version.as_deref() != Some(SCHEMA_VERSION) {
        let tx = conn.unchecked_transaction().map_err(ctx)?;
        if version.is_some() {
            tx.execute_batch(DROP).map_err(ctx)?;
        }
        tx.execute_batch(SCHEMA).map_err(ctx)?;
        tx.execute(
            "INSERT OR REPLACE INTO meta(key, value) VALUES ('schema', ?1)",
            [SCHEMA_VERSION],
        )
        .map_err(ctx)?;
        tx.commit().map_err(ctx)?;
    }
    Ok(conn)
}
