//! What `ferroclaw -p` sends for a prompt given as an argument, on stdin,
//! or both (`cat log | ferroclaw -p "explain this"`).
//!
//! `@file` mentions count only in what the user typed (the argument, or
//! stdin when it is the whole prompt): a log or a file piped in is data,
//! and its `@` words include nothing and warn of nothing. Piped bytes that
//! are not text are never decoded into the prompt: an image (PNG, JPEG,
//! GIF, WebP) up to the providers' image limit is attached as an image,
//! other binary data is named by size and left out.

use std::io::Read;
use std::path::Path;

use ferroclaw_protocol::{ContentBlock, Message};

/// Most bytes of piped text added to the prompt; the rest is cut with a note.
pub(crate) const MAX_STDIN_BYTES: usize = 256 * 1024;
/// Most bytes of piped stdin read past what is kept, to say how much was
/// cut; a stream longer than that (`yes | ferroclaw -p ...`, `tail -f`) is
/// left unread instead of waited for forever.
const MAX_STDIN_COUNTED: u64 = 64 * 1024 * 1024;

/// One request of a `-p` run.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Prompt {
    /// The whole text sent (the argument and the piped text).
    pub text: String,
    /// The part the user typed, where `@file` mentions count.
    pub typed: String,
    /// An image piped on stdin.
    pub image: Option<ContentBlock>,
}

impl Prompt {
    /// A prompt the user typed whole (a stream-json message).
    pub(crate) fn typed(text: String) -> Self {
        Prompt { typed: text.clone(), text, image: None }
    }

    /// The user message: images mentioned in the typed part, the piped
    /// image, the text, then the text files mentioned in the typed part.
    pub(crate) fn message(&self, workspace: &Path) -> Message {
        let mut message = crate::attach::user_message(&self.typed, workspace);
        let typed_block = ContentBlock::text(self.typed.as_str());
        if let Some(block) = message.content.iter_mut().find(|b| **b == typed_block) {
            *block = ContentBlock::text(self.text.as_str());
        }
        if let Some(image) = &self.image {
            message.content.insert(0, image.clone());
        }
        message
    }
}

/// What came on stdin.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Piped {
    /// Text (cut at [`MAX_STDIN_BYTES`], with a note).
    Text(String),
    /// An image, attached as it is.
    Image(ContentBlock),
    /// Other binary data: a note naming it.
    Binary(String),
}

/// The prompt from the argument `arg` and what was piped (`None`: stdin is
/// a terminal). `None` when there is neither.
pub(crate) fn prompt(arg: Option<&str>, piped: Option<Piped>) -> Option<Prompt> {
    let (text, image) = match piped {
        None => (None, None),
        Some(Piped::Text(t)) if t.trim().is_empty() => (None, None),
        Some(Piped::Text(t)) => (Some(t), None),
        Some(Piped::Image(block)) => (None, Some(block)),
        Some(Piped::Binary(note)) => (Some(note), None),
    };
    Some(match (arg, text) {
        (Some(p), Some(input)) => Prompt {
            text: format!("{p}\n\n<stdin>\n{}\n</stdin>", input.trim_end()),
            typed: p.to_string(),
            image,
        },
        (Some(p), None) => Prompt { text: p.to_string(), typed: p.to_string(), image },
        // Piped text alone is the request the user wrote.
        (None, Some(input)) if !input.starts_with("[stdin:") => Prompt::typed(input),
        (None, Some(note)) => Prompt { text: note, typed: String::new(), image },
        (None, None) => {
            let image = image?;
            let text = "(an image on stdin)".to_string();
            Prompt { text, typed: String::new(), image: Some(image) }
        }
    })
}

