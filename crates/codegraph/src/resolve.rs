//! Name resolution: which symbol a call or inheritance site refers to.
//!
//! Honest about its limits. A site resolves *exactly* when the name is
//! defined in the same file (a bare call, or `self.x()` within the same
//! type), or when an import says which module it comes from and that module
//! holds exactly one such symbol. Anything else is a *heuristic* edge to each
//! candidate with the same name (confidence 1/n, at most 0.8), or no edge at
//! all when there are more than [`MAX_CANDIDATES`] or the import points
//! outside the project. The site itself is always kept, by name, so it can
//! be linked again when its target's file changes.

use std::collections::{HashMap, HashSet};

use rusqlite::{Connection, OptionalExtension, params};

use crate::lang::Lang;

/// More same-named candidates than this and a site gets no edge (a name like
/// `new` or `get` says nothing about which one is meant).
pub const MAX_CANDIDATES: usize = 5;

/// The confidence of a heuristic edge to the only candidate by that name.
pub const UNIQUE_NAME_CONFIDENCE: f64 = 0.8;

/// The confidence of an edge found by the type's qualified name in another
/// file (a Rust `impl` split across files, `Type::f()` not imported).
pub const QUALIFIED_CONFIDENCE: f64 = 0.9;

#[derive(Clone)]
struct Candidate {
    id: i64,
    file_id: i64,
    path: String,
    family: String,
    kind: String,
    qualified: String,
}

struct SiteRow {
    id: i64,
    file_id: i64,
    path: String,
    caller_qualified: Option<String>,
    kind: String,
    name: String,
    qualifier: Option<String>,
    family: String,
    sep: &'static str,
}

/// A resolved target: symbol id, confidence, exact.
type Target = (i64, f64, bool);

/// Resolves again the sites in `files`, every site named in `names`, and
/// the sites `site_ids`; returns how many sites were resolved.
pub(crate) fn relink(
    tx: &Connection,
    files: &[i64],
    names: &HashSet<String>,
    site_ids: &HashSet<i64>,
) -> rusqlite::Result<usize> {
    const SITE_COLUMNS: &str =
        "SELECT s.id, s.file_id, c.qualified, s.kind, s.name, s.qualifier, f.language, f.path
         FROM sites s JOIN files f ON f.id = s.file_id LEFT JOIN symbols c ON c.id = s.caller_id";
    let site_row = |r: &rusqlite::Row| {
        let lang: String = r.get(6)?;
        Ok(SiteRow {
            id: r.get(0)?,
            file_id: r.get(1)?,
            path: r.get(7)?,
            caller_qualified: r.get(2)?,
            kind: r.get(3)?,
            name: r.get(4)?,
            qualifier: r.get(5)?,
            sep: if lang == Lang::Rust.name() { "::" } else { "." },
            family: Lang::family_of(&lang).to_string(),
        })
    };
    // Every site to resolve, once; their old edges go first.
    let mut sites: Vec<SiteRow> = Vec::new();
    let mut seen: HashSet<i64> = HashSet::new();
    {
        let mut by_file = tx.prepare(&format!("{SITE_COLUMNS} WHERE s.file_id = ?1"))?;
        let mut clear_file = tx.prepare(
            "DELETE FROM edges WHERE site_id IN (SELECT id FROM sites WHERE file_id = ?1)",
        )?;
        for f in files {
            clear_file.execute([f])?;
            for row in by_file.query_map([f], site_row)? {
                let row = row?;
                if seen.insert(row.id) {
                    sites.push(row);
                }
            }
        }
        // Sites linked into replaced symbols: their edges went with them.
        let mut by_id = tx.prepare(&format!("{SITE_COLUMNS} WHERE s.id = ?1"))?;
        let mut clear_id = tx.prepare("DELETE FROM edges WHERE site_id = ?1")?;
        for id in site_ids {
            clear_id.execute([id])?;
            let row = by_id.query_row([id], site_row).optional()?;
            if let Some(row) = row.filter(|r| !seen.contains(&r.id)) {
                seen.insert(row.id);
                sites.push(row);
            }
        }
        let mut by_name = tx.prepare(&format!("{SITE_COLUMNS} WHERE s.name = ?1"))?;
        let mut clear_name = tx
            .prepare("DELETE FROM edges WHERE site_id IN (SELECT id FROM sites WHERE name = ?1)")?;
        for n in names {
            clear_name.execute([n])?;
            for row in by_name.query_map([n], site_row)? {
                let row = row?;
                if seen.insert(row.id) {
                    sites.push(row);
                }
            }
        }
    }
    let mut candidates: HashMap<String, Vec<Candidate>> = HashMap::new();
    let mut imports: HashMap<i64, Vec<(String, String)>> = HashMap::new();
    let mut load_candidates = tx.prepare(
        "SELECT s.id, s.file_id, f.path, f.language, s.kind, s.qualified
         FROM symbols s JOIN files f ON f.id = s.file_id WHERE s.name = ?1",
    )?;
    let mut load_imports = tx.prepare("SELECT alias, path FROM imports WHERE file_id = ?1")?;
    let mut insert =
        tx.prepare("INSERT OR IGNORE INTO edges(site_id, target_id, confidence, exact) VALUES (?1, ?2, ?3, ?4)")?;
    for site in &sites {
        if !candidates.contains_key(&site.name) {
            let found = load_candidates
                .query_map([&site.name], |r| {
                    let lang: String = r.get(3)?;
                    Ok(Candidate {
                        id: r.get(0)?,
                        file_id: r.get(1)?,
                        path: r.get(2)?,
                        family: Lang::family_of(&lang).to_string(),
                        kind: r.get(4)?,
                        qualified: r.get(5)?,
                    })
                })?
                .collect::<rusqlite::Result<Vec<_>>>()?;
            candidates.insert(site.name.clone(), found);
        }
        if let std::collections::hash_map::Entry::Vacant(e) = imports.entry(site.file_id) {
            let rows = load_imports.query_map([site.file_id], |r| Ok((r.get(0)?, r.get(1)?)))?;
            e.insert(rows.collect::<rusqlite::Result<Vec<_>>>()?);
        }
        let cands = candidates.get(&site.name).map(Vec::as_slice).unwrap_or_default();
        let file_imports = imports.get(&site.file_id).map(Vec::as_slice).unwrap_or_default();
        for (target, confidence, exact) in resolve(site, file_imports, cands) {
            insert.execute(params![site.id, target, confidence, exact])?;
        }
    }
    Ok(sites.len())
}

