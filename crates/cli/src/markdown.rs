//! Streaming Markdown to ANSI: text arrives in arbitrary pieces and is styled
//! as it goes (headings, code fences, inline code, bold, bullets, block
//! quotes, links), holding back only the few characters that are still
//! ambiguous; a table is held until its last row and printed aligned.

const BOLD: &str = "\x1b[1m";
const HEADING: &str = "\x1b[1;36m";
const CODE: &str = "\x1b[33m";
const FENCE: &str = "\x1b[2m";
const RESET: &str = "\x1b[0m";
const QUOTE: &str = "\x1b[2;3m";
const LINK: &str = "\x1b[4m";
const DIM: &str = "\x1b[2m";
/// A link longer than this is printed as it came.
const MAX_LINK_CHARS: usize = 500;

/// Turns streamed Markdown into styled terminal text.
#[derive(Debug, Default)]
pub(crate) struct MarkdownStream {
    /// Characters of the current line held until their meaning is known.
    pending: String,
    at_line_start: bool,
    in_fence: bool,
    in_heading: bool,
    in_code: bool,
    in_bold: bool,
    /// The current line is a fence marker line (```lang).
    fence_line: bool,
    /// The current line is a block quote.
    in_quote: bool,
    /// Rows of a table being received (`| a | b |` lines).
    table: Vec<String>,
    /// A `[text](url)` link being received.
    link: Option<String>,
    /// The language of the open code fence (```rust).
    lang: String,
    /// The current line of a code block, highlighted when it ends.
    code_line: String,
}

impl MarkdownStream {
    /// A renderer at the start of a line.
    pub(crate) fn new() -> Self {
        Self { at_line_start: true, ..Self::default() }
    }

    /// Feeds a piece of text; returns what can be printed now.
    pub(crate) fn push(&mut self, text: &str) -> String {
        let mut out = String::new();
        for c in text.chars() {
            self.push_char(c, &mut out);
        }
        out
    }

    /// Ends the stream: prints anything held back and resets styles.
    pub(crate) fn finish(&mut self) -> String {
        let mut out = String::new();
        if self.at_line_start && self.pending.trim_start().starts_with('|') && !self.in_fence {
            self.table.push(std::mem::take(&mut self.pending));
        }
        self.flush_table(&mut out);
        self.flush_pending(&mut out);
        self.flush_link(&mut out);
        self.flush_code(&mut out);
        if self.in_bold
            || self.in_code
            || self.in_heading
            || self.in_fence
            || self.fence_line
            || self.in_quote
        {
            out.push_str(RESET);
        }
        *self = Self::new();
        out
    }

