//! Property tests (proptest, bounded) for tool-call extraction from a local
//! model's text: however the output is cut into pieces, the splitter never
//! panics, loses no text outside calls, and gives the same calls.
//! Builds without the llama engine (`--no-default-features`).

use ferroclaw_local::toolcall::{
    CALL_CLOSE, CALL_OPEN, CallSplitter, Segment, parse_call, render_call,
};
use proptest::prelude::*;

const CASES: u32 = 600;

/// Model-like output: text, tags, partial tags, JSON bits, multi-byte characters.
fn output() -> impl Strategy<Value = String> {
    proptest::collection::vec(
        prop_oneof![
            Just(CALL_OPEN.to_string()),
            Just(CALL_CLOSE.to_string()),
            Just("<tool_".to_string()),
            Just("</tool".to_string()),
            Just("<".to_string()),
            Just("{\"name\": \"read\", \"arguments\": {\"path\": \"a\"}}".to_string()),
            Just("{\"name\": 1}".to_string()),
            Just("\"arguments\": \"{\\\"x\\\": 1}\"".to_string()),
            Just("é".to_string()),
            Just("日本".to_string()),
            Just("🦀".to_string()),
            ".{0,12}",
        ],
        0..30,
    )
    .prop_map(|parts| parts.concat())
}

/// Splits `text` at the char boundaries picked by `cuts`, feeds the pieces.
fn split(text: &str, cuts: &[usize]) -> (Vec<Segment>, Result<Option<Segment>, String>) {
    let mut splitter = CallSplitter::new();
    let mut segments = Vec::new();
    let mut rest = text;
    for &cut in cuts {
        let mut at = cut.min(rest.len());
        while !rest.is_char_boundary(at) {
            at -= 1;
        }
        let (piece, tail) = rest.split_at(at);
        segments.extend(splitter.push(piece));
        rest = tail;
    }
    segments.extend(splitter.push(rest));
    let end = splitter.finish();
    (segments, end)
}

/// The calls among `segments`, and all text joined.
fn calls_and_text(segments: &[Segment]) -> (Vec<String>, String) {
    let mut calls = Vec::new();
    let mut text = String::new();
    for s in segments {
        match s {
            Segment::Call(body) => calls.push(body.clone()),
            Segment::Text(t) => text.push_str(t),
        }
    }
    (calls, text)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: CASES, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn splitting_never_panics_and_chunking_gives_the_same_calls(
        text in output(),
        cuts in proptest::collection::vec(0usize..24, 0..12),
    ) {
        let (whole, whole_end) = split(&text, &[]);
        let (parts, parts_end) = split(&text, &cuts);
        let (whole_calls, _) = calls_and_text(&whole);
        let (part_calls, _) = calls_and_text(&parts);
        prop_assert_eq!(whole_calls, part_calls);
        prop_assert_eq!(whole_end.is_ok(), parts_end.is_ok());
        for body in calls_and_text(&parts).0 {
            let _ = parse_call("id".to_string(), &body);
        }
    }

    #[test]
    fn a_rendered_call_parses_back(name in "[a-z_]{1,12}", key in "[a-z]{1,8}", value in ".{0,20}") {
        let call = ferroclaw_protocol::ToolCall {
            id: "c1".to_string(),
            name,
            input: serde_json::json!({ key: value }),
        };
        let rendered = render_call(&call);
        let (segments, end) = split(&rendered, &[]);
        prop_assert!(end.is_ok());
        let (calls, _) = calls_and_text(&segments);
        prop_assert_eq!(calls.len(), 1);
        let back = parse_call("c1".to_string(), &calls[0]).unwrap();
        prop_assert_eq!(back, call);
    }
}