const SELF_NAMES: &[&str] = &["self", "Self", "this", "cls"];

fn resolve(site: &SiteRow, imports: &[(String, String)], all: &[Candidate]) -> Vec<Target> {
    if site.kind == "imports" {
        // A top-level symbol of that name in a file the module path names.
        let module = site.qualifier.as_deref().unwrap_or("");
        let from: Vec<&Candidate> = all
            .iter()
            .filter(|c| c.family == site.family && c.kind != "method" && c.qualified == site.name)
            .filter(|c| module_matches(&c.path, module))
            .collect();
        return match from.len() {
            1 => vec![(from[0].id, 1.0, true)],
            _ => split(&from),
        };
    }
    let allowed: &[&str] = match site.kind.as_str() {
        "inherits" => &["class", "trait", "struct"],
        "references" => &["class", "trait", "struct", "enum"],
        _ => &["function", "method", "class"],
    };
    let cands: Vec<&Candidate> = all
        .iter()
        .filter(|c| c.family == site.family && allowed.contains(&c.kind.as_str()))
        .collect();
    if cands.is_empty() {
        return Vec::new();
    }
    let sep = site.sep;
    let first_segment = |q: &str| q.split([':', '.']).next().unwrap_or(q).to_string();

    match site.qualifier.as_deref() {
        // `self.helper()`: a method of the caller's own type.
        Some(q) if SELF_NAMES.contains(&q) => {
            if let Some(owner) =
                site.caller_qualified.as_deref().and_then(|c| c.rsplit_once(sep)).map(|p| p.0)
            {
                let want = format!("{owner}{sep}{}", site.name);
                let own: Vec<&&Candidate> = cands.iter().filter(|c| c.qualified == want).collect();
                if let Some(same) = own.iter().find(|c| c.file_id == site.file_id) {
                    return vec![(same.id, 1.0, true)];
                }
                if own.len() == 1 {
                    return vec![(own[0].id, QUALIFIED_CONFIDENCE, false)];
                }
            }
            methods_in_scope(site, imports, &cands)
        }
        // `module.f()`, `pkg.F()`, `ns.f()` where the first segment was imported.
        Some(q) if imports.iter().any(|(alias, _)| *alias == first_segment(q)) => {
            let head = first_segment(q);
            let path = imports
                .iter()
                .find(|(a, _)| *a == head)
                .map(|(_, p)| p.clone())
                .unwrap_or_default();
            let rest = q.strip_prefix(&head).unwrap_or("");
            let module = format!("{path}{rest}");
            let in_module: Vec<&Candidate> =
                cands.iter().copied().filter(|c| module_matches(&c.path, &module)).collect();
            // `Store::open` where `Store` was imported: the type's method.
            let typed: Vec<&Candidate> = cands
                .iter()
                .copied()
                .filter(|c| c.qualified.ends_with(&format!("{head}{sep}{}", site.name)))
                .collect();
            match (in_module.len(), typed.len()) {
                (1, _) => vec![(in_module[0].id, 1.0, true)],
                (_, 1) => vec![(typed[0].id, 1.0, true)],
                // `module.f()` into a module outside the project.
                (0, 0) if is_path(q) => Vec::new(),
                // `runtime::Builder::new().m()`: a call on a value, like `obj.m()`.
                (0, 0) => methods_in_scope(site, imports, &cands),
                _ => split(if in_module.is_empty() { &typed } else { &in_module }),
            }
        }
        // `Type::f()` or `module::f()` not imported (Rust paths), `obj.m()`.
        Some(q) => {
            let last = q.rsplit([':', '.']).next().unwrap_or(q);
            let want = format!("{last}{sep}{}", site.name);
            let typed: Vec<&Candidate> =
                cands.iter().copied().filter(|c| c.qualified.ends_with(&want)).collect();
            if let Some(same) = typed.iter().find(|c| c.file_id == site.file_id) {
                return vec![(same.id, 1.0, true)];
            }
            if typed.len() == 1 {
                let exact =
                    SELF_NAMES.contains(&first_segment(q).as_str()) || first_segment(q) == "crate";
                return vec![(typed[0].id, if exact { 1.0 } else { QUALIFIED_CONFIDENCE }, exact)];
            }
            let in_module: Vec<&Candidate> = cands
                .iter()
                .copied()
                .filter(|c| c.qualified == site.name && module_matches(&c.path, q))
                .collect();
            if in_module.len() == 1 && sep == "::" {
                let exact = first_segment(q) == "crate";
                return vec![(
                    in_module[0].id,
                    if exact { 1.0 } else { QUALIFIED_CONFIDENCE },
                    exact,
                )];
            }
            if sep == "::" && is_rust_type_path(q) {
                // `Vec::new()`, `std::fs::read()`: a path to something outside the project.
                return Vec::new();
            }
            methods_in_scope(site, imports, &cands)
        }
        None => {
            // A name defined in this file.
            let local: Vec<&Candidate> = cands
                .iter()
                .copied()
                .filter(|c| c.file_id == site.file_id && c.kind != "method")
                .collect();
            if local.len() == 1 {
                return vec![(local[0].id, 1.0, true)];
            }
            // Go: a package is its folder, so the same folder is the same scope.
            if site.family == "go" {
                let package: Vec<&Candidate> = cands
                    .iter()
                    .copied()
                    .filter(|c| c.kind != "method" && folder(&c.path) == folder(&site.path))
                    .collect();
                if package.len() == 1 {
                    return vec![(package[0].id, 1.0, true)];
                }
            }
            // A name imported from a module of the project.
            if let Some((_, path)) = imports.iter().find(|(alias, _)| *alias == site.name) {
                let (module, original) = split_path(path);
                let from: Vec<&Candidate> = cands
                    .iter()
                    .copied()
                    .filter(|c| {
                        c.kind != "method"
                            && c.qualified.rsplit([':', '.']).next() == Some(original)
                    })
                    .filter(|c| module_matches(&c.path, module))
                    .collect();
                return match from.len() {
                    0 => Vec::new(),
                    1 => vec![(from[0].id, 1.0, true)],
                    _ => split(&from),
                };
            }
            by_name(&cands, |c| c.kind != "method")
        }
    }
}

