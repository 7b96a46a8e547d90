//! Showing lines of text to the model: `cat -n` numbering and cutting very
//! long lines (minified files) so one line cannot flood the context.

use std::fmt::Write;

/// Lines longer than this many characters are cut (Claude Code's Read uses 2000).
pub const MAX_LINE_CHARS: usize = 2000;

/// Appends `line` as `cat -n` does: the number right-aligned in 6 columns, a
/// tab, the line (cut at [`MAX_LINE_CHARS`]), a newline.
pub(crate) fn push_numbered(out: &mut String, number: usize, line: &str) {
    let _ = write!(out, "{number:>6}\t");
    push_cut(out, line, MAX_LINE_CHARS);
    out.push('\n');
}

/// Appends `line`, cut at `max_chars` characters with a marker saying how long it was.
pub(crate) fn push_cut(out: &mut String, line: &str, max_chars: usize) {
    match line.char_indices().nth(max_chars) {
        None => out.push_str(line),
        Some((cut, _)) => {
            out.push_str(&line[..cut]);
            let total = line.chars().count();
            let _ = write!(out, "… [line cut: {total} chars in all]");
        }
    }
}

/// 1-based line number of byte offset `at` in `text`.
pub(crate) fn line_of(text: &str, at: usize) -> usize {
    text.as_bytes()[..at.min(text.len())].iter().filter(|b| **b == b'\n').count() + 1
}

/// Lines `first..=last` (1-based, clamped) of `text`, numbered.
pub(crate) fn numbered_excerpt(text: &str, first: usize, last: usize) -> String {
    let mut out = String::new();
    for (i, line) in text.lines().enumerate() {
        let n = i + 1;
        if n > last {
            break;
        }
        if n >= first {
            push_numbered(&mut out, n, line);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbered_lines_look_like_cat_n() {
        let mut out = String::new();
        push_numbered(&mut out, 7, "fn main() {}");
        assert_eq!(out, "     7\tfn main() {}\n");
    }

    #[test]
    fn long_lines_are_cut_with_their_length() {
        let mut out = String::new();
        push_cut(&mut out, &"é".repeat(30), 10);
        assert_eq!(out, format!("{}… [line cut: 30 chars in all]", "é".repeat(10)));
    }

    #[test]
    fn line_of_counts_from_one() {
        assert_eq!(line_of("a\nb\nc", 0), 1);
        assert_eq!(line_of("a\nb\nc", 2), 2);
        assert_eq!(line_of("a\nb\nc", 4), 3);
    }
}
