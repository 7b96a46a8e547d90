//! Streaming Markdown to ANSI: text arrives in arbitrary pieces and is styled
//! as it goes (headings, code fences, inline code, bold, bullets), holding back
//! only the few characters that are still ambiguous.

const BOLD: &str = "\x1b[1m";
const HEADING: &str = "\x1b[1;36m";
const CODE: &str = "\x1b[33m";
const FENCE: &str = "\x1b[2m";
const RESET: &str = "\x1b[0m";

/// Turns streamed Markdown into styled terminal text.
#[derive(Debug, Default)]
pub struct MarkdownStream {
    /// Characters of the current line held until their meaning is known.
    pending: String,
    at_line_start: bool,
    in_fence: bool,
    in_heading: bool,
    in_code: bool,
    in_bold: bool,
    /// The current line is a fence marker line (```lang).
    fence_line: bool,
}

impl MarkdownStream {
    /// A renderer at the start of a line.
    pub fn new() -> Self {
        Self { at_line_start: true, ..Self::default() }
    }

    /// Feeds a piece of text; returns what can be printed now.
    pub fn push(&mut self, text: &str) -> String {
        let mut out = String::new();
        for c in text.chars() {
            self.push_char(c, &mut out);
        }
        out
    }

    /// Ends the stream: prints anything held back and resets styles.
    pub fn finish(&mut self) -> String {
        let mut out = String::new();
        self.flush_pending(&mut out);
        if self.in_bold || self.in_code || self.in_heading || self.in_fence || self.fence_line {
            out.push_str(RESET);
        }
        *self = Self::new();
        out
    }

    fn push_char(&mut self, c: char, out: &mut String) {
        if c == '\n' {
            self.flush_pending(out);
            self.end_line(out);
            return;
        }
        if self.at_line_start {
            self.pending.push(c);
            // Decide once the line's first characters can no longer be a marker.
            let p = self.pending.trim_start();
            let undecided = p.is_empty()
                || "```".starts_with(p)
                || (p.chars().all(|x| x == '#') && p.len() <= 6)
                || p == "-"
                || p == "*";
            if !undecided {
                let held = std::mem::take(&mut self.pending);
                self.at_line_start = false;
                self.start_line(&held, out);
            }
            return;
        }
        if !self.in_fence
            && !self.fence_line
            && !self.in_code
            && c == '*'
            && self.pending.is_empty()
        {
            self.pending.push('*');
            return;
        }
        if self.pending == "*" {
            self.pending.clear();
            if c == '*' {
                self.in_bold = !self.in_bold;
                out.push_str(if self.in_bold { BOLD } else { RESET });
                return;
            }
            out.push('*');
        }
        self.inline(c, out);
    }

    /// Prints whatever is held back, deciding the line start if still open.
    fn flush_pending(&mut self, out: &mut String) {
        if self.at_line_start {
            let held = std::mem::take(&mut self.pending);
            self.at_line_start = false;
            self.start_line(&held, out);
        }
        for c in std::mem::take(&mut self.pending).chars() {
            self.inline(c, out);
        }
    }

    /// Handles the first characters of a line, now that they are known.
    fn start_line(&mut self, head: &str, out: &mut String) {
        let trimmed = head.trim_start();
        if trimmed.starts_with("```") {
            self.in_fence = !self.in_fence;
            self.fence_line = true;
            out.push_str(FENCE);
            out.push_str(head);
            return;
        }
        if self.in_fence {
            out.push_str(CODE);
            out.push_str(head);
            return;
        }
        if let Some(rest) = trimmed.strip_prefix('#') {
            let rest = rest.trim_start_matches('#');
            if rest.starts_with(' ') || rest.is_empty() {
                self.in_heading = true;
                out.push_str(HEADING);
                for c in rest.trim_start().chars() {
                    self.inline(c, out);
                }
                return;
            }
        }
        let indent = &head[..head.len() - trimmed.len()];
        if let Some(rest) = trimmed.strip_prefix("- ").or_else(|| trimmed.strip_prefix("* ")) {
            out.push_str(indent);
            out.push_str("• ");
            for c in rest.chars() {
                self.push_char(c, out);
            }
            return;
        }
        for c in head.chars() {
            self.push_char(c, out);
        }
    }

    fn inline(&mut self, c: char, out: &mut String) {
        if self.in_fence || self.fence_line {
            out.push(c);
            return;
        }
        if c == '`' {
            self.in_code = !self.in_code;
            out.push_str(if self.in_code { CODE } else { RESET });
            if !self.in_code && (self.in_bold || self.in_heading) {
                out.push_str(if self.in_heading { HEADING } else { BOLD });
            }
            return;
        }
        out.push(c);
    }

    fn end_line(&mut self, out: &mut String) {
        if self.in_heading || self.fence_line || self.in_fence || self.in_code || self.in_bold {
            out.push_str(RESET);
        }
        self.in_heading = false;
        self.fence_line = false;
        self.in_code = false;
        self.in_bold = false;
        self.at_line_start = true;
        out.push('\n');
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn render(pieces: &[&str]) -> String {
        let mut md = MarkdownStream::new();
        let mut out: String = pieces.iter().map(|p| md.push(p)).collect();
        out.push_str(&md.finish());
        out
    }

    fn plain(s: &str) -> String {
        let mut out = String::new();
        let mut chars = s.chars();
        while let Some(c) = chars.next() {
            if c == '\x1b' {
                for d in chars.by_ref() {
                    if d == 'm' {
                        break;
                    }
                }
            } else {
                out.push(c);
            }
        }
        out
    }

    #[test]
    fn styles_survive_arbitrary_split_points() {
        let text = "# Title\nSome **bold** and `code`.\n- item\n```rust\nlet x = 1;\n```\ndone";
        let whole = render(&[text]);
        let bytes: Vec<String> = text.chars().map(String::from).collect();
        let pieces: Vec<&str> = bytes.iter().map(String::as_str).collect();
        assert_eq!(render(&pieces), whole);
        assert_eq!(
            plain(&whole),
            "Title\nSome bold and code.\n• item\n```rust\nlet x = 1;\n```\ndone"
        );
        assert!(whole.contains(HEADING) && whole.contains(BOLD) && whole.contains(CODE));
    }

    #[test]
    fn a_lone_star_and_hash_stay_literal() {
        assert_eq!(plain(&render(&["2 * 3 = 6\n#hashtag"])), "2 * 3 = 6\n#hashtag");
    }
}
