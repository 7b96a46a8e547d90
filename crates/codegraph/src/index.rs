//! Building and updating the index: walk the project, parse what changed,
//! write it in one transaction, and re-link every call site whose target
//! may have moved.
//!
//! Incremental by content: a file whose size and modification time match
//! the index is not read; one that was read but hashes the same is not
//! parsed. When a file's symbols are replaced, every site anywhere that
//! names one of the old or new symbols is resolved again, so edges into a
//! changed file are never silently lost.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};
use sha2::{Digest, Sha256};
use tree_sitter::Parser;

use crate::extract::{self, Parsed};
use crate::lang::Lang;
use crate::{Error, resolve, store};

/// Files larger than this are skipped (generated or vendored code).
pub const MAX_FILE_BYTES: u64 = 1024 * 1024;

/// Folders never walked into (as in the `grep` tool).
const SKIPPED_DIRS: &[&str] = &[".git", ".hg", ".svn", ".jj", "node_modules", "target"];

/// The code graph of one project, backed by its SQLite index.
pub struct CodeIndex {
    pub(crate) conn: Connection,
    root: PathBuf,
    db_path: PathBuf,
}

/// What an update did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct UpdateStats {
    /// Source files seen in the project.
    pub files: usize,
    /// Files parsed (new or changed content).
    pub parsed: usize,
    /// Files dropped because they are gone.
    pub removed: usize,
    /// Sites whose targets were resolved again.
    pub relinked_sites: usize,
    pub elapsed: Duration,
    /// Of `elapsed`: walking and reading, parsing, writing, linking.
    pub walk: Duration,
    pub parse: Duration,
    pub write: Duration,
    pub link: Duration,
}

/// How far the index is behind the files on disk.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Staleness {
    /// Files new, changed or deleted since the last update (relative paths).
    pub changed: Vec<String>,
    /// Seconds since the last update, when it ran at all.
    pub age_secs: Option<u64>,
}

/// A source file found on disk.
struct Found {
    rel: String,
    abs: PathBuf,
    lang: Lang,
    size: u64,
    mtime_ns: i64,
}

/// A file whose new content must be written.
struct Change {
    found: Found,
    hash: String,
    parsed: Parsed,
}

impl CodeIndex {
    /// Opens the index of `workspace` under `home` (`$FERROCLAW_HOME`),
    /// creating an empty one if there is none. Call [`CodeIndex::update`] to fill it.
    pub fn open(workspace: &Path, home: &Path) -> Result<CodeIndex, Error> {
        Self::open_at(workspace, &store::db_path(home, workspace), true)
    }

    /// Opens the index of `workspace` only if it was built before.
    pub fn open_existing(workspace: &Path, home: &Path) -> Result<CodeIndex, Error> {
        Self::open_at(workspace, &store::db_path(home, workspace), false)
    }

    fn open_at(workspace: &Path, db: &Path, create: bool) -> Result<CodeIndex, Error> {
        let root =
            workspace.canonicalize().map_err(|e| Error::Io(workspace.display().to_string(), e))?;
        let conn = store::open(db, create)?;
        Ok(CodeIndex { conn, root, db_path: db.to_path_buf() })
    }

    /// The project folder.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The database file.
    pub fn db_path(&self) -> &Path {
        &self.db_path
    }

    /// Brings the whole index up to date with the files on disk.
    pub fn update(&mut self) -> Result<UpdateStats, Error> {
        let started = Instant::now();
        let found = walk(&self.root);
        let walked = started.elapsed();
        let stored = self.stored_files()?;
        let seen: HashSet<&str> = found.iter().map(|f| f.rel.as_str()).collect();
        let removed: Vec<String> =
            stored.keys().filter(|p| !seen.contains(p.as_str())).cloned().collect();
        let files = found.len();
        let mut to_read = Vec::new();
        let mut touched = Vec::new();
        for f in found {
            match stored.get(&f.rel) {
                Some(s) if s.size == f.size as i64 && s.mtime_ns == f.mtime_ns => {}
                Some(s) => {
                    let hash = s.hash.clone();
                    to_read.push((f, Some(hash)));
                }
                None => to_read.push((f, None)),
            }
        }
        let parse_started = Instant::now();
        let changes = parse_all(to_read, &mut touched);
        let parse = parse_started.elapsed();
        let mut stats = self.apply(changes, &removed, &touched)?;
        stats.files = files;
        stats.walk = walked;
        stats.parse = parse;
        stats.elapsed = started.elapsed();
        Ok(stats)
    }

