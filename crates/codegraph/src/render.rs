//! Answers as compact text for a model or a person: one line per symbol or
//! edge, each citing `file:line`, fitted into a character budget with paging.

use crate::index::Staleness;
use crate::query::{Counts, EdgeInfo, Graph, Impact, SymbolInfo};

/// The default budget of one answer, in characters (about 1,500 tokens).
pub const DEFAULT_MAX_CHARS: usize = 6_000;

/// How each edge is marked.
pub const LEGEND: &str =
    "edges: `exact` = same file or import; `~0.50` = matched by name only, with that confidence";

/// Which slice of an answer to show.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Page {
    /// Lines to skip (from a previous answer's footer).
    pub offset: usize,
    /// The most characters of lines to show.
    pub max_chars: usize,
}

impl Default for Page {
    fn default() -> Self {
        Page { offset: 0, max_chars: DEFAULT_MAX_CHARS }
    }
}

/// `header`, then the lines from `page.offset` that fit the budget (always
/// at least one), then a footer saying how to get the rest.
pub fn paginate(header: &str, lines: &[String], page: Page) -> String {
    let mut out = String::from(header);
    if !out.ends_with('\n') {
        out.push('\n');
    }
    let start = page.offset.min(lines.len());
    let mut end = start;
    let mut used = 0;
    for line in &lines[start..] {
        if end > start && used + line.len() + 1 > page.max_chars {
            break;
        }
        used += line.len() + 1;
        out.push_str(line);
        out.push('\n');
        end += 1;
    }
    if end < lines.len() {
        out.push_str(&format!(
            "[lines {}-{} of {}; call again with offset={} for more]\n",
            start + 1,
            end,
            lines.len(),
            end
        ));
    } else if start > 0 {
        out.push_str(&format!("[lines {}-{} of {}; end]\n", start + 1, end, lines.len()));
    }
    out
}

/// How fresh the index is, in one line.
pub fn freshness(counts: &Counts, stale: &Staleness) -> String {
    let age = match stale.age_secs {
        Some(s) if s < 120 => format!("updated {s} s ago"),
        Some(s) if s < 7_200 => format!("updated {} min ago", s / 60),
        Some(s) => format!("updated {} h ago", s / 3_600),
        None => "never updated".to_string(),
    };
    let changed = match stale.changed.len() {
        0 => "no files changed since".to_string(),
        n => {
            let shown: Vec<&str> = stale.changed.iter().take(5).map(String::as_str).collect();
            let more = if n > 5 { format!(" and {} more", n - 5) } else { String::new() };
            format!(
                "{n} files changed since ({}{more}): answers about them may be stale",
                shown.join(", ")
            )
        }
    };
    format!(
        "index: {} files, {} symbols, {} edges ({} exact); {age}; {changed}",
        counts.files, counts.symbols, counts.edges, counts.exact_edges
    )
}

fn tag(exact: bool, confidence: f64) -> String {
    if exact { "exact".to_string() } else { format!("~{confidence:.2}") }
}

fn doc_suffix(doc: &Option<String>) -> String {
    doc.as_ref().map(|d| format!("  // {d}")).unwrap_or_default()
}

/// One symbol with its place: `src/a.rs:12-40 function a::b: fn b() -> u8`.
pub fn symbol_line(s: &SymbolInfo) -> String {
    let test = if s.is_test { " [test]" } else { "" };
    format!(
        "{}:{}-{} {} {}{test}: {}{}",
        s.path,
        s.start_line,
        s.end_line,
        s.kind,
        s.qualified,
        s.signature,
        doc_suffix(&s.doc)
    )
}

/// A file's outline: one line per symbol, indented by nesting.
pub fn outline_lines(symbols: &[(usize, SymbolInfo)]) -> Vec<String> {
    symbols
        .iter()
        .map(|(depth, s)| {
            let test = if s.is_test { " [test]" } else { "" };
            format!(
                "{}{}-{} {} {}{test}: {}{}",
                "  ".repeat(*depth),
                s.start_line,
                s.end_line,
                s.kind,
                s.name,
                s.signature,
                doc_suffix(&s.doc)
            )
        })
        .collect()
}

/// Symbols, one per line.
pub fn symbol_lines(symbols: &[SymbolInfo]) -> Vec<String> {
    symbols.iter().map(symbol_line).collect()
}

/// What the question named: `Store::open (src/store.rs:12)`, or several.
pub fn roots_summary(roots: &[SymbolInfo]) -> String {
    let shown: Vec<String> = roots
        .iter()
        .take(3)
        .map(|r| format!("{} ({}:{})", r.qualified, r.path, r.start_line))
        .collect();
    let more =
        if roots.len() > 3 { format!(" and {} more", roots.len() - 3) } else { String::new() };
    let note =
        if roots.len() > 1 { " [several definitions match; narrow with path:name]" } else { "" };
    format!("{}{more}{note}", shown.join(", "))
}

