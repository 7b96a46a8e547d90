//! Chat Completions request bodies and chunk assembly, from canned bytes.

use super::*;
use crate::WireFormat;
use crate::decode::str_field;
use crate::decode::tests::{chunked, decode_chunks};
use ferroclaw_protocol::{ContentBlock, Message, ResultPart, Role, ToolSpec};
use serde_json::json;

fn sse(chunks: &[Value]) -> String {
    let mut body: String = chunks.iter().map(|c| format!("data: {c}\n\n")).collect();
    body.push_str("data: [DONE]\n\n");
    body
}

async fn decode(body: &str) -> Vec<ProviderEvent> {
    let mut first = None;
    for size in [1, 5, 13, body.len()] {
        let (events, err) = decode_chunks(WireFormat::OpenAi, chunked(body, size)).await;
        assert_eq!(err, None, "chunk size {size}");
        match &first {
            None => first = Some(events),
            Some(f) => assert_eq!(&events, f, "chunk size {size} differs"),
        }
    }
    first.unwrap_or_default()
}

fn started(id: &str, name: &str) -> ProviderEvent {
    ProviderEvent::ToolCallStarted { id: id.into(), name: name.into() }
}

fn tool_call(id: &str, name: &str, input: Value) -> ProviderEvent {
    ProviderEvent::ToolCall {
        call: ToolCall { id: id.into(), name: name.into(), input },
        parse_error: None,
    }
}

fn text(t: &str) -> ProviderEvent {
    ProviderEvent::TextDelta(t.into())
}

#[test]
fn system_comes_first_and_plain_user_text_is_a_string() {
    let mut req = ChatRequest::new("gpt", vec![Message::user("hi")]);
    req.system = "be brief".into();
    req.tools = vec![ToolSpec {
        name: "read".into(),
        description: "reads".into(),
        input_schema: json!({"type": "object"}),
    }]
    .into();
    let body = request_body(&req, true, "max_tokens");
    assert_eq!(
        body["messages"],
        json!([{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}])
    );
    assert_eq!(
        body["tools"],
        json!([{"type": "function", "function": {"name": "read", "description": "reads", "parameters": {"type": "object"}}}])
    );
    assert_eq!(body["stream_options"], json!({"include_usage": true}));
    assert_eq!(body["max_tokens"], json!(crate::DEFAULT_MAX_TOKENS));
}

#[test]
fn no_tools_no_system_and_no_stream_options_when_not_streaming() {
    let body = request_body(&ChatRequest::new("m", vec![Message::user("hi")]), false, "max_tokens");
    assert_eq!(body.get("tools"), None);
    assert_eq!(body.get("stream_options"), None);
    assert_eq!(body["messages"].as_array().map(Vec::len), Some(1));
    assert_eq!(body["stream"], json!(false));
}

#[test]
fn official_openai_gets_max_completion_tokens_others_max_tokens() {
    assert_eq!(max_tokens_field("https://api.openai.com/v1"), "max_completion_tokens");
    assert_eq!(max_tokens_field("http://localhost:11434/v1"), "max_tokens");
    let body = request_body(&ChatRequest::new("m", vec![]), true, "max_completion_tokens");
    assert_eq!(body.get("max_tokens"), None);
    assert!(body.get("max_completion_tokens").is_some());
}

#[test]
fn assistant_tool_calls_carry_empty_string_content_and_json_string_arguments() {
    let assistant = Message {
        role: Role::Assistant,
        content: vec![
            ContentBlock::ToolCall(ToolCall {
                id: "c1".into(),
                name: "read".into(),
                input: json!({"path": "a"}),
            }),
            ContentBlock::ToolCall(ToolCall {
                id: "c2".into(),
                name: "bash".into(),
                input: Value::String("{broken".into()),
            }),
        ],
    };
    let body = request_body(&ChatRequest::new("m", vec![assistant]), true, "max_tokens");
    assert_eq!(
        body["messages"][0],
        json!({"role": "assistant", "content": "", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "read", "arguments": "{\"path\":\"a\"}"}},
            {"id": "c2", "type": "function", "function": {"name": "bash", "arguments": "{broken"}},
        ]})
    );
}

