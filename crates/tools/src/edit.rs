//! `edit`: exact string replacement in one file, and the matching rules that
//! `multi_edit` shares.

use std::path::{Path, PathBuf};

use async_trait::async_trait;
use serde_json::{Value, json};

use crate::CHANGED_SINCE_READ;
use crate::args::{flag, required_str};
use crate::closest::closest_lines;
use crate::lines::{line_of, numbered_excerpt};
use crate::stale_write::APPLIED_TO_CHANGED;
use crate::write::atomic_write;
use crate::{Sandbox, Tool, ToolContext, ToolError, ToolOutput};

/// Lines of context shown around a change.
const CONTEXT_LINES: usize = 3;
/// Line numbers listed at most for an ambiguous match.
const MAX_LISTED_MATCHES: usize = 20;

/// Replaces an exact string in a file.
#[derive(Debug, Default)]
pub struct EditTool;

#[async_trait]
impl Tool for EditTool {
    fn name(&self) -> &str {
        "edit"
    }

    fn description(&self) -> &str {
        "Replaces exact text in a file. `old_string` must match exactly, indentation included \
         (copy it from `read` without the line-number prefix), and occur once unless \
         `replace_all`; add surrounding lines to make it unique. A failed edit writes nothing \
         and shows the closest lines; a good one shows the changed lines."
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "path": {"type": "string"},
                "old_string": {"type": "string"},
                "new_string": {"type": "string"},
                "replace_all": {"type": "boolean", "description": "Replace every occurrence (default false)."}
            },
            "required": ["path", "old_string", "new_string"],
            "additionalProperties": false
        })
    }

    async fn execute(&self, input: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let edit = Replacement::from_json(&input)?;
        let (sandbox, path, shown) = resolve_existing(ctx, required_str(&input, "path")?)?;
        let reads = ctx.reads.clone();
        tokio::task::spawn_blocking(move || {
            let original = read_text(&sandbox, &path, &shown)?;
            let stale = reads.changed_since_read(&path, original.as_bytes());
            let (content, message) = edit_once(&original, &edit, &shown, stale)?;
            atomic_write(&sandbox, &path, content.as_bytes())?;
            reads.wrote(&path, content.as_bytes());
            Ok(ToolOutput::text(message))
        })
        .await
        .map_err(|e| ToolError::Failed(format!("edit task failed: {e}")))?
    }
}

/// `edit` in memory: the new content of file `shown` (now `original`) and
/// the result for the model. `stale`: the file changed since the
/// conversation read it, so a replacement that does not apply is refused
/// as stale, and one that does says so.
pub(crate) fn edit_once(
    original: &str,
    edit: &Replacement,
    shown: &str,
    stale: bool,
) -> Result<(String, String), ToolError> {
    let applied = apply(original, edit).map_err(|f| match f {
        EditFailure::NotFound | EditFailure::Ambiguous { .. } if stale => {
            ToolError::Failed(CHANGED_SINCE_READ.to_string())
        }
        f => ToolError::Failed(f.describe(shown, original, &edit.old)),
    })?;
    let message = format!(
        "Edited {shown}: {} replacement{}.{}\n{}",
        applied.count,
        if applied.count == 1 { "" } else { "s" },
        stale_note(stale),
        applied.excerpt()
    );
    Ok((applied.content, message))
}

/// What `edit` or `multi_edit` (`tool`) called with `input` makes of file
/// `shown`, whose text is `original`: the new text and the result for the
/// model. For front ends that hold the file elsewhere (an editor's buffer).
pub fn edit_text(
    tool: &str,
    input: &Value,
    original: &str,
    shown: &str,
    stale: bool,
) -> Result<(String, String), ToolError> {
    match tool {
        "multi_edit" => crate::multi_edit::edit_all(original, &edits_of(input)?, shown, stale),
        _ => edit_once(original, &Replacement::from_json(input)?, shown, stale),
    }
}

/// `multi_edit`'s `edits`, checked.
pub(crate) fn edits_of(input: &Value) -> Result<Vec<Replacement>, ToolError> {
    let edits = input
        .get("edits")
        .and_then(Value::as_array)
        .ok_or_else(|| ToolError::InvalidArguments("`edits` (an array) is required".to_string()))?
        .iter()
        .enumerate()
        .map(|(i, e)| {
            Replacement::from_json(e)
                .map_err(|err| ToolError::InvalidArguments(format!("edit #{}: {err}", i + 1)))
        })
        .collect::<Result<Vec<_>, _>>()?;
    if edits.is_empty() {
        return Err(ToolError::InvalidArguments(
            "`edits` is empty; give at least one edit".to_string(),
        ));
    }
    Ok(edits)
}

/// What an edit's result adds when the file had changed since the
/// conversation read it (see [`crate::stale_write`]).
pub(crate) fn stale_note(stale: bool) -> String {
    if stale { format!(" {APPLIED_TO_CHANGED}") } else { String::new() }
}

/// One replacement: what to find, what to put, everywhere or once.
#[derive(Debug, Clone)]
pub(crate) struct Replacement {
    pub old: String,
    pub new: String,
    pub replace_all: bool,
}

