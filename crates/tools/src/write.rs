//! `write`: creates or replaces a file atomically; also the atomic write used
//! by `edit` and `multi_edit`.

use std::path::Path;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use crate::file_limit::read_bounded;
use crate::tool_input::{parse, schema_for};
use crate::{Change, Sandbox, Tool, ToolContext, ToolError, ToolOutput};

/// Writes a whole file, creating parent folders.
#[derive(Debug, Default)]
pub struct WriteTool;

#[async_trait]
impl Tool for WriteTool {
    fn name(&self) -> &str {
        "write"
    }

    fn description(&self) -> &str {
        "Writes `content` to a file, replacing it or creating it (and missing folders); \
         atomic, keeps an existing file's permissions. Prefer `edit` to change part of a file. \
         An existing file must be read first, and is refused if it changed since you read it."
    }

    fn input_schema(&self) -> Value {
        schema_for::<WriteArgs>()
    }

    async fn execute(&self, input: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let WriteArgs { path: raw, content } = parse(input)?;
        let sandbox = Sandbox::from_context(ctx);
        let path = sandbox.resolve(&raw)?;
        let shown = sandbox.display(&path);
        let reads = ctx.reads.clone();
        let max = ctx.sandbox.max_file_bytes;
        let len = content.len();
        let created = tokio::task::spawn_blocking(move || {
            let current = current_bytes(&sandbox, &path, max)?;
            reads.before_change(&path, current.as_deref(), Change::Whole)?;
            let created = atomic_write(&sandbox, &path, content.as_bytes())?;
            reads.wrote(&path, content.as_bytes());
            Ok::<_, ToolError>(created)
        })
        .await
        .map_err(|e| ToolError::Failed(format!("write task failed: {e}")))??;
        let verb = if created { "Created" } else { "Overwrote" };
        Ok(ToolOutput::text(format!("{verb} {shown} ({len} bytes written)")))
    }
}

/// `write`'s input.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct WriteArgs {
    path: String,
    /// The whole new content.
    content: String,
}

/// The bytes of the file at the resolved `path`, `None` when there is none
/// (opened beneath its sandbox root without following links or blocking;
/// refused when over `max` bytes, before reading).
pub(crate) fn current_bytes(
    sandbox: &Sandbox,
    path: &Path,
    max: u64,
) -> Result<Option<Vec<u8>>, ToolError> {
    if !path.is_file() {
        return Ok(None);
    }
    let (root, rel) = sandbox.beneath(path)?;
    let bytes = read_bounded(&mut root.open_read(&rel)?, &sandbox.display(path), max)?;
    Ok(Some(bytes))
}

/// Replaces the resolved `path` with `bytes` atomically (temp file in the
/// same folder, fsync, rename), creating missing parent folders and keeping
/// an existing file's permissions, all opened beneath its sandbox root
/// without following links. Returns true when the file did not exist before.
///
/// A protected file ([`crate::protected_file`]) is refused here too, on the
/// path as resolved now: the permission gate judged the path before the
/// call, and a folder swapped for a link to `.git` since then would
/// otherwise resolve to `.git/config` (a link swapped in after this check
/// is refused by the open beneath the root).
pub(crate) fn atomic_write(
    sandbox: &Sandbox,
    path: &Path,
    bytes: &[u8],
) -> Result<bool, ToolError> {
    if let Some(why) = crate::protected_file(path) {
        return Err(ToolError::Refused(format!(
            "{} may not be written by the agent: {why}; the user edits it",
            sandbox.display(path)
        )));
    }
    let (root, rel) = sandbox.beneath(path)?;
    root.write_atomic(&rel, bytes)
}
