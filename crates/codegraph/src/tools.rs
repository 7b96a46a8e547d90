//! The graph as tools for the model: `code_outline`, `code_find`,
//! `code_definition`, `code_callers`, `code_callees` and `code_impact`.
//!
//! Each call first brings the index up to date (incremental: only files
//! whose size or time changed are read, only changed content is parsed), so
//! an edit the agent just made is in the answer; if that update fails (the
//! database is busy), the answer comes from the index as it is and says how
//! many files changed since.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use ferroclaw_tools::{Tool, ToolContext, ToolError, ToolOutput, ToolRegistry};
use serde_json::{Value, json};

use crate::extract::SymbolKind;
use crate::render::{self, LEGEND, Page};
use crate::{CodeIndex, Error, Lang, Staleness};

/// A project with at most this many source files gets the tools even
/// without an index: its first build takes a few seconds.
pub const QUICK_BUILD_MAX_FILES: usize = 3_000;

/// The deepest `code_callers`/`code_callees` go.
const MAX_DEPTH: u64 = 5;

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

    /// Runs `f` on the up-to-date index; the second value is the freshness line.
    fn with<T>(
        &self,
        f: impl FnOnce(&CodeIndex) -> Result<T, Error>,
    ) -> Result<(T, String), Error> {
        let mut guard = self.index.lock().unwrap_or_else(|p| p.into_inner());
        if guard.is_none() {
            *guard = Some(CodeIndex::open(&self.workspace, &self.home)?);
        }
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
}

