//! The bound on one answer: a provider that ignores `max_tokens` (a stream
//! of deltas without end, a 50 MB JSON body) is cut at a size derived from
//! `max_tokens`, so memory and the stored session stay bounded by the
//! request, not by the server. The cut answer ends with
//! [`LlmError::TooLarge`](crate::LlmError), which the agent records beside
//! the partial text ("the answer was cut off") and reports as a failure.

/// Bytes of body (SSE framing and JSON included) allowed per token of
/// `max_tokens`. One token is one event on the OpenAI wire, ~250-350 bytes
/// with its `id`, `model` and `choices` framing; thinking tokens and
/// signatures stream as bytes too. 1 KiB leaves room for any honest stream.
const BODY_BYTES_PER_TOKEN: u64 = 1024;
/// Bytes of body allowed whatever `max_tokens` says (short answers, usage
/// events, error bodies).
const BODY_FLOOR_BYTES: u64 = 1024 * 1024;
/// Bytes of answer text allowed per token: a token is ~4 bytes of text on
/// average, rarely 16 (runs of spaces, long words).
const TEXT_BYTES_PER_TOKEN: u64 = 16;
/// Bytes of answer text allowed whatever `max_tokens` says.
const TEXT_FLOOR_BYTES: u64 = 64 * 1024;

/// How much one answer may hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct AnswerLimit {
    /// The request's `max_tokens`, named in the error.
    pub max_tokens: u32,
    /// Bytes of response body.
    pub body_bytes: u64,
    /// Bytes of answer text (the deltas the user sees).
    pub text_bytes: u64,
}

impl AnswerLimit {
    /// The bound for a request asking for at most `max_tokens`.
    pub(crate) fn for_max_tokens(max_tokens: u32) -> Self {
        let tokens = u64::from(max_tokens);
        Self {
            max_tokens,
            body_bytes: tokens.saturating_mul(BODY_BYTES_PER_TOKEN) + BODY_FLOOR_BYTES,
            text_bytes: tokens.saturating_mul(TEXT_BYTES_PER_TOKEN) + TEXT_FLOOR_BYTES,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bound_grows_with_max_tokens_above_a_floor() {
        let default = AnswerLimit::for_max_tokens(8192);
        assert_eq!(default.body_bytes, 9 * 1024 * 1024);
        assert_eq!(default.text_bytes, 192 * 1024);
        assert!(AnswerLimit::for_max_tokens(1).body_bytes > BODY_FLOOR_BYTES);
    }
}
