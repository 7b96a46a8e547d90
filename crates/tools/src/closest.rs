//! When an edit's `old_string` is not in the file: find what the model
//! probably meant, so the error shows the real lines instead of "not found".
//!
//! Two passes: first the same lines with different whitespace (the usual
//! mistake: indentation or trailing spaces), then the lines most similar by
//! character bigrams (Dice coefficient), a cheap measure that tolerates typos.

use crate::lines::numbered_excerpt;

/// Similar lines shown at most.
const MAX_SUGGESTIONS: usize = 3;
/// Lines scoring below this are not worth showing.
const MIN_SIMILARITY: f64 = 0.5;
/// Bounds on the work done for a suggestion (huge files get no bigram pass).
const MAX_FILE_LINES: usize = 50_000;
const MAX_NEEDLE_LINES: usize = 20;
/// Lines longer than this (bytes) are not scored: a bigram list costs
/// 8 bytes per character, and a minified or generated line is no typo.
const MAX_SCORED_LINE_BYTES: usize = 4096;

/// A hint naming the lines of `content` closest to `needle`, with line numbers.
/// Huge files (over [`MAX_FILE_LINES`] lines) get no hint: the search
/// would hold a slice per line.
pub(crate) fn closest_lines(content: &str, needle: &str) -> String {
    if content.lines().count() > MAX_FILE_LINES {
        return "Read the file to see its current content.".to_string();
    }
    if let Some(hint) = whitespace_only_difference(content, needle) {
        return hint;
    }
    let needles: Vec<Vec<(char, char)>> = needle
        .lines()
        .filter(|l| !l.trim().is_empty())
        .take(MAX_NEEDLE_LINES)
        .map(bigrams)
        .collect();
    if needles.is_empty() {
        return "Read the file to see its current content.".to_string();
    }
    let mut scored: Vec<(f64, usize)> = content
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty() && l.len() <= MAX_SCORED_LINE_BYTES)
        .map(|(i, line)| {
            let grams = bigrams(line);
            let best = needles.iter().map(|n| dice(n, &grams)).fold(0.0, f64::max);
            (best, i + 1)
        })
        .filter(|(score, _)| *score >= MIN_SIMILARITY)
        .collect();
    if scored.is_empty() {
        return "No similar lines found; read the file to see its current content.".to_string();
    }
    scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    scored.truncate(MAX_SUGGESTIONS);
    scored.sort_by_key(|(_, n)| *n);
    let mut out = String::from("The most similar lines in the file are:\n");
    for (_, n) in scored {
        out.push_str(&numbered_excerpt(content, n, n));
    }
    out
}

/// Finds `needle` in `content` line by line with leading and trailing
/// whitespace ignored.
fn whitespace_only_difference(content: &str, needle: &str) -> Option<String> {
    let wanted: Vec<&str> = needle.lines().map(str::trim).collect();
    let start = wanted.iter().position(|l| !l.is_empty())?;
    let end = wanted.iter().rposition(|l| !l.is_empty())? + 1;
    let wanted = &wanted[start..end];
    let lines: Vec<&str> = content.lines().map(str::trim).collect();
    if wanted.len() > lines.len() {
        return None;
    }
    let found: Vec<usize> = (0..=lines.len() - wanted.len())
        .filter(|&i| lines[i..i + wanted.len()] == *wanted)
        .take(MAX_SUGGESTIONS)
        .collect();
    let first = *found.first()?;
    let last = first + wanted.len();
    let mut out = format!(
        "old_string matches line{} {} when whitespace is ignored; copy the exact \
         indentation and spacing from the file:\n",
        if wanted.len() == 1 { "" } else { "s" },
        if wanted.len() == 1 { (first + 1).to_string() } else { format!("{}-{last}", first + 1) }
    );
    out.push_str(&numbered_excerpt(content, first + 1, last));
    Some(out)
}

/// Sorted character bigrams of `line`, lowercased, whitespace collapsed.
fn bigrams(line: &str) -> Vec<(char, char)> {
    let chars: Vec<char> = line
        .split_whitespace()
        .flat_map(|w| w.chars().chain(std::iter::once(' ')))
        .flat_map(char::to_lowercase)
        .collect();
    let mut grams: Vec<(char, char)> = chars.windows(2).map(|w| (w[0], w[1])).collect();
    grams.sort_unstable();
    grams
}

/// Dice coefficient of two sorted bigram lists: 1.0 equal, 0.0 nothing shared.
fn dice(a: &[(char, char)], b: &[(char, char)]) -> f64 {
    if a.is_empty() || b.is_empty() {
        return 0.0;
    }
    let (mut i, mut j, mut shared) = (0, 0, 0usize);
    while i < a.len() && j < b.len() {
        match a[i].cmp(&b[j]) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => {
                shared += 1;
                i += 1;
                j += 1;
            }
        }
    }
    2.0 * shared as f64 / (a.len() + b.len()) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_whitespace_difference_names_the_lines() {
        let content = "fn main() {\n    let x = 1;\n    let y = 2;\n}\n";
        let hint = closest_lines(content, "let x = 1;\n  let y = 2;");
        assert!(hint.contains("lines 2-3 when whitespace is ignored"), "{hint}");
        assert!(hint.contains("     2\t    let x = 1;"), "{hint}");
    }

    #[test]
    fn a_typo_shows_the_most_similar_line() {
        let content = "alpha\nlet counter = compute_total(items);\nomega\n";
        let hint = closest_lines(content, "let countr = compute_totl(items);");
        assert!(hint.contains("     2\tlet counter"), "{hint}");
        assert!(!hint.contains("alpha"), "{hint}");
    }

    #[test]
    fn nothing_similar_says_so() {
        let hint = closest_lines("alpha\nbeta\n", "zzzzqqqq");
        assert!(hint.contains("No similar lines"), "{hint}");
    }
}
