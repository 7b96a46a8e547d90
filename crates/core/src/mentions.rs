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
        // Checked for size and kind when resolved; read without blocking all the same.
        let Ok(bytes) = ferroclaw_tools::own_file::read(&path, MAX_IMAGE_BYTES) else {
            continue;
        };
        seen.push(path);
        blocks.push(image_block(media_type, &bytes));
    }
    blocks.push(ContentBlock::text(text));
    blocks
}

/// An image content block of `bytes` (base64) of type `media_type`.
pub fn image_block(media_type: &str, bytes: &[u8]) -> ContentBlock {
    ContentBlock::Image {
        media_type: media_type.to_string(),
        data: base64::engine::general_purpose::STANDARD.encode(bytes),
    }
}

/// A user message for `text` with its mentioned images attached.
pub fn user_message(text: &str, workspace: &Path) -> Message {
    Message { role: Role::User, content: expand_mentions(text, workspace) }
}

/// The raw mention strings of a text, without the `@` or quotes.
pub fn mentions(text: &str) -> Vec<String> {
    mention_spans(text).into_iter().map(|(_, m)| m).collect()
}

/// Each mention with the byte offset of its `@`.
fn mention_spans(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut rest = text;
    let mut at_start = true;
    while let Some(i) = rest.find('@') {
        let before_ok = if i == 0 { at_start } else { rest[..i].ends_with(char::is_whitespace) };
        let at = text.len() - rest.len() + i;
        let after = &rest[i + 1..];
        at_start = false;
        if !before_ok {
            rest = after;
            continue;
        }
        if let Some(quoted) = after.strip_prefix('"')
            && let Some(end) = quoted.find('"')
        {
            out.push((at, quoted[..end].to_string()));
            rest = &quoted[end + 1..];
            continue;
        }
        let end = after.find(char::is_whitespace).unwrap_or(after.len());
        let word = &after[..end];
        if !word.is_empty() {
            out.push((at, word.to_string()));
        }
        rest = &after[end..];
    }
    out
}

/// `text` with the `@` taken off every mention of a file outside the
/// project (`@~/.ssh/id_rsa`, `@/etc/passwd`): they stay as words and
/// include nothing. For text the user did not write, such as an untrusted
/// project's command files.
pub fn without_outside_mentions(text: &str) -> String {
    let mut out = text.to_string();
    for (at, raw) in mention_spans(text).into_iter().rev() {
        if raw.starts_with('~') || Path::new(&raw).is_absolute() {
            out.remove(at);
        }
    }
    out
}

/// The file a mention names, if it may be included: `~/x` in the home
/// folder and `/abs` as written (the user typed them), a relative one only
/// inside the workspace: `..` or a link in the project pointing out of it
/// (`notes.md -> ~/.ssh/id_rsa`) names nothing, as for the file tools.
/// `None` also when nothing is there.
pub fn mention_path(raw: &str, workspace: &Path) -> Option<PathBuf> {
    if let Some(rest) = raw.strip_prefix("~/") {
        return Some(PathBuf::from(std::env::var_os("HOME")?).join(rest));
    }
    if Path::new(raw).is_absolute() {
        return Some(PathBuf::from(raw));
    }
    let real = workspace.join(raw).canonicalize().ok()?;
    let root = workspace.canonicalize().ok()?;
    real.starts_with(&root).then_some(real)
}

/// The file and media type of a mention that names an image, trying the
/// mention as written and then without trailing punctuation.
fn resolve_image(raw: &str, workspace: &Path) -> Option<(PathBuf, &'static str)> {
    let trimmed = raw.trim_end_matches(TRAILING);
    for candidate in [raw, trimmed] {
        let Some(path) = mention_path(candidate, workspace) else {
            continue;
        };
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

/// The media type of an image file, from its first bytes (not its name).
fn media_type(path: &Path) -> Option<&'static str> {
    use std::io::Read;
    let mut head = [0u8; 12];
    let n = ferroclaw_tools::own_file::open(path).ok()?.read(&mut head).ok()?;
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

    #[cfg(unix)]
    #[test]
    fn a_relative_mention_never_reaches_outside_the_workspace() {
        let ws = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret.png"), PNG).unwrap();
        std::os::unix::fs::symlink(outside.path().join("secret.png"), ws.path().join("shot.png"))
            .unwrap();
        let up = format!("../{}/secret.png", outside.path().file_name().unwrap().to_str().unwrap());
        for text in ["look at @shot.png".to_string(), format!("look at @{up}")] {
            assert_eq!(expand_mentions(&text, ws.path()), [ContentBlock::text(&text)], "{text}");
        }
        let typed = format!("look at @{}", outside.path().join("secret.png").display());
        assert_eq!(expand_mentions(&typed, ws.path()).len(), 2, "an absolute path is the user's");
    }

    #[test]
    fn mentions_outside_the_project_lose_their_at_sign() {
        assert_eq!(
            without_outside_mentions("see @~/.ssh/id_rsa, @/etc/passwd, @\"/a b\" and @src/a.rs"),
            "see ~/.ssh/id_rsa, /etc/passwd, \"/a b\" and @src/a.rs"
        );
    }

    #[test]
    fn a_prompt_without_images_is_a_plain_user_message() {
        let ws = tempfile::tempdir().unwrap();
        std::fs::write(ws.path().join("fake.png"), "not an image").unwrap();
        assert_eq!(user_message("see @fake.png", ws.path()), Message::user("see @fake.png"));
    }
}
