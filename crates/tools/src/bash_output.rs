//! A command's output, bounded in memory: the start is kept, the end is kept
//! in a rolling window, the middle is counted. Rendered as lossy UTF-8 with a
//! marker that gives the total when something was cut.

/// Characters of output shown at most (Claude Code's Bash cuts at 30,000).
pub const MAX_OUTPUT_CHARS: usize = 30_000;
/// Characters kept from each end when output is cut.
const KEEP_CHARS: usize = MAX_OUTPUT_CHARS / 2;
/// Bytes kept from the start: enough for [`MAX_OUTPUT_CHARS`] of 4-byte characters.
const HEAD_BYTES: usize = MAX_OUTPUT_CHARS * 4;
/// Bytes kept from the end: enough for [`KEEP_CHARS`] of 4-byte characters.
const TAIL_BYTES: usize = KEEP_CHARS * 4;

/// Output captured so far.
#[derive(Debug, Default)]
pub(crate) struct Capture {
    head: Vec<u8>,
    tail: Vec<u8>,
    total: u64,
    background: bool,
}

impl Capture {
    /// Appends a chunk of output.
    pub(crate) fn push(&mut self, mut bytes: &[u8]) {
        self.total += bytes.len() as u64;
        let room = HEAD_BYTES.saturating_sub(self.head.len());
        if self.tail.is_empty() && room > 0 {
            let take = room.min(bytes.len());
            self.head.extend_from_slice(&bytes[..take]);
            bytes = &bytes[take..];
        }
        if !bytes.is_empty() {
            self.tail.extend_from_slice(bytes);
            if self.tail.len() > 2 * TAIL_BYTES {
                let excess = self.tail.len() - TAIL_BYTES;
                self.tail.drain(..excess);
            }
        }
    }

    /// Records that background processes still held the output open when
    /// the shell exited.
    pub(crate) fn note_background(&mut self) {
        self.background = true;
    }

    /// The output as text, cut in the middle when over [`MAX_OUTPUT_CHARS`].
    pub(crate) fn render(&self) -> String {
        let mut out = if self.tail.is_empty() {
            let text = String::from_utf8_lossy(&self.head);
            let chars = text.chars().count();
            if chars <= MAX_OUTPUT_CHARS {
                text.into_owned()
            } else {
                let head: String = text.chars().take(KEEP_CHARS).collect();
                let tail: String = text.chars().skip(chars - KEEP_CHARS).collect();
                format!(
                    "{head}\n\n[... output cut: {chars} characters in all; showing the first and last {KEEP_CHARS} ...]\n\n{tail}"
                )
            }
        } else {
            let head_text = String::from_utf8_lossy(&self.head);
            let head: String = head_text.chars().take(KEEP_CHARS).collect();
            let tail_text = String::from_utf8_lossy(&self.tail);
            let tail_chars = tail_text.chars().count();
            let tail: String =
                tail_text.chars().skip(tail_chars.saturating_sub(KEEP_CHARS)).collect();
            format!(
                "{head}\n\n[... output cut: {} bytes in all; showing the first and last {KEEP_CHARS} characters ...]\n\n{}",
                self.total,
                tail.trim_start_matches('\u{FFFD}')
            )
        };
        if self.background {
            if !out.is_empty() && !out.ends_with('\n') {
                out.push('\n');
            }
            out.push_str(
                "[background processes are still running; their later output is not captured]",
            );
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_output_is_kept_whole() {
        let mut c = Capture::default();
        c.push(b"hello ");
        c.push(b"world");
        assert_eq!(c.render(), "hello world");
    }

    #[test]
    fn long_output_keeps_head_and_tail_with_the_total() {
        let mut c = Capture::default();
        c.push(b"START");
        for _ in 0..100_000 {
            c.push(b"0123456789");
        }
        c.push(b"END");
        let text = c.render();
        assert!(text.starts_with("START"), "{}", &text[..20]);
        assert!(text.ends_with("END"));
        assert!(text.contains("1000008 bytes in all"), "marker missing");
        assert!(text.chars().count() < MAX_OUTPUT_CHARS + 200);
    }

    #[test]
    fn output_just_over_the_cap_is_cut_by_characters() {
        let mut c = Capture::default();
        c.push("é".repeat(MAX_OUTPUT_CHARS + 10).as_bytes());
        let text = c.render();
        assert!(
            text.contains(&format!("{} characters in all", MAX_OUTPUT_CHARS + 10)),
            "marker missing"
        );
    }

    #[test]
    fn invalid_utf8_is_replaced_not_refused() {
        let mut c = Capture::default();
        c.push(b"ok \xff\xfe done");
        assert_eq!(c.render(), "ok \u{FFFD}\u{FFFD} done");
    }
}
