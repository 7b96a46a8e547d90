//! The repo map: the project's most central symbols, ranked by how the
//! rest of the code refers to them (PageRank over calls, inheritance and
//! type references), listed by file with their signatures and fitted into a
//! token budget, for the prompt (`context.repo_map = true`).
//!
//! Unlike aider's, whose cache key includes the prompt (so huge repositories
//! are ranked again on every request), the map is cached in the index keyed
//! by the state of the index alone: every file's path and content hash, and
//! the budget. The same files give the same map, byte for byte.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::time::Duration;

use rusqlite::OptionalExtension;
use sha2::{Digest, Sha256};

use crate::{CodeIndex, Error};

/// The default budget of the map, in tokens (aider's default too).
pub const DEFAULT_REPO_MAP_TOKENS: usize = 1_024;

/// How long storing the map waits for another writer before it leaves the
/// map uncached.
const CACHE_WRITE_WAIT: Duration = Duration::from_millis(100);

/// PageRank's damping factor (the usual 0.85) and rounds (enough for the
/// ranking to settle on graphs of a few hundred thousand edges).
const DAMPING: f64 = 0.85;
const ROUNDS: usize = 30;

/// A symbol that may go on the map.
struct Node {
    id: i64,
    path: String,
    line: u32,
    kind: String,
    qualified: String,
    signature: String,
}

impl CodeIndex {
    /// The repo map within `max_tokens`, from the cache when the files (and
    /// the budget) are those it was built for. Empty when nothing in the
    /// project is referred to.
    pub fn repo_map(&self, max_tokens: usize) -> Result<String, Error> {
        let key = self.state_key(max_tokens)?;
        let cached: Option<(String, String)> = self
            .conn
            .query_row(
                "SELECT k.value, m.value FROM meta k JOIN meta m
                 ON k.key = 'repo_map_key' AND m.key = 'repo_map'",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()
            .map_err(|e| self.db_err(e))?;
        if let Some((k, map)) = cached
            && k == key
        {
            return Ok(map);
        }
        let map = self.build_repo_map(max_tokens)?;
        // A busy database (a running `ferroclaw index`) only costs the cache,
        // never the answer, and never makes the prompt wait.
        self.set_busy_timeout(CACHE_WRITE_WAIT)?;
        let stored = self.conn.execute(
            "INSERT OR REPLACE INTO meta(key, value) VALUES ('repo_map_key', ?1), ('repo_map', ?2)",
            [&key, &map],
        );
        self.set_busy_timeout(crate::BUSY_TIMEOUT)?;
        if let Err(e) = stored {
            tracing::debug!(error = %e, "repo map not cached");
        }
        Ok(map)
    }

    /// What the map depends on: every file's path and content hash, and the budget.
    fn state_key(&self, max_tokens: usize) -> Result<String, Error> {
        let mut stmt = self
            .conn
            .prepare("SELECT path, hash FROM files ORDER BY path")
            .map_err(|e| self.db_err(e))?;
        let mut hasher = Sha256::new();
        hasher.update(max_tokens.to_le_bytes());
        let rows = stmt
            .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))
            .map_err(|e| self.db_err(e))?;
        for row in rows {
            let (path, hash) = row.map_err(|e| self.db_err(e))?;
            hasher.update(path.as_bytes());
            hasher.update([0]);
            hasher.update(hash.as_bytes());
            hasher.update([0]);
        }
        Ok(hasher.finalize().iter().take(16).map(|b| format!("{b:02x}")).collect())
    }

    fn build_repo_map(&self, max_tokens: usize) -> Result<String, Error> {
        let nodes: Vec<Node> = {
            let mut stmt = self
                .conn
                .prepare(
                    "SELECT s.id, f.path, s.start_line, s.kind, s.qualified, s.signature
                     FROM symbols s JOIN files f ON f.id = s.file_id
                     WHERE NOT s.is_test AND NOT f.is_test AND s.kind != 'module'",
                )
                .map_err(|e| self.db_err(e))?;
            stmt.query_map([], |r| {
                Ok(Node {
                    id: r.get(0)?,
                    path: r.get(1)?,
                    line: r.get(2)?,
                    kind: r.get(3)?,
                    qualified: r.get(4)?,
                    signature: r.get(5)?,
                })
            })
            .and_then(|rows| rows.collect())
            .map_err(|e| self.db_err(e))?
        };
        let index_of: HashMap<i64, usize> =
            nodes.iter().enumerate().map(|(i, n)| (n.id, i)).collect();
        // (from, to, weight): a symbol's reference to another, weighted by confidence.
        let links: Vec<(usize, usize, f64)> = {
            let mut stmt = self
                .conn
                .prepare(
                    "SELECT s.caller_id, e.target_id, e.confidence FROM edges e JOIN sites s ON s.id = e.site_id
                     WHERE s.caller_id IS NOT NULL AND s.kind != 'imports' AND s.caller_id != e.target_id",
                )
                .map_err(|e| self.db_err(e))?;
            let rows: Vec<(i64, i64, f64)> = stmt
                .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
                .and_then(|rows| rows.collect())
                .map_err(|e| self.db_err(e))?;
            rows.into_iter()
                .filter_map(|(from, to, w)| Some((*index_of.get(&from)?, *index_of.get(&to)?, w)))
                .collect()
        };
        let rank = page_rank(nodes.len(), &links);
        let mut referred = vec![false; nodes.len()];
        for &(_, to, _) in &links {
            referred[to] = true;
        }
        let mut order: Vec<usize> = (0..nodes.len()).filter(|&i| referred[i]).collect();
        order.sort_by(|&a, &b| {
            rank[b]
                .total_cmp(&rank[a])
                .then_with(|| nodes[a].path.cmp(&nodes[b].path))
                .then_with(|| nodes[a].line.cmp(&nodes[b].line))
        });
        Ok(render(&nodes, &order, max_tokens))
    }
}