/// `np`, `pkg.util`, `std::fs`: names and separators only, no call or
/// expression.
fn is_path(q: &str) -> bool {
    q.chars().all(|c| c.is_alphanumeric() || matches!(c, '_' | ':' | '.'))
}

/// `Vec`, `std::fs`, `Store`: a Rust path (not a value like `self.items`),
/// naming a type when capitalised or a module when it has `::`.
fn is_rust_type_path(q: &str) -> bool {
    let is_path = q.chars().all(|c| c.is_alphanumeric() || c == '_' || c == ':');
    is_path && (q.contains("::") || q.starts_with(|c: char| c.is_uppercase()))
}

fn folder(path: &str) -> &str {
    path.rsplit_once('/').map_or("", |(d, _)| d)
}

/// Heuristic edges for `value.method()`: to the methods of that name whose
/// type is in scope in the calling file (defined there, imported, or in the
/// same Go package) when there are any, else to all of them.
fn methods_in_scope(
    site: &SiteRow,
    imports: &[(String, String)],
    cands: &[&Candidate],
) -> Vec<Target> {
    let methods: Vec<&Candidate> = cands.iter().copied().filter(|c| c.kind == "method").collect();
    let in_scope: Vec<&Candidate> = methods
        .iter()
        .copied()
        .filter(|c| {
            let owner = c
                .qualified
                .rsplit_once(site.sep)
                .map(|(o, _)| o.rsplit(site.sep).next().unwrap_or(o));
            c.file_id == site.file_id
                || owner.is_some_and(|o| imports.iter().any(|(alias, _)| alias == o))
                || (site.family == "go" && folder(&c.path) == folder(&site.path))
        })
        .collect();
    split(if in_scope.is_empty() { &methods } else { &in_scope })
}

