//! `edit`: exact string replacement in one file, and the matching rules that
//! `multi_edit` shares.

use std::path::{Path, PathBuf};

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use crate::closest::closest_lines;
use crate::file_limit::{
    DEFAULT_MAX_FILE_BYTES, binary_refusal, human_size, looks_binary, read_bounded,
};
use crate::lines::{line_of, numbered_excerpt};
use crate::stale_write::APPLIED_TO_CHANGED;
use crate::tool_input::{parse, schema_for};
use crate::write::atomic_write;
use crate::{CHANGED_SINCE_READ, Change};
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
        schema_for::<EditArgs>()
    }

    async fn execute(&self, input: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let (raw, edit) = EditArgs::parse(input)?;
        let (sandbox, path, shown) = resolve_existing(ctx, &raw)?;
        let reads = ctx.reads.clone();
        let max = ctx.sandbox.max_file_bytes;
        tokio::task::spawn_blocking(move || {
            let original = read_text(&sandbox, &path, &shown, "edit", max)?;
            let stale =
                reads.before_change(&path, Some(original.as_bytes()), Change::InPlace)?.is_stale();
            let (content, message) = edit_once(&original, &edit, &shown, stale, max)?;
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
/// as stale, and one that does says so. The new content may have `max`
/// bytes at most.
pub(crate) fn edit_once(
    original: &str,
    edit: &Replacement,
    shown: &str,
    stale: bool,
    max: u64,
) -> Result<(String, String), ToolError> {
    let applied = apply(original, edit, max).map_err(|f| match f {
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
/// model. For front ends that hold the file elsewhere (an editor's buffer);
/// the new text may have [`DEFAULT_MAX_FILE_BYTES`] at most.
pub fn edit_text(
    tool: &str,
    input: &Value,
    original: &str,
    shown: &str,
    stale: bool,
) -> Result<(String, String), ToolError> {
    match tool {
        "multi_edit" => crate::multi_edit::edit_all(
            original,
            &crate::multi_edit::MultiEditArgs::parse(input.clone())?.1,
            shown,
            stale,
            DEFAULT_MAX_FILE_BYTES,
        ),
        _ => edit_once(
            original,
            &EditArgs::parse(input.clone())?.1,
            shown,
            stale,
            DEFAULT_MAX_FILE_BYTES,
        ),
    }
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

/// `edit`'s input.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct EditArgs {
    path: String,
    old_string: String,
    new_string: String,
    /// Replace every occurrence (default false).
    replace_all: Option<bool>,
}

impl EditArgs {
    /// The path and the replacement `input` asks for.
    fn parse(input: Value) -> Result<(String, Replacement), ToolError> {
        let args: Self = parse(input)?;
        let replace_all = args.replace_all.unwrap_or(false);
        Ok((args.path, Replacement { old: args.old_string, new: args.new_string, replace_all }))
    }
}

/// Why a replacement could not be applied.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum EditFailure {
    EmptyOld,
    Unchanged,
    NotFound,
    Ambiguous {
        count: usize,
        lines: Vec<usize>,
    },
    /// The new content would have `len` bytes, over the file tools' `max`.
    TooLarge {
        len: u64,
        max: u64,
    },
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
            Self::TooLarge { len, max } => format!(
                "the edit would make {shown} {} ({len} bytes), over the {} limit of the file \
                 tools (config `max_file_bytes`)",
                human_size(*len),
                human_size(*max)
            ),
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

/// Applies one replacement to `content`, whose result may have `max` bytes
/// at most. When nothing matches and the file uses CRLF line ends, the
/// strings are retried with CRLF.
pub(crate) fn apply(content: &str, edit: &Replacement, max: u64) -> Result<Applied, EditFailure> {
    if edit.old.is_empty() {
        return Err(EditFailure::EmptyOld);
    }
    if edit.old == edit.new {
        return Err(EditFailure::Unchanged);
    }
    match apply_exact(content, &edit.old, &edit.new, edit.replace_all, max) {
        Err(EditFailure::NotFound) if content.contains("\r\n") && !edit.old.contains("\r\n") => {
            let old = edit.old.replace('\n', "\r\n");
            let new = edit.new.replace('\n', "\r\n");
            apply_exact(content, &old, &new, edit.replace_all, max)
        }
        other => other,
    }
}

/// One pass of matching: counts the matches keeping only the first few
/// positions, and builds the new content once, sized from that count, so
/// memory is the file and its new version whatever the number of matches.
fn apply_exact(
    content: &str,
    old: &str,
    new: &str,
    replace_all: bool,
    max: u64,
) -> Result<Applied, EditFailure> {
    let mut count = 0usize;
    let mut starts = Vec::new();
    for (i, _) in content.match_indices(old) {
        count += 1;
        if starts.len() < MAX_LISTED_MATCHES {
            starts.push(i);
        }
    }
    let Some(&first) = starts.first() else { return Err(EditFailure::NotFound) };
    if count > 1 && !replace_all {
        return Err(EditFailure::Ambiguous {
            count,
            lines: starts.iter().map(|&i| line_of(content, i)).collect(),
        });
    }
    let len = (content.len() - count * old.len()) as u64 + (count as u64) * new.len() as u64;
    if len > max {
        return Err(EditFailure::TooLarge { len, max });
    }
    let mut out = String::with_capacity(len as usize);
    let mut from = 0;
    for (i, _) in content.match_indices(old) {
        out.push_str(&content[from..i]);
        out.push_str(new);
        from = i + old.len();
    }
    out.push_str(&content[from..]);
    Ok(Applied { content: out, count, first: first..first + new.len() })
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

/// The file as UTF-8 text for `tool`, or a refusal naming why not: over
/// `max` bytes (checked before reading), binary (as `read` decides), or not
/// UTF-8. Opened beneath its sandbox root without following links or
/// blocking (a FIFO or device is refused).
pub(crate) fn read_text(
    sandbox: &Sandbox,
    path: &Path,
    shown: &str,
    tool: &str,
    max: u64,
) -> Result<String, ToolError> {
    let (root, rel) = sandbox.beneath(path)?;
    let bytes = read_bounded(&mut root.open_read(&rel)?, shown, max)?;
    if looks_binary(&bytes) {
        return Err(binary_refusal(shown, tool));
    }
    String::from_utf8(bytes).map_err(|_| {
        ToolError::Failed(format!(
            "{shown} is not valid UTF-8 text; edit only changes text files (use write to replace it)"
        ))
    })
}