#[test]
fn each_tool_result_is_a_tool_message_and_its_images_follow_in_a_user_message() {
    let results = Message {
        role: Role::User,
        content: vec![
            ContentBlock::tool_result("c1", "file contents", false),
            ContentBlock::ToolResult {
                tool_call_id: "c2".into(),
                content: vec![
                    ResultPart::Text { text: "screenshot".into() },
                    ResultPart::Image { media_type: "image/png".into(), data: "AAAA".into() },
                ],
                is_error: false,
            },
        ],
    };
    let body = request_body(&ChatRequest::new("m", vec![results]), true, "max_tokens");
    let messages = body["messages"].as_array().cloned().unwrap_or_default();
    assert_eq!(messages.len(), 3, "{messages:?}");
    assert_eq!(
        messages[0],
        json!({"role": "tool", "tool_call_id": "c1", "content": "file contents"})
    );
    assert_eq!(messages[1]["role"], json!("tool"));
    assert_eq!(messages[1]["tool_call_id"], json!("c2"));
    assert!(str_field(&messages[1], "content").starts_with("screenshot"));
    assert_eq!(messages[2]["role"], json!("user"));
    assert_eq!(
        messages[2]["content"][1],
        json!({"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}})
    );
}

#[test]
fn user_images_become_data_url_content_parts() {
    let m = Message {
        role: Role::User,
        content: vec![
            ContentBlock::text("what is this?"),
            ContentBlock::Image { media_type: "image/jpeg".into(), data: "Zm9v".into() },
        ],
    };
    let body = request_body(&ChatRequest::new("m", vec![m]), true, "max_tokens");
    assert_eq!(
        body["messages"][0]["content"],
        json!([
            {"type": "text", "text": "what is this?"},
            {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,Zm9v"}},
        ])
    );
}

#[tokio::test]
async fn text_then_a_usage_only_chunk_gives_text_usage_and_end_turn() {
    let body = sse(&[
        json!({"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": null}], "usage": null}),
        json!({"choices": [{"index": 0, "delta": {"reasoning_content": "hmm"}, "finish_reason": null}]}),
        json!({"choices": [{"index": 0, "delta": {"content": "Hel"}, "finish_reason": null}]}),
        json!({"choices": [{"index": 0, "delta": {"content": "lo"}, "finish_reason": null}]}),
        json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}),
        json!({"choices": [], "usage": {"prompt_tokens": 120, "completion_tokens": 5, "prompt_tokens_details": {"cached_tokens": 100}}}),
    ]);
    let usage =
        Usage { input_tokens: 20, output_tokens: 5, cache_read_tokens: 100, cache_write_tokens: 0 };
    assert_eq!(
        decode(&body).await,
        vec![
            text("Hel"),
            text("lo"),
            ProviderEvent::Usage(usage),
            ProviderEvent::Stop(StopReason::EndTurn)
        ]
    );
}

#[tokio::test]
async fn parallel_tool_calls_assemble_by_index() {
    let body = sse(&[
        json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "call_a", "type": "function", "function": {"name": "read", "arguments": ""}}]}}]}),
        json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": "{\"pa"}}]}}]}),
        json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 1, "id": "call_b", "type": "function", "function": {"name": "list", "arguments": "{}"}}]}}]}),
        json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": "th\": \"x\"}"}}]}}]}),
        json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}),
    ]);
    assert_eq!(
        decode(&body).await,
        vec![
            started("call_a", "read"),
            started("call_b", "list"),
            tool_call("call_a", "read", json!({"path": "x"})),
            tool_call("call_b", "list", json!({})),
            ProviderEvent::Stop(StopReason::ToolUse),
        ]
    );
}

#[tokio::test]
async fn id_and_name_repeated_in_every_chunk_are_not_duplicated() {
    let piece = |args: &str| json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "c1", "type": "function", "function": {"name": "grep", "arguments": args}}]}}]});
    let body = sse(&[
        piece("{\"pattern\""),
        piece(": \"fn main\"}"),
        json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}], "usage": {"prompt_tokens": 9, "completion_tokens": 3}}),
    ]);
    assert_eq!(
        decode(&body).await,
        vec![
            started("c1", "grep"),
            tool_call("c1", "grep", json!({"pattern": "fn main"})),
            ProviderEvent::Usage(Usage { input_tokens: 9, output_tokens: 3, ..Usage::default() }),
            ProviderEvent::Stop(StopReason::ToolUse),
        ]
    );
}

