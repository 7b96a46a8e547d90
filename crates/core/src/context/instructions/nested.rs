//! Instruction files of subfolders, loaded when the agent first reads or
//! edits a file there, as Claude Code 2.1.332 does: the `CLAUDE.md`,
//! `.claude/CLAUDE.md`, `CLAUDE.local.md` (and `AGENTS.md`) of every folder
//! between the project folder (not included: its files are in the prompt)
//! and the file, then their imports, each added to the message that carries
//! the tool results as its own block:
//!
//! ```text
//! <system-reminder>
//! Contents of /abs/path/sub/CLAUDE.md:
//!
//! ...
//!
//! </system-reminder>
//! ```
//!
//! Each file comes once per conversation: the blocks already in it (a
//! resumed session's included) say which were loaded, so `--continue` does
//! not repeat them and a compaction that dropped them lets them come back.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use ferroclaw_protocol::{ContentBlock, Message, Role, ToolCall};

use super::Reader;

/// The tools whose `path` input makes its folder's instructions load.
pub const FILE_TOOLS: [&str; 4] = ["read", "write", "edit", "multi_edit"];

const OPEN: &str = "<system-reminder>\nContents of ";

/// The reminder blocks for the instruction files `calls` reach that the
/// conversation `messages` does not hold yet (calls whose result is an error
/// load nothing).
pub fn reminders(
    workspace: &Path,
    trusted: bool,
    calls: &[ToolCall],
    results: &[ContentBlock],
    messages: &[Message],
) -> Vec<ContentBlock> {
    let failed: HashSet<&str> = results
        .iter()
        .filter_map(|r| match r {
            ContentBlock::ToolResult { tool_call_id, is_error: true, .. } => {
                Some(tool_call_id.as_str())
            }
            _ => None,
        })
        .collect();
    let mut dirs: Vec<PathBuf> = Vec::new();
    for call in calls {
        if !FILE_TOOLS.contains(&call.name.as_str()) || failed.contains(call.id.as_str()) {
            continue;
        }
        let Some(path) = call.input.get("path").and_then(|p| p.as_str()) else { continue };
        for dir in folders_between(workspace, &workspace.join(path)) {
            if !dirs.contains(&dir) {
                dirs.push(dir);
            }
        }
    }
    // Most calls reach folders whose files came already (or that have none):
    // nothing more is read for them.
    let loaded = loaded(messages);
    let new_file = dirs
        .iter()
        .flat_map(|d| super::FOLDER_FILES.map(|f| d.join(f)))
        .any(|path| path.is_file() && !loaded.contains(&path));
    if !new_file {
        return Vec::new();
    }
    let mut reader = Reader::new(workspace, trusted);
    let in_prompt = super::read(workspace, super::claude_home().as_deref(), trusted).paths();
    for path in in_prompt.iter().chain(&loaded) {
        reader.mark_seen(path);
    }
    for dir in &dirs {
        reader.add_folder(dir, "");
    }
    reader
        .done
        .files
        .iter()
        .map(|f| {
            let text = format!("{OPEN}{}:\n\n{}\n\n</system-reminder>", f.path.display(), f.text);
            ContentBlock::text(text)
        })
        .collect()
}

/// The folders strictly below `workspace` down to `file`'s, outermost first
/// (none when `file` is outside the workspace).
fn folders_between(workspace: &Path, file: &Path) -> Vec<PathBuf> {
    let Some(parent) = file.parent() else { return Vec::new() };
    let Ok(rel) = parent.strip_prefix(workspace) else { return Vec::new() };
    let mut dir = workspace.to_path_buf();
    let mut out = Vec::new();
    for part in rel.components() {
        match part {
            std::path::Component::Normal(name) => dir.push(name),
            // `a/../b` or `./x`: not worth guessing; nothing loads.
            _ => return Vec::new(),
        }
        out.push(dir.clone());
    }
    out
}

/// The files whose reminder blocks are in `messages`.
pub fn loaded(messages: &[Message]) -> Vec<PathBuf> {
    messages
        .iter()
        .filter(|m| m.role == Role::User)
        .flat_map(|m| &m.content)
        .filter_map(|b| match b {
            ContentBlock::Text { text } => text.strip_prefix(OPEN),
            _ => None,
        })
        .filter_map(|rest| rest.split_once(":\n\n").map(|(path, _)| PathBuf::from(path)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_folders_below_the_workspace_count() {
        let ws = Path::new("/p");
        assert_eq!(
            folders_between(ws, Path::new("/p/a/b/x.rs")),
            [PathBuf::from("/p/a"), PathBuf::from("/p/a/b")]
        );
        assert!(folders_between(ws, Path::new("/p/x.rs")).is_empty());
        assert!(folders_between(ws, Path::new("/elsewhere/x.rs")).is_empty());
    }
}
