//! Questions the index answers: a file's outline, symbols by name, a
//! symbol's definition, its callers and callees to some depth, and the
//! impact of changing it (transitive callers, their files, tests among them).

use std::collections::{HashMap, HashSet};

use rusqlite::{Row, params};

use crate::extract::SymbolKind;
use crate::{CodeIndex, Error};

/// The most edges one graph answer collects before it stops walking.
pub const MAX_GRAPH_EDGES: usize = 2_000;

/// The deepest `impact` walks.
pub const MAX_IMPACT_DEPTH: usize = 12;

/// A symbol as answers show it.
#[derive(Debug, Clone, PartialEq)]
pub struct SymbolInfo {
    pub id: i64,
    pub kind: String,
    pub name: String,
    pub qualified: String,
    pub path: String,
    pub start_line: u32,
    pub end_line: u32,
    pub signature: String,
    pub doc: Option<String>,
    /// A test function, or any symbol in a test file.
    pub is_test: bool,
}

/// One edge of a callers/callees answer.
#[derive(Debug, Clone, PartialEq)]
pub struct EdgeInfo {
    /// How many hops from the symbol asked about (1 = direct).
    pub depth: usize,
    /// `calls`, `inherits` or `references`.
    pub kind: String,
    /// The calling symbol; `None` for a call at a file's top level.
    pub from: Option<SymbolInfo>,
    pub to: SymbolInfo,
    /// Where the call is written.
    pub site_path: String,
    pub site_line: u32,
    /// Resolved by same-file or import rules (true) or by name alone.
    pub exact: bool,
    pub confidence: f64,
}

/// A name a symbol calls that the index could not link to a project symbol
/// (a library function, or too many same-named candidates).
#[derive(Debug, Clone, PartialEq)]
pub struct Unresolved {
    pub name: String,
    pub qualifier: Option<String>,
    pub site_path: String,
    pub site_line: u32,
}

/// A callers or callees answer.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Graph {
    /// The symbols the question named.
    pub roots: Vec<SymbolInfo>,
    pub edges: Vec<EdgeInfo>,
    /// Callees only: calls with no project target.
    pub unresolved: Vec<Unresolved>,
    /// True when [`MAX_GRAPH_EDGES`] cut the walk short.
    pub truncated: bool,
}

/// What changing a symbol may break.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Impact {
    pub roots: Vec<SymbolInfo>,
    /// Transitive callers with their distance, nearest first.
    pub callers: Vec<(usize, SymbolInfo, bool)>,
    /// Files holding the symbol's callers, sorted.
    pub files: Vec<String>,
    /// Tests among the callers.
    pub tests: Vec<SymbolInfo>,
    pub truncated: bool,
}

const SYMBOL_COLUMNS: &str = "s.id, s.kind, s.name, s.qualified, f.path, s.start_line, s.end_line, s.signature, s.doc, s.is_test OR f.is_test";

fn symbol_row(r: &Row, at: usize) -> rusqlite::Result<SymbolInfo> {
    Ok(SymbolInfo {
        id: r.get(at)?,
        kind: r.get(at + 1)?,
        name: r.get(at + 2)?,
        qualified: r.get(at + 3)?,
        path: r.get(at + 4)?,
        start_line: r.get(at + 5)?,
        end_line: r.get(at + 6)?,
        signature: r.get(at + 7)?,
        doc: r.get(at + 8)?,
        is_test: r.get(at + 9)?,
    })
}

impl CodeIndex {
    /// The symbols of one file in source order, with their nesting depth.
    pub fn outline(&self, path: &str) -> Result<Vec<(usize, SymbolInfo)>, Error> {
        let rel = path.trim_start_matches("./");
        let mut stmt = self
            .conn
            .prepare(&format!(
                "SELECT {SYMBOL_COLUMNS}, s.parent_id FROM symbols s JOIN files f ON f.id = s.file_id
                 WHERE f.path = ?1 ORDER BY s.start_line, s.id"
            ))
            .map_err(|e| self.db_err(e))?;
        let rows: Vec<(SymbolInfo, Option<i64>)> = stmt
            .query_map([rel], |r| Ok((symbol_row(r, 0)?, r.get(10)?)))
            .and_then(|rows| rows.collect())
            .map_err(|e| self.db_err(e))?;
        if rows.is_empty() && !self.has_file(rel)? {
            return Err(Error::NotIndexed(rel.to_string()));
        }
        let mut depth_of: HashMap<i64, usize> = HashMap::new();
        let mut out = Vec::new();
        for (sym, parent) in rows {
            let depth = parent.and_then(|p| depth_of.get(&p)).map_or(0, |d| d + 1);
            depth_of.insert(sym.id, depth);
            out.push((depth, sym));
        }
        Ok(out)
    }

