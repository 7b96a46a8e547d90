//! `glob`: files whose path matches a glob pattern, newest first.

use std::path::PathBuf;
use std::sync::mpsc;
use std::time::SystemTime;

use async_trait::async_trait;
use globset::GlobBuilder;
use ignore::WalkState;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use crate::beneath::Recheck;
use crate::tool_input::{parse, schema_for};
use crate::walk::{walk_threads, walker};
use crate::{Sandbox, Tool, ToolContext, ToolError, ToolOutput};

/// Paths listed at most (Claude Code's Glob shows 100; paths are short).
pub const MAX_GLOB_RESULTS: usize = 200;

/// `glob`'s input.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct GlobArgs {
    /// e.g. **/*.rs
    pattern: String,
    /// Folder to search (default: the workspace).
    path: Option<String>,
}

/// Finds files by glob pattern.
#[derive(Debug, Default)]
pub struct GlobTool;

#[async_trait]
impl Tool for GlobTool {
    fn name(&self) -> &str {
        "glob"
    }

    fn description(&self) -> &str {
        "Finds files by glob pattern (`*` within a folder, `**` across folders, `{a,b}` \
         alternatives) matched against paths relative to `path`; newest first, at most 200, \
         skipping .git and what .gitignore ignores."
    }

    fn input_schema(&self) -> Value {
        schema_for::<GlobArgs>()
    }

    fn read_only(&self) -> bool {
        true
    }

    async fn execute(&self, input: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let args: GlobArgs = parse(input)?;
        let pattern = args.pattern.trim();
        let sandbox = Sandbox::from_context(ctx);
        let base = sandbox.resolve(args.path.as_deref().unwrap_or("."))?;
        if !base.is_dir() {
            return Err(ToolError::InvalidArguments(format!(
                "path {} is not a folder",
                sandbox.display(&base)
            )));
        }
        let relative = pattern_relative_to(pattern, &base)?;
        let matcher = GlobBuilder::new(&relative)
            .literal_separator(true)
            .build()
            .map_err(|e| ToolError::InvalidArguments(format!("bad glob pattern {pattern:?}: {e}")))?
            .compile_matcher();
        let cancel = ctx.cancel.clone();
        let walk_base = base.clone();
        let (beneath, _) = sandbox.beneath(&base)?;
        let mut found = tokio::task::spawn_blocking(move || {
            let (tx, rx) = mpsc::channel::<(Option<u64>, PathBuf)>();
            walker(&walk_base).threads(walk_threads()).build_parallel().run(|| {
                let tx = tx.clone();
                let matcher = &matcher;
                let base = &walk_base;
                let cancel = &cancel;
                Box::new(move |entry| {
                    if cancel.is_cancelled() {
                        return WalkState::Quit;
                    }
                    let Ok(entry) = entry else {
                        return WalkState::Continue;
                    };
                    if entry.file_type().is_some_and(|t| t.is_dir()) {
                        return WalkState::Continue;
                    }
                    let rel = entry.path().strip_prefix(base).unwrap_or(entry.path());
                    if matcher.is_match(rel) {
                        let _ = tx.send((entry.ino(), entry.into_path()));
                    }
                    WalkState::Continue
                })
            });
            drop(tx);
            // The walk goes by path; each match is looked at again beneath
            // the workspace (its time too), so a folder swapped for a link
            // while it runs shows nothing from outside.
            let mut recheck = Recheck::new(&beneath);
            rx.into_iter()
                .filter_map(|(ino, path)| Some((recheck.stat(&path, ino)?.modified, path)))
                .collect::<Vec<(SystemTime, PathBuf)>>()
        })
        .await
        .map_err(|e| ToolError::Failed(format!("glob task failed: {e}")))?;
        if ctx.cancel.is_cancelled() {
            return Err(ToolError::Cancelled);
        }
        if found.is_empty() {
            return Ok(ToolOutput::text(format!(
                "No files match {pattern:?} in {}.",
                sandbox.display(&base)
            )));
        }
        found.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
        let total = found.len();
        let mut out: String =
            found.iter().take(MAX_GLOB_RESULTS).map(|(_, p)| sandbox.display(p) + "\n").collect();
        if total > MAX_GLOB_RESULTS {
            out.push_str(&format!(
                "({} more not shown; {total} files match. Use a narrower pattern or path.)\n",
                total - MAX_GLOB_RESULTS
            ));
        }
        Ok(ToolOutput::text(out))
    }
}

/// The pattern relative to `base`: a leading `./` is dropped and an absolute
/// pattern under `base` is made relative; other absolute patterns are refused.
fn pattern_relative_to(pattern: &str, base: &std::path::Path) -> Result<String, ToolError> {
    if pattern.is_empty() {
        return Err(ToolError::InvalidArguments("pattern is empty".to_string()));
    }
    if let Some(rest) = pattern.strip_prefix('/') {
        let base_str = base.to_string_lossy();
        let base_rel = base_str.trim_start_matches('/');
        return match rest.strip_prefix(base_rel) {
            Some(tail) if tail.starts_with('/') => Ok(tail[1..].to_string()),
            _ => Err(ToolError::InvalidArguments(format!(
                "pattern {pattern:?} is absolute; give a pattern relative to the search \
                 folder, and the folder as `path`"
            ))),
        };
    }
    Ok(pattern.strip_prefix("./").unwrap_or(pattern).to_string())
}
