//! `@path` mentions in a user's prompt: an image file mentioned this way is
//! attached as an image content block (base64, with its media type), so
//! `ferroclaw -p "what is wrong in @shot.png"` shows the model the picture.
//! Other mentions stay as text (the model can `read` them).

use std::path::{Path, PathBuf};

use base64::Engine;
use ferroclaw_protocol::{ContentBlock, Message, Role};

/// Largest image attached, in bytes (the providers' per-image limit).
pub const MAX_IMAGE_BYTES: u64 = 5 * 1024 * 1024;

/// Characters that may end a mention without being part of the path.
const TRAILING: &[char] = &[',', '.', ';', ':', '!', '?', ')', ']', '}', '"', '\''];

/// The blocks of a user message for `text`: one image block per mentioned
/// image (in order of mention, each file once), then the text unchanged. A
/// mention is `@` at the start or after whitespace, followed by a path
/// (relative to `workspace`, absolute, or `~/...`), or `@"a path with spaces"`.
/// Unreadable, missing, oversized or non-image files stay as text.
pub fn expand_mentions(text: &str, workspace: &Path) -> Vec<ContentBlock> {
    let mut blocks = Vec::new();
    let mut seen: Vec<PathBuf> = Vec::new();
    for raw in mentions(text) {
        let Some((path, media_type)) = resolve_image(&raw, workspace) else {
            continue;
        };
        if seen.contains(&path) {
            continue;
        }
        let Ok(bytes) = std::fs::read(&path) else {
            continue;
        };
        seen.push(path);
        blocks.push(ContentBlock::Image {
            media_type: media_type.to_string(),
            data: base64::engine::general_purpose::STANDARD.encode(bytes),
        });
    }
    blocks.push(ContentBlock::text(text));
    blocks
}

/// A user message for `text` with its mentioned images attached.
pub fn user_message(text: &str, workspace: &Path) -> Message {
    Message { role: Role::User, content: expand_mentions(text, workspace) }
}

/// The raw mention strings of a text, without the `@` or quotes.
pub fn mentions(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = text;
    let mut at_start = true;
    while let Some(i) = rest.find('@') {
        let before_ok = if i == 0 { at_start } else { rest[..i].ends_with(char::is_whitespace) };
        let after = &rest[i + 1..];
        at_start = false;
        if !before_ok {
            rest = after;
            continue;
        }
        if let Some(quoted) = after.strip_prefix('"')
            && let Some(end) = quoted.find('"')
        {
            out.push(quoted[..end].to_string());
            rest = &quoted[end + 1..];
            continue;
        }
        let end = after.find(char::is_whitespace).unwrap_or(after.len());
        let word = &after[..end];
        if !word.is_empty() {
            out.push(word.to_string());
        }
        rest = &after[end..];
    }
    out
}

/// The file and media type of a mention that names an image, trying the
/// mention as written and then without trailing punctuation.
fn resolve_image(raw: &str, workspace: &Path) -> Option<(PathBuf, &'static str)> {
    let trimmed = raw.trim_end_matches(TRAILING);
    for candidate in [raw, trimmed] {
        let path = expand(candidate, workspace);
        let Ok(meta) = path.metadata() else {
            continue;
        };
        if !meta.is_file() || meta.len() > MAX_IMAGE_BYTES {
            return None;
        }
        return media_type(&path).map(|m| (path, m));
    }
    None
}

fn expand(raw: &str, workspace: &Path) -> PathBuf {
    if let Some(rest) = raw.strip_prefix("~/")
        && let Some(home) = std::env::var_os("HOME")
    {
        return PathBuf::from(home).join(rest);
    }
    workspace.join(raw)
}

/// The media type of an image file, from its first bytes (not its name).
fn media_type(path: &Path) -> Option<&'static str> {
    use std::io::Read;
    let mut head = [0u8; 12];
    let n = std::fs::File::open(path).ok()?.read(&mut head).ok()?;
    ferroclaw_tools::image_media_type(&head[..n])
}

#[cfg(test)]
mod tests {
    use super::*;

    const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR";

    #[test]
    fn mentions_are_found_at_word_starts_only() {
        assert_eq!(
            mentions("@a.png look at @b/c.jpg, mail me@host and @\"my shot.png\" ok"),
            ["a.png", "b/c.jpg,", "my shot.png"]
        );
    }

    #[test]
    fn an_image_mention_becomes_an_image_block_before_the_text() {
        let ws = tempfile::tempdir().unwrap();
        std::fs::write(ws.path().join("shot.png"), PNG).unwrap();
        std::fs::write(ws.path().join("notes.txt"), "hello").unwrap();
        let text = "compare @shot.png, @notes.txt and @shot.png and @missing.png";
        let blocks = expand_mentions(text, ws.path());
        assert_eq!(blocks.len(), 2, "{blocks:?}");
        match &blocks[0] {
            ContentBlock::Image { media_type, data } => {
                assert_eq!(media_type, "image/png");
                assert_eq!(base64::engine::general_purpose::STANDARD.decode(data).unwrap(), PNG);
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(blocks[1], ContentBlock::text(text));
    }

    #[test]
    fn a_prompt_without_images_is_a_plain_user_message() {
        let ws = tempfile::tempdir().unwrap();
        std::fs::write(ws.path().join("fake.png"), "not an image").unwrap();
        assert_eq!(user_message("see @fake.png", ws.path()), Message::user("see @fake.png"));
    }
}
