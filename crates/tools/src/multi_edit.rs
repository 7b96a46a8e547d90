//! `multi_edit`: several replacements in one file, all or nothing.

use std::borrow::Cow;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use crate::edit::{EditFailure, Replacement, apply, read_text, resolve_existing, stale_note};
use crate::tool_input::{parse, schema_for};
use crate::write::atomic_write;
use crate::{CHANGED_SINCE_READ, Change, Tool, ToolContext, ToolError, ToolOutput};

/// Applies a list of edits to one file in order; writes only if all succeed.
#[derive(Debug, Default)]
pub struct MultiEditTool;

#[async_trait]
impl Tool for MultiEditTool {
    fn name(&self) -> &str {
        "multi_edit"
    }

    fn description(&self) -> &str {
        "Applies several `edit`s to one file in order (each on the result of the one before), \
         all or nothing: if one fails, nothing is written and the error names it. Each follows \
         `edit`'s rules."
    }

    fn input_schema(&self) -> Value {
        schema_for::<MultiEditArgs>()
    }

    async fn execute(&self, input: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let (raw, edits) = MultiEditArgs::parse(input)?;
        let (sandbox, path, shown) = resolve_existing(ctx, &raw)?;
        let reads = ctx.reads.clone();
        let max = ctx.sandbox.max_file_bytes;
        tokio::task::spawn_blocking(move || {
            let original = read_text(&sandbox, &path, &shown, "multi_edit", max)?;
            let stale =
                reads.before_change(&path, Some(original.as_bytes()), Change::InPlace)?.is_stale();
            let (content, message) = edit_all(&original, &edits, &shown, stale, max)?;
            atomic_write(&sandbox, &path, content.as_bytes())?;
            reads.wrote(&path, content.as_bytes());
            Ok(ToolOutput::text(message))
        })
        .await
        .map_err(|e| ToolError::Failed(format!("multi_edit task failed: {e}")))?
    }
}

/// `multi_edit`'s input.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct MultiEditArgs {
    path: String,
    #[schemars(length(min = 1))]
    edits: Vec<Step>,
}

/// One of `multi_edit`'s `edits`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Step {
    old_string: String,
    new_string: String,
    replace_all: Option<bool>,
}

impl MultiEditArgs {
    /// The path and the replacements `input` asks for, at least one.
    pub(crate) fn parse(input: Value) -> Result<(String, Vec<Replacement>), ToolError> {
        let args: Self = parse(input)?;
        if args.edits.is_empty() {
            return Err(ToolError::InvalidArguments(
                "`edits` is empty; give at least one edit".to_string(),
            ));
        }
        let edits = args
            .edits
            .into_iter()
            .map(|step| Replacement {
                old: step.old_string,
                new: step.new_string,
                replace_all: step.replace_all.unwrap_or(false),
            })
            .collect();
        Ok((args.path, edits))
    }
}

/// `multi_edit` in memory: the new content of file `shown` (now
/// `original`) and the result for the model (see `edit::edit_once`); each
/// step's content may have `max` bytes at most.
pub(crate) fn edit_all(
    original: &str,
    edits: &[Replacement],
    shown: &str,
    stale: bool,
    max: u64,
) -> Result<(String, String), ToolError> {
    let mut content = Cow::Borrowed(original);
    let mut total = 0;
    let mut last_excerpt = String::new();
    for (i, edit) in edits.iter().enumerate() {
        let applied = apply(&content, edit, max).map_err(|failure| match failure {
            EditFailure::NotFound | EditFailure::Ambiguous { .. } if stale => {
                ToolError::Failed(CHANGED_SINCE_READ.to_string())
            }
            failure => ToolError::Failed(format!(
                "edit #{} of {} failed: {}. Nothing was written.",
                i + 1,
                edits.len(),
                failure.describe(shown, &content, &edit.old)
            )),
        })?;
        total += applied.count;
        last_excerpt = applied.excerpt();
        content = Cow::Owned(applied.content);
    }
    let message = format!(
        "Edited {shown}: {} edits, {total} replacements.{} Last change:\n{last_excerpt}",
        edits.len(),
        stale_note(stale)
    );
    Ok((content.into_owned(), message))
}
