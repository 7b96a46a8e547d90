//! Showing what a file tool does: a unified diff with line numbers (red
//! removed, green added), or the head of a new file. Used before asking
//! ("this is what you approve") and after a change ("this is what happened").

use std::path::Path;

use serde_json::Value;
use similar::{ChangeTag, TextDiff};

use crate::printable::printable;
use crate::style::Style;
use crate::tool_log::{input_path, read_text};

/// Lines of diff shown before "… N more lines".
pub(crate) const MAX_DIFF_LINES: usize = 40;
/// Lines of a new file shown.
pub(crate) const NEW_FILE_HEAD_LINES: usize = 10;
/// Unchanged lines shown around each change.
const CONTEXT_LINES: usize = 3;

/// The diff of `before` (`None`: the file is new) to `after`, indented for
/// the tool block, at most [`MAX_DIFF_LINES`] lines. Empty when nothing changes.
pub(crate) fn render(before: Option<&str>, after: &str, style: Style) -> String {
    let mut lines: Vec<String> = Vec::new();
    let Some(before) = before else {
        let total = after.lines().count();
        for (i, line) in after.lines().take(NEW_FILE_HEAD_LINES).enumerate() {
            lines.push(style.green(&format!("{:>5} + {}", i + 1, printable(line))));
        }
        if total > NEW_FILE_HEAD_LINES {
            lines.push(style.dim(&format!("      … {} more lines", total - NEW_FILE_HEAD_LINES)));
        }
        return indent(&lines);
    };
    let diff = TextDiff::from_lines(before, after);
    for (i, group) in diff.grouped_ops(CONTEXT_LINES).iter().enumerate() {
        if i > 0 {
            lines.push(style.dim("      ⋮"));
        }
        for op in group {
            for change in diff.iter_changes(op) {
                let text = printable(change.value().trim_end_matches(['\n', '\r']));
                let line = match change.tag() {
                    ChangeTag::Delete => style
                        .red(&format!("{:>5} - {text}", change.old_index().map_or(0, |n| n + 1))),
                    ChangeTag::Insert => style
                        .green(&format!("{:>5} + {text}", change.new_index().map_or(0, |n| n + 1))),
                    ChangeTag::Equal => style
                        .dim(&format!("{:>5}   {text}", change.new_index().map_or(0, |n| n + 1))),
                };
                lines.push(line);
            }
        }
    }
    if lines.len() > MAX_DIFF_LINES {
        let more = lines.len() - MAX_DIFF_LINES;
        lines.truncate(MAX_DIFF_LINES);
        lines.push(style.dim(&format!("      … {more} more lines")));
    }
    indent(&lines)
}

/// What a file tool call would do, as (before, after), read from the file
/// now: for the approval question. `None` for other tools or unreadable files.
pub(crate) fn proposed(
    name: &str,
    input: &Value,
    workspace: &Path,
) -> Option<(Option<String>, String)> {
    let path = input_path(input, workspace)?;
    let current = read_text(&path);
    match name {
        "write" => Some((current, input["content"].as_str()?.to_string())),
        "edit" => {
            let before = current?;
            let after = apply(&before, input)?;
            Some((Some(before), after))
        }
        "multi_edit" => {
            let before = current?;
            let mut after = before.clone();
            for edit in input["edits"].as_array()? {
                after = apply(&after, edit)?;
            }
            Some((Some(before), after))
        }
        _ => None,
    }
}

/// One `old_string` → `new_string` replacement, as the edit tool makes it;
/// `None` when `old_string` is not in the text.
fn apply(text: &str, edit: &Value) -> Option<String> {
    let old = edit["old_string"].as_str().filter(|s| !s.is_empty())?;
    let new = edit["new_string"].as_str()?;
    if !text.contains(old) {
        return None;
    }
    Some(if edit["replace_all"].as_bool().unwrap_or(false) {
        text.replace(old, new)
    } else {
        text.replacen(old, new, 1)
    })
}

fn indent(lines: &[String]) -> String {
    lines.iter().map(|l| format!("    {l}\n")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_diff_shows_removed_and_added_lines_with_numbers() {
        let out = render(Some("a\nb\nc\n"), "a\nB\nc\n", Style::plain());
        assert!(out.contains("    2 - b"), "{out}");
        assert!(out.contains("    2 + B"), "{out}");
        assert!(out.contains("    1   a"), "{out}");
    }

    #[test]
    fn a_new_file_shows_its_head() {
        let text: String = (1..=30).map(|i| format!("line {i}\n")).collect();
        let out = render(None, &text, Style::plain());
        assert!(out.contains("+ line 1") && out.contains("+ line 10"), "{out}");
        assert!(!out.contains("line 11") && out.contains("20 more lines"), "{out}");
    }

    #[test]
    fn colours_only_when_asked() {
        assert!(!render(Some("a\n"), "b\n", Style::plain()).contains('\x1b'));
        assert!(render(Some("a\n"), "b\n", Style::color()).contains("\x1b[31m"));
    }

    #[test]
    fn an_edit_is_previewed_from_the_file() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("m.rs"), "fn main() {}\n").unwrap();
        let input =
            serde_json::json!({"path": "m.rs", "old_string": "main", "new_string": "start"});
        let (before, after) = proposed("edit", &input, dir.path()).unwrap();
        assert_eq!(before.as_deref(), Some("fn main() {}\n"));
        assert_eq!(after, "fn start() {}\n");
    }
}
