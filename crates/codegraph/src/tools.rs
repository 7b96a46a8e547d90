//! The graph as tools for the model: `code_outline`, `code_find`,
//! `code_definition`, `code_callers`, `code_callees` and `code_impact`.
//!
//! The six are one [`CodeTool`] each, told apart by a [`CodeQuery`].
//!
//! Edits reach the index two ways. The file tools that edit (`write`,
//! `edit`, `multi_edit`) are wrapped in [`ReindexAfterEdit`], which
//! re-indexes the file as soon as the edit succeeds (one file, no walk). And
//! each code tool call first brings the index up to date (only files whose
//! size or time changed are read, only changed content is parsed), which
//! catches what `bash` or the user's editor changed; if that update fails
//! (the database is busy), the answer comes from the index as it is and
//! says how many files changed since.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use async_trait::async_trait;
use ferroclaw_tools::{Around, Tool, ToolContext, ToolError, ToolOutput, ToolRegistry, Wrapped};
use serde_json::{Value, json};

use crate::extract::SymbolKind;
use crate::render::{self, LEGEND, Page};
use crate::{BUSY_TIMEOUT, CodeIndex, Error, Lang, Staleness, UpdateStats};

/// A project with at most this many source files gets the tools even
/// without an index: its first build takes a few seconds.
pub const QUICK_BUILD_MAX_FILES: usize = 3_000;

/// The deepest `code_callers`/`code_callees` go.
const MAX_DEPTH: u64 = 5;

/// The file tools whose successful edits are re-indexed at once; each takes
/// the file as `path`.
pub const EDITING_TOOLS: &[&str] = &["write", "edit", "multi_edit"];

/// How long re-indexing after an edit waits for another writer (a running
/// `ferroclaw index`) before it leaves the file to the next code tool call,
/// which finds it by its changed time: an edit must not wait on a full build.
const EDIT_REINDEX_WAIT: Duration = Duration::from_millis(500);

/// The index the code tools share, opened on first use.
pub struct SharedIndex {
    workspace: PathBuf,
    home: PathBuf,
    index: Mutex<Option<CodeIndex>>,
}

impl SharedIndex {
    /// The index of `workspace` under `home`, not opened yet.
    pub fn new(workspace: &Path, home: &Path) -> Arc<SharedIndex> {
        Arc::new(SharedIndex {
            workspace: workspace.to_path_buf(),
            home: home.to_path_buf(),
            index: Mutex::new(None),
        })
    }

    /// The index, opened on first use.
    fn open(&self) -> Result<MutexGuard<'_, Option<CodeIndex>>, Error> {
        let mut guard = self.index.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if guard.is_none() {
            *guard = Some(CodeIndex::open(&self.workspace, &self.home)?);
        }
        Ok(guard)
    }

    /// Runs `f` on the up-to-date index; the second value is the freshness line.
    fn with<T>(
        &self,
        f: impl FnOnce(&CodeIndex) -> Result<T, Error>,
    ) -> Result<(T, String), Error> {
        let mut guard = self.open()?;
        let Some(index) = guard.as_mut() else { return Err(Error::NoIndex(self.home.clone())) };
        let stale = match index.update() {
            Ok(_) => Staleness { changed: Vec::new(), age_secs: Some(0) },
            Err(e) => {
                tracing::warn!(error = %e, "code index update failed; answering from the index as it is");
                index.staleness()?
            }
        };
        let counts = index.counts()?;
        let value = f(index)?;
        Ok((value, render::freshness(&counts, &stale)))
    }

    /// Re-indexes the file at `path` (absolute, or relative to the project)
    /// right after an edit, waiting at most [`EDIT_REINDEX_WAIT`] for another writer.
    pub fn reindex(&self, path: &Path) -> Result<UpdateStats, Error> {
        let mut guard = self.open()?;
        let Some(index) = guard.as_mut() else { return Err(Error::NoIndex(self.home.clone())) };
        index.set_busy_timeout(EDIT_REINDEX_WAIT)?;
        let stats = index.reindex_file(path);
        index.set_busy_timeout(BUSY_TIMEOUT)?;
        stats
    }
}

