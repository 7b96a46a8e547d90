//! Stopping an answer that has fallen into a loop. Small models at low
//! temperature often repeat one phrase, line or URL until the token cap; a
//! penalty on recent tokens makes that rarer, and [`LoopGuard`] stops what
//! gets through. It watches token ids, so it is cheap per token, and it
//! looks for two shapes:
//!
//! - an exact loop: the last tokens are one block of 1 to
//!   [`MAX_PERIOD`] tokens repeated, spanning at least [`MIN_LOOP_TOKENS`]
//!   tokens and at least [`MIN_REPEATS`] copies;
//! - a line loop (the same line, perhaps with a counter that changes):
//!   [`MIN_LINE_REPEATS`] lines in a row that are equal once digits are
//!   ignored, each at least [`MIN_LINE_CHARS`] long.

/// Longest repeated block looked for, in tokens (a long line).
pub const MAX_PERIOD: usize = 64;
/// Fewest tokens an exact loop must span before it counts: short runs
/// (`----`, a blank line or two) are normal text.
pub const MIN_LOOP_TOKENS: usize = 32;
/// Fewest copies of a block before it counts as a loop.
pub const MIN_REPEATS: usize = 3;
/// Lines in a row, equal but for digits, that make a line loop. A table of
/// numbers can repeat a row shape a few times; a loop goes on for hundreds.
pub const MIN_LINE_REPEATS: usize = 6;
/// Shortest line that counts (blank lines and `}` repeat legitimately).
pub const MIN_LINE_CHARS: usize = 8;

/// Watches an answer's tokens for a loop.
#[derive(Debug, Default)]
pub struct LoopGuard {
    tokens: Vec<i32>,
    /// The line being written, digits replaced by `#`.
    line: String,
    /// The last finished line (same form) and how many times in a row it came.
    last_line: String,
    repeats: usize,
}

impl LoopGuard {
    /// A guard for a fresh answer.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds the next token and its text; true when the answer is now looping.
    pub fn push(&mut self, token: i32, text: &str) -> bool {
        self.tokens.push(token);
        exact_loop(&self.tokens) || self.line_loop(text)
    }

    fn line_loop(&mut self, text: &str) -> bool {
        for c in text.chars() {
            if c != '\n' {
                self.line.push(if c.is_ascii_digit() { '#' } else { c });
                continue;
            }
            let line = std::mem::take(&mut self.line);
            let line = line.trim();
            if line.chars().count() < MIN_LINE_CHARS {
                continue;
            }
            if line == self.last_line {
                self.repeats += 1;
            } else {
                self.last_line = line.to_string();
                self.repeats = 1;
            }
            if self.repeats >= MIN_LINE_REPEATS {
                return true;
            }
        }
        false
    }
}

/// True when `tokens` ends with a block repeated as described above.
fn exact_loop(tokens: &[i32]) -> bool {
    (1..=MAX_PERIOD).any(|period| {
        let span = (period * MIN_REPEATS).max(MIN_LOOP_TOKENS);
        if tokens.len() < span {
            return false;
        }
        let tail = &tokens[tokens.len() - span..];
        tail.iter().zip(&tail[period..]).all(|(a, b)| a == b)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn first_stop(tokens: impl IntoIterator<Item = i32>) -> Option<usize> {
        let mut guard = LoopGuard::new();
        tokens.into_iter().position(|t| guard.push(t, "x"))
    }

    /// Feeds text as one token per line.
    fn stops_on_lines(lines: impl IntoIterator<Item = String>) -> Option<usize> {
        let mut guard = LoopGuard::new();
        lines.into_iter().enumerate().position(|(i, l)| guard.push(i as i32, &l))
    }

    #[test]
    fn a_line_repeated_over_and_over_is_stopped_early() {
        // A 9-token line (a made-up URL and a newline), looping.
        let line = [10, 11, 12, 13, 14, 15, 16, 17, 1];
        let answer = (0..100).flat_map(|_| line);
        let stopped = first_stop(answer).expect("a loop");
        assert!(stopped < 40, "stopped after {stopped} tokens");
    }

    #[test]
    fn one_token_repeated_is_a_loop_only_past_the_minimum_span() {
        assert_eq!(first_stop(std::iter::repeat_n(7, MIN_LOOP_TOKENS - 1)), None);
        assert_eq!(first_stop(std::iter::repeat_n(7, 100)), Some(MIN_LOOP_TOKENS - 1));
    }

    #[test]
    fn a_line_with_a_changing_counter_is_a_loop() {
        let lines = (0..300).map(|n| format!("See https://example.com/page/{n}\n"));
        assert_eq!(stops_on_lines(lines), Some(MIN_LINE_REPEATS - 1));
    }

    #[test]
    fn counting_and_short_repeated_lines_are_not_loops() {
        let numbers = (1..=200).map(|n| format!("{n}, "));
        assert_eq!(stops_on_lines(numbers), None, "no newline: not a line loop");
        let closers = std::iter::repeat_n("}\n".to_string(), 50);
        assert_eq!(stops_on_lines(closers), None, "short lines do not count");
        let list = ["- apples\n", "- pears\n", "- plums and more\n"].map(String::from);
        assert_eq!(stops_on_lines(list.into_iter().cycle().take(60)), None);
    }

    #[test]
    fn ordinary_varied_text_is_never_stopped() {
        // A long answer of pseudo-random tokens from a 500-token vocabulary,
        // with the same short word (a newline, "the") coming back often.
        let mut state = 12345u32;
        let answer = (0..2_000).map(|i| {
            state = state.wrapping_mul(1_103_515_245).wrapping_add(12_345);
            if i % 7 == 0 { 1 } else { (state >> 16) as i32 % 500 }
        });
        assert_eq!(first_stop(answer), None);
    }

    #[test]
    fn a_short_repeated_phrase_is_not_a_loop() {
        // "no, no, no" then on with the answer.
        let answer = [5, 6, 5, 6, 5, 6].into_iter().chain(30..200);
        assert_eq!(first_stop(answer), None);
    }
}