#[tokio::test]
async fn calls_without_index_match_by_id_or_continue_the_latest() {
    let body = sse(&[
        json!({"choices": [{"delta": {"tool_calls": [{"id": "a", "function": {"name": "read", "arguments": "{\"p\":"}}]}}]}),
        json!({"choices": [{"delta": {"tool_calls": [{"function": {"arguments": "1}"}}]}}]}),
        json!({"choices": [{"delta": {"tool_calls": [{"id": "b", "function": {"name": "read", "arguments": "{\"p\":2}"}}]}}]}),
        json!({"choices": [{"delta": {}, "finish_reason": "tool_calls"}]}),
    ]);
    let events = decode(&body).await;
    assert_eq!(events[2], tool_call("a", "read", json!({"p": 1})));
    assert_eq!(events[3], tool_call("b", "read", json!({"p": 2})));
}

#[tokio::test]
async fn complete_calls_reusing_index_zero_with_new_ids_stay_separate() {
    let body = sse(&[
        json!({"choices": [{"delta": {"tool_calls": [{"index": 0, "id": "a", "function": {"name": "read", "arguments": "{}"}}]}}]}),
        json!({"choices": [{"delta": {"tool_calls": [{"index": 0, "id": "b", "function": {"name": "list", "arguments": "{}"}}]}}]}),
        json!({"choices": [{"delta": {}, "finish_reason": "tool_calls"}]}),
    ]);
    let events = decode(&body).await;
    assert_eq!(events[2], tool_call("a", "read", json!({})));
    assert_eq!(events[3], tool_call("b", "list", json!({})));
}

#[tokio::test]
async fn usage_in_every_chunk_is_reported_once_with_the_final_numbers() {
    let body = sse(&[
        json!({"choices": [{"delta": {"content": "a"}}], "usage": {"prompt_tokens": 10, "completion_tokens": 1}}),
        json!({"choices": [{"delta": {"content": "b"}}], "usage": {"prompt_tokens": 10, "completion_tokens": 2}}),
        json!({"choices": [{"delta": {}, "finish_reason": "length"}], "usage": {"prompt_tokens": 10, "completion_tokens": 3}}),
    ]);
    let events = decode(&body).await;
    assert_eq!(events.iter().filter(|e| matches!(e, ProviderEvent::Usage(_))).count(), 1);
    assert_eq!(
        &events[2..],
        [
            ProviderEvent::Usage(Usage { input_tokens: 10, output_tokens: 3, ..Usage::default() }),
            ProviderEvent::Stop(StopReason::MaxTokens),
        ]
    );
}

#[tokio::test]
async fn a_body_ending_cleanly_after_finish_reason_needs_no_done() {
    let body =
        "data: {\"choices\":[{\"delta\":{\"content\":\"hi\"},\"finish_reason\":\"stop\"}]}\n\n";
    let (events, err) = decode_chunks(WireFormat::OpenAi, chunked(body, 3)).await;
    assert_eq!(err, None);
    assert_eq!(events, vec![text("hi"), ProviderEvent::Stop(StopReason::EndTurn)]);
}

#[tokio::test]
async fn a_body_ending_before_finish_reason_is_incomplete() {
    let body = "data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\n";
    let (events, err) = decode_chunks(WireFormat::OpenAi, chunked(body, 3)).await;
    assert_eq!(events, vec![text("hi")]);
    assert_eq!(err, Some(DecodeError::Incomplete));
}

#[tokio::test]
async fn an_error_chunk_becomes_an_api_error() {
    let body = "data: {\"error\":{\"message\":\"Rate limit reached\",\"type\":\"rate_limit_exceeded\",\"code\":429}}\n\n";
    let (_, err) = decode_chunks(WireFormat::OpenAi, chunked(body, 8)).await;
    let err = err.unwrap_or(DecodeError::Incomplete);
    assert!(err.is_transient());
    assert_eq!(
        err,
        DecodeError::Api {
            kind: "rate_limit_exceeded".into(),
            message: "Rate limit reached".into()
        }
    );
}

#[test]
fn a_full_completion_decodes_to_text_calls_usage_and_stop() {
    let completion = json!({
        "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
            "role": "assistant", "content": "Reading.",
            "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "read", "arguments": "{\"path\":\"a\"}"}}],
        }}],
        "usage": {"prompt_tokens": 7, "completion_tokens": 2},
    });
    assert_eq!(
        parse_response(&completion).unwrap_or_default(),
        vec![
            text("Reading."),
            started("c1", "read"),
            tool_call("c1", "read", json!({"path": "a"})),
            ProviderEvent::Usage(Usage { input_tokens: 7, output_tokens: 2, ..Usage::default() }),
            ProviderEvent::Stop(StopReason::ToolUse),
        ]
    );
}

