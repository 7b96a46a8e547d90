//! A small Server-Sent Events parser: bytes in, events out.
//!
//! Follows the WHATWG event-stream rules that matter to LLM APIs: `event:` and
//! `data:` fields (several `data:` lines join with `\n`), comment lines starting
//! with `:`, `\n`, `\r\n` and lone `\r` line endings, a leading byte-order mark,
//! and frames split across arbitrary chunk boundaries, including inside a
//! multi-byte UTF-8 character or between a `\r` and its `\n`.

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct SseEvent {
    /// The `event:` field; empty when the frame had none (the spec's "message").
    pub event: String,
    /// The `data:` lines joined with `\n`.
    pub data: String,
}

/// Incremental parser: feed chunks with [`SseParser::push`], then call
/// [`SseParser::finish`] at the end of the body.
#[derive(Debug, Default)]
pub(crate) struct SseParser {
    /// Bytes not yet split into lines.
    buf: Vec<u8>,
    /// How far `buf` has been searched for a line ending.
    scanned: usize,
    /// The event being built.
    event: String,
    data: String,
    has_data: bool,
    /// Whether the start of the stream (and a possible BOM) is still ahead.
    at_start: bool,
}

impl SseParser {
    /// A parser at the start of a stream.
    pub(crate) fn new() -> Self {
        Self { at_start: true, ..Self::default() }
    }

    /// Feeds one chunk; returns the events it completed, in order.
    pub(crate) fn push(&mut self, chunk: &[u8]) -> Vec<SseEvent> {
        self.buf.extend_from_slice(chunk);
        if self.at_start {
            if self.buf.len() < 3 && b"\xEF\xBB\xBF".starts_with(&self.buf) {
                return Vec::new();
            }
            if self.buf.starts_with(b"\xEF\xBB\xBF") {
                self.buf.drain(..3);
            }
            self.at_start = false;
        }
        let mut out = Vec::new();
        let mut start = 0;
        let mut i = self.scanned;
        while i < self.buf.len() {
            match self.buf[i] {
                b'\n' => {
                    self.take_line(start, i, &mut out);
                    start = i + 1;
                }
                b'\r' => {
                    // A `\r` at the very end may be the first half of `\r\n`.
                    if i + 1 == self.buf.len() {
                        break;
                    }
                    self.take_line(start, i, &mut out);
                    start = if self.buf[i + 1] == b'\n' { i + 2 } else { i + 1 };
                    i = start;
                    continue;
                }
                _ => {}
            }
            i += 1;
        }
        self.buf.drain(..start);
        self.scanned = i - start;
        out
    }

    /// Ends the stream: a final event whose blank line never came is still
    /// dispatched, but an unterminated last line is dropped (the body was cut
    /// inside it).
    pub(crate) fn finish(&mut self) -> Option<SseEvent> {
        let mut out = Vec::new();
        if self.buf.ends_with(b"\r") {
            // A lone `\r` ends a line; only `\r\n` was still possible.
            self.take_line(0, self.buf.len() - 1, &mut out);
        }
        self.buf.clear();
        self.scanned = 0;
        out.pop().or_else(|| self.dispatch())
    }