/// The callee of a callers edge: its name, or, when several definitions
/// were asked about, which one.
fn target(e: &EdgeInfo, several: bool) -> String {
    if several {
        format!("{} ({}:{})", e.to.qualified, e.to.path, e.to.start_line)
    } else {
        e.to.name.clone()
    }
}

fn count_summary(edges: &[EdgeInfo]) -> String {
    let exact = edges.iter().filter(|e| e.exact).count();
    format!("{} edges ({} exact, {} heuristic)", edges.len(), exact, edges.len() - exact)
}

/// Callers: `src/a.rs:30 main::run [exact]`, indented by depth.
pub fn callers_lines(graph: &Graph) -> (String, Vec<String>) {
    let header =
        format!("callers of {}: {}", roots_summary(&graph.roots), count_summary(&graph.edges));
    let lines = graph
        .edges
        .iter()
        .map(|e| {
            let who = e.from.as_ref().map_or("<top level>".to_string(), |f| {
                format!("{} {}{}", f.kind, f.qualified, if f.is_test { " [test]" } else { "" })
            });
            let how = match e.kind.as_str() {
                "inherits" => " inherits",
                "references" => " refers to",
                _ => "",
            };
            format!(
                "{}{}:{} {who}{how} -> {} [{}]",
                "  ".repeat(e.depth.saturating_sub(1)),
                e.site_path,
                e.site_line,
                target(e, graph.roots.len() > 1),
                tag(e.exact, e.confidence)
            )
        })
        .collect();
    (with_truncation(header, graph.truncated), lines)
}

/// Callees: `src/a.rs:31 -> store::open at src/store.rs:12 [exact]`, then
/// the calls that link to nothing in the project.
pub fn callees_lines(graph: &Graph) -> (String, Vec<String>) {
    let header =
        format!("callees of {}: {}", roots_summary(&graph.roots), count_summary(&graph.edges));
    let mut lines: Vec<String> = graph
        .edges
        .iter()
        .map(|e| {
            let how = match e.kind.as_str() {
                "inherits" => "inherits ",
                "references" => "refers to ",
                _ => "",
            };
            format!(
                "{}{}:{} {how}-> {} {} at {}:{} [{}]",
                "  ".repeat(e.depth.saturating_sub(1)),
                e.site_path,
                e.site_line,
                e.to.kind,
                e.to.qualified,
                e.to.path,
                e.to.start_line,
                tag(e.exact, e.confidence)
            )
        })
        .collect();
    if !graph.unresolved.is_empty() {
        let names: Vec<String> = graph
            .unresolved
            .iter()
            .map(|u| match &u.qualifier {
                Some(q) if q.len() <= 24 => format!("{q}.{} (:{})", u.name, u.site_line),
                _ => format!("{} (:{})", u.name, u.site_line),
            })
            .collect();
        lines.push(format!(
            "unresolved (library or ambiguous, direct calls only): {}",
            names.join(", ")
        ));
    }
    (with_truncation(header, graph.truncated), lines)
}

/// Impact: the callers by distance, the files, the tests to run.
pub fn impact_lines(impact: &Impact) -> (String, Vec<String>) {
    let exact = impact.callers.iter().filter(|c| c.2).count();
    let header = format!(
        "impact of changing {}: {} transitive callers ({} reached by exact edges) in {} files; {} tests",
        roots_summary(&impact.roots),
        impact.callers.len(),
        exact,
        impact.files.len(),
        impact.tests.len()
    );
    let mut lines = Vec::new();
    if !impact.tests.is_empty() {
        lines.push("tests:".to_string());
        lines.extend(
            impact.tests.iter().map(|t| format!("  {}:{} {}", t.path, t.start_line, t.qualified)),
        );
    }
    lines.push("files:".to_string());
    lines.extend(impact.files.iter().map(|f| format!("  {f}")));
    lines.push("callers (depth, exact or heuristic path):".to_string());
    lines.extend(impact.callers.iter().map(|(d, s, exact)| {
        format!(
            "  {d} {}:{} {} {} [{}]",
            s.path,
            s.start_line,
            s.kind,
            s.qualified,
            if *exact { "exact" } else { "heuristic" }
        )
    }));
    (with_truncation(header, impact.truncated), lines)
}

fn with_truncation(header: String, truncated: bool) -> String {
    if truncated { format!("{header} [walk stopped at the edge limit]") } else { header }
}