/// Registers the six code tools on `registry` when the project at
/// `workspace` has an index under `home` or is small enough to build one
/// quickly ([`QUICK_BUILD_MAX_FILES`]), and wraps the [`EDITING_TOOLS`]
/// already there in [`ReindexAfterEdit`]; returns whether it did.
pub fn register_code_tools(registry: &mut ToolRegistry, workspace: &Path, home: &Path) -> bool {
    let has_index = crate::db_path(home, workspace).exists();
    if !has_index && !small_project(workspace) {
        return false;
    }
    let shared = SharedIndex::new(workspace, home);
    for query in CodeQuery::ALL {
        registry.register(CodeTool { shared: shared.clone(), query });
    }
    for name in EDITING_TOOLS {
        if let Some(inner) = registry.get(name).cloned() {
            registry.register(Wrapped { inner, around: ReindexAfterEdit(shared.clone()) });
        }
    }
    true
}

/// The most folder entries [`small_project`] looks at before it gives up
/// (a workspace that is a home folder must not be walked in full).
const QUICK_BUILD_MAX_ENTRIES: usize = 50_000;

/// Counts source files up to the limit, stopping early past it.
fn small_project(workspace: &Path) -> bool {
    let mut sources = 0;
    for (seen, entry) in crate::index::walker(workspace).build().flatten().enumerate() {
        if seen > QUICK_BUILD_MAX_ENTRIES {
            return false;
        }
        if entry.file_type().is_some_and(|t| t.is_file()) && Lang::of(entry.path()).is_some() {
            sources += 1;
            if sources > QUICK_BUILD_MAX_FILES {
                return false;
            }
        }
    }
    true
}

/// A question for the index, asked off the async runtime: its header line
/// and answer lines.
type Question = Box<dyn FnOnce(&CodeIndex) -> Result<(String, Vec<String>), Error> + Send>;

/// Runs a question off the async runtime and turns its text (or error) into a tool result.
async fn answer(
    shared: &Arc<SharedIndex>,
    f: Question,
    page: Page,
) -> Result<ToolOutput, ToolError> {
    let shared = shared.clone();
    let joined = tokio::task::spawn_blocking(move || shared.with(f))
        .await
        .map_err(|e| ToolError::Failed(format!("code index task failed: {e}")))?;
    match joined {
        Ok(((header, lines), fresh)) => Ok(ToolOutput::text(render::paginate(
            &format!("{header}\n{fresh}\n{LEGEND}"),
            &lines,
            page,
        ))),
        Err(e @ (Error::UnknownSymbol(_) | Error::NotIndexed(_))) => {
            Ok(ToolOutput::error(e.to_string()))
        }
        Err(e) => Err(ToolError::Failed(e.to_string())),
    }
}

fn page_of(input: &Value) -> Page {
    let offset = input["offset"].as_u64().unwrap_or(0) as usize;
    let max_chars = input["max_chars"]
        .as_u64()
        .map_or(render::DEFAULT_MAX_CHARS, |m| (m as usize).clamp(500, 50_000));
    Page { offset, max_chars }
}

fn string_arg(input: &Value, key: &str) -> Result<String, ToolError> {
    match input[key].as_str().map(str::trim) {
        Some(s) if !s.is_empty() => Ok(s.to_string()),
        _ => Err(ToolError::InvalidArguments(format!("`{key}` must be a non-empty string"))),
    }
}

fn schema(props: Value, required: &[&str]) -> Value {
    let mut props = props;
    if let Some(map) = props.as_object_mut() {
        map.insert(
            "offset".into(),
            json!({"type": "integer", "minimum": 0, "description": "Lines to skip (paging)."}),
        );
        map.insert("max_chars".into(), json!({"type": "integer", "minimum": 500, "description": "Answer budget in characters (default 6000)."}));
    }
    json!({"type": "object", "properties": props, "required": required, "additionalProperties": false})
}

/// Which question a [`CodeTool`] answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CodeQuery {
    Outline,
    Find,
    Definition,
    Callers,
    Callees,
    Impact,
}