#[test]
fn a_completion_with_null_content_and_stop_is_an_empty_end_turn() {
    let completion = json!({"choices": [{"finish_reason": "stop", "message": {"content": null}}]});
    assert_eq!(
        parse_response(&completion).unwrap_or_default(),
        vec![ProviderEvent::Stop(StopReason::EndTurn)]
    );
}

#[test]
fn a_whole_turn_is_written_as_the_wire_expects_with_text_escaped() {
    let mut req = ChatRequest::new(
        "m",
        vec![
            Message::user("say \"hi\"\n\ttwice"),
            Message {
                role: Role::Assistant,
                content: vec![
                    ContentBlock::text("looking"),
                    ContentBlock::text(" now"),
                    ContentBlock::ToolCall(ToolCall {
                        id: "c1".into(),
                        name: "read".into(),
                        input: json!({"path": "a \"b\""}),
                    }),
                ],
            },
            Message {
                role: Role::User,
                content: vec![
                    ContentBlock::ToolResult {
                        tool_call_id: "c1".into(),
                        content: vec![
                            ResultPart::Text { text: "line\u{1}one".into() },
                            ResultPart::Text { text: "two".into() },
                        ],
                        is_error: false,
                    },
                    ContentBlock::text("and"),
                    ContentBlock::text("more"),
                ],
            },
        ],
    );
    req.system = "sys".into();
    req.sampling.temperature = Some(0.5);
    let body = request_body(&req, false, "max_tokens");
    assert_eq!(
        body,
        json!({
            "model": "m",
            "messages": [
                {"role": "system", "content": "sys"},
                {"role": "user", "content": "say \"hi\"\n\ttwice"},
                {"role": "assistant", "content": "looking now", "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "read", "arguments": "{\"path\":\"a \\\"b\\\"\"}"}},
                ]},
                {"role": "tool", "tool_call_id": "c1", "content": "line\u{1}one\ntwo"},
                {"role": "user", "content": "and\nmore"},
            ],
            "max_tokens": crate::DEFAULT_MAX_TOKENS,
            "temperature": 0.5,
            "stream": false,
        })
    );
}

/// The detail of a malformed-answer error, or `""`.
fn malformed_detail(err: Option<DecodeError>) -> String {
    match err {
        Some(DecodeError::Malformed { detail, .. }) => detail,
        other => format!("not malformed: {other:?}"),
    }
}

#[tokio::test]
async fn a_chunk_field_of_the_wrong_type_is_malformed_naming_its_path() {
    let chunk = json!({"choices": [{"delta": {"tool_calls": [{"index": "first", "id": "c1"}]}}]});
    let (_, err) = decode_chunks(WireFormat::OpenAi, chunked(&sse(&[chunk]), 7)).await;
    let detail = malformed_detail(err);
    assert!(detail.contains("choices[0].delta.tool_calls[0].index: invalid type"), "{detail}");
}

#[tokio::test]
async fn unknown_fields_and_content_parts_are_tolerated() {
    let body = sse(&[
        json!({"id": "x", "system_fingerprint": "fp", "choices": [{"index": 0, "logprobs": null,
               "delta": {"content": [{"type": "thinking", "thinking": "hm"}], "refusal": null}}]}),
        json!({"choices": [{"delta": {"content": "ok", "annotations": []}, "finish_reason": "stop"}]}),
    ]);
    assert_eq!(decode(&body).await, vec![text("ok"), ProviderEvent::Stop(StopReason::EndTurn)]);
}

#[test]
fn sampling_options_go_out_under_their_chat_completions_names() {
    let mut req = ChatRequest::new("m", vec![Message::user("hi")]);
    req.sampling = ferroclaw_protocol::Sampling {
        temperature: Some(0.25),
        top_p: Some(0.5),
        seed: Some(42),
        stop: vec!["END".into()],
    };
    let body = request_body(&req, false, "max_tokens");
    assert_eq!(
        (&body["temperature"], &body["top_p"], &body["seed"], &body["stop"]),
        (&json!(0.25), &json!(0.5), &json!(42), &json!(["END"]))
    );
    let plain = request_body(&ChatRequest::new("m", vec![]), false, "max_tokens");
    assert!(["temperature", "top_p", "seed", "stop"].iter().all(|k| plain.get(k).is_none()));
}
