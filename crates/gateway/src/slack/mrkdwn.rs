//! Markdown from the model turned into Slack's `mrkdwn`: `**bold**` →
//! `*bold*`, `*italic*` → `_italic_`, `~~strike~~` → `~strike~`,
//! `[text](url)` → `<url|text>`, headings → bold lines, bullets → `•`.
//! Code fences and spans are kept (a fence's language tag is dropped: Slack
//! would show it as code), and `&`, `<`, `>` are escaped everywhere else, as
//! Slack requires.

/// Converts Markdown to Slack mrkdwn.
pub fn to_mrkdwn(markdown: &str) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut in_code = false;
    for line in markdown.lines() {
        let trimmed = line.trim_start();
        let indent = &line[..line.len() - trimmed.len()];
        if trimmed.starts_with("```") {
            in_code = !in_code;
            out.push("```".into());
        } else if in_code {
            out.push(escape(line));
        } else if let Some(text) = heading(trimmed) {
            out.push(format!("*{}*", inline(&text.replace("**", ""))));
        } else if is_rule(trimmed) {
            out.push(RULE.into());
        } else if let Some(item) = ["- ", "* ", "+ "].iter().find_map(|b| trimmed.strip_prefix(b)) {
            out.push(format!("{indent}• {}", inline(item)));
        } else if let Some(quote) = trimmed.strip_prefix('>') {
            out.push(format!(">{}", inline(quote)));
        } else {
            out.push(inline(line));
        }
    }
    out.join("\n")
}

/// What a Markdown rule (`---`) becomes: Slack has none.
const RULE: &str = "──────────";

/// Escapes the three characters Slack treats as control characters.
pub(super) fn escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

/// The text of an ATX heading (`# Title` to `###### Title`).
fn heading(line: &str) -> Option<&str> {
    let hashes = line.chars().take_while(|c| *c == '#').count();
    let rest = &line[hashes..];
    ((1..=6).contains(&hashes) && rest.starts_with(' '))
        .then(|| rest.trim().trim_end_matches('#').trim_end())
}

/// True for `---`, `***` and `___` (three or more, spaces allowed).
fn is_rule(line: &str) -> bool {
    let marks: String = line.chars().filter(|c| !c.is_whitespace()).collect();
    marks.len() >= 3 && ["-", "*", "_"].iter().any(|m| marks.chars().all(|c| c.to_string() == *m))
}

/// Converts the inline Markdown of one line.
fn inline(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let find = |from: usize, pat: &str| -> Option<usize> {
        let pat: Vec<char> = pat.chars().collect();
        (from..=chars.len().saturating_sub(pat.len())).find(|&j| chars[j..].starts_with(&pat))
    };
    let slice = |a: usize, b: usize| chars[a..b].iter().collect::<String>();
    let mut out = String::new();
    let mut i = 0;
    while i < chars.len() {
        let rest = &chars[i..];
        if rest[0] == '`'
            && let Some(end) = find(i + 1, "`")
        {
            out.push_str(&format!("`{}`", escape(&slice(i + 1, end))));
            i = end + 1;
            continue;
        }
        if let Some((converted, next)) = styled(&chars, i, &find, &slice) {
            out.push_str(&converted);
            i = next;
            continue;
        }
        if let Some((converted, next)) = link(&chars, i, &find, &slice) {
            out.push_str(&converted);
            i = next;
            continue;
        }
        out.push_str(&escape(&rest[0].to_string()));
        i += 1;
    }
    out
}

/// Bold, strike-through or `*italic*` starting at `i`: the converted text
/// and where to go on.
fn styled(
    chars: &[char],
    i: usize,
    find: &dyn Fn(usize, &str) -> Option<usize>,
    slice: &dyn Fn(usize, usize) -> String,
) -> Option<(String, usize)> {
    for (mark, slack) in [("**", "*"), ("__", "*"), ("~~", "~"), ("*", "_")] {
        let len = mark.chars().count();
        if !chars[i..].starts_with(&mark.chars().collect::<Vec<_>>()) {
            continue;
        }
        let Some(end) = find(i + len, mark) else { continue };
        if end > i + len && !chars[i + len].is_whitespace() && !chars[end - 1].is_whitespace() {
            return Some((format!("{slack}{}{slack}", inline(&slice(i + len, end))), end + len));
        }
    }
    None
}

/// `[text](url)`, `![alt](url)` or an autolink `<https://…>` starting at `i`.
fn link(
    chars: &[char],
    i: usize,
    find: &dyn Fn(usize, &str) -> Option<usize>,
    slice: &dyn Fn(usize, usize) -> String,
) -> Option<(String, usize)> {
    if chars[i] == '<' {
        let end = find(i + 1, ">")?;
        let url = slice(i + 1, end);
        let is_url =
            (url.starts_with("http://") || url.starts_with("https://")) && !url.contains(' ');
        return is_url.then(|| (format!("<{}>", escape(&url)), end + 1));
    }
    let start = match chars[i] {
        '[' => i,
        '!' if chars.get(i + 1) == Some(&'[') => i + 1,
        _ => return None,
    };
    let close = find(start + 1, "](")?;
    let end = find(close + 2, ")")?;
    let url = slice(close + 2, end);
    if !(url.starts_with("http://") || url.starts_with("https://") || url.starts_with("mailto:")) {
        return None;
    }
    let label = slice(start + 1, close).replace('|', "¦");
    Some((format!("<{}|{}>", escape(&url), escape(&label)), end + 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bold_italic_strike_and_links_become_mrkdwn() {
        assert_eq!(
            to_mrkdwn("**bold**, *it*, __b2__, ~~gone~~ and [the docs](https://x.io/?a=1&b=2)"),
            "*bold*, _it_, *b2*, ~gone~ and <https://x.io/?a=1&amp;b=2|the docs>"
        );
        assert_eq!(to_mrkdwn("**bold with *it* inside**"), "*bold with _it_ inside*");
    }

    #[test]
    fn headings_become_bold_lines_and_bullets_dots() {
        assert_eq!(
            to_mrkdwn("# Plan\n## **Step** two ##\n- one\n  * two"),
            "*Plan*\n*Step two*\n• one\n  • two"
        );
    }

    #[test]
    fn code_is_kept_verbatim_but_escaped_and_fences_lose_the_language() {
        assert_eq!(
            to_mrkdwn("```rust\nlet x = a**b < c;\n```\nuse `**x** & y`"),
            "```\nlet x = a**b &lt; c;\n```\nuse `**x** &amp; y`"
        );
    }

    #[test]
    fn control_characters_are_escaped_and_plain_stars_left_alone() {
        assert_eq!(to_mrkdwn("a < b & c > d"), "a &lt; b &amp; c &gt; d");
        assert_eq!(to_mrkdwn("2 * 3 = 6, a*b, snake_case_name"), "2 * 3 = 6, a*b, snake_case_name");
        assert_eq!(to_mrkdwn("> quoted **x**"), "> quoted *x*");
        assert_eq!(to_mrkdwn("see <https://x.io>"), "see <https://x.io>");
        assert_eq!(to_mrkdwn("---"), RULE);
    }
}
