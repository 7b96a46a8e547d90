//! Telegram's message format: Markdown from the model turned into the HTML
//! subset Telegram shows (`parse_mode = HTML`), cut into messages of at most
//! [`MAX_MESSAGE_CHARS`].

/// Telegram's limit on one message's text, in characters.
pub const MAX_MESSAGE_CHARS: usize = 4096;

/// Escapes the three characters Telegram's HTML mode requires.
pub(super) fn escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

/// Converts Markdown to Telegram HTML: code blocks and spans, bold, italic,
/// strike-through, links, headings (bold) and bullets.
pub fn to_html(markdown: &str) -> String {
    let mut out = String::new();
    let mut in_code = false;
    for line in markdown.lines() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("```") {
            if in_code {
                out.push_str("</code></pre>\n");
            } else {
                out.push_str("<pre><code>");
            }
            in_code = !in_code;
            continue;
        }
        if in_code {
            out.push_str(&escape(line));
            out.push('\n');
            continue;
        }
        let heading = trimmed.trim_start_matches('#');
        if trimmed.starts_with('#') && heading.starts_with(' ') {
            out.push_str(&format!("<b>{}</b>\n", inline(heading.trim())));
        } else if let Some(item) = trimmed.strip_prefix("- ").or_else(|| trimmed.strip_prefix("* "))
        {
            let indent = &line[..line.len() - trimmed.len()];
            out.push_str(&format!("{indent}• {}\n", inline(item)));
        } else {
            out.push_str(&inline(line));
            out.push('\n');
        }
    }
    if in_code {
        out.push_str("</code></pre>\n");
    }
    out.trim_end().to_string()
}

/// Inline Markdown of one line.
fn inline(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::new();
    let mut i = 0;
    let find = |from: usize, pat: &str| -> Option<usize> {
        let pat: Vec<char> = pat.chars().collect();
        (from..chars.len().saturating_sub(pat.len() - 1)).find(|&j| chars[j..].starts_with(&pat))
    };
    let text_of = |a: usize, b: usize| chars[a..b].iter().collect::<String>();
    while i < chars.len() {
        let rest = &chars[i..];
        if rest[0] == '`'
            && let Some(end) = find(i + 1, "`")
        {
            out.push_str(&format!("<code>{}</code>", escape(&text_of(i + 1, end))));
            i = end + 1;
            continue;
        }
        let mut styled = false;
        for (mark, tag) in [("**", "b"), ("__", "b"), ("~~", "s"), ("*", "i")] {
            if rest.starts_with(&mark.chars().collect::<Vec<_>>())
                && let Some(end) = find(i + mark.len(), mark)
                && end > i + mark.len()
                && !chars[i + mark.len()].is_whitespace()
                && !chars[end - 1].is_whitespace()
            {
                out.push_str(&format!("<{tag}>{}</{tag}>", inline(&text_of(i + mark.len(), end))));
                i = end + mark.len();
                styled = true;
                break;
            }
        }
        if styled {
            continue;
        }
        if rest[0] == '['
            && let Some(close) = find(i + 1, "](")
            && let Some(end) = find(close + 2, ")")
        {
            let url = text_of(close + 2, end);
            if url.starts_with("http://") || url.starts_with("https://") {
                out.push_str(&format!(
                    "<a href=\"{}\">{}</a>",
                    escape(&url).replace('"', "&quot;"),
                    escape(&text_of(i + 1, close))
                ));
                i = end + 1;
                continue;
            }
        }
        out.push_str(&escape(&rest[0].to_string()));
        i += 1;
    }
    out
}

/// Cuts Markdown into pieces whose HTML fits in one message: at line
/// boundaries, closing and reopening a code block cut in two, and within a
/// line only when one line alone is too long.
pub fn split_for_telegram(markdown: &str) -> Vec<String> {
    let fits = |s: &str| to_html(s).chars().count() <= MAX_MESSAGE_CHARS;
    if fits(markdown) {
        return vec![markdown.to_string()];
    }
    let mut pieces = Vec::new();
    let mut current = String::new();
    let mut in_code = false;
    for line in markdown.lines() {
        let candidate =
            if current.is_empty() { line.to_string() } else { format!("{current}\n{line}") };
        let closed = if in_code { format!("{candidate}\n```") } else { candidate.clone() };
        if fits(&closed) {
            current = candidate;
        } else if !current.is_empty() {
            pieces.push(if in_code { format!("{current}\n```") } else { current });
            current = if in_code { format!("```\n{line}") } else { line.to_string() };
        } else {
            current = line.to_string();
        }
        // One line alone too long: cut it by characters.
        while !fits(&current) {
            let budget = MAX_MESSAGE_CHARS / 6; // worst case: every character escaped
            let cut: String = current.chars().take(budget.max(1)).collect();
            pieces.push(cut.clone());
            current = current[cut.len()..].to_string();
        }
        if line.trim_start().starts_with("```") {
            in_code = !in_code;
        }
    }
    if !current.trim().is_empty() {
        pieces.push(current);
    }
    pieces
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markdown_becomes_telegram_html_with_everything_else_escaped() {
        assert_eq!(
            to_html("# Title\n**bold** and *it* and `a<b>` & [site](https://x.io/?a=1&b=2)"),
            "<b>Title</b>\n<b>bold</b> and <i>it</i> and <code>a&lt;b&gt;</code> &amp; <a href=\"https://x.io/?a=1&amp;b=2\">site</a>"
        );
        assert_eq!(
            to_html("```rust\nlet x = 1 < 2;\n```"),
            "<pre><code>let x = 1 &lt; 2;\n</code></pre>"
        );
        assert_eq!(to_html("- one\n- two"), "• one\n• two");
        assert_eq!(to_html("2 * 3 = 6, a*b"), "2 * 3 = 6, a*b");
    }

    #[test]
    fn long_answers_are_split_at_lines_under_the_limit_keeping_code_blocks_whole() {
        let line = "word ".repeat(30);
        let text = vec![line.as_str(); 100].join("\n");
        let pieces = split_for_telegram(&text);
        assert!(pieces.len() >= 4, "{}", pieces.len());
        for p in &pieces {
            assert!(to_html(p).chars().count() <= MAX_MESSAGE_CHARS);
        }
        assert_eq!(pieces.join("\n").replace('\n', ""), text.replace('\n', ""));
        let code = format!("```\n{}\n```", vec!["x = 1"; 1200].join("\n"));
        for p in split_for_telegram(&code) {
            let html = to_html(&p);
            assert!(html.starts_with("<pre><code>") && html.ends_with("</code></pre>"), "{html}");
        }
    }

    #[test]
    fn one_huge_line_is_cut_by_characters() {
        let text = "<".repeat(10_000);
        for p in split_for_telegram(&text) {
            assert!(to_html(&p).chars().count() <= MAX_MESSAGE_CHARS);
        }
    }
}