    /// Re-indexes one file right after it was edited (or dropped, when it is
    /// gone). `path` is absolute or relative to the project.
    pub fn reindex_file(&mut self, path: &Path) -> Result<UpdateStats, Error> {
        let started = Instant::now();
        let abs = if path.is_absolute() { path.to_path_buf() } else { self.root.join(path) };
        let abs = abs.canonicalize().unwrap_or(abs);
        let rel = match abs.strip_prefix(&self.root) {
            Ok(r) => rel_string(r),
            Err(_) => return Err(Error::OutsideProject(path.to_path_buf())),
        };
        let stored = self.stored_files()?;
        // What the walk would skip is not indexed (or is dropped) here either.
        let skipped = rel.split('/').any(|c| SKIPPED_DIRS.contains(&c));
        let meta = std::fs::metadata(&abs)
            .ok()
            .filter(|m| m.is_file() && m.len() <= MAX_FILE_BYTES && !skipped);
        let lang = Lang::of(&abs);
        let (Some(meta), Some(lang)) = (meta, lang) else {
            let removed: Vec<String> =
                stored.contains_key(&rel).then(|| rel.clone()).into_iter().collect();
            let mut stats = self.apply(Vec::new(), &removed, &[])?;
            stats.elapsed = started.elapsed();
            return Ok(stats);
        };
        let found =
            Found { rel: rel.clone(), abs, lang, size: meta.len(), mtime_ns: mtime_ns(&meta) };
        let old_hash = stored.get(&rel).map(|s| s.hash.clone());
        let mut touched = Vec::new();
        let changes = parse_all(vec![(found, old_hash)], &mut touched);
        let mut stats = self.apply(changes, &[], &touched)?;
        stats.files = 1;
        stats.elapsed = started.elapsed();
        Ok(stats)
    }

    /// How long a write waits for another writer before it fails
    /// ([`BUSY_TIMEOUT`](crate::BUSY_TIMEOUT) when opened).
    pub fn set_busy_timeout(&self, wait: Duration) -> Result<(), Error> {
        self.conn.busy_timeout(wait).map_err(|e| self.db_err(e))
    }

    /// Which files changed on disk since the last update, without reading them.
    pub fn staleness(&self) -> Result<Staleness, Error> {
        let stored = self.stored_files()?;
        let found = walk(&self.root);
        let mut changed = Vec::new();
        let mut seen = HashSet::new();
        for f in &found {
            seen.insert(f.rel.as_str());
            match stored.get(&f.rel) {
                Some(s) if s.size == f.size as i64 && s.mtime_ns == f.mtime_ns => {}
                _ => changed.push(f.rel.clone()),
            }
        }
        changed.extend(stored.keys().filter(|p| !seen.contains(p.as_str())).cloned());
        changed.sort();
        let updated: Option<i64> = self
            .conn
            .query_row("SELECT value FROM meta WHERE key = 'updated_at'", [], |r| {
                r.get::<_, String>(0)
            })
            .optional()
            .map_err(|e| self.db_err(e))?
            .and_then(|v| v.parse().ok());
        let age_secs = updated.map(|t| (unix_now() - t).max(0) as u64);
        Ok(Staleness { changed, age_secs })
    }

    pub(crate) fn db_err(&self, e: rusqlite::Error) -> Error {
        Error::Db(self.db_path.display().to_string(), e)
    }

