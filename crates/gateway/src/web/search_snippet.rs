//! A search hit's snippet as the sidebar shows it. The recall index marks
//! the words it found with `[` and `]`; the page gets the snippet as plain
//! parts, the found words flagged, so that no marker shows as a bracket and
//! no bracket of the conversation itself is taken for a marker (a marker
//! holds a word of the search). A snippet without markers (the database's
//! search) gets the search's words flagged where they occur.

use serde::Serialize;

/// A run of a snippet's text; `hit` for a word the search found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(super) struct Part {
    pub text: String,
    pub hit: bool,
}

/// `snippet` (as the recall index or the database gave it) in parts, for
/// the search `query`.
pub(super) fn parts(snippet: &str, query: &str) -> Vec<Part> {
    let terms: Vec<Vec<char>> = query
        .split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .filter(|t| !t.is_empty())
        .map(|t| t.chars().flat_map(char::to_lowercase).collect())
        .collect();
    let chars: Vec<char> = snippet.chars().collect();
    let mut out = Vec::new();
    let mut marked = false;
    let mut i = 0;
    while i < chars.len() {
        if chars[i] == '['
            && let Some(len) = chars[i + 1..].iter().position(|&c| c == ']')
            && starts_with_term(&chars[i + 1..i + 1 + len], &terms)
        {
            push(&mut out, chars[i + 1..i + 1 + len].iter().collect(), true);
            marked = true;
            i += len + 2;
            continue;
        }
        push(&mut out, chars[i].to_string(), false);
        i += 1;
    }
    if marked { out } else { flagged(&chars, &terms) }
}

/// True when `word` (any case) starts with one of `terms`.
fn starts_with_term(word: &[char], terms: &[Vec<char>]) -> bool {
    let word: Vec<char> = word.iter().flat_map(|c| c.to_lowercase()).collect();
    !word.is_empty() && terms.iter().any(|t| word.starts_with(t))
}

/// `chars` with each occurrence of a term (any case) flagged.
fn flagged(chars: &[char], terms: &[Vec<char>]) -> Vec<Part> {
    let lower: Vec<char> = chars.iter().map(|c| c.to_lowercase().next().unwrap_or(*c)).collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let found = terms.iter().find(|t| !t.is_empty() && lower[i..].starts_with(t)).map(Vec::len);
        match found {
            Some(n) => {
                push(&mut out, chars[i..i + n].iter().collect(), true);
                i += n;
            }
            None => {
                push(&mut out, chars[i].to_string(), false);
                i += 1;
            }
        }
    }
    out
}

/// Adds `text` to `out`, joined to the last part when of the same kind.
fn push(out: &mut Vec<Part>, text: String, hit: bool) {
    match out.last_mut() {
        Some(last) if last.hit == hit => last.text.push_str(&text),
        _ => out.push(Part { text, hit }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shown(parts: &[Part]) -> String {
        parts.iter().map(|p| if p.hit { format!("<{}>", p.text) } else { p.text.clone() }).collect()
    }

    #[test]
    fn the_index_markers_become_flagged_words_and_no_bracket_shows() {
        let parts = parts("…a [second] conversation about the [Second] try…", "second");
        assert_eq!(shown(&parts), "…a <second> conversation about the <Second> try…");
        assert!(!parts.iter().any(|p| p.text.contains('[')));
    }

    #[test]
    fn brackets_of_the_conversation_itself_stay() {
        let parts = parts("see [1] and v[i] in the [release] notes", "release");
        assert_eq!(shown(&parts), "see [1] and v[i] in the <release> notes");
    }

    #[test]
    fn a_snippet_without_markers_gets_the_words_flagged() {
        let parts = parts("…the Release notes, released…", "release");
        assert_eq!(shown(&parts), "…the <Release> notes, <release>d…");
    }
}