    fn has_file(&self, rel: &str) -> Result<bool, Error> {
        self.conn
            .query_row("SELECT EXISTS(SELECT 1 FROM files WHERE path = ?1)", [rel], |r| r.get(0))
            .map_err(|e| self.db_err(e))
    }

    /// Symbols whose name contains `query` (case-insensitive): exact names
    /// first, then prefixes, then the rest; at most `limit`.
    pub fn find(
        &self,
        query: &str,
        kind: Option<SymbolKind>,
        limit: usize,
    ) -> Result<Vec<SymbolInfo>, Error> {
        let pattern =
            format!("%{}%", query.replace('\\', "\\\\").replace('%', "\\%").replace('_', "\\_"));
        let mut stmt = self
            .conn
            .prepare(&format!(
                "SELECT {SYMBOL_COLUMNS} FROM symbols s JOIN files f ON f.id = s.file_id
                 WHERE (s.name LIKE ?1 ESCAPE '\\' OR s.qualified LIKE ?1 ESCAPE '\\')
                   AND (?2 IS NULL OR s.kind = ?2)
                 ORDER BY (lower(s.name) = lower(?3)) DESC, (s.name LIKE ?4 ESCAPE '\\') DESC,
                          length(s.name), f.path, s.start_line
                 LIMIT ?5"
            ))
            .map_err(|e| self.db_err(e))?;
        let prefix =
            format!("{}%", query.replace('\\', "\\\\").replace('%', "\\%").replace('_', "\\_"));
        stmt.query_map(
            params![pattern, kind.map(SymbolKind::as_str), query, prefix, limit as i64],
            |r| symbol_row(r, 0),
        )
        .and_then(|rows| rows.collect())
        .map_err(|e| self.db_err(e))
    }

    /// The symbols `spec` names: `name`, `Type::name` / `Type.name` (a suffix
    /// of the qualified name), or `path/file.rs:name`.
    pub fn definition(&self, spec: &str) -> Result<Vec<SymbolInfo>, Error> {
        let spec = spec.trim();
        let (file, name) = match single_colon(spec) {
            Some(i) if spec[..i].contains(['/', '.']) && i + 1 < spec.len() => {
                (Some(spec[..i].trim_start_matches("./")), &spec[i + 1..])
            }
            _ => (None, spec),
        };
        let last = name.rsplit([':', '.']).next().unwrap_or(name);
        let qualified_suffix_rust = format!("%::{name}");
        let qualified_suffix_dot = format!("%.{name}");
        let mut stmt = self
            .conn
            .prepare(&format!(
                "SELECT {SYMBOL_COLUMNS} FROM symbols s JOIN files f ON f.id = s.file_id
                 WHERE s.name = ?1 AND (s.qualified = ?2 OR s.qualified LIKE ?3 OR s.qualified LIKE ?4)
                   AND (?5 IS NULL OR f.path = ?5)
                 ORDER BY f.is_test, f.path, s.start_line"
            ))
            .map_err(|e| self.db_err(e))?;
        stmt.query_map(
            params![last, name, qualified_suffix_rust, qualified_suffix_dot, file],
            |r| symbol_row(r, 0),
        )
        .and_then(|rows| rows.collect())
        .map_err(|e| self.db_err(e))
    }

    /// Who calls (or inherits from) `spec`, up to `depth` hops.
    pub fn callers(&self, spec: &str, depth: usize) -> Result<Graph, Error> {
        self.walk_graph(spec, depth, Direction::Callers)
    }

    /// What `spec` calls, up to `depth` hops, and the calls it makes that
    /// resolve to nothing in the project.
    pub fn callees(&self, spec: &str, depth: usize) -> Result<Graph, Error> {
        self.walk_graph(spec, depth, Direction::Callees)
    }

    /// Transitive callers of `spec`, the files they are in, and the tests among them.
    pub fn impact(&self, spec: &str) -> Result<Impact, Error> {
        let graph = self.walk_graph(spec, MAX_IMPACT_DEPTH, Direction::Callers)?;
        let mut seen = HashSet::new();
        let mut callers = Vec::new();
        let mut files = HashSet::new();
        let mut tests = Vec::new();
        for edge in &graph.edges {
            files.insert(edge.site_path.clone());
            let Some(from) = &edge.from else { continue };
            if seen.insert(from.id) {
                if from.is_test {
                    tests.push(from.clone());
                }
                callers.push((edge.depth, from.clone(), edge.exact));
            }
        }
        // Files that import the symbol or one of its callers depend on it too.
        let mut importers = self
            .conn
            .prepare(
                "SELECT DISTINCT f.path FROM edges e JOIN sites s ON s.id = e.site_id JOIN files f ON f.id = s.file_id
                 WHERE e.target_id = ?1 AND s.kind = 'imports'",
            )
            .map_err(|e| self.db_err(e))?;
        let reached = graph.roots.iter().map(|r| r.id).chain(callers.iter().map(|(_, c, _)| c.id));
        for id in reached {
            let paths: Vec<String> = importers
                .query_map([id], |r| r.get(0))
                .and_then(|rows| rows.collect())
                .map_err(|e| self.db_err(e))?;
            files.extend(paths);
        }
        let mut files: Vec<String> = files.into_iter().collect();
        files.sort();
        Ok(Impact { roots: graph.roots, callers, files, tests, truncated: graph.truncated })
    }

