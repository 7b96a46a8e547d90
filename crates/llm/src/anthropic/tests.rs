//! Anthropic request bodies and stream assembly, from canned bytes.

use super::*;
use crate::WireFormat;
use crate::decode::tests::{chunked, decode_chunks};
use ferroclaw_protocol::{ContentBlock, Message, ResultPart, Role, ToolSpec};

fn spec(name: &str) -> ToolSpec {
    ToolSpec {
        name: name.into(),
        description: format!("{name} things"),
        input_schema: json!({"type": "object"}),
    }
}

fn call(id: &str, name: &str, input: Value) -> ContentBlock {
    ContentBlock::ToolCall(ToolCall { id: id.into(), name: name.into(), input })
}

#[test]
fn system_prompt_last_tool_and_last_block_carry_cache_breakpoints() {
    let mut req = ChatRequest::new("claude-x", vec![Message::user("hi")]);
    req.system = "be brief".into();
    req.tools = vec![spec("read"), spec("edit")].into();
    req.sampling.temperature = Some(0.5);
    let body = request_body(&req, true);
    assert_eq!(
        body["system"],
        json!([{"type": "text", "text": "be brief", "cache_control": {"type": "ephemeral"}}])
    );
    assert_eq!(body["tools"][0].get("cache_control"), None);
    assert_eq!(body["tools"][1]["cache_control"], json!({"type": "ephemeral"}));
    assert_eq!(body["tools"][1]["input_schema"], json!({"type": "object"}));
    assert_eq!(body["messages"][0]["content"][0]["cache_control"], json!({"type": "ephemeral"}));
    assert_eq!(body["temperature"], json!(0.5));
    assert_eq!(body["stream"], json!(true));
    assert_eq!(body["max_tokens"], json!(crate::DEFAULT_MAX_TOKENS));
}

#[test]
fn an_empty_system_prompt_and_no_tools_are_left_out() {
    let body = request_body(&ChatRequest::new("m", vec![Message::user("hi")]), false);
    assert_eq!(body.get("system"), None);
    assert_eq!(body.get("tools"), None);
    assert_eq!(body.get("temperature"), None);
    assert_eq!(body.get("stop_sequences"), None);
    assert_eq!(body["stream"], json!(false));
}

#[test]
fn sampling_options_go_out_as_anthropic_names_them_and_the_seed_is_dropped() {
    let mut req = ChatRequest::new("m", vec![Message::user("hi")]);
    req.sampling = ferroclaw_protocol::Sampling {
        temperature: Some(0.25),
        top_p: Some(0.5),
        seed: Some(42),
        stop: vec!["END".into(), "\n\n".into()],
    };
    let body = request_body(&req, false);
    assert_eq!(body["temperature"], json!(0.25));
    assert_eq!(body["stop_sequences"], json!(["END", "\n\n"]));
    assert_eq!((body.get("seed"), body.get("top_p")), (None, None), "{body}");
    req.sampling.temperature = None;
    assert_eq!(request_body(&req, false)["top_p"], json!(0.5));
}

#[test]
fn tool_calls_and_results_map_to_tool_use_and_tool_result_blocks() {
    let assistant = Message {
        role: Role::Assistant,
        content: vec![
            ContentBlock::text(""),
            call("c1", "read", json!({"path": "a"})),
            call("c2", "bash", Value::String("{broken".into())),
        ],
    };
    let results = Message {
        role: Role::User,
        content: vec![
            ContentBlock::ToolResult {
                tool_call_id: "c1".into(),
                content: vec![
                    ResultPart::Text { text: "pixels:".into() },
                    ResultPart::Image { media_type: "image/png".into(), data: "AAAA".into() },
                ],
                is_error: false,
            },
            ContentBlock::tool_result("c2", "bad arguments", true),
        ],
    };
    let req = ChatRequest::new("m", vec![Message::user("go"), assistant, results]);
    let body = request_body(&req, true);
    assert_eq!(
        body["messages"][1],
        json!({"role": "assistant", "content": [
            {"type": "tool_use", "id": "c1", "name": "read", "input": {"path": "a"}},
            {"type": "tool_use", "id": "c2", "name": "bash", "input": {}},
        ]})
    );
    assert_eq!(
        body["messages"][2]["content"][0],
        json!({"type": "tool_result", "tool_use_id": "c1", "is_error": false, "content": [
            {"type": "text", "text": "pixels:"},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}},
        ]})
    );
    assert_eq!(body["messages"][2]["content"][1]["is_error"], json!(true));
    assert_eq!(body["messages"][2]["content"][1]["tool_use_id"], json!("c2"));
}

