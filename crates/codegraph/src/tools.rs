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
use ferroclaw_tools::tool_input::{parse, schema_for};
use ferroclaw_tools::{Around, Tool, ToolContext, ToolError, ToolOutput, ToolRegistry, Wrapped};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

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

/// The paging arguments every code tool takes.
#[derive(Deserialize, JsonSchema)]
struct PageArgs {
    /// Lines to skip (paging).
    #[schemars(range(min = 0))]
    offset: Option<u64>,
    /// Answer budget in characters (default 6000).
    #[schemars(range(min = 500))]
    max_chars: Option<u64>,
}

impl From<PageArgs> for Page {
    fn from(args: PageArgs) -> Page {
        let offset = args.offset.unwrap_or(0) as usize;
        let max_chars =
            args.max_chars.map_or(render::DEFAULT_MAX_CHARS, |m| (m as usize).clamp(500, 50_000));
        Page { offset, max_chars }
    }
}

/// `code_outline`'s input.
#[derive(Deserialize, JsonSchema)]
#[schemars(extend("additionalProperties" = false))]
struct OutlineArgs {
    /// File path, relative to the project or absolute.
    path: String,
    #[serde(flatten)]
    page: PageArgs,
}

/// `code_find`'s input.
#[derive(Deserialize, JsonSchema)]
#[schemars(extend("additionalProperties" = false))]
struct FindArgs {
    /// Part of a symbol name, e.g. `open` or `Store::open`.
    query: String,
    kind: Option<KindArg>,
    #[serde(flatten)]
    page: PageArgs,
}

/// The kinds `code_find` may be limited to.
#[derive(Clone, Copy, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
enum KindArg {
    Function,
    Method,
    Class,
    Struct,
    Enum,
    Trait,
    Interface,
    Module,
    Constant,
}

impl From<KindArg> for SymbolKind {
    fn from(kind: KindArg) -> SymbolKind {
        match kind {
            KindArg::Function => SymbolKind::Function,
            KindArg::Method => SymbolKind::Method,
            KindArg::Class => SymbolKind::Class,
            KindArg::Struct => SymbolKind::Struct,
            KindArg::Enum => SymbolKind::Enum,
            KindArg::Trait | KindArg::Interface => SymbolKind::Trait,
            KindArg::Module => SymbolKind::Module,
            KindArg::Constant => SymbolKind::Constant,
        }
    }
}

/// The input of `code_definition` and `code_impact`.
#[derive(Deserialize, JsonSchema)]
#[schemars(extend("additionalProperties" = false))]
struct SymbolArgs {
    /// A name, `Type::name`/`Type.name`, or `path:name`.
    symbol: String,
    #[serde(flatten)]
    page: PageArgs,
}

/// The input of `code_callers` and `code_callees`.
#[derive(Deserialize, JsonSchema)]
#[schemars(extend("additionalProperties" = false))]
struct HopsArgs {
    /// A name, `Type::name`/`Type.name`, or `path:name`.
    symbol: String,
    /// Hops to follow (default 1).
    #[schemars(range(min = 1, max = MAX_DEPTH))]
    depth: Option<u64>,
    #[serde(flatten)]
    page: PageArgs,
}

/// `value` trimmed, refused when empty.
fn non_empty(key: &str, value: &str) -> Result<String, ToolError> {
    match value.trim() {
        "" => Err(ToolError::InvalidArguments(format!("`{key}` must be a non-empty string"))),
        s => Ok(s.to_string()),
    }
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

    /// The tool's input schema.
    fn schema(self) -> Value {
        match self {
            CodeQuery::Outline => schema_for::<OutlineArgs>(),
            CodeQuery::Find => schema_for::<FindArgs>(),
            CodeQuery::Definition | CodeQuery::Impact => schema_for::<SymbolArgs>(),
            CodeQuery::Callers | CodeQuery::Callees => schema_for::<HopsArgs>(),
        }
    }

    /// Checks the arguments and returns the question to put to the index.
    fn question(self, input: Value, workspace: &Path) -> Result<(Question, Page), ToolError> {
        Ok(match self {
            CodeQuery::Outline => {
                let args: OutlineArgs = parse(input)?;
                let path = non_empty("path", &args.path)?;
                let root = workspace.canonicalize().unwrap_or_else(|_| workspace.to_path_buf());
                let rel = Path::new(&path)
                    .strip_prefix(&root)
                    .or_else(|_| Path::new(&path).strip_prefix(workspace))
                    .map_or(path.clone(), |r| r.to_string_lossy().into_owned());
                let question: Question = Box::new(move |index: &CodeIndex| {
                    let symbols = index.outline(&rel)?;
                    Ok((
                        format!("outline of {rel}: {} symbols", symbols.len()),
                        render::outline_lines(&symbols),
                    ))
                });
                (question, args.page.into())
            }
            CodeQuery::Find => {
                let args: FindArgs = parse(input)?;
                let query = non_empty("query", &args.query)?;
                let kind = args.kind.map(SymbolKind::from);
                let question: Question = Box::new(move |index: &CodeIndex| {
                    let found = index.find(&query, kind, 500)?;
                    Ok((
                        format!("{} symbols matching `{query}`", found.len()),
                        render::symbol_lines(&found),
                    ))
                });
                (question, args.page.into())
            }
            CodeQuery::Definition => {
                let args: SymbolArgs = parse(input)?;
                let symbol = non_empty("symbol", &args.symbol)?;
                let question: Question = Box::new(move |index: &CodeIndex| {
                    let found = index.definition(&symbol)?;
                    if found.is_empty() {
                        return Err(Error::UnknownSymbol(symbol));
                    }
                    Ok((
                        format!("{} definitions of `{symbol}`", found.len()),
                        render::symbol_lines(&found),
                    ))
                });
                (question, args.page.into())
            }
            CodeQuery::Callers => {
                let args: HopsArgs = parse(input)?;
                let symbol = non_empty("symbol", &args.symbol)?;
                let depth = args.depth.unwrap_or(1).clamp(1, MAX_DEPTH) as usize;
                let question: Question = Box::new(move |index: &CodeIndex| {
                    Ok(render::callers_lines(&index.callers(&symbol, depth)?))
                });
                (question, args.page.into())
            }
            CodeQuery::Callees => {
                let args: HopsArgs = parse(input)?;
                let symbol = non_empty("symbol", &args.symbol)?;
                let depth = args.depth.unwrap_or(1).clamp(1, MAX_DEPTH) as usize;
                let question: Question = Box::new(move |index: &CodeIndex| {
                    Ok(render::callees_lines(&index.callees(&symbol, depth)?))
                });
                (question, args.page.into())
            }
            CodeQuery::Impact => {
                let args: SymbolArgs = parse(input)?;
                let symbol = non_empty("symbol", &args.symbol)?;
                let question: Question = Box::new(move |index: &CodeIndex| {
                    Ok(render::impact_lines(&index.impact(&symbol)?))
                });
                (question, args.page.into())
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
        self.query.schema()
    }
    fn read_only(&self) -> bool {
        true
    }
    async fn execute(&self, input: Value, _ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let (question, page) = self.query.question(input, &self.shared.workspace)?;
        answer(&self.shared, question, page).await
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
