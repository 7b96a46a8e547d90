//! What Claude Code reports as a tool's result (`tool_response` in a
//! PostToolUse hook's input, `tool_use_result` in stream-json), built from
//! what our tool printed, its input in Claude's shape, and, for the file
//! tools, the file before and after.
//!
//! Shapes as Claude Code 2.1.332 sends them:
//! - `Bash`: `{stdout, stderr, interrupted, isImage, noOutputExpected}` (the
//!   two streams arrive merged in `stdout`, as ours are);
//! - `Write`: `{type: "create"|"update", filePath, content, structuredPatch, originalFile, userModified}`;
//! - `Edit`: `{filePath, oldString, newString, originalFile, structuredPatch, userModified, replaceAll}`;
//! - `Read`: `{type: "text", file: {filePath, content, numLines, startLine, totalLines}}`;
//! - `Glob`: `{filenames, durationMs, numFiles, truncated}`; `Grep`: `{mode, filenames, numFiles, content?, numLines?}`;
//! - `Agent`: `{status, prompt, agentType, content: [{type: "text", text}], totalToolUseCount, totalTokens}`
//!   (the sub-agent's answer without our one-line summary, whose counts fill the totals);
//! - an MCP tool: the content list `[{type: "text", text}]`.
//!
//! A tool with no counterpart keeps ferroclaw's shape: `{"content": TEXT}`.

use serde_json::{Value, json};

/// The file a write or edit changed, as it was before the call (`None`:
/// it did not exist) and after.
#[derive(Debug, Clone, Default)]
pub struct FileChange {
    pub before: Option<String>,
    pub after: Option<String>,
}

/// Claude Code's `tool_response` for a successful call of our tool `ours`.
/// `claude_input` is the input in Claude's shape ([`super::to_claude`]);
/// `text` what our tool printed; `change` the file a write or edit changed.
pub fn tool_response(
    ours: &str,
    claude_input: &Value,
    text: &str,
    change: Option<&FileChange>,
) -> Value {
    let field = |key: &str| claude_input.get(key).cloned().unwrap_or(Value::Null);
    let file_path = field("file_path");
    let empty = FileChange::default();
    let change = change.unwrap_or(&empty);
    let patch = || {
        structured_patch(
            change.before.as_deref().unwrap_or(""),
            change.after.as_deref().unwrap_or(""),
        )
    };
    match ours {
        "bash" | "background_run" => bash(text),
        "write" => json!({
            "type": if change.before.is_some() { "update" } else { "create" },
            "filePath": file_path,
            "content": field("content"),
            "structuredPatch": if change.before.is_some() { patch() } else { json!([]) },
            "originalFile": change.before,
            "userModified": false,
        }),
        "edit" => json!({
            "filePath": file_path,
            "oldString": field("old_string"),
            "newString": field("new_string"),
            "originalFile": change.before,
            "structuredPatch": patch(),
            "userModified": false,
            "replaceAll": claude_input.get("replace_all").and_then(Value::as_bool).unwrap_or(false),
        }),
        "multi_edit" => json!({
            "filePath": file_path,
            "edits": field("edits"),
            "originalFileContents": change.before,
            "structuredPatch": patch(),
            "userModified": false,
        }),
        "read" => read(claude_input, text, change.after.as_deref()),
        "glob" => {
            let files = listed_paths(text);
            json!({
                "filenames": files,
                "durationMs": 0,
                "numFiles": files.len(),
                "truncated": text.contains(" more not shown;"),
            })
        }
        "grep" => grep(claude_input, text),
        "task" => sub_agent(claude_input, text),
        name if name.starts_with("mcp__") => json!([{"type": "text", "text": text}]),
        _ => json!({"content": text}),
    }
}

/// Claude Code's `error` for a failed call (PostToolUseFailure, and
/// `tool_use_result` after `Error: `): a command's failure reads
/// `Exit code 3` then its output, as Claude Code words it; other tools'
/// errors are their own text.
pub fn tool_error(ours: &str, text: &str) -> String {
    if !matches!(ours, "bash") {
        return text.to_string();
    }
    let code = text.lines().rev().find_map(|l| l.strip_prefix("[exit code ")?.strip_suffix(']'));
    let Some(code) = code else { return text.to_string() };
    let stdout = bash(text)["stdout"].as_str().unwrap_or_default().to_string();
    match stdout.is_empty() {
        true => format!("Exit code {code}"),
        false => format!("Exit code {code}\n{stdout}"),
    }
}