    fn take_line(&mut self, start: usize, end: usize, out: &mut Vec<SseEvent>) {
        let line = String::from_utf8_lossy(&self.buf[start..end]).into_owned();
        if line.is_empty() {
            out.extend(self.dispatch());
            return;
        }
        if line.starts_with(':') {
            return;
        }
        let (field, value) = match line.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (line.as_str(), ""),
        };
        match field {
            "event" => value.clone_into(&mut self.event),
            "data" => {
                if self.has_data {
                    self.data.push('\n');
                }
                self.data.push_str(value);
                self.has_data = true;
            }
            _ => {} // `id`, `retry` and unknown fields do not matter here.
        }
    }

    fn dispatch(&mut self) -> Option<SseEvent> {
        let event = std::mem::take(&mut self.event);
        if !std::mem::take(&mut self.has_data) {
            return None;
        }
        Some(SseEvent { event, data: std::mem::take(&mut self.data) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(event: &str, data: &str) -> SseEvent {
        SseEvent { event: event.into(), data: data.into() }
    }

    fn parse_in_chunks(input: &[u8], chunk: usize) -> Vec<SseEvent> {
        let mut parser = SseParser::new();
        let mut out = Vec::new();
        for piece in input.chunks(chunk.max(1)) {
            out.extend(parser.push(piece));
        }
        out.extend(parser.finish());
        out
    }

    const SAMPLE: &str = "event: message_start\ndata: {\"a\":1}\n\n: keep-alive comment\n\nevent: delta\ndata: line one\ndata: line two\n\ndata: é漢🦀\n\n";

    fn sample_events() -> Vec<SseEvent> {
        vec![ev("message_start", "{\"a\":1}"), ev("delta", "line one\nline two"), ev("", "é漢🦀")]
    }

    #[test]
    fn events_and_multi_line_data_are_parsed() {
        assert_eq!(parse_in_chunks(SAMPLE.as_bytes(), usize::MAX), sample_events());
    }

    #[test]
    fn every_chunk_boundary_gives_the_same_events() {
        for size in 1..=SAMPLE.len() {
            assert_eq!(
                parse_in_chunks(SAMPLE.as_bytes(), size),
                sample_events(),
                "chunk size {size}"
            );
        }
    }

    #[test]
    fn crlf_and_lone_cr_line_endings_are_accepted_across_any_split() {
        let crlf = SAMPLE.replace('\n', "\r\n");
        let cr = SAMPLE.replace('\n', "\r");
        for input in [crlf, cr] {
            for size in 1..=input.len() {
                assert_eq!(
                    parse_in_chunks(input.as_bytes(), size),
                    sample_events(),
                    "size {size} in {input:?}"
                );
            }
        }
    }

    #[test]
    fn comments_and_unknown_fields_dispatch_nothing() {
        let out = parse_in_chunks(b": ping\n\nid: 7\nretry: 100\n\n:another\n\n", 3);
        assert!(out.is_empty(), "{out:?}");
    }

    #[test]
    fn a_single_space_after_the_colon_is_stripped_but_no_more() {
        let out = parse_in_chunks(b"data:tight\n\ndata:  two spaces\n\n", 4);
        assert_eq!(out, vec![ev("", "tight"), ev("", " two spaces")]);
    }

    #[test]
    fn a_data_field_without_colon_is_an_empty_line_of_data() {
        let out = parse_in_chunks(b"data\ndata\n\n", 1);
        assert_eq!(out, vec![ev("", "\n")]);
    }

    #[test]
    fn event_name_does_not_leak_into_the_next_frame() {
        let out =
            parse_in_chunks(b"event: a\ndata: 1\n\ndata: 2\n\nevent: lonely\n\ndata: 3\n\n", 2);
        assert_eq!(out, vec![ev("a", "1"), ev("", "2"), ev("", "3")]);
    }

    #[test]
    fn a_leading_byte_order_mark_is_ignored_even_when_split() {
        let input = b"\xEF\xBB\xBFdata: x\n\n";
        for size in 1..=input.len() {
            assert_eq!(parse_in_chunks(input, size), vec![ev("", "x")], "size {size}");
        }
    }

    #[test]
    fn a_final_event_without_blank_line_is_dispatched_at_finish() {
        assert_eq!(parse_in_chunks(b"data: [DONE]\n", 5), vec![ev("", "[DONE]")]);
        assert_eq!(parse_in_chunks(b"data: [DONE]\r", 5), vec![ev("", "[DONE]")]);
    }

    #[test]
    fn an_unterminated_last_line_is_dropped_as_cut() {
        assert_eq!(parse_in_chunks(b"data: 1\n\ndata: {\"half", 4), vec![ev("", "1")]);
    }

    #[test]
    fn invalid_utf8_is_replaced_not_fatal() {
        let out = parse_in_chunks(b"data: a\xFFb\n\n", 1);
        assert_eq!(out, vec![ev("", "a\u{FFFD}b")]);
    }

    #[test]
    fn events_are_returned_as_soon_as_their_blank_line_arrives() {
        let mut parser = SseParser::new();
        assert!(parser.push(b"data: one\n").is_empty());
        assert_eq!(parser.push(b"\ndata: tw"), vec![ev("", "one")]);
        assert!(parser.push(b"o\n").is_empty());
        assert_eq!(parser.push(b"\n"), vec![ev("", "two")]);
        assert_eq!(parser.finish(), None);
    }

    #[test]
    fn a_long_line_in_many_small_chunks_is_assembled_once() {
        let payload = "x".repeat(100_000);
        let input = format!("data: {payload}\n\n");
        let out = parse_in_chunks(input.as_bytes(), 7);
        assert_eq!(out, vec![ev("", &payload)]);
    }
}