/// Heuristic edges to the candidates `keep` accepts.
fn by_name(cands: &[&Candidate], keep: impl Fn(&Candidate) -> bool) -> Vec<Target> {
    let kept: Vec<&Candidate> = cands.iter().copied().filter(|c| keep(c)).collect();
    split(&kept)
}

fn split(cands: &[&Candidate]) -> Vec<Target> {
    if cands.is_empty() || cands.len() > MAX_CANDIDATES {
        return Vec::new();
    }
    let confidence = (1.0 / cands.len() as f64).min(UNIQUE_NAME_CONFIDENCE);
    cands.iter().map(|c| (c.id, confidence, false)).collect()
}

/// `crate::store::open` → (`crate::store`, `open`); `./util.helper` → (`./util`, `helper`).
fn split_path(path: &str) -> (&str, &str) {
    if let Some((m, n)) = path.rsplit_once("::") {
        return (m, n);
    }
    match path.rsplit_once('.') {
        Some((m, n)) if !n.contains('/') => (m, n),
        _ => (path, ""),
    }
}

/// Whether the file at `path` can be the module `module` names: its last
/// meaningful segment is the file's stem, or its folder's name for
/// `mod.rs`, `__init__.py`, `index.ts` and Go packages.
fn module_matches(path: &str, module: &str) -> bool {
    let segments: Vec<&str> = module
        .split([':', '.', '/'])
        .filter(|s| !s.is_empty() && !matches!(*s, "crate" | "self" | "super"))
        .collect();
    let Some(last) = segments.last() else { return true };
    let mut parts = path.rsplit('/');
    let file = parts.next().unwrap_or(path);
    let dir = parts.next().unwrap_or("");
    let stem = file.split('.').next().unwrap_or(file);
    stem == *last || dir == *last
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn module_matches_files_and_package_folders() {
        assert!(module_matches("src/store.rs", "crate::store"));
        assert!(module_matches("src/store/mod.rs", "crate::store"));
        assert!(module_matches("pkg/util.py", "pkg.util"));
        assert!(module_matches("src/util.ts", "./util"));
        assert!(module_matches("store/store.go", "example.com/m/store"));
        assert!(!module_matches("src/other.rs", "crate::store"));
        assert!(module_matches("src/lib.rs", "crate"));
    }

    #[test]
    fn split_path_separates_module_and_name() {
        assert_eq!(split_path("crate::store::open"), ("crate::store", "open"));
        assert_eq!(split_path("./util.helper"), ("./util", "helper"));
        assert_eq!(split_path("pkg.util.helper"), ("pkg.util", "helper"));
    }
}