/// PageRank of `n` nodes over weighted `links`; a node with no outgoing
/// links spreads its rank evenly.
fn page_rank(n: usize, links: &[(usize, usize, f64)]) -> Vec<f64> {
    if n == 0 {
        return Vec::new();
    }
    let mut out_weight = vec![0.0; n];
    for &(from, _, w) in links {
        out_weight[from] += w;
    }
    let mut rank = vec![1.0 / n as f64; n];
    for _ in 0..ROUNDS {
        let dangling: f64 = (0..n).filter(|&i| out_weight[i] == 0.0).map(|i| rank[i]).sum();
        let base = (1.0 - DAMPING) / n as f64 + DAMPING * dangling / n as f64;
        let mut next = vec![base; n];
        for &(from, to, w) in links {
            next[to] += DAMPING * rank[from] * w / out_weight[from];
        }
        rank = next;
    }
    rank
}

/// The best-ranked symbols that fit `max_tokens`, grouped by file (files
/// in the order of their best symbol, symbols in line order).
fn render(nodes: &[Node], order: &[usize], max_tokens: usize) -> String {
    const HEADER: &str = "# Repo map\n\nThe project's most referenced symbols (file, then line and signature); \
         ask the code_* tools for more.\n";
    // Tokens are estimated as characters / 4, as the prompt layers count them.
    let budget = max_tokens.saturating_mul(4);
    let mut used = HEADER.len();
    let mut files: Vec<(&str, Vec<usize>)> = Vec::new();
    for &i in order {
        let line = symbol_line(&nodes[i]);
        let new_file = !files.iter().any(|(p, _)| *p == nodes[i].path);
        let cost = line.len() + 1 + if new_file { nodes[i].path.len() + 3 } else { 0 };
        if used + cost > budget {
            // Smaller entries further down may still fit.
            continue;
        }
        used += cost;
        match files.iter_mut().find(|(p, _)| *p == nodes[i].path) {
            Some((_, symbols)) => symbols.push(i),
            None => files.push((nodes[i].path.as_str(), vec![i])),
        }
    }
    if files.is_empty() {
        return String::new();
    }
    let mut out = String::from(HEADER);
    for (path, mut symbols) in files {
        symbols.sort_by_key(|&i| (nodes[i].line, nodes[i].id));
        let _ = writeln!(out, "\n{path}:");
        for i in symbols {
            let _ = writeln!(out, "{}", symbol_line(&nodes[i]));
        }
    }
    out
}

/// `  12 fn open(path: &Path) -> Result<Store>` (the kind when the
/// signature does not show the name).
fn symbol_line(n: &Node) -> String {
    let name = n.qualified.rsplit([':', '.']).next().unwrap_or(&n.qualified);
    if n.signature.contains(name) {
        format!("  {} {}", n.line, n.signature)
    } else {
        format!("  {} {} {}", n.line, n.kind, n.qualified)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_rank_favours_what_many_refer_to() {
        // 0, 1 and 2 all refer to 3; 3 refers to 4.
        let links = [(0, 3, 1.0), (1, 3, 1.0), (2, 3, 1.0), (3, 4, 1.0)];
        let rank = page_rank(5, &links);
        assert!(rank[3] > rank[0] && rank[4] > rank[0], "{rank:?}");
        assert!((rank.iter().sum::<f64>() - 1.0).abs() < 1e-9);
    }
}
