//! `list_dir`: the entries of one folder with their kind and size.

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use crate::beneath::Recheck;
use crate::tool_input::{parse, schema_for};
use crate::walk::walker;
use crate::{Sandbox, Tool, ToolContext, ToolError, ToolOutput};

/// Entries listed at most.
pub const MAX_LIST_ENTRIES: usize = 500;

/// `list_dir`'s input.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ListDirArgs {
    /// Default: the workspace.
    path: Option<String>,
}

/// Lists a folder.
#[derive(Debug, Default)]
pub struct ListDirTool;

/// One listed entry.
struct Entry {
    name: String,
    kind: &'static str,
    size: Option<u64>,
}

#[async_trait]
impl Tool for ListDirTool {
    fn name(&self) -> &str {
        "list_dir"
    }

    fn description(&self) -> &str {
        "Lists one folder, not recursively: each entry's kind (dir, file, symlink), size for \
         files, and name, folders first. Hidden entries are shown; .git and what .gitignore \
         ignores are not. At most 500 entries."
    }

    fn input_schema(&self) -> Value {
        schema_for::<ListDirArgs>()
    }

    fn read_only(&self) -> bool {
        true
    }

    async fn execute(&self, input: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let args: ListDirArgs = parse(input)?;
        let sandbox = Sandbox::from_context(ctx);
        let dir = sandbox.resolve(args.path.as_deref().unwrap_or("."))?;
        let shown = sandbox.display(&dir);
        if !dir.is_dir() {
            return Err(ToolError::InvalidArguments(format!(
                "{shown} is not a folder; use read for files"
            )));
        }
        let (beneath, _) = sandbox.beneath(&dir)?;
        let mut entries = tokio::task::spawn_blocking(move || {
            // The walk goes by path (for .gitignore); each entry is looked at
            // again beneath the workspace, so a folder swapped for a link
            // while it runs shows nothing from outside.
            let mut recheck = Recheck::new(&beneath);
            walker(&dir)
                .max_depth(Some(1))
                .build()
                .filter_map(Result::ok)
                .filter(|e| e.depth() == 1)
                .filter_map(|e| {
                    let found = recheck.stat(e.path(), e.ino())?;
                    let size = (found.kind == "file").then_some(found.size);
                    let name = e.file_name().to_string_lossy().into_owned();
                    Some(Entry { name, kind: found.kind, size })
                })
                .collect::<Vec<_>>()
        })
        .await
        .map_err(|e| ToolError::Failed(format!("list_dir task failed: {e}")))?;
        if entries.is_empty() {
            return Ok(ToolOutput::text(format!("{shown} is empty.")));
        }
        entries.sort_by(|a, b| {
            (a.kind != "dir").cmp(&(b.kind != "dir")).then_with(|| a.name.cmp(&b.name))
        });
        let total = entries.len();
        let mut out = format!("{shown}:\n");
        for e in entries.iter().take(MAX_LIST_ENTRIES) {
            let size = e.size.map(|s| s.to_string()).unwrap_or_else(|| "-".to_string());
            let slash = if e.kind == "dir" { "/" } else { "" };
            out.push_str(&format!("{:<7} {size:>10}  {}{slash}\n", e.kind, e.name));
        }
        if total > MAX_LIST_ENTRIES {
            out.push_str(&format!(
                "({} more entries not shown; {total} in all. Use glob to narrow down.)\n",
                total - MAX_LIST_ENTRIES
            ));
        }
        Ok(ToolOutput::text(out))
    }
}
