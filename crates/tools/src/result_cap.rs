//! One cap on the size of every tool result (built-in, MCP, sub-agent), applied
//! by the loop, so that no single result can fill the context window: the
//! head is kept and a note tells the model how to get the rest in pieces.

use ferroclaw_protocol::ResultPart;

use crate::ToolOutput;

/// Characters of text one tool result may carry at most: about 25k tokens,
/// Claude Code's cap on MCP tool output (`MAX_MCP_OUTPUT_TOKENS` = 25000).
pub const MAX_RESULT_CHARS: usize = 100_000;

/// The cap for a model with a context window of `context_window` tokens: at
/// most [`MAX_RESULT_CHARS`], and at most about a quarter of the window (a
/// token is ~4 characters), so that after compaction a result always fits
/// and compaction never has to remove it again.
pub fn result_cap_chars(context_window: u64) -> usize {
    usize::try_from(context_window).unwrap_or(usize::MAX).clamp(2_000, MAX_RESULT_CHARS)
}

/// `output` with its text cut to `max_chars` characters in all (images are
/// kept), and a note saying what was cut and how to read the rest.
pub fn cap_result(mut output: ToolOutput, max_chars: usize) -> ToolOutput {
    let total: usize = output.content.iter().map(text_chars).sum();
    if total <= max_chars {
        return output;
    }
    let mut left = max_chars;
    for part in &mut output.content {
        if let ResultPart::Text { text } = part {
            match text.char_indices().nth(left) {
                Some((cut, _)) => {
                    text.truncate(cut);
                    left = 0;
                }
                None => left -= text.chars().count(),
            }
        }
    }
    output.content.retain(|p| !matches!(p, ResultPart::Text { text } if text.is_empty()));
    output.content.push(ResultPart::Text {
        text: format!(
            "\n\n[result cut: {total} characters in all, only the first {max_chars} are shown. \
             Get the rest in smaller pieces: `read` with offset and limit, `grep` for what you \
             need, or a command piped through head, tail or sed -n.]"
        ),
    });
    output
}

fn text_chars(part: &ResultPart) -> usize {
    match part {
        ResultPart::Text { text } => text.chars().count(),
        ResultPart::Image { .. } => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_result_over_the_cap_keeps_its_head_and_says_how_to_read_the_rest() {
        let out = cap_result(ToolOutput::text("é".repeat(5_000)), 3_000);
        let text = out.joined_text();
        assert!(text.starts_with(&"é".repeat(3_000)));
        assert!(!text.contains(&"é".repeat(3_001)));
        assert!(text.contains("5000 characters in all") && text.contains("offset and limit"));
    }

    #[test]
    fn a_result_under_the_cap_is_untouched() {
        let out = cap_result(ToolOutput::text("short"), 3_000);
        assert_eq!(out.joined_text(), "short");
    }

    #[test]
    fn the_cap_follows_small_context_windows() {
        assert_eq!(result_cap_chars(8_192), 8_192);
        assert_eq!(result_cap_chars(200_000), MAX_RESULT_CHARS);
    }
}