    fn push_char(&mut self, c: char, out: &mut String) {
        if c == '\n' {
            if self.at_line_start && !self.in_fence && self.pending.trim_start().starts_with('|') {
                self.table.push(std::mem::take(&mut self.pending));
                return;
            }
            self.flush_table(out);
            self.flush_pending(out);
            self.flush_link(out);
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
                || p == "*"
                || (p.starts_with('|') && !self.in_fence);
            if !undecided {
                let held = std::mem::take(&mut self.pending);
                self.at_line_start = false;
                self.start_line(&held, out);
            }
            return;
        }
        if let Some(link) = &mut self.link {
            link.push(c);
            match link_state(link) {
                LinkState::Open => {}
                LinkState::Done(text, url) => {
                    self.link = None;
                    out.push_str(LINK);
                    out.push_str(&text);
                    out.push_str(RESET);
                    if url != text {
                        out.push_str(DIM);
                        out.push_str(&format!(" ({url})"));
                        out.push_str(RESET);
                    }
                    self.restore_style(out);
                }
                LinkState::NotALink => self.flush_link(out),
            }
            return;
        }
        if c == '['
            && !self.in_fence
            && !self.fence_line
            && !self.in_code
            && self.pending.is_empty()
        {
            self.link = Some("[".to_string());
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

    /// Prints a held-back `[...` that turned out not to be a link, as it came.
    fn flush_link(&mut self, out: &mut String) {
        if let Some(held) = self.link.take() {
            for c in held.chars() {
                self.inline(c, out);
            }
        }
    }

    /// Re-applies the line's style after a reset.
    fn restore_style(&self, out: &mut String) {
        if self.in_heading {
            out.push_str(HEADING);
        } else if self.in_quote {
            out.push_str(QUOTE);
        } else if self.in_bold {
            out.push_str(BOLD);
        }
    }

    /// Prints a table held back, columns aligned, as soon as it has ended.
    fn flush_table(&mut self, out: &mut String) {
        if self.table.is_empty() {
            return;
        }
        let rows = std::mem::take(&mut self.table);
        out.push_str(&render_table(&rows));
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
        self.flush_table(out);
        let trimmed = head.trim_start();
        if let Some(lang) = trimmed.strip_prefix("```") {
            self.in_fence = !self.in_fence;
            self.fence_line = true;
            self.lang = if self.in_fence { lang.to_string() } else { String::new() };
            out.push_str(FENCE);
            out.push_str(head);
            return;
        }
        if self.in_fence {
            self.code_line.push_str(head);
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
        if let Some(rest) = trimmed.strip_prefix('>') {
            self.in_quote = true;
            out.push_str(QUOTE);
            out.push('│');
            for c in rest.chars() {
                self.push_char(c, out);
            }
            return;
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
        if self.fence_line {
            if self.in_fence {
                self.lang.push(c);
            }
            out.push(c);
            return;
        }
        if self.in_fence {
            self.code_line.push(c);
            return;
        }
        if c == '`' {
            self.in_code = !self.in_code;
            out.push_str(if self.in_code { CODE } else { RESET });
            if !self.in_code {
                self.restore_style(out);
            }
            return;
        }
        out.push(c);
    }

    /// Prints the code line held back, highlighted for the fence's language.
    fn flush_code(&mut self, out: &mut String) {
        if !self.in_fence || self.fence_line {
            return;
        }
        let code = std::mem::take(&mut self.code_line);
        match crate::highlight::line(&self.lang, &code) {
            Some(coloured) => out.push_str(&coloured),
            None => {
                out.push_str(CODE);
                out.push_str(&code);
            }
        }
    }

    fn end_line(&mut self, out: &mut String) {
        self.flush_code(out);
        if self.in_heading
            || self.fence_line
            || self.in_fence
            || self.in_code
            || self.in_bold
            || self.in_quote
        {
            out.push_str(RESET);
        }
        self.in_quote = false;
        self.in_heading = false;
        self.fence_line = false;
        self.in_code = false;
        self.in_bold = false;
        self.at_line_start = true;
        out.push('\n');
    }
}

/// How far a held-back `[...` has got.
enum LinkState {
    Open,
    Done(String, String),
    NotALink,
}

fn link_state(held: &str) -> LinkState {
    if held.chars().count() > MAX_LINK_CHARS {
        return LinkState::NotALink;
    }
    let Some(close) = held.find(']') else { return LinkState::Open };
    let after = &held[close + 1..];
    if after.is_empty() {
        return LinkState::Open;
    }
    let Some(url) = after.strip_prefix('(') else { return LinkState::NotALink };
    match url.strip_suffix(')') {
        Some(url) if !url.contains(')') => {
            LinkState::Done(held[1..close].to_string(), url.to_string())
        }
        _ if url.contains(char::is_whitespace) => LinkState::NotALink,
        _ => LinkState::Open,
    }
}

/// A Markdown table's rows, aligned: header bold, a rule under it, `│` between.
fn render_table(rows: &[String]) -> String {
    let cells = |row: &str| -> Vec<String> {
        let row = row.trim();
        let row = row.strip_prefix('|').unwrap_or(row);
        let row = row.strip_suffix('|').unwrap_or(row);
        row.split('|').map(|c| c.trim().replace("**", "").replace('`', "")).collect()
    };
    let is_rule = |row: &str| {
        row.trim().chars().all(|c| matches!(c, '|' | '-' | ':' | ' ')) && row.contains('-')
    };
    let table: Vec<Vec<String>> = rows.iter().filter(|r| !is_rule(r)).map(|r| cells(r)).collect();
    let columns = table.iter().map(Vec::len).max().unwrap_or(0);
    let mut widths = vec![0usize; columns];
    for row in &table {
        for (i, cell) in row.iter().enumerate() {
            widths[i] = widths[i].max(cell.chars().count());
        }
    }
    let mut out = String::new();
    for (n, row) in table.iter().enumerate() {
        let line: Vec<String> = (0..columns)
            .map(|i| {
                let cell = row.get(i).map(String::as_str).unwrap_or("");
                let pad = widths[i] - cell.chars().count();
                format!("{cell}{}", " ".repeat(pad))
            })
            .collect();
        if n == 0 && table.len() > 1 {
            out.push_str(&format!("{BOLD}{}{RESET}\n", line.join(" │ ")));
            let rule: Vec<String> = widths.iter().map(|w| "─".repeat(*w)).collect();
            out.push_str(&format!("{DIM}{}{RESET}\n", rule.join("─┼─")));
        } else {
            out.push_str(&format!("{}\n", line.join(" │ ")));
        }
    }
    out
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

    #[test]
    fn tables_are_aligned_whatever_the_split_points() {
        let text = "Intro\n| name | size |\n|---|--:|\n| a | 10 |\n| long name | 2 |\nafter\n";
        let whole = render(&[text]);
        let chars: Vec<String> = text.chars().map(String::from).collect();
        let pieces: Vec<&str> = chars.iter().map(String::as_str).collect();
        assert_eq!(render(&pieces), whole);
        assert_eq!(
            plain(&whole),
            "Intro\nname      │ size\n──────────┼─────\na         │ 10  \nlong name │ 2   \nafter\n"
        );
    }

    #[test]
    fn quotes_and_links_are_styled_and_other_brackets_stay() {
        let out = render(&["> wise words\nsee [the docs](https://x.dev/a) and [x] or [y](z w)\n"]);
        assert_eq!(
            plain(&out),
            "│ wise words\nsee the docs (https://x.dev/a) and [x] or [y](z w)\n"
        );
        assert!(out.contains(QUOTE) && out.contains(LINK), "{out:?}");
    }

    #[test]
    fn code_blocks_are_highlighted_for_their_language() {
        let out = render(&["```rust\nlet x = \"hi\"; // c\n```\n```\nplain\n```\n"]);
        assert!(out.contains("\x1b[35mlet\x1b[0m"), "{out:?}");
        assert!(out.contains(&format!("{CODE}plain")), "unknown language: one colour: {out:?}");
        assert_eq!(plain(&out), "```rust\nlet x = \"hi\"; // c\n```\n```\nplain\n```\n");
    }
}
