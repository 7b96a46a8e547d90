//! `grep`: regex search over the workspace with ripgrep's own libraries
//! (`ignore` for the parallel, gitignore-aware walk; `grep-regex` and
//! `grep-searcher` for the search), so speed and skipping rules match `rg`.

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc;

use async_trait::async_trait;
use grep_regex::{RegexMatcher, RegexMatcherBuilder};
use grep_searcher::{BinaryDetection, Searcher, SearcherBuilder};
use ignore::WalkState;
use ignore::overrides::OverrideBuilder;
use ignore::types::TypesBuilder;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::grep_sink::{BREAK, Collect, OutputMode};
use crate::tool_input::{AtLeastOne, parse, schema_for};
use crate::walk::{walk_threads, walker};
use crate::{Beneath, Sandbox, Tool, ToolContext, ToolError, ToolOutput};

/// Lines (content mode) or files shown when no `head_limit` is given.
pub const DEFAULT_HEAD_LIMIT: usize = 250;
/// Collected output past which the search stops early (memory bound for
/// patterns that match nearly everything).
const MAX_COLLECTED_BYTES: usize = 16 * 1024 * 1024;

/// Regex search across files.
#[derive(Debug, Default)]
pub struct GrepTool;

#[async_trait]
impl Tool for GrepTool {
    fn name(&self) -> &str {
        "grep"
    }

    fn description(&self) -> &str {
        "Searches file contents with a regular expression (Rust regex, as ripgrep), skipping \
         binary files and what .gitignore ignores. -A, -B and -C add context lines in content \
         mode. Results are sorted by path and cut at `head_limit` (default 250) lines or \
         files."
    }

    fn input_schema(&self) -> Value {
        schema_for::<GrepArgs>()
    }

    fn read_only(&self) -> bool {
        true
    }

    async fn execute(&self, input: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let args: GrepArgs = parse(input)?;
        let sandbox = Sandbox::from_context(ctx);
        let root = sandbox.resolve(args.path.as_deref().unwrap_or("."))?;
        let query = Query::from(args);
        let cancel = ctx.cancel.clone();
        let workspace = sandbox.workspace().to_path_buf();
        let search_root = root.clone();
        let (beneath, _) = sandbox.beneath(&root)?;
        let (query, found) = tokio::task::spawn_blocking(move || {
            search(&query, &search_root, &beneath, &workspace, &cancel).map(|found| (query, found))
        })
        .await
        .map_err(|e| ToolError::Failed(format!("grep task failed: {e}")))??;
        if ctx.cancel.is_cancelled() {
            return Err(ToolError::Cancelled);
        }
        Ok(ToolOutput::text(render(&query, found, &sandbox.display(&root))))
    }
}

/// A parsed grep request.
struct Query {
    pattern: String,
    mode: OutputMode,
    case_insensitive: bool,
    line_numbers: bool,
    before: usize,
    after: usize,
    multiline: bool,
    glob: Option<String>,
    file_type: Option<String>,
    head_limit: usize,
}

/// `grep`'s input.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct GrepArgs {
    pattern: String,
    /// File or folder (default: the workspace).
    path: Option<String>,
    /// Only files matching it, e.g. *.{ts,tsx}
    glob: Option<String>,
    /// Only files of this ripgrep type: rust, py, js, ts, go, ...
    #[serde(rename = "type")]
    file_type: Option<String>,
    /// files_with_matches (default): paths; content: path:line:text; count: path:count.
    output_mode: Option<OutputMode>,
    /// Ignore case.
    #[serde(rename = "-i")]
    case_insensitive: Option<bool>,
    /// Default true.
    #[serde(rename = "-n")]
    line_numbers: Option<bool>,
    #[serde(rename = "-A")]
    after: Option<u64>,
    #[serde(rename = "-B")]
    before: Option<u64>,
    #[serde(rename = "-C")]
    context: Option<u64>,
    /// Matches may span lines; `.` matches newlines.
    multiline: Option<bool>,
    head_limit: Option<AtLeastOne>,
}

impl From<GrepArgs> for Query {
    fn from(args: GrepArgs) -> Self {
        let context = args.context.unwrap_or(0) as usize;
        Self {
            pattern: args.pattern,
            mode: args.output_mode.unwrap_or(OutputMode::FilesWithMatches),
            case_insensitive: args.case_insensitive.unwrap_or(false),
            line_numbers: args.line_numbers.unwrap_or(true),
            before: args.before.map_or(context, |n| n as usize),
            after: args.after.map_or(context, |n| n as usize),
            multiline: args.multiline.unwrap_or(false),
            glob: args.glob,
            file_type: args.file_type,
            head_limit: args.head_limit.map_or(DEFAULT_HEAD_LIMIT, |n| n.get() as usize),
        }
    }
}