impl CodeQuery {
    /// Every code tool, in the order the model sees them.
    pub const ALL: [CodeQuery; 6] = [
        CodeQuery::Outline,
        CodeQuery::Find,
        CodeQuery::Definition,
        CodeQuery::Callers,
        CodeQuery::Callees,
        CodeQuery::Impact,
    ];

    /// The tool's name.
    pub fn name(self) -> &'static str {
        match self {
            CodeQuery::Outline => "code_outline",
            CodeQuery::Find => "code_find",
            CodeQuery::Definition => "code_definition",
            CodeQuery::Callers => "code_callers",
            CodeQuery::Callees => "code_callees",
            CodeQuery::Impact => "code_impact",
        }
    }

    fn description(self) -> &'static str {
        match self {
            CodeQuery::Outline => {
                "Lists the symbols of one source file (functions, types, methods, constants) with their line ranges, \
                 signatures and first doc line, nested as in the file. Cheaper than reading the file to find your way."
            }
            CodeQuery::Find => {
                "Finds symbol definitions whose name contains `query` (case-insensitive), exact names first, \
                 optionally of one `kind`. Answers file:line-range, kind, qualified name and signature."
            }
            CodeQuery::Definition => {
                "Where a symbol is defined: file:line-range, signature and first doc line. `symbol` is a name, \
                 a qualified name (`Store::open`, `Repo.save`) or `path:name`."
            }
            CodeQuery::Callers => {
                "Who calls a symbol (and which types inherit from it, and which functions and types refer to \
                 it as a type), up to `depth` hops, as file:line of each site. Edges are marked exact (same file \
                 or import) or ~confidence (matched by name only)."
            }
            CodeQuery::Callees => {
                "What a symbol calls (and the project types it refers to), up to `depth` hops, with where each \
                 is defined; calls to libraries or ambiguous names are listed as unresolved. Edges are marked \
                 exact or ~confidence."
            }
            CodeQuery::Impact => {
                "What may break if a symbol changes: its transitive callers (and users of a type), the files \
                 they are in, and the tests among them (to run after the change)."
            }
        }
    }

    /// The tool's own arguments and which are required (paging is added by [`schema`]).
    fn properties(self) -> (Value, &'static [&'static str]) {
        let symbol = json!({"type": "string", "description": "A name, `Type::name`/`Type.name`, or `path:name`."});
        match self {
            CodeQuery::Outline => (
                json!({"path": {"type": "string", "description": "File path, relative to the project or absolute."}}),
                &["path"],
            ),
            CodeQuery::Find => (
                json!({
                    "query": {"type": "string", "description": "Part of a symbol name, e.g. `open` or `Store::open`."},
                    "kind": {"type": "string", "enum": ["function", "method", "class", "struct", "enum", "trait", "interface", "module", "constant"]}
                }),
                &["query"],
            ),
            CodeQuery::Definition | CodeQuery::Impact => (json!({"symbol": symbol}), &["symbol"]),
            CodeQuery::Callers | CodeQuery::Callees => (
                json!({
                    "symbol": symbol,
                    "depth": {"type": "integer", "minimum": 1, "maximum": MAX_DEPTH, "description": "Hops to follow (default 1)."}
                }),
                &["symbol"],
            ),
        }
    }

    /// Checks the arguments and returns the question to put to the index.
    fn question(self, input: &Value, workspace: &Path) -> Result<Question, ToolError> {
        let depth = input["depth"].as_u64().unwrap_or(1).clamp(1, MAX_DEPTH) as usize;
        Ok(match self {
            CodeQuery::Outline => {
                let path = string_arg(input, "path")?;
                let root = workspace.canonicalize().unwrap_or_else(|_| workspace.to_path_buf());
                let rel = Path::new(&path)
                    .strip_prefix(&root)
                    .or_else(|_| Path::new(&path).strip_prefix(workspace))
                    .map_or(path.clone(), |r| r.to_string_lossy().into_owned());
                Box::new(move |index: &CodeIndex| {
                    let symbols = index.outline(&rel)?;
                    Ok((
                        format!("outline of {rel}: {} symbols", symbols.len()),
                        render::outline_lines(&symbols),
                    ))
                })
            }
            CodeQuery::Find => {
                let query = string_arg(input, "query")?;
                let kind = match input["kind"].as_str() {
                    Some(k) => Some(SymbolKind::parse(k).ok_or_else(|| {
                        ToolError::InvalidArguments(format!("unknown kind `{k}`"))
                    })?),
                    None => None,
                };
                Box::new(move |index: &CodeIndex| {
                    let found = index.find(&query, kind, 500)?;
                    Ok((
                        format!("{} symbols matching `{query}`", found.len()),
                        render::symbol_lines(&found),
                    ))
                })
            }
            CodeQuery::Definition => {
                let symbol = string_arg(input, "symbol")?;
                Box::new(move |index: &CodeIndex| {
                    let found = index.definition(&symbol)?;
                    if found.is_empty() {
                        return Err(Error::UnknownSymbol(symbol));
                    }
                    Ok((
                        format!("{} definitions of `{symbol}`", found.len()),
                        render::symbol_lines(&found),
                    ))
                })
            }
            CodeQuery::Callers => {
                let symbol = string_arg(input, "symbol")?;
                Box::new(move |index: &CodeIndex| {
                    Ok(render::callers_lines(&index.callers(&symbol, depth)?))
                })
            }
            CodeQuery::Callees => {
                let symbol = string_arg(input, "symbol")?;
                Box::new(move |index: &CodeIndex| {
                    Ok(render::callees_lines(&index.callees(&symbol, depth)?))
                })
            }
            CodeQuery::Impact => {
                let symbol = string_arg(input, "symbol")?;
                Box::new(move |index: &CodeIndex| Ok(render::impact_lines(&index.impact(&symbol)?)))
            }
        })
    }
}

