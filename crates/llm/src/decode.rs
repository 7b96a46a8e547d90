//! Turning a provider's answer into [`ProviderEvent`]s: the SSE parser feeding
//! the wire format's assembler, the one-JSON-body (non-streaming) path, and
//! what can go wrong while decoding. No I/O here, so all of it is tested from
//! canned bytes.

use ferroclaw_protocol::ProviderEvent;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::sse::{SseEvent, SseParser};
use crate::{LlmError, WireFormat, anthropic, openai};

/// How much of an offending payload an error message quotes.
const SNIPPET_CHARS: usize = 200;

/// What can go wrong decoding an answer.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum DecodeError {
    /// A data line or body that is not the JSON we expect.
    Malformed { detail: String, snippet: String },
    /// The provider reported an error inside the answer.
    Api { kind: String, message: String },
    /// The body ended before the answer's terminal event.
    Incomplete,
}

impl DecodeError {
    /// A data line or body that failed to parse as JSON.
    pub(crate) fn bad_json(payload: &str, err: &serde_json::Error) -> Self {
        Self::Malformed {
            detail: format!("malformed JSON from the provider ({err})"),
            snippet: snippet(payload),
        }
    }

    /// Valid JSON whose field at a path is not what the wire type says
    /// (`choices[0].delta.content: invalid type: integer `1`, expected a string`).
    pub(crate) fn shape(
        payload: &Value,
        err: &serde_path_to_error::Error<serde_json::Error>,
    ) -> Self {
        Self::Malformed {
            detail: format!("unexpected response from the provider ({err})"),
            snippet: snippet(&payload.to_string()),
        }
    }

    /// Valid JSON that does not have the shape we expect.
    pub(crate) fn unexpected(what: &str, payload: &Value) -> Self {
        Self::Malformed {
            detail: format!("unexpected response: {what}"),
            snippet: snippet(&payload.to_string()),
        }
    }

    /// Whether trying the request again may help (before any output).
    pub(crate) fn is_transient(&self) -> bool {
        match self {
            Self::Malformed { .. } => false,
            Self::Api { kind, .. } => crate::retry::is_transient_kind(kind),
            Self::Incomplete => true,
        }
    }

    /// The user-facing error, naming the provider.
    pub(crate) fn into_llm(self, provider: &str) -> LlmError {
        let provider = provider.to_string();
        match self {
            Self::Malformed { detail, snippet } => {
                LlmError::Stream { provider, message: format!("{detail}: {snippet}") }
            }
            Self::Api { kind, message } => LlmError::Api { provider, kind, message },
            Self::Incomplete => LlmError::Stream {
                provider,
                message: "stream ended before the answer was complete".into(),
            },
        }
    }
}

/// The first [`SNIPPET_CHARS`] characters of a payload, for error messages.
pub(crate) fn snippet(payload: &str) -> String {
    let mut chars = payload.char_indices();
    match chars.nth(SNIPPET_CHARS) {
        Some((cut, _)) => format!("{}…", &payload[..cut]),
        None => payload.to_string(),
    }
}

/// Tool-call arguments as the model streamed them: empty means `{}`; text
/// that is not JSON is kept verbatim as a string, with the parse error.
pub(crate) fn parse_arguments(raw: &str) -> (Value, Option<String>) {
    if raw.trim().is_empty() {
        return (Value::Object(Default::default()), None);
    }
    match serde_json::from_str(raw) {
        Ok(value) => (value, None),
        Err(err) => (
            Value::String(raw.to_string()),
            Some(format!("tool arguments are not valid JSON ({err}): {}", snippet(raw))),
        ),
    }
}

/// Reads a provider's JSON as its wire type `T` (serde's own checks and
/// messages, with the path of the field that is not what `T` says).
pub(crate) fn typed<T: DeserializeOwned>(value: &Value) -> Result<T, DecodeError> {
    serde_path_to_error::deserialize(value).map_err(|e| DecodeError::shape(value, &e))
}

/// A string field of a JSON object, or `""`.
pub(crate) fn str_field<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or("")
}

/// The assembler of one wire format's streamed events.
enum Assembler {
    Anthropic(anthropic::StreamAssembler),
    OpenAi(openai::StreamAssembler),
}

/// SSE bytes in, provider events out, for one answer.
pub(crate) struct SseDecoder {
    parser: SseParser,
    assembler: Assembler,
}

impl SseDecoder {
    /// A decoder for an answer in `wire` format.
    pub(crate) fn new(wire: WireFormat) -> Self {
        let assembler = match wire {
            WireFormat::Anthropic => Assembler::Anthropic(anthropic::StreamAssembler::default()),
            WireFormat::OpenAi => Assembler::OpenAi(openai::StreamAssembler::default()),
        };
        Self { parser: SseParser::new(), assembler }
    }

    /// Feeds one body chunk; returns the events it completed.
    pub(crate) fn push(&mut self, chunk: &[u8]) -> Result<Vec<ProviderEvent>, DecodeError> {
        let mut out = Vec::new();
        for event in self.parser.push(chunk) {
            self.on_event(&event, &mut out)?;
        }
        Ok(out)
    }

