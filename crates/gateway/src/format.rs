//! Markdown helpers shared by the chat channels: splitting an answer that is
//! longer than a platform allows into messages that each read well on their own.
//!
//! [`split_markdown`] cuts at paragraph boundaries first, then at line
//! boundaries, and only inside a line when a single line is too long. A code
//! fence that has to be cut is closed at the end of one message and reopened
//! (with its language tag) at the start of the next, so every message renders
//! its code as code.
//!
//! Lengths are counted in characters (Unicode scalar values), which is how
//! Discord counts its 2,000 and Slack its 4,000.

/// How a code fence is closed when a message ends inside it.
const FENCE_CLOSE: &str = "```";

/// Splits `text` into pieces of at most `limit` characters each, at
/// paragraph, then line, then word boundaries, never leaving a code fence
/// open at the end of a piece. Empty text gives no pieces.
pub fn split_markdown(text: &str, limit: usize) -> Vec<String> {
    let limit = limit.max(MIN_LIMIT);
    let text = text.trim_end();
    if text.trim().is_empty() {
        return Vec::new();
    }
    if chars(text) <= limit {
        return vec![text.to_string()];
    }
    let mut units: Vec<Unit> = Vec::new();
    for block in blocks(text) {
        match block {
            Block::Prose(lines) => prose_units(&lines, limit, &mut units),
            Block::Fence { opener, body } => fence_units(&opener, &body, limit, &mut units),
        }
    }
    pack(units, limit)
}

/// The smallest limit that still leaves room for a fence opener, a line and a
/// closer; smaller limits are raised to it.
const MIN_LIMIT: usize = 32;

/// A stretch of the text: prose (paragraphs) or one fenced code block.
enum Block<'a> {
    Prose(Vec<&'a str>),
    Fence { opener: String, body: Vec<&'a str> },
}

/// A piece no longer than the limit, with what joins it to the piece before.
struct Unit {
    text: String,
    /// `"\n\n"` between paragraphs or blocks, `"\n"` between the lines of one.
    sep: &'static str,
}

/// True when `line` opens or closes a fenced code block.
fn is_fence(line: &str) -> bool {
    let t = line.trim_start();
    t.starts_with("```") || t.starts_with("~~~")
}

fn chars(s: &str) -> usize {
    s.chars().count()
}

/// Cuts `text` into prose stretches and fenced blocks (an unclosed fence runs
/// to the end).
fn blocks(text: &str) -> Vec<Block<'_>> {
    let mut out = Vec::new();
    let mut prose: Vec<&str> = Vec::new();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        if !is_fence(line) {
            prose.push(line);
            continue;
        }
        if !prose.is_empty() {
            out.push(Block::Prose(std::mem::take(&mut prose)));
        }
        let marker = &line.trim_start()[..3];
        let mut body = Vec::new();
        for inner in lines.by_ref() {
            if inner.trim_start().starts_with(marker) && inner.trim() == marker {
                break;
            }
            body.push(inner);
        }
        out.push(Block::Fence { opener: line.trim().to_string(), body });
    }
    if !prose.is_empty() {
        out.push(Block::Prose(prose));
    }
    out
}

/// Paragraphs (split by blank lines) as units; a paragraph over the limit is
/// cut into lines, and a line over the limit into words.
fn prose_units(lines: &[&str], limit: usize, units: &mut Vec<Unit>) {
    for paragraph in lines.split(|l| l.trim().is_empty()).filter(|p| !p.is_empty()) {
        let joined = paragraph.join("\n");
        if chars(&joined) <= limit {
            units.push(Unit { text: joined, sep: "\n\n" });
            continue;
        }
        for (i, line) in paragraph.iter().enumerate() {
            let sep = if i == 0 { "\n\n" } else { "\n" };
            for (j, piece) in split_line(line, limit).into_iter().enumerate() {
                units.push(Unit { text: piece, sep: if j == 0 { sep } else { "\n" } });
            }
        }
    }
}

