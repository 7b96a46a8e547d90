//! The bound on one answer: a provider that ignores `max_tokens` (a stream
//! of deltas without end, a 50 MB JSON body) is cut at a size derived from
//! `max_tokens`, so memory and the stored session stay bounded by the
//! request, not by the server. The cut answer ends with
//! [`LlmError::TooLarge`](crate::LlmError), which the agent records beside
//! the partial text ("the answer was cut off") and reports as a failure.

/// The most tokens one answer may ask for. The largest output caps models
/// document today are 128,000 tokens (OpenAI's GPT-5 family; Anthropic's
/// Claude 3.7 Sonnet with its 128k-output beta); asking for more only buys a
/// looser bound on what a runaway provider may send. With it, one answer is
/// bounded by about 126 MiB of body and 2 MiB of text. A `max_tokens` in the
/// config above it is refused when the config is read; a request asking for
/// more from anywhere else (an MCP server's sampling request, a caller of
/// this crate) is sent with this many, and a warning says so
/// ([`bounded_max_tokens`]).
pub const MAX_TOKENS_CEILING: u32 = 128_000;

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

/// The `max_tokens` a request to `provider` is sent with: `asked`, at most
/// [`MAX_TOKENS_CEILING`] (with a warning when that cut it).
pub(crate) fn bounded_max_tokens(provider: &str, asked: u32) -> u32 {
    if asked <= MAX_TOKENS_CEILING {
        return asked;
    }
    tracing::warn!(
        provider,
        asked,
        "{provider}: max_tokens = {asked} is more than any model answers in one go; \
         asking for {MAX_TOKENS_CEILING} (the answer's bound follows from it)"
    );
    MAX_TOKENS_CEILING
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

    #[test]
    fn no_request_asks_for_more_than_the_ceiling_so_the_bound_stays_finite() {
        assert_eq!(bounded_max_tokens("p", 8192), 8192);
        assert_eq!(bounded_max_tokens("p", MAX_TOKENS_CEILING), MAX_TOKENS_CEILING);
        let absurd = bounded_max_tokens("p", 1_000_000_000);
        assert_eq!(absurd, MAX_TOKENS_CEILING);
        let limit = AnswerLimit::for_max_tokens(bounded_max_tokens("p", u32::MAX));
        assert!(limit.body_bytes <= 128 * 1024 * 1024, "{limit:?}");
        assert!(limit.text_bytes <= 2 * 1024 * 1024 + TEXT_FLOOR_BYTES, "{limit:?}");
    }
}