    /// Ends the body; fails when the answer's terminal event never came.
    pub(crate) fn finish(&mut self) -> Result<Vec<ProviderEvent>, DecodeError> {
        let mut out = Vec::new();
        if let Some(event) = self.parser.finish() {
            self.on_event(&event, &mut out)?;
        }
        match &mut self.assembler {
            Assembler::Anthropic(a) => a.finish(&mut out)?,
            Assembler::OpenAi(a) => a.finish(&mut out)?,
        }
        Ok(out)
    }

    /// Whether the terminal event has been seen (the rest of the body can go).
    pub(crate) fn is_done(&self) -> bool {
        match &self.assembler {
            Assembler::Anthropic(a) => a.is_done(),
            Assembler::OpenAi(a) => a.is_done(),
        }
    }

    fn on_event(
        &mut self,
        event: &SseEvent,
        out: &mut Vec<ProviderEvent>,
    ) -> Result<(), DecodeError> {
        match &mut self.assembler {
            Assembler::Anthropic(a) => a.on_event(event, out),
            Assembler::OpenAi(a) => a.on_event(event, out),
        }
    }
}

/// Decodes a whole non-streaming response body.
pub(crate) fn parse_response(
    wire: WireFormat,
    body: &[u8],
) -> Result<Vec<ProviderEvent>, DecodeError> {
    let text = String::from_utf8_lossy(body);
    let value: Value = serde_json::from_str(&text).map_err(|e| DecodeError::bad_json(&text, &e))?;
    match wire {
        WireFormat::Anthropic => anthropic::parse_response(&value),
        WireFormat::OpenAi => openai::parse_response(&value),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use bytes::Bytes;
    use futures_util::{Stream, StreamExt, stream};

    /// Runs a stream of byte chunks through a decoder, as the HTTP layer does.
    pub(crate) async fn decode_chunks(
        wire: WireFormat,
        mut chunks: impl Stream<Item = Bytes> + Unpin,
    ) -> (Vec<ProviderEvent>, Option<DecodeError>) {
        let mut decoder = SseDecoder::new(wire);
        let mut events = Vec::new();
        while let Some(chunk) = chunks.next().await {
            match decoder.push(&chunk) {
                Ok(more) => events.extend(more),
                Err(e) => return (events, Some(e)),
            }
            if decoder.is_done() {
                return (events, None);
            }
        }
        match decoder.finish() {
            Ok(more) => {
                events.extend(more);
                (events, None)
            }
            Err(e) => (events, Some(e)),
        }
    }

    /// Splits a body into chunks of `size` bytes (cutting anywhere).
    pub(crate) fn chunked(body: &str, size: usize) -> impl Stream<Item = Bytes> + Unpin {
        let pieces: Vec<Bytes> =
            body.as_bytes().chunks(size.max(1)).map(Bytes::copy_from_slice).collect();
        stream::iter(pieces)
    }

    #[test]
    fn snippets_are_cut_at_a_character_boundary() {
        let long = "é".repeat(300);
        let s = snippet(&long);
        assert_eq!(s.chars().count(), SNIPPET_CHARS + 1);
        assert!(s.ends_with('…'));
        assert_eq!(snippet("short"), "short");
    }

    #[test]
    fn empty_arguments_mean_an_empty_object() {
        assert_eq!(parse_arguments("  "), (serde_json::json!({}), None));
    }

    #[test]
    fn invalid_arguments_are_kept_verbatim_with_the_parse_error() {
        let (input, err) = parse_arguments("{\"path\": ");
        assert_eq!(input, Value::String("{\"path\": ".into()));
        let err = err.unwrap_or_default();
        assert!(err.contains("not valid JSON") && err.contains("{\"path\": "), "{err}");
    }

    #[tokio::test]
    async fn malformed_json_in_a_data_line_is_an_error_quoting_the_line() {
        let body = "data: {\"choices\": [oops this is not json\n\n";
        let (events, err) = decode_chunks(WireFormat::OpenAi, chunked(body, 9)).await;
        assert!(events.is_empty());
        let err = err.map(|e| e.into_llm("groq").to_string()).unwrap_or_default();
        assert!(err.starts_with("groq: malformed JSON"), "{err}");
        assert!(err.contains("{\"choices\": [oops this is not json"), "{err}");
    }

    #[tokio::test]
    async fn a_body_that_stops_early_is_incomplete_not_a_clean_end() {
        for wire in [WireFormat::Anthropic, WireFormat::OpenAi] {
            let (_, err) = decode_chunks(wire, chunked("", 1)).await;
            assert_eq!(err, Some(DecodeError::Incomplete), "{wire:?}");
        }
        let err = DecodeError::Incomplete.into_llm("anthropic").to_string();
        assert_eq!(err, "anthropic: stream ended before the answer was complete");
    }

    #[test]
    fn a_non_json_body_is_malformed_with_a_snippet() {
        let err = parse_response(WireFormat::Anthropic, b"<html>bad gateway</html>");
        let Err(DecodeError::Malformed { snippet, .. }) = err else {
            panic!("expected malformed, got {err:?}");
        };
        assert_eq!(snippet, "<html>bad gateway</html>");
    }
}