impl Query {
    fn matcher(&self) -> Result<RegexMatcher, ToolError> {
        let mut builder = RegexMatcherBuilder::new();
        builder.case_insensitive(self.case_insensitive);
        if self.multiline {
            builder.multi_line(true).dot_matches_new_line(true);
        } else {
            builder.line_terminator(Some(b'\n'));
        }
        builder.build(&self.pattern).map_err(|e| {
            let hint = if self.pattern.contains("\\n") && !self.multiline {
                " (to match across lines set multiline: true)"
            } else {
                ""
            };
            ToolError::InvalidArguments(format!("bad regex {:?}: {e}{hint}", self.pattern))
        })
    }

    fn searcher(&self) -> Searcher {
        let content = self.mode == OutputMode::Content;
        SearcherBuilder::new()
            .line_number(content && self.line_numbers)
            .before_context(if content { self.before } else { 0 })
            .after_context(if content { self.after } else { 0 })
            .multi_line(self.multiline)
            .binary_detection(BinaryDetection::quit(b'\0'))
            .build()
    }
}

/// One matching file: its path relative to the workspace, its match count
/// and (content mode) its stored lines.
struct FileHit {
    path: String,
    matches: u64,
    lines: Vec<u8>,
}

/// Everything a search found.
struct Found {
    hits: Vec<FileHit>,
    stopped_early: bool,
    /// The one file searched turned out binary (a NUL byte): not searched,
    /// which the answer says rather than "no matches".
    binary_file: bool,
}

/// Runs the search on a parallel walk of `root`; each file is opened beneath
/// `beneath` (its sandbox root) without following links.
fn search(
    query: &Query,
    root: &Path,
    beneath: &Beneath,
    workspace: &Path,
    cancel: &CancellationToken,
) -> Result<Found, ToolError> {
    let matcher = query.matcher()?;
    let (tx, rx) = mpsc::channel::<FileHit>();
    let collected = AtomicUsize::new(0);
    let stopped = AtomicBool::new(false);
    let display = |path: &Path| -> String {
        path.strip_prefix(workspace).unwrap_or(path).to_string_lossy().into_owned()
    };

    let mut binary_file = false;
    if root.is_file() {
        let mut buf = Vec::new();
        let mut searcher = query.searcher();
        match search_one(query, &matcher, &mut searcher, beneath, root, &mut buf, &display) {
            Searched::Hit(hit) => {
                let _ = tx.send(hit);
            }
            Searched::Binary => binary_file = true,
            Searched::Nothing => {}
        }
    } else {
        let mut builder = walker(root);
        builder.threads(walk_threads());
        if let Some(glob) = &query.glob {
            let mut overrides = OverrideBuilder::new(root);
            overrides
                .add(glob)
                .map_err(|e| ToolError::InvalidArguments(format!("bad glob {glob:?}: {e}")))?;
            builder.overrides(
                overrides
                    .build()
                    .map_err(|e| ToolError::InvalidArguments(format!("bad glob {glob:?}: {e}")))?,
            );
        }
        if let Some(name) = &query.file_type {
            let types = TypesBuilder::new()
                .add_defaults()
                .select(name)
                .build()
                .map_err(|e| {
                    ToolError::InvalidArguments(format!(
                        "{e}; use a ripgrep type name such as rust, py, js, ts, go, java, c, cpp, md, json, yaml"
                    ))
                })?;
            builder.types(types);
        }
        builder.build_parallel().run(|| {
            let tx = tx.clone();
            let mut searcher = query.searcher();
            let mut buf = Vec::new();
            let (matcher, collected, stopped, display) = (&matcher, &collected, &stopped, &display);
            Box::new(move |entry| {
                if cancel.is_cancelled() || stopped.load(Ordering::Relaxed) {
                    return WalkState::Quit;
                }
                let Ok(entry) = entry else {
                    return WalkState::Continue;
                };
                if !entry.file_type().is_some_and(|t| t.is_file()) {
                    return WalkState::Continue;
                }
                if let Some(hit) = search_file(
                    query,
                    matcher,
                    &mut searcher,
                    beneath,
                    entry.path(),
                    &mut buf,
                    display,
                ) {
                    let size = hit.lines.len() + hit.path.len();
                    if collected.fetch_add(size, Ordering::Relaxed) + size > MAX_COLLECTED_BYTES {
                        stopped.store(true, Ordering::Relaxed);
                    }
                    if tx.send(hit).is_err() {
                        return WalkState::Quit;
                    }
                }
                WalkState::Continue
            })
        });
    }
    drop(tx);
    let stopped_early = stopped.load(Ordering::Relaxed);
    Ok(Found { hits: rx.into_iter().collect(), stopped_early, binary_file })
}