/// Registers the six code tools on `registry` when the project at
/// `workspace` has an index under `home` or is small enough to build one
/// quickly ([`QUICK_BUILD_MAX_FILES`]); returns whether it did.
pub fn register_code_tools(registry: &mut ToolRegistry, workspace: &Path, home: &Path) -> bool {
    let has_index = crate::db_path(home, workspace).exists();
    if !has_index && !small_project(workspace) {
        return false;
    }
    let shared = SharedIndex::new(workspace, home);
    registry.register(CodeOutlineTool(shared.clone()));
    registry.register(CodeFindTool(shared.clone()));
    registry.register(CodeDefinitionTool(shared.clone()));
    registry.register(CodeCallersTool(shared.clone()));
    registry.register(CodeCalleesTool(shared.clone()));
    registry.register(CodeImpactTool(shared));
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

/// Runs a query off the async runtime and turns its text (or error) into a tool result.
async fn answer(
    shared: &Arc<SharedIndex>,
    f: impl FnOnce(&CodeIndex) -> Result<(String, Vec<String>), Error> + Send + 'static,
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

macro_rules! read_only_tool {
    ($ty:ident) => {
        /// A code-graph tool (see the module docs).
        pub struct $ty(pub Arc<SharedIndex>);
    };
}
read_only_tool!(CodeOutlineTool);
read_only_tool!(CodeFindTool);
read_only_tool!(CodeDefinitionTool);
read_only_tool!(CodeCallersTool);
read_only_tool!(CodeCalleesTool);
read_only_tool!(CodeImpactTool);

#[async_trait]
impl Tool for CodeOutlineTool {
    fn name(&self) -> &str {
        "code_outline"
    }
    fn description(&self) -> &str {
        "Lists the symbols of one source file (functions, types, methods, constants) with their line ranges, \
         signatures and first doc line, nested as in the file. Cheaper than reading the file to find your way."
    }
    fn input_schema(&self) -> Value {
        schema(
            json!({"path": {"type": "string", "description": "File path, relative to the project or absolute."}}),
            &["path"],
        )
    }
    fn read_only(&self) -> bool {
        true
    }
    async fn execute(&self, input: Value, _ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let path = string_arg(&input, "path")?;
        let root = self.0.workspace.canonicalize().unwrap_or_else(|_| self.0.workspace.clone());
        let rel = Path::new(&path)
            .strip_prefix(&root)
            .or_else(|_| Path::new(&path).strip_prefix(&self.0.workspace))
            .map_or(path.clone(), |r| r.to_string_lossy().into_owned());
        answer(
            &self.0,
            move |index| {
                let symbols = index.outline(&rel)?;
                Ok((
                    format!("outline of {rel}: {} symbols", symbols.len()),
                    render::outline_lines(&symbols),
                ))
            },
            page_of(&input),
        )
        .await
    }
}

#[async_trait]
impl Tool for CodeFindTool {
    fn name(&self) -> &str {
        "code_find"
    }
    fn description(&self) -> &str {
        "Finds symbol definitions whose name contains `query` (case-insensitive), exact names first, \
         optionally of one `kind`. Answers file:line-range, kind, qualified name and signature."
    }
    fn input_schema(&self) -> Value {
        schema(
            json!({
                "query": {"type": "string", "description": "Part of a symbol name, e.g. `open` or `Store::open`."},
                "kind": {"type": "string", "enum": ["function", "method", "class", "struct", "enum", "trait", "interface", "module", "constant"]}
            }),
            &["query"],
        )
    }
    fn read_only(&self) -> bool {
        true
    }
    async fn execute(&self, input: Value, _ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let query = string_arg(&input, "query")?;
        let kind = match input["kind"].as_str() {
            Some(k) => Some(
                SymbolKind::parse(k)
                    .ok_or_else(|| ToolError::InvalidArguments(format!("unknown kind `{k}`")))?,
            ),
            None => None,
        };
        answer(
            &self.0,
            move |index| {
                let found = index.find(&query, kind, 500)?;
                Ok((
                    format!("{} symbols matching `{query}`", found.len()),
                    render::symbol_lines(&found),
                ))
            },
            page_of(&input),
        )
        .await
    }
}

#[async_trait]
impl Tool for CodeDefinitionTool {
    fn name(&self) -> &str {
        "code_definition"
    }
    fn description(&self) -> &str {
        "Where a symbol is defined: file:line-range, signature and first doc line. `symbol` is a name, \
         a qualified name (`Store::open`, `Repo.save`) or `path:name`."
    }
    fn input_schema(&self) -> Value {
        schema(json!({"symbol": {"type": "string"}}), &["symbol"])
    }
    fn read_only(&self) -> bool {
        true
    }
    async fn execute(&self, input: Value, _ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let symbol = string_arg(&input, "symbol")?;
        answer(
            &self.0,
            move |index| {
                let found = index.definition(&symbol)?;
                if found.is_empty() {
                    return Err(Error::UnknownSymbol(symbol));
                }
                Ok((
                    format!("{} definitions of `{symbol}`", found.len()),
                    render::symbol_lines(&found),
                ))
            },
            page_of(&input),
        )
        .await
    }
}

fn depth_of(input: &Value) -> usize {
    input["depth"].as_u64().unwrap_or(1).clamp(1, MAX_DEPTH) as usize
}

fn depth_schema() -> Value {
    json!({"symbol": {"type": "string", "description": "A name, `Type::name`/`Type.name`, or `path:name`."},
           "depth": {"type": "integer", "minimum": 1, "maximum": MAX_DEPTH, "description": "Hops to follow (default 1)."}})
}

#[async_trait]
impl Tool for CodeCallersTool {
    fn name(&self) -> &str {
        "code_callers"
    }
    fn description(&self) -> &str {
        "Who calls a symbol (and which types inherit from it), up to `depth` hops, as file:line of each call. \
         Edges are marked exact (same file or import) or ~confidence (matched by name only)."
    }
    fn input_schema(&self) -> Value {
        schema(depth_schema(), &["symbol"])
    }
    fn read_only(&self) -> bool {
        true
    }
    async fn execute(&self, input: Value, _ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let symbol = string_arg(&input, "symbol")?;
        let depth = depth_of(&input);
        answer(
            &self.0,
            move |index| Ok(render::callers_lines(&index.callers(&symbol, depth)?)),
            page_of(&input),
        )
        .await
    }
}

#[async_trait]
impl Tool for CodeCalleesTool {
    fn name(&self) -> &str {
        "code_callees"
    }
    fn description(&self) -> &str {
        "What a symbol calls, up to `depth` hops, with where each callee is defined; calls to libraries or \
         ambiguous names are listed as unresolved. Edges are marked exact or ~confidence."
    }
    fn input_schema(&self) -> Value {
        schema(depth_schema(), &["symbol"])
    }
    fn read_only(&self) -> bool {
        true
    }
    async fn execute(&self, input: Value, _ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let symbol = string_arg(&input, "symbol")?;
        let depth = depth_of(&input);
        answer(
            &self.0,
            move |index| Ok(render::callees_lines(&index.callees(&symbol, depth)?)),
            page_of(&input),
        )
        .await
    }
}

#[async_trait]
impl Tool for CodeImpactTool {
    fn name(&self) -> &str {
        "code_impact"
    }
    fn description(&self) -> &str {
        "What may break if a symbol changes: its transitive callers, the files they are in, and the tests \
         among them (to run after the change)."
    }
    fn input_schema(&self) -> Value {
        schema(json!({"symbol": {"type": "string"}}), &["symbol"])
    }
    fn read_only(&self) -> bool {
        true
    }
    async fn execute(&self, input: Value, _ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let symbol = string_arg(&input, "symbol")?;
        answer(
            &self.0,
            move |index| Ok(render::impact_lines(&index.impact(&symbol)?)),
            page_of(&input),
        )
        .await
    }
}