    fn walk_graph(&self, spec: &str, depth: usize, dir: Direction) -> Result<Graph, Error> {
        let roots = self.definition(spec)?;
        if roots.is_empty() {
            return Err(Error::UnknownSymbol(spec.to_string()));
        }
        let other = "t.id, t.kind, t.name, t.qualified, tf.path, t.start_line, t.end_line, t.signature, t.doc,
                     t.is_test OR tf.is_test";
        let sql = match dir {
            Direction::Callers => format!(
                "SELECT e.exact, e.confidence, s.kind, sf.path, s.line, {other}
                 FROM edges e JOIN sites s ON s.id = e.site_id JOIN files sf ON sf.id = s.file_id
                 LEFT JOIN symbols t ON t.id = s.caller_id LEFT JOIN files tf ON tf.id = t.file_id
                 WHERE e.target_id = ?1 AND s.kind != 'imports' ORDER BY sf.path, s.line"
            ),
            Direction::Callees => format!(
                "SELECT e.exact, e.confidence, s.kind, sf.path, s.line, {other}
                 FROM sites s JOIN edges e ON e.site_id = s.id JOIN files sf ON sf.id = s.file_id
                 JOIN symbols t ON t.id = e.target_id JOIN files tf ON tf.id = t.file_id
                 WHERE s.caller_id = ?1 ORDER BY sf.path, s.line"
            ),
        };
        let mut stmt = self.conn.prepare(&sql).map_err(|e| self.db_err(e))?;
        let mut by_id: HashMap<i64, SymbolInfo> = roots.iter().map(|r| (r.id, r.clone())).collect();
        let mut visited: HashSet<i64> = roots.iter().map(|r| r.id).collect();
        let mut frontier: Vec<i64> = roots.iter().map(|r| r.id).collect();
        let mut edges = Vec::new();
        let mut truncated = false;
        'walk: for level in 1..=depth.max(1) {
            let mut next = Vec::new();
            for id in &frontier {
                let rows: Vec<(bool, f64, String, String, u32, Option<SymbolInfo>)> = stmt
                    .query_map([id], |r| {
                        let other = match r.get::<_, Option<i64>>(5)? {
                            Some(_) => Some(symbol_row(r, 5)?),
                            None => None,
                        };
                        Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, other))
                    })
                    .and_then(|rows| rows.collect())
                    .map_err(|e| self.db_err(e))?;
                let here = by_id.get(id).cloned();
                for (exact, confidence, kind, site_path, site_line, other) in rows {
                    if edges.len() >= MAX_GRAPH_EDGES {
                        truncated = true;
                        break 'walk;
                    }
                    if let Some(o) = &other {
                        by_id.entry(o.id).or_insert_with(|| o.clone());
                        if visited.insert(o.id) {
                            next.push(o.id);
                        }
                    }
                    let Some(here) = here.clone() else { continue };
                    let (from, to) = match dir {
                        Direction::Callers => (other, here),
                        Direction::Callees => match other {
                            Some(o) => (Some(here), o),
                            None => continue,
                        },
                    };
                    edges.push(EdgeInfo {
                        depth: level,
                        kind,
                        from,
                        to,
                        site_path,
                        site_line,
                        exact,
                        confidence,
                    });
                }
            }
            frontier = next;
            if frontier.is_empty() {
                break;
            }
        }
        let unresolved = match dir {
            Direction::Callees => self.unresolved_calls(&roots)?,
            Direction::Callers => Vec::new(),
        };
        Ok(Graph { roots, edges, unresolved, truncated })
    }

    fn unresolved_calls(&self, roots: &[SymbolInfo]) -> Result<Vec<Unresolved>, Error> {
        let mut stmt = self
            .conn
            .prepare(
                "SELECT s.name, s.qualifier, f.path, s.line FROM sites s JOIN files f ON f.id = s.file_id
                 WHERE s.caller_id = ?1 AND s.kind = 'calls'
                   AND NOT EXISTS (SELECT 1 FROM edges e WHERE e.site_id = s.id)
                 ORDER BY s.line",
            )
            .map_err(|e| self.db_err(e))?;
        let mut out = Vec::new();
        for root in roots {
            let rows: Vec<Unresolved> = stmt
                .query_map([root.id], |r| {
                    Ok(Unresolved {
                        name: r.get(0)?,
                        qualifier: r.get(1)?,
                        site_path: r.get(2)?,
                        site_line: r.get(3)?,
                    })
                })
                .and_then(|rows| rows.collect())
                .map_err(|e| self.db_err(e))?;
            out.extend(rows);
        }
        Ok(out)
    }

    /// The whole index as text, one fact a line, in a stable order (for
    /// snapshots and debugging): files, symbols, imports, then every site
    /// with its targets.
    pub fn dump(&self) -> Result<String, Error> {
        let mut out = String::new();
        let q = |sql: &str| -> Result<Vec<String>, Error> {
            let mut stmt = self.conn.prepare(sql).map_err(|e| self.db_err(e))?;
            stmt.query_map([], |r| r.get::<_, String>(0))
                .and_then(|rows| rows.collect())
                .map_err(|e| self.db_err(e))
        };
        let sections = [
            ("files", "SELECT path || ' ' || language || iif(is_test, ' [test]', '') FROM files ORDER BY path"),
            (
                "symbols",
                "SELECT f.path || ':' || s.start_line || '-' || s.end_line || ' ' || s.kind || ' ' || s.qualified
                        || iif(s.is_test, ' [test]', '') || ' | ' || s.signature || coalesce(' // ' || s.doc, '')
                 FROM symbols s JOIN files f ON f.id = s.file_id ORDER BY f.path, s.start_line, s.id",
            ),
            (
                "imports",
                "SELECT f.path || ':' || i.line || ' ' || i.alias || ' = ' || i.path
                 FROM imports i JOIN files f ON f.id = i.file_id ORDER BY f.path, i.line, i.alias",
            ),
            (
                "edges",
                "SELECT f.path || ':' || s.line || ' ' || coalesce(c.qualified, '<top>') || ' ' || s.kind || ' '
                        || coalesce(s.qualifier || '.', '') || s.name || ' -> '
                        || coalesce((SELECT group_concat(t, ', ') FROM (
                              SELECT tf.path || ':' || ts.start_line || ' ' || ts.qualified
                                     || iif(e.exact, ' exact', printf(' ~%.2f', e.confidence)) AS t
                              FROM edges e JOIN symbols ts ON ts.id = e.target_id JOIN files tf ON tf.id = ts.file_id
                              WHERE e.site_id = s.id ORDER BY tf.path, ts.start_line)), 'unresolved')
                 FROM sites s JOIN files f ON f.id = s.file_id LEFT JOIN symbols c ON c.id = s.caller_id
                 ORDER BY f.path, s.line, s.id",
            ),
        ];
        for (title, sql) in sections {
            out.push_str(&format!("# {title}\n"));
            for line in q(sql)? {
                out.push_str(&line);
                out.push('\n');
            }
        }
        Ok(out)
    }

    /// Counts of files, symbols, call/inheritance sites and edges (exact, all).
    pub fn counts(&self) -> Result<Counts, Error> {
        self.conn
            .query_row(
                "SELECT (SELECT count(*) FROM files), (SELECT count(*) FROM symbols), (SELECT count(*) FROM sites),
                        (SELECT count(*) FROM edges WHERE exact), (SELECT count(*) FROM edges)",
                [],
                |r| {
                    Ok(Counts {
                        files: r.get::<_, i64>(0)? as u64,
                        symbols: r.get::<_, i64>(1)? as u64,
                        sites: r.get::<_, i64>(2)? as u64,
                        exact_edges: r.get::<_, i64>(3)? as u64,
                        edges: r.get::<_, i64>(4)? as u64,
                    })
                },
            )
            .map_err(|e| self.db_err(e))
    }
}

/// Sizes of the index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Counts {
    pub files: u64,
    pub symbols: u64,
    pub sites: u64,
    pub exact_edges: u64,
    pub edges: u64,
}

/// The first `:` that is not part of a `::` (the end of `path:name`).
fn single_colon(spec: &str) -> Option<usize> {
    let bytes = spec.as_bytes();
    (0..bytes.len()).find(|&i| {
        bytes[i] == b':' && bytes.get(i + 1) != Some(&b':') && (i == 0 || bytes[i - 1] != b':')
    })
}

#[derive(Clone, Copy)]
enum Direction {
    Callers,
    Callees,
}
