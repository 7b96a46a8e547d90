//! Property tests (proptest, bounded) for everything that parses what a
//! provider sends: the SSE parser, both wire formats' stream assembly, and
//! whole non-streaming bodies. Zero panics on any input; the SSE parser
//! gives the same events however the body is cut into chunks.

use proptest::prelude::*;
use serde_json::{Value, json};

use crate::WireFormat;
use crate::decode::{SseDecoder, parse_response};
use crate::sse::SseParser;

/// Cases per property: enough to find shallow crashes, cheap in CI.
const CASES: u32 = 150;

/// One plausible-but-hostile value for a JSON field.
fn field() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        "[a-z_]{0,12}".prop_map(Value::from),
        ".{0,40}".prop_map(Value::from),
        Just(json!([])),
        Just(json!({})),
        Just(json!(-1)),
        Just(json!(u64::MAX)),
    ]
}

/// An Anthropic stream event with random fields in plausible places.
fn anthropic_event() -> impl Strategy<Value = String> {
    let kinds = prop_oneof![
        Just("message_start"),
        Just("content_block_start"),
        Just("content_block_delta"),
        Just("content_block_stop"),
        Just("message_delta"),
        Just("message_stop"),
        Just("ping"),
        Just("error"),
    ];
    let deltas = prop_oneof![
        Just("text_delta"),
        Just("input_json_delta"),
        Just("thinking_delta"),
        Just("signature_delta"),
    ];
    let blocks = prop_oneof![Just("text"), Just("tool_use"), Just("thinking"), Just("other")];
    (kinds, deltas, blocks, field(), field(), field(), 0u64..4).prop_map(
        |(kind, delta, block, a, b, c, index)| {
            let v = json!({
                "type": kind,
                "index": index,
                "message": {"id": a, "usage": {"input_tokens": b, "output_tokens": c}},
                "content_block": {"type": block, "id": a, "name": b, "text": c, "input": {}},
                "delta": {"type": delta, "text": a, "partial_json": b, "thinking": c,
                          "stop_reason": a, "signature": b},
                "usage": {"output_tokens": c},
                "error": {"type": a, "message": b},
            });
            format!("event: {kind}\ndata: {v}\n\n")
        },
    )
}

/// An OpenAI chat-completions chunk with random fields in plausible places.
fn openai_event() -> impl Strategy<Value = String> {
    (field(), field(), field(), 0u64..4, any::<bool>(), any::<bool>()).prop_map(
        |(a, b, c, index, done, with_usage)| {
            if done {
                return "data: [DONE]\n\n".to_string();
            }
            let v = json!({
                "id": "x",
                "choices": [{
                    "index": 0,
                    "delta": {"content": a, "reasoning_content": b,
                              "tool_calls": [{"index": index, "id": c, "type": "function",
                                              "function": {"name": a, "arguments": b}}]},
                    "finish_reason": c,
                }],
                "usage": if with_usage { json!({"prompt_tokens": a, "completion_tokens": b}) } else { Value::Null },
                "error": if with_usage { Value::Null } else { json!({"message": c}) },
            });
            format!("data: {v}\n\n")
        },
    )
}

/// Feeds `body` to a decoder in chunks of `cut` bytes and finishes it.
fn decode_all(wire: WireFormat, body: &[u8], cut: usize) {
    let mut decoder = SseDecoder::new(wire);
    for chunk in body.chunks(cut.max(1)) {
        if decoder.push(chunk).is_err() {
            return;
        }
    }
    let _ = decoder.finish();
}

proptest! {
    #![proptest_config(ProptestConfig { cases: CASES, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn sse_parser_never_panics_and_chunking_does_not_change_the_events(
        body in proptest::collection::vec(any::<u8>(), 0..600),
        cut in 1usize..64,
    ) {
        let mut whole = SseParser::new();
        let mut expected = whole.push(&body);
        expected.extend(whole.finish());
        let mut parts = SseParser::new();
        let mut got = Vec::new();
        for chunk in body.chunks(cut) {
            got.extend(parts.push(chunk));
        }
        got.extend(parts.finish());
        prop_assert_eq!(format!("{expected:?}"), format!("{got:?}"));
    }

    #[test]
    fn sse_parser_handles_line_shaped_noise(
        lines in proptest::collection::vec(
            prop_oneof![
                Just("data: ".to_string()), Just(":comment".to_string()), Just("event:".to_string()),
                Just("\r".to_string()), Just("\n".to_string()), Just("\r\n".to_string()),
                Just("id: 1".to_string()), Just("retry: x".to_string()), ".{0,20}",
            ],
            0..60,
        ),
        cut in 1usize..16,
    ) {
        let body = lines.concat();
        let mut parser = SseParser::new();
        for chunk in body.as_bytes().chunks(cut) {
            parser.push(chunk);
        }
        parser.finish();
    }

    #[test]
    fn anthropic_stream_assembly_never_panics(
        events in proptest::collection::vec(anthropic_event(), 0..24),
        cut in 1usize..200,
    ) {
        decode_all(WireFormat::Anthropic, events.concat().as_bytes(), cut);
    }

    #[test]
    fn openai_stream_assembly_never_panics(
        events in proptest::collection::vec(openai_event(), 0..24),
        cut in 1usize..200,
    ) {
        decode_all(WireFormat::OpenAi, events.concat().as_bytes(), cut);
    }

    #[test]
    fn whole_bodies_never_panic(a in field(), b in field(), c in field(), bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
        let anthropic = json!({"content": [{"type": "tool_use", "id": a, "name": b, "input": c},
                                           {"type": "text", "text": a}],
                               "stop_reason": b, "usage": {"input_tokens": c}});
        let openai = json!({"choices": [{"message": {"content": a, "tool_calls": [
                               {"id": b, "function": {"name": c, "arguments": a}}]},
                            "finish_reason": b}], "usage": c});
        for wire in [WireFormat::Anthropic, WireFormat::OpenAi] {
            let _ = parse_response(wire, anthropic.to_string().as_bytes());
            let _ = parse_response(wire, openai.to_string().as_bytes());
            let _ = parse_response(wire, &bytes);
        }
    }
}
