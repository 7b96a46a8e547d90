//! `@file` in a typed prompt includes a text file's content (images are
//! attached by `ferroclaw_core::mentions`), as Claude Code does: the model
//! gets `<file path="src/main.rs">…</file>` after the request, capped.

use std::path::{Path, PathBuf};

use ferroclaw_protocol::{ContentBlock, Message};

/// Most bytes of one mentioned text file included; the rest is cut with a note.
pub(crate) const MAX_FILE_BYTES: usize = 100 * 1024;
/// Most text files included from one prompt.
pub(crate) const MAX_FILES: usize = 10;

/// Characters that may end a mention without being part of the path.
const TRAILING: &[char] = &[',', '.', ';', ':', '!', '?', ')', ']', '}', '"', '\''];

/// The user message for `text`: images attached, then mentioned text files.
pub(crate) fn user_message(text: &str, workspace: &Path) -> Message {
    let mut message = ferroclaw_core::mentions::user_message(text, workspace);
    for block in text_files(text, workspace) {
        message.content.push(ContentBlock::text(block));
    }
    message
}

/// `<file>` blocks for the text files mentioned with `@`.
pub(crate) fn text_files(text: &str, workspace: &Path) -> Vec<String> {
    let mut seen: Vec<PathBuf> = Vec::new();
    let mut out = Vec::new();
    for raw in ferroclaw_core::mentions::mentions(text) {
        let Some((path, shown)) = resolve(&raw, workspace) else { continue };
        if seen.contains(&path) || out.len() == MAX_FILES {
            continue;
        }
        let Some((bytes, total)) = read_head(&path) else { continue };
        if bytes.iter().take(8192).any(|b| *b == 0) || is_image(&bytes) {
            continue;
        }
        seen.push(path);
        let cut = total > MAX_FILE_BYTES as u64;
        let body = String::from_utf8_lossy(&bytes).into_owned();
        let note = if cut {
            format!(
                "\n[cut at {} KiB of {} KiB; read the rest with the read tool]",
                MAX_FILE_BYTES / 1024,
                total / 1024
            )
        } else {
            String::new()
        };
        out.push(format!("<file path=\"{shown}\">\n{}{note}\n</file>", body.trim_end()));
    }
    out
}

/// The first [`MAX_FILE_BYTES`] of the regular file at `path` and its size
/// (opened without blocking: a FIFO is skipped, never waited on).
fn read_head(path: &Path) -> Option<(Vec<u8>, u64)> {
    use std::io::Read;
    let file = ferroclaw_tools::own_file::open(path).ok()?;
    let total = file.metadata().ok()?.len();
    let mut bytes = Vec::new();
    file.take(MAX_FILE_BYTES as u64).read_to_end(&mut bytes).ok()?;
    Some((bytes, total))
}

/// The `@` mentions that look like a file (a `.` or `/` in them) but name
/// none, so a mistyped name is said instead of silently sent as text; a
/// mention of someone (`@bob`) is left alone.
pub(crate) fn missing_files(text: &str, workspace: &Path) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for raw in ferroclaw_core::mentions::mentions(text) {
        let name = raw.trim_end_matches(TRAILING);
        let looks_like_a_file = name.contains('.') || name.contains('/');
        let exists = [raw.as_str(), name].iter().any(|c| match c.strip_prefix("~/") {
            Some(rest) => {
                std::env::var_os("HOME").is_some_and(|home| PathBuf::from(home).join(rest).exists())
            }
            None => workspace.join(c).exists(),
        });
        if looks_like_a_file && !exists && !out.iter().any(|m| m == name) {
            out.push(name.to_string());
        }
    }
    out
}

/// Says on stderr which `@` mentions name no file (see [`missing_files`]).
pub(crate) fn warn_missing_files(text: &str, workspace: &Path) {
    for name in missing_files(text, workspace) {
        let line = format!(
            "⎘ @{}: no such file in {}; sent as plain text",
            crate::printable::printable(&name),
            workspace.display()
        );
        eprintln!("{}", crate::style::Style::for_stderr().yellow(&line));
    }
}

fn is_image(bytes: &[u8]) -> bool {
    ferroclaw_tools::image_media_type(&bytes[..bytes.len().min(12)]).is_some()
}

/// The file a mention names: as written, then without trailing punctuation.
fn resolve(raw: &str, workspace: &Path) -> Option<(PathBuf, String)> {
    for candidate in [raw, raw.trim_end_matches(TRAILING)] {
        let Some(path) = ferroclaw_core::mentions::mention_path(candidate, workspace) else {
            continue;
        };
        if path.is_file() {
            return Some((path, candidate.to_string()));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mention_that_looks_like_a_file_but_is_not_there_is_reported() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("notes.md"), "hi").unwrap();
        let text = "ask @bob about @notes.md, @nope.md and @src/gone.rs.";
        assert_eq!(missing_files(text, dir.path()), vec!["nope.md", "src/gone.rs"]);
    }

    #[test]
    fn a_mentioned_text_file_is_included_and_others_are_not() {
        let ws = tempfile::tempdir().unwrap();
        std::fs::write(ws.path().join("notes.md"), "remember the milk\n").unwrap();
        std::fs::write(ws.path().join("bin.dat"), b"ab\0cd").unwrap();
        let blocks = text_files("see @notes.md, @bin.dat and @missing.txt", ws.path());
        assert_eq!(blocks, ["<file path=\"notes.md\">\nremember the milk\n</file>"]);
    }

    #[test]
    fn a_big_file_is_cut_with_a_note() {
        let ws = tempfile::tempdir().unwrap();
        std::fs::write(ws.path().join("big.txt"), "x".repeat(MAX_FILE_BYTES + 10)).unwrap();
        let blocks = text_files("@big.txt", ws.path());
        assert!(blocks[0].contains("[cut at 100 KiB"), "{}", &blocks[0][blocks[0].len() - 80..]);
    }
}