/// A sub-agent's result: its answer, then our summary line
/// `[TYPE sub-agent: N turns, M tool calls, T tokens, S s; transcript P]`.
fn sub_agent(claude_input: &Value, text: &str) -> Value {
    let (answer, summary) = match text.rsplit_once("\n\n[") {
        Some((answer, tail)) if tail.contains(" sub-agent: ") => (answer, tail),
        _ => (text, ""),
    };
    let count = |unit: &str| -> u64 {
        summary
            .split(", ")
            .find_map(|part| part.strip_suffix(unit)?.rsplit(' ').next()?.parse().ok())
            .unwrap_or(0)
    };
    json!({
        "status": "completed",
        "prompt": claude_input.get("prompt").cloned().unwrap_or(Value::Null),
        "agentType": claude_input.get("subagent_type").cloned().unwrap_or(Value::Null),
        "content": [{"type": "text", "text": answer}],
        "totalToolUseCount": count(" tool calls").max(count(" tool call")),
        "totalTokens": count(" tokens"),
    })
}

/// Our bash output, `out\n[exit code 0]\n[note: ...]`, as Claude's fields.
fn bash(text: &str) -> Value {
    let mut body: Vec<&str> = text.lines().collect();
    let mut interrupted = false;
    while let Some(last) = body.last() {
        let ours = ["[exit code ", "[note: ", "[killed by signal ", "[exited]"];
        if last.starts_with("[timed out after ") || last.starts_with("[cancelled by the user") {
            interrupted = true;
        } else if !ours.iter().any(|p| last.starts_with(p)) {
            break;
        }
        body.pop();
    }
    let stdout = match body.as_slice() {
        ["(no output)"] => String::new(),
        lines => lines.join("\n"),
    };
    json!({
        "stdout": stdout,
        "stderr": "",
        "interrupted": interrupted,
        "isImage": false,
        "noOutputExpected": false,
    })
}

/// Read: the file's lines asked for, without our line numbers.
fn read(input: &Value, text: &str, file: Option<&str>) -> Value {
    let Some(content) = file else { return json!({"type": "text", "file": {"content": text}}) };
    let lines: Vec<&str> = content.split('\n').collect();
    let start = input.get("offset").and_then(Value::as_u64).unwrap_or(1).max(1) as usize;
    let limit = input.get("limit").and_then(Value::as_u64).map_or(usize::MAX, |l| l as usize);
    let shown: Vec<&str> = lines.iter().skip(start - 1).take(limit).copied().collect();
    json!({
        "type": "text",
        "file": {
            "filePath": input.get("file_path").cloned().unwrap_or(Value::Null),
            "content": shown.join("\n"),
            "numLines": shown.len(),
            "startLine": start,
            "totalLines": lines.len(),
        },
    })
}

fn grep(input: &Value, text: &str) -> Value {
    let mode = input.get("output_mode").and_then(Value::as_str).unwrap_or("files_with_matches");
    match mode {
        "content" | "count" => {
            let lines = text.lines().filter(|l| !is_note(l)).count();
            json!({"mode": mode, "numFiles": 0, "filenames": [], "content": text.trim_end(), "numLines": lines})
        }
        _ => {
            let files = listed_paths(text);
            json!({"mode": mode, "filenames": files, "numFiles": files.len()})
        }
    }
}

/// The paths of a listing, without our notes (`(3 more not shown...)`).
fn listed_paths(text: &str) -> Vec<String> {
    if text.starts_with("No files match") || text.starts_with("No matches") {
        return Vec::new();
    }
    text.lines().filter(|l| !l.is_empty() && !is_note(l)).map(str::to_string).collect()
}

fn is_note(line: &str) -> bool {
    line.starts_with('(') || line.starts_with('[')
}

/// Claude Code's `structuredPatch`: the unified diff's hunks, three lines
/// of context, each line prefixed `-`, `+` or ` ` without its newline.
pub fn structured_patch(before: &str, after: &str) -> Value {
    let diff = similar::TextDiff::from_lines(before, after);
    let mut hunks = Vec::new();
    for hunk in diff.unified_diff().context_radius(3).iter_hunks() {
        let ops = hunk.ops();
        let (Some(first), Some(last)) = (ops.first(), ops.last()) else { continue };
        let (old, new) = (
            first.old_range().start..last.old_range().end,
            first.new_range().start..last.new_range().end,
        );
        let lines: Vec<String> = hunk
            .iter_changes()
            .map(|c| {
                let sign = match c.tag() {
                    similar::ChangeTag::Delete => '-',
                    similar::ChangeTag::Insert => '+',
                    similar::ChangeTag::Equal => ' ',
                };
                format!("{sign}{}", c.value().trim_end_matches('\n'))
            })
            .collect();
        hunks.push(json!({
            "oldStart": old.start + 1,
            "oldLines": old.len(),
            "newStart": new.start + 1,
            "newLines": new.len(),
            "lines": lines,
        }));
    }
    Value::Array(hunks)
}