#[test]
fn user_images_become_base64_image_blocks() {
    let m = Message {
        role: Role::User,
        content: vec![
            ContentBlock::Image { media_type: "image/jpeg".into(), data: "Zm9v".into() },
            ContentBlock::text("what is this?"),
        ],
    };
    let body = request_body(&ChatRequest::new("m", vec![m]), true);
    assert_eq!(
        body["messages"][0]["content"][0],
        json!({"type": "image", "source": {"type": "base64", "media_type": "image/jpeg", "data": "Zm9v"}})
    );
}

const TOOL_STREAM: &str = "event: message_start\n\
data: {\"type\":\"message_start\",\"message\":{\"id\":\"m1\",\"usage\":{\"input_tokens\":12,\"cache_read_input_tokens\":100,\"cache_creation_input_tokens\":7,\"output_tokens\":1}}}\n\n\
event: ping\ndata: {\"type\": \"ping\"}\n\n\
event: content_block_start\n\
data: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n\
event: content_block_delta\n\
data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Let me \"}}\n\n\
event: content_block_delta\n\
data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"look.\"}}\n\n\
event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n\
event: content_block_start\n\
data: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_1\",\"name\":\"read\",\"input\":{}}}\n\n\
event: content_block_delta\n\
data: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"\"}}\n\n\
event: content_block_delta\n\
data: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"pa\"}}\n\n\
event: content_block_delta\n\
data: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"th\\\": \\\"src/\"}}\n\n\
event: content_block_delta\n\
data: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"main.rs\\\"}\"}}\n\n\
event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":1}\n\n\
event: content_block_start\n\
data: {\"type\":\"content_block_start\",\"index\":2,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_2\",\"name\":\"list\",\"input\":{}}}\n\n\
event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":2}\n\n\
event: message_delta\n\
data: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\"},\"usage\":{\"output_tokens\":42}}\n\n\
event: brand_new_event\ndata: {\"type\":\"brand_new_event\"}\n\n\
event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n";

fn tool_stream_events() -> Vec<ProviderEvent> {
    vec![
        ProviderEvent::TextDelta("Let me ".into()),
        ProviderEvent::TextDelta("look.".into()),
        ProviderEvent::ToolCallStarted { id: "toolu_1".into(), name: "read".into() },
        ProviderEvent::ToolCall {
            call: ToolCall {
                id: "toolu_1".into(),
                name: "read".into(),
                input: json!({"path": "src/main.rs"}),
            },
            parse_error: None,
        },
        ProviderEvent::ToolCallStarted { id: "toolu_2".into(), name: "list".into() },
        ProviderEvent::ToolCall {
            call: ToolCall { id: "toolu_2".into(), name: "list".into(), input: json!({}) },
            parse_error: None,
        },
        ProviderEvent::Usage(Usage {
            input_tokens: 12,
            output_tokens: 42,
            cache_read_tokens: 100,
            cache_write_tokens: 7,
        }),
        ProviderEvent::Stop(StopReason::ToolUse),
    ]
}

#[tokio::test]
async fn text_and_a_tool_call_streamed_in_pieces_assemble_at_any_chunking() {
    for size in [1, 2, 3, 7, 64, 1000, TOOL_STREAM.len()] {
        let (events, err) = decode_chunks(WireFormat::Anthropic, chunked(TOOL_STREAM, size)).await;
        assert_eq!(err, None, "chunk size {size}");
        assert_eq!(events, tool_stream_events(), "chunk size {size}");
    }
}

#[tokio::test]
async fn crlf_framing_decodes_the_same() {
    let crlf = TOOL_STREAM.replace('\n', "\r\n");
    let (events, err) = decode_chunks(WireFormat::Anthropic, chunked(&crlf, 5)).await;
    assert_eq!(err, None);
    assert_eq!(events, tool_stream_events());
}