impl Replacement {
    /// Reads `old_string`, `new_string` and `replace_all` from a JSON object.
    pub(crate) fn from_json(value: &Value) -> Result<Self, ToolError> {
        Ok(Self {
            old: required_str(value, "old_string")?.to_owned(),
            new: required_str(value, "new_string")?.to_owned(),
            replace_all: flag(value, "replace_all", false),
        })
    }
}

/// Why a replacement could not be applied.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum EditFailure {
    EmptyOld,
    Unchanged,
    NotFound,
    Ambiguous { count: usize, lines: Vec<usize> },
}

impl EditFailure {
    /// The message for the model, about file `shown` whose text was `content`
    /// when `old` was looked for.
    pub(crate) fn describe(&self, shown: &str, content: &str, old: &str) -> String {
        match self {
            Self::EmptyOld => "old_string is empty; to create a file use write, to insert \
                 text include a neighbouring line in old_string"
                .to_string(),
            Self::Unchanged => {
                "old_string and new_string are the same; nothing to change".to_string()
            }
            Self::NotFound => {
                format!("old_string was not found in {shown}. {}", closest_lines(content, old))
            }
            Self::Ambiguous { count, lines } => {
                let listed: Vec<String> = lines.iter().map(usize::to_string).collect();
                format!(
                    "old_string occurs {count} times in {shown} (lines {}{}); include more \
                     surrounding lines to make it unique, or set replace_all to true",
                    listed.join(", "),
                    if *count > lines.len() { ", ..." } else { "" }
                )
            }
        }
    }
}

/// The result of applying replacements in memory.
#[derive(Debug, Clone)]
pub(crate) struct Applied {
    pub content: String,
    pub count: usize,
    /// Byte range of the first replacement in `content`.
    pub first: std::ops::Range<usize>,
}

impl Applied {
    /// The first change with a few lines around it, numbered.
    pub(crate) fn excerpt(&self) -> String {
        let first = line_of(&self.content, self.first.start);
        let last = line_of(&self.content, self.first.end.saturating_sub(1).max(self.first.start));
        numbered_excerpt(
            &self.content,
            first.saturating_sub(CONTEXT_LINES).max(1),
            last + CONTEXT_LINES,
        )
    }
}

/// Applies one replacement to `content`. When nothing matches and the file
/// uses CRLF line ends, the strings are retried with CRLF.
pub(crate) fn apply(content: &str, edit: &Replacement) -> Result<Applied, EditFailure> {
    if edit.old.is_empty() {
        return Err(EditFailure::EmptyOld);
    }
    if edit.old == edit.new {
        return Err(EditFailure::Unchanged);
    }
    match apply_exact(content, &edit.old, &edit.new, edit.replace_all) {
        Err(EditFailure::NotFound) if content.contains("\r\n") && !edit.old.contains("\r\n") => {
            let old = edit.old.replace('\n', "\r\n");
            let new = edit.new.replace('\n', "\r\n");
            apply_exact(content, &old, &new, edit.replace_all)
        }
        other => other,
    }
}

fn apply_exact(
    content: &str,
    old: &str,
    new: &str,
    replace_all: bool,
) -> Result<Applied, EditFailure> {
    let starts: Vec<usize> = content.match_indices(old).map(|(i, _)| i).collect();
    match starts.len() {
        0 => Err(EditFailure::NotFound),
        n if n > 1 && !replace_all => Err(EditFailure::Ambiguous {
            count: n,
            lines: starts.iter().take(MAX_LISTED_MATCHES).map(|&i| line_of(content, i)).collect(),
        }),
        n => Ok(Applied {
            content: content.replace(old, new),
            count: n,
            first: starts[0]..starts[0] + new.len(),
        }),
    }
}

/// Resolves a path that must be an existing file: its sandbox, the path and
/// its display name.
pub(crate) fn resolve_existing(
    ctx: &ToolContext,
    raw: &str,
) -> Result<(Sandbox, PathBuf, String), ToolError> {
    let sandbox = Sandbox::from_context(ctx);
    let path = sandbox.resolve(raw)?;
    let shown = sandbox.display(&path);
    if path.is_dir() {
        return Err(ToolError::InvalidArguments(format!("{shown} is a folder, not a file")));
    }
    if !path.exists() {
        return Err(ToolError::Failed(format!(
            "{shown} does not exist; use write to create a new file"
        )));
    }
    Ok((sandbox, path, shown))
}

/// The file as UTF-8 text, or a refusal naming why not; opened beneath its
/// sandbox root without following links.
pub(crate) fn read_text(sandbox: &Sandbox, path: &Path, shown: &str) -> Result<String, ToolError> {
    let (root, rel) = sandbox.beneath(path)?;
    let mut bytes = Vec::new();
    std::io::Read::read_to_end(&mut root.open_read(&rel)?, &mut bytes)
        .map_err(|e| ToolError::io(format!("cannot read {shown}"), e))?;
    String::from_utf8(bytes).map_err(|_| {
        ToolError::Failed(format!(
            "{shown} is not valid UTF-8 text; edit only changes text files (use write to replace it)"
        ))
    })
}