/// A code-graph tool for the model: one [`CodeQuery`] over a [`SharedIndex`].
pub struct CodeTool {
    shared: Arc<SharedIndex>,
    query: CodeQuery,
}

impl CodeTool {
    /// The tool answering `query` from `shared`.
    pub fn new(shared: Arc<SharedIndex>, query: CodeQuery) -> CodeTool {
        CodeTool { shared, query }
    }
}

#[async_trait]
impl Tool for CodeTool {
    fn name(&self) -> &str {
        self.query.name()
    }
    fn description(&self) -> &str {
        self.query.description()
    }
    fn input_schema(&self) -> Value {
        let (props, required) = self.query.properties();
        schema(props, required)
    }
    fn read_only(&self) -> bool {
        true
    }
    async fn execute(&self, input: Value, _ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let question = self.query.question(&input, &self.shared.workspace)?;
        answer(&self.shared, question, page_of(&input)).await
    }
}

/// A file tool that edits (one of [`EDITING_TOOLS`]) whose file is
/// re-indexed as soon as the edit succeeds, so the next code tool answer,
/// `ferroclaw code` and the repo map see it. A failed re-index (the
/// database busy past [`EDIT_REINDEX_WAIT`]) never fails the edit: the next
/// code tool call finds the file by its changed time.
pub struct ReindexAfterEdit(Arc<SharedIndex>);

#[async_trait]
impl Around for ReindexAfterEdit {
    async fn run(
        &self,
        inner: &dyn Tool,
        input: Value,
        ctx: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        let out = inner.execute(input.clone(), ctx).await?;
        let Some(raw) = input["path"].as_str().filter(|_| !out.is_error) else { return Ok(out) };
        let path = ctx.workspace.join(raw);
        let shared = self.0.clone();
        match tokio::task::spawn_blocking(move || shared.reindex(&path)).await {
            Ok(Ok(_) | Err(Error::OutsideProject(_))) => {}
            Ok(Err(e)) => {
                tracing::debug!(error = %e, "re-index after edit failed; the next code tool call catches up");
            }
            Err(e) => tracing::debug!(error = %e, "re-index after edit did not finish"),
        }
        Ok(out)
    }
}