#[tokio::test]
async fn invalid_tool_json_yields_the_raw_text_and_a_parse_error() {
    let body = "event: content_block_start\n\
data: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"tool_use\",\"id\":\"t\",\"name\":\"edit\",\"input\":{}}}\n\n\
event: content_block_delta\n\
data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"a\\\": tru\"}}\n\n\
event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n\
event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n";
    let (events, err) = decode_chunks(WireFormat::Anthropic, chunked(body, 11)).await;
    assert_eq!(err, None);
    let Some(ProviderEvent::ToolCall { call, parse_error }) = events.get(1) else {
        panic!("no tool call in {events:?}");
    };
    assert_eq!(call.input, Value::String("{\"a\": tru".into()));
    assert!(parse_error.as_deref().is_some_and(|e| e.contains("not valid JSON")));
    assert_eq!(events.last(), Some(&ProviderEvent::Stop(StopReason::ToolUse)));
}

#[tokio::test]
async fn an_error_event_becomes_an_api_error_with_type_and_message() {
    let body = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":3}}}\n\n\
event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n";
    let (events, err) = decode_chunks(WireFormat::Anthropic, chunked(body, 4)).await;
    assert!(events.is_empty());
    let err = err.unwrap_or(DecodeError::Incomplete);
    assert!(err.is_transient());
    assert_eq!(
        err,
        DecodeError::Api { kind: "overloaded_error".into(), message: "Overloaded".into() }
    );
}

#[tokio::test]
async fn a_stream_cut_before_message_stop_is_incomplete() {
    let cut = &TOOL_STREAM[..TOOL_STREAM.find("event: message_delta").unwrap_or(0)];
    let (events, err) = decode_chunks(WireFormat::Anthropic, chunked(cut, 50)).await;
    assert_eq!(err, Some(DecodeError::Incomplete));
    assert_eq!(events.len(), 6, "content before the cut still arrives: {events:?}");
}

#[test]
fn a_full_message_decodes_to_the_same_event_sequence() {
    let message = json!({
        "id": "m1", "type": "message", "role": "assistant",
        "content": [
            {"type": "text", "text": "Let me look."},
            {"type": "tool_use", "id": "toolu_1", "name": "read", "input": {"path": "src/main.rs"}},
        ],
        "stop_reason": "tool_use",
        "usage": {"input_tokens": 12, "output_tokens": 42, "cache_read_input_tokens": 100, "cache_creation_input_tokens": 7},
    });
    let events = parse_response(&message).unwrap_or_default();
    let mut expected = tool_stream_events();
    expected.drain(4..6);
    expected[0] = ProviderEvent::TextDelta("Let me look.".into());
    expected.remove(1);
    assert_eq!(events, expected);
}

#[test]
fn an_error_body_decodes_to_an_api_error() {
    let body =
        json!({"type": "error", "error": {"type": "invalid_request_error", "message": "bad"}});
    assert_eq!(
        parse_response(&body),
        Err(DecodeError::Api { kind: "invalid_request_error".into(), message: "bad".into() })
    );
}

#[tokio::test]
async fn an_event_field_of_the_wrong_type_is_malformed_naming_its_path() {
    let body = "event: content_block_start\n\
data: {\"type\":\"content_block_start\",\"index\":\"zero\",\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n";
    let (_, err) = decode_chunks(WireFormat::Anthropic, chunked(body, 9)).await;
    let Some(DecodeError::Malformed { detail, .. }) = err else {
        panic!("not malformed: {err:?}");
    };
    assert!(detail.contains("index: invalid type: string \"zero\", expected u64"), "{detail}");
}

#[tokio::test]
async fn unknown_events_blocks_deltas_and_fields_are_skipped() {
    let body = "event: content_block_start\n\
data: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"server_tool_use\",\"id\":\"s1\"}}\n\n\
event: content_block_delta\n\
data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"citations_delta\",\"citation\":{}}}\n\n\
event: content_block_start\n\
data: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"text\",\"text\":\"hi\",\"citations\":[]}}\n\n\
event: future_event\ndata: {\"type\":\"future_event\",\"what\":1}\n\n\
event: message_stop\ndata: {\"type\":\"message_stop\",\"extra\":true}\n\n";
    let (events, err) = decode_chunks(WireFormat::Anthropic, chunked(body, 11)).await;
    assert_eq!(err, None);
    assert_eq!(
        events,
        vec![ProviderEvent::TextDelta("hi".into()), ProviderEvent::Stop(StopReason::EndTurn)]
    );
}