    fn stored_files(&self) -> Result<HashMap<String, StoredFile>, Error> {
        let mut stmt = self
            .conn
            .prepare("SELECT path, hash, size, mtime_ns FROM files")
            .map_err(|e| self.db_err(e))?;
        let rows = stmt
            .query_map([], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    StoredFile { hash: r.get(1)?, size: r.get(2)?, mtime_ns: r.get(3)? },
                ))
            })
            .map_err(|e| self.db_err(e))?;
        rows.collect::<Result<HashMap<_, _>, _>>().map_err(|e| self.db_err(e))
    }

    /// Writes changed files, drops removed ones, records new times of files
    /// whose content did not change, and re-links, in one transaction.
    fn apply(
        &mut self,
        changes: Vec<Change>,
        removed: &[String],
        touched: &[Found],
    ) -> Result<UpdateStats, Error> {
        let started = Instant::now();
        let path = self.db_path.display().to_string();
        let err = |e| Error::Db(path.clone(), e);
        let tx =
            self.conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(err)?;
        let mut relink_names: HashSet<String> = HashSet::new();
        let mut relink_sites: HashSet<i64> = HashSet::new();
        let mut changed_files: Vec<i64> = Vec::new();
        for rel in removed {
            let old = old_symbols(&tx, rel, &mut relink_sites).map_err(err)?;
            relink_names.extend(old.into_iter().map(|(name, _, _)| name));
            tx.execute("DELETE FROM files WHERE path = ?1", [rel]).map_err(err)?;
        }
        for f in touched {
            tx.execute(
                "UPDATE files SET size = ?2, mtime_ns = ?3 WHERE path = ?1",
                params![f.rel, f.size as i64, f.mtime_ns],
            )
            .map_err(err)?;
        }
        let parsed = changes.len();
        for change in changes {
            // Sites linked into the old symbols lose their edges with them;
            // names added, removed or changed in kind or container may
            // change how any same-named site resolves.
            let old = old_symbols(&tx, &change.found.rel, &mut relink_sites).map_err(err)?;
            let new: HashSet<(String, String, String)> = change
                .parsed
                .symbols
                .iter()
                .map(|s| (s.name.clone(), s.kind.as_str().to_string(), s.qualified.clone()))
                .collect();
            relink_names.extend(old.symmetric_difference(&new).map(|(name, _, _)| name.clone()));
            tx.execute("DELETE FROM files WHERE path = ?1", [&change.found.rel]).map_err(err)?;
            let id = insert_file(&tx, &change).map_err(err)?;
            changed_files.push(id);
        }
        let write = started.elapsed();
        let relinked_sites =
            resolve::relink(&tx, &changed_files, &relink_names, &relink_sites).map_err(err)?;
        if parsed > 0 || !removed.is_empty() || !touched.is_empty() {
            tx.execute(
                "INSERT OR REPLACE INTO meta(key, value) VALUES ('updated_at', ?1)",
                [unix_now().to_string()],
            )
            .map_err(err)?;
        }
        tx.commit().map_err(err)?;
        Ok(UpdateStats {
            parsed,
            removed: removed.len(),
            relinked_sites,
            write,
            link: started.elapsed() - write,
            ..UpdateStats::default()
        })
    }
}

struct StoredFile {
    hash: String,
    size: i64,
    mtime_ns: i64,
}