/// What searching one file found.
enum Searched {
    Hit(FileHit),
    /// A NUL byte: binary, its results dropped (as ripgrep skips it).
    Binary,
    /// No match, or unreadable, or not openable beneath the sandbox root
    /// without following a link.
    Nothing,
}

/// Searches one file of a walk; `None` unless it has a match.
fn search_file(
    query: &Query,
    matcher: &RegexMatcher,
    searcher: &mut Searcher,
    beneath: &Beneath,
    path: &Path,
    buf: &mut Vec<u8>,
    display: &dyn Fn(&Path) -> String,
) -> Option<FileHit> {
    match search_one(query, matcher, searcher, beneath, path, buf, display) {
        Searched::Hit(hit) => Some(hit),
        Searched::Binary | Searched::Nothing => None,
    }
}

fn search_one(
    query: &Query,
    matcher: &RegexMatcher,
    searcher: &mut Searcher,
    beneath: &Beneath,
    path: &Path,
    buf: &mut Vec<u8>,
    display: &dyn Fn(&Path) -> String,
) -> Searched {
    buf.clear();
    let Some(file) = beneath.relative(path).and_then(|rel| beneath.open_read(rel).ok()) else {
        return Searched::Nothing;
    };
    if !file.metadata().is_ok_and(|m| m.is_file()) {
        return Searched::Nothing;
    }
    let mut sink = Collect::new(query.mode, query.line_numbers, buf);
    if searcher.search_file(matcher, &file, &mut sink).is_err() {
        return Searched::Nothing;
    }
    if sink.binary {
        return Searched::Binary;
    }
    if sink.matches == 0 {
        return Searched::Nothing;
    }
    let matches = sink.matches;
    Searched::Hit(FileHit { path: display(path), matches, lines: std::mem::take(buf) })
}

/// The sorted, capped text the model sees.
fn render(query: &Query, found: Found, root: &str) -> String {
    let mut hits = found.hits;
    if hits.is_empty() && found.binary_file {
        return format!(
            "{root} is a binary file (it has a NUL byte), so it was not searched; grep \
             searches text files. Look inside it with bash (grep -a, strings, od)."
        );
    }
    if hits.is_empty() {
        return format!("No matches for {:?} (searched {root}).", query.pattern);
    }
    hits.sort_unstable_by(|a, b| a.path.cmp(&b.path));
    let mut lines: Vec<String> = Vec::new();
    match query.mode {
        OutputMode::FilesWithMatches => lines.extend(hits.iter().map(|h| h.path.clone())),
        OutputMode::Count => lines.extend(hits.iter().map(|h| format!("{}:{}", h.path, h.matches))),
        OutputMode::Content => {
            let context = query.before > 0 || query.after > 0;
            for (i, hit) in hits.iter().enumerate() {
                if context && i > 0 {
                    lines.push("--".to_string());
                }
                for stored in hit.lines.split_inclusive(|b| *b == b'\n') {
                    if stored == BREAK {
                        lines.push("--".to_string());
                    } else {
                        let text =
                            String::from_utf8_lossy(stored.strip_suffix(b"\n").unwrap_or(stored));
                        lines.push(format!("{}{text}", hit.path));
                    }
                }
            }
        }
    }
    let total = lines.len();
    let mut out = lines.into_iter().take(query.head_limit).collect::<Vec<_>>().join("\n");
    out.push('\n');
    if total > query.head_limit {
        let unit = match query.mode {
            OutputMode::Content => "lines",
            OutputMode::FilesWithMatches => "files",
            OutputMode::Count => "counts",
        };
        out.push_str(&format!(
            "({} more {unit} not shown; raise head_limit or narrow the search.)\n",
            total - query.head_limit
        ));
    }
    if found.stopped_early {
        out.push_str("(The search stopped early because it matched too much; results are incomplete. Narrow the pattern, path or glob.)\n");
    }
    out
}