/// Reads stdin: text up to [`MAX_STDIN_BYTES`] (a note, here and on stderr,
/// when cut), an image up to the image limit, or a note for other bytes.
pub(crate) fn read(mut stdin: impl Read) -> std::io::Result<Piped> {
    let mut kept = Vec::new();
    (&mut stdin).take(MAX_STDIN_BYTES as u64).read_to_end(&mut kept)?;
    let media_type = ferroclaw_tools::image_media_type(&kept[..kept.len().min(12)]);
    let binary = ferroclaw_tools::file_limit::looks_binary(&kept);
    if let Some(media_type) = media_type {
        let max = ferroclaw_core::mentions::MAX_IMAGE_BYTES;
        (&mut stdin).take(max + 1 - kept.len() as u64).read_to_end(&mut kept)?;
        if kept.len() as u64 <= max {
            return Ok(Piped::Image(ferroclaw_core::mentions::image_block(media_type, &kept)));
        }
        let total = kept.len() as u64 + count_rest(&mut stdin)?;
        return Ok(Piped::Binary(format!(
            "[stdin: an image ({media_type}) of {}, over the {} a model takes; not included]",
            size(total),
            size(max)
        )));
    }
    let rest = count_rest(&mut stdin)?;
    let total = kept.len() as u64 + rest;
    if binary {
        let note = format!("[stdin: {} of binary data, not included]", size(total));
        eprintln!("ferroclaw: {note}");
        return Ok(Piped::Binary(note));
    }
    let mut text = String::from_utf8_lossy(&kept).into_owned();
    if rest > 0 {
        let of = match rest == MAX_STDIN_COUNTED {
            true => format!("more than {} KiB", total / 1024),
            false => format!("{} KiB", total / 1024),
        };
        let note =
            format!("[stdin cut: the first {} KiB of {of} are shown]", MAX_STDIN_BYTES / 1024);
        eprintln!("ferroclaw: {note}");
        text.push_str(&format!("\n{note}\n"));
    }
    Ok(Piped::Text(text))
}

/// Bytes left on `stdin`, read and dropped, up to [`MAX_STDIN_COUNTED`].
fn count_rest(stdin: &mut impl Read) -> std::io::Result<u64> {
    std::io::copy(&mut stdin.take(MAX_STDIN_COUNTED), &mut std::io::sink())
}

/// `bytes` for people: `12 KiB`, `3.4 MiB`, `5 bytes`.
fn size(bytes: u64) -> String {
    match bytes {
        b if b >= 1 << 20 => format!("{:.1} MiB", b as f64 / f64::from(1 << 20)),
        b if b >= 1 << 10 => format!("{} KiB", b / 1024),
        b => format!("{b} bytes"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR @x.png @y/z \0\0";

    #[test]
    fn a_piped_image_is_attached_and_its_bytes_are_never_text() {
        let piped = read(PNG).unwrap();
        let Piped::Image(ContentBlock::Image { media_type, .. }) = &piped else {
            panic!("{piped:?}")
        };
        assert_eq!(media_type, "image/png");
        let prompt = prompt(Some("what is this?"), Some(piped)).unwrap();
        assert_eq!(prompt.text, "what is this?");
        assert_eq!(prompt.typed, "what is this?");
    }

    #[test]
    fn other_binary_input_is_named_by_size_and_has_no_mentions() {
        let piped = read(&b"\0\x01 @a.png @b/c.rs"[..]).unwrap();
        assert_eq!(piped, Piped::Binary("[stdin: 17 bytes of binary data, not included]".into()));
        let prompt = prompt(Some("look"), Some(piped)).unwrap();
        assert_eq!(prompt.typed, "look");
        assert!(prompt.text.contains("17 bytes of binary data"));
    }

    #[test]
    fn mentions_count_in_the_argument_not_in_piped_text() {
        let prompt = prompt(Some("explain @main.rs"), Some(Piped::Text("see @log.txt".into())));
        let prompt = prompt.unwrap();
        assert_eq!(prompt.typed, "explain @main.rs");
        assert_eq!(prompt.text, "explain @main.rs\n\n<stdin>\nsee @log.txt\n</stdin>");
    }

    #[test]
    fn piped_text_alone_is_the_typed_request() {
        let prompt = prompt(None, Some(Piped::Text("fix @a.rs".into()))).unwrap();
        assert_eq!(prompt.typed, "fix @a.rs");
    }
}