/// The fenced block as one unit, or as several that each reopen and close the
/// fence when the block is over the limit.
fn fence_units(opener: &str, body: &[&str], limit: usize, units: &mut Vec<Unit>) {
    let whole = format!(
        "{opener}\n{}{}{FENCE_CLOSE}",
        body.join("\n"),
        if body.is_empty() { "" } else { "\n" }
    );
    if chars(&whole) <= limit {
        units.push(Unit { text: whole, sep: "\n\n" });
        return;
    }
    // Room for the code between "opener\n" and "\n```".
    let room = limit.saturating_sub(chars(opener) + 1 + 1 + FENCE_CLOSE.len()).max(1);
    let mut parts: Vec<String> = Vec::new();
    let mut current = String::new();
    for line in body {
        for piece in split_line(line, room) {
            let extra = usize::from(!current.is_empty());
            if !current.is_empty() && chars(&current) + extra + chars(&piece) > room {
                parts.push(std::mem::take(&mut current));
            }
            if !current.is_empty() {
                current.push('\n');
            }
            current.push_str(&piece);
        }
    }
    if !current.is_empty() || parts.is_empty() {
        parts.push(current);
    }
    for (i, part) in parts.into_iter().enumerate() {
        let sep = if i == 0 { "\n\n" } else { "\n" };
        units.push(Unit { text: format!("{opener}\n{part}\n{FENCE_CLOSE}"), sep });
    }
}

/// Cuts one line into pieces of at most `limit` characters, at the last space
/// before the limit when there is one.
fn split_line(line: &str, limit: usize) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = line;
    while chars(rest) > limit {
        let cut = rest.char_indices().nth(limit).map_or(rest.len(), |(i, _)| i);
        let at = match rest[..cut].rfind(' ') {
            Some(space) if space > 0 => space,
            _ => cut,
        };
        out.push(rest[..at].trim_end().to_string());
        rest = rest[at..].trim_start();
    }
    if !rest.is_empty() || out.is_empty() {
        out.push(rest.to_string());
    }
    out
}

/// Packs units into as few pieces as fit, keeping their order.
fn pack(units: Vec<Unit>, limit: usize) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    for unit in units {
        if current.is_empty() {
            current = unit.text;
        } else if chars(&current) + unit.sep.len() + chars(&unit.text) <= limit {
            current.push_str(unit.sep);
            current.push_str(&unit.text);
        } else {
            out.push(std::mem::replace(&mut current, unit.text));
        }
    }
    if !current.is_empty() {
        out.push(current);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fences_balanced(piece: &str) -> bool {
        piece.lines().filter(|l| is_fence(l)).count() % 2 == 0
    }

    #[test]
    fn short_text_is_one_piece_and_blank_text_none() {
        assert_eq!(split_markdown("hello\n\nworld\n", 100), ["hello\n\nworld"]);
        assert!(split_markdown("  \n", 100).is_empty());
    }

    #[test]
    fn long_text_splits_at_paragraphs_before_lines() {
        let para = "word ".repeat(15).trim_end().to_string(); // 74 chars
        let text = format!("{para}\n\n{para}\n\n{para}");
        let pieces = split_markdown(&text, 160);
        assert_eq!(pieces, [format!("{para}\n\n{para}"), para.clone()]);
    }

    #[test]
    fn a_long_line_is_cut_at_spaces_and_every_piece_fits() {
        let text = "abcdefghi ".repeat(50);
        let pieces = split_markdown(&text, 64);
        assert!(pieces.iter().all(|p| p.chars().count() <= 64), "{pieces:?}");
        assert!(pieces.iter().all(|p| !p.starts_with(' ') && !p.ends_with(' ')));
        assert_eq!(pieces.join(" "), text.trim_end());
    }

    #[test]
    fn a_cut_code_fence_is_closed_and_reopened_with_its_language() {
        let code: Vec<String> = (0..40).map(|i| format!("let x{i} = {i};")).collect();
        let text = format!("Intro.\n\n```rust\n{}\n```\n\nOutro.", code.join("\n"));
        let pieces = split_markdown(&text, 200);
        assert!(pieces.len() > 2);
        for piece in &pieces {
            assert!(piece.chars().count() <= 200, "{piece}");
            assert!(fences_balanced(piece), "unbalanced: {piece}");
        }
        assert!(pieces[1].starts_with("```rust\n"), "{}", pieces[1]);
        let all = pieces.join("\n");
        assert!(code.iter().all(|line| all.contains(line.as_str())));
    }

    #[test]
    fn blank_lines_inside_a_fence_do_not_end_it() {
        let text = format!("```\na\n\nb\n```\n\n{}", "z".repeat(60));
        let pieces = split_markdown(&text, 40);
        assert_eq!(pieces[0], "```\na\n\nb\n```");
        assert!(pieces.iter().all(|p| fences_balanced(p)));
    }

    #[test]
    fn multibyte_text_is_cut_on_character_boundaries() {
        let text = "é".repeat(100);
        let pieces = split_markdown(&text, 40);
        assert_eq!(pieces.len(), 3);
        assert_eq!(pieces.concat(), text);
    }
}