/// The symbols `rel` defines now (about to be replaced or dropped), as
/// (name, kind, qualified name); the sites linked to them go into `linked`.
fn old_symbols(
    tx: &Connection,
    rel: &str,
    linked: &mut HashSet<i64>,
) -> rusqlite::Result<HashSet<(String, String, String)>> {
    let mut stmt = tx.prepare(
        "SELECT s.name, s.kind, s.qualified FROM symbols s JOIN files f ON f.id = s.file_id WHERE f.path = ?1",
    )?;
    let rows = stmt.query_map([rel], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?;
    let symbols = rows.collect::<rusqlite::Result<HashSet<_>>>()?;
    let mut sites = tx.prepare(
        "SELECT e.site_id FROM edges e JOIN symbols t ON t.id = e.target_id JOIN files f ON f.id = t.file_id
         WHERE f.path = ?1",
    )?;
    for id in sites.query_map([rel], |r| r.get::<_, i64>(0))? {
        linked.insert(id?);
    }
    Ok(symbols)
}

fn insert_file(tx: &Connection, change: &Change) -> rusqlite::Result<i64> {
    let f = &change.found;
    tx.execute(
        "INSERT INTO files(path, language, hash, size, mtime_ns, is_test) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        params![f.rel, f.lang.name(), change.hash, f.size as i64, f.mtime_ns, f.lang.is_test_path(&f.rel)],
    )?;
    let file_id = tx.last_insert_rowid();
    let mut ids: Vec<i64> = Vec::with_capacity(change.parsed.symbols.len());
    let mut sym = tx.prepare(
        "INSERT INTO symbols(file_id, parent_id, kind, name, qualified, start_line, end_line, signature, doc, is_test)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
    )?;
    for s in &change.parsed.symbols {
        let parent = s.parent.and_then(|p| ids.get(p).copied());
        sym.execute(params![
            file_id,
            parent,
            s.kind.as_str(),
            s.name,
            s.qualified,
            s.start_line,
            s.end_line,
            s.signature,
            s.doc,
            s.is_test
        ])?;
        ids.push(tx.last_insert_rowid());
    }
    let mut site = tx.prepare(
        "INSERT INTO sites(file_id, caller_id, kind, name, qualifier, line) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    )?;
    for s in &change.parsed.sites {
        let caller = s.caller.and_then(|c| ids.get(c).copied());
        site.execute(params![file_id, caller, s.kind.as_str(), s.name, s.qualifier, s.line])?;
    }
    let mut import =
        tx.prepare("INSERT INTO imports(file_id, alias, path, line) VALUES (?1, ?2, ?3, ?4)")?;
    for i in &change.parsed.imports {
        import.execute(params![file_id, i.alias, i.path, i.line])?;
    }
    Ok(file_id)
}

/// Reads and hashes each file; those whose hash matches `old` only get their
/// new size and time recorded (`touched`), the others are parsed, on all cores.
fn parse_all(files: Vec<(Found, Option<String>)>, touched: &mut Vec<Found>) -> Vec<Change> {
    let mut work = Vec::new();
    for (found, old) in files {
        let Ok(bytes) = std::fs::read(&found.abs) else { continue };
        let hash = content_hash(&bytes);
        if old.as_deref() == Some(hash.as_str()) {
            touched.push(found);
            continue;
        }
        let Ok(source) = String::from_utf8(bytes) else {
            tracing::debug!(path = %found.rel, "skipped: not UTF-8");
            continue;
        };
        work.push((found, hash, source));
    }
    let threads = std::thread::available_parallelism()
        .map_or(2, std::num::NonZero::get)
        .min(8)
        .min(work.len().max(1));
    let chunk = work.len().div_ceil(threads).max(1);
    let mut chunks: Vec<Vec<(Found, String, String)>> = Vec::new();
    let mut iter = work.into_iter().peekable();
    while iter.peek().is_some() {
        chunks.push(iter.by_ref().take(chunk).collect());
    }
    std::thread::scope(|s| {
        let handles: Vec<_> = chunks
            .into_iter()
            .map(|chunk| {
                s.spawn(move || {
                    let mut parser = Parser::new();
                    let mut out = Vec::new();
                    for (found, hash, source) in chunk {
                        match extract::parse(&mut parser, found.lang, &source) {
                            Some(parsed) => out.push(Change { found, hash, parsed }),
                            None => tracing::debug!(path = %found.rel, "skipped: tree-sitter could not parse it"),
                        }
                    }
                    out
                })
            })
            .collect();
        handles.into_iter().flat_map(|h| h.join().unwrap_or_default()).collect()
    })
}

/// The walker over `root`: `.gitignore` and friends honoured (in a git
/// repository or not), hidden files included, version-control folders,
/// `node_modules` and `target` skipped, symlinks not followed.
pub(crate) fn walker(root: &Path) -> ignore::WalkBuilder {
    let mut builder = ignore::WalkBuilder::new(root);
    builder.hidden(false).require_git(false).follow_links(false).filter_entry(|entry| {
        let is_dir = entry.file_type().is_some_and(|t| t.is_dir());
        !(is_dir && entry.file_name().to_str().is_some_and(|n| SKIPPED_DIRS.contains(&n)))
    });
    builder
}

/// Every source file under `root` in a language the index knows.
fn walk(root: &Path) -> Vec<Found> {
    let builder = walker(root);
    let mut out = Vec::new();
    for entry in builder.build().flatten() {
        if !entry.file_type().is_some_and(|t| t.is_file()) {
            continue;
        }
        let Some(lang) = Lang::of(entry.path()) else { continue };
        let Ok(meta) = entry.metadata() else { continue };
        if meta.len() > MAX_FILE_BYTES {
            continue;
        }
        let Ok(rel) = entry.path().strip_prefix(root) else { continue };
        out.push(Found {
            rel: rel_string(rel),
            abs: entry.path().to_path_buf(),
            lang,
            size: meta.len(),
            mtime_ns: mtime_ns(&meta),
        });
    }
    out.sort_by(|a, b| a.rel.cmp(&b.rel));
    out
}

fn rel_string(rel: &Path) -> String {
    rel.components().map(|c| c.as_os_str().to_string_lossy()).collect::<Vec<_>>().join("/")
}

fn mtime_ns(meta: &std::fs::Metadata) -> i64 {
    meta.modified()
        .ok()
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_nanos() as i64)
}

fn content_hash(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().take(16).map(|b| format!("{b:02x}")).collect()
}

fn unix_now() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64)
}
