//! The scripted server, seen from the wire.

mod raw_http;

use std::time::{Duration, Instant};

use ferroclaw_testkit::{Fault, ScriptedServer, ScriptedToolCall, ServerOptions, Step, Turn};
use raw_http::{RawResponse, post, request};
use serde_json::{Value, json};

const ANTHROPIC_STREAM: &str = r#"{"model":"claude-x","stream":true,"messages":[]}"#;
const OPENAI_STREAM: &str = r#"{"model":"gpt-x","stream":true,"messages":[]}"#;
const OPENAI_STREAM_USAGE: &str =
    r#"{"model":"gpt-x","stream":true,"stream_options":{"include_usage":true}}"#;

fn messages(server: &ScriptedServer, body: &str) -> RawResponse {
    post(&server.url(), "/v1/messages", body)
}

fn chat(server: &ScriptedServer, body: &str) -> RawResponse {
    post(&server.url(), "/v1/chat/completions", body)
}

fn read_turn() -> Turn {
    Turn::tool("read", json!({"path": "a.txt", "lines": [1, 2]}))
        .with_text("Let me look at it")
        .with_usage(42, 7)
}

/// Reassembles OpenAI tool calls from stream chunks as a client must: (id, name, arguments).
fn openai_tool_calls(data: &[Value]) -> Vec<(String, String, String)> {
    let mut calls: Vec<(String, String, String)> = Vec::new();
    for delta in
        data.iter().filter_map(|chunk| chunk["choices"][0]["delta"]["tool_calls"].as_array())
    {
        let call = &delta[0];
        let index = call["index"].as_u64().unwrap() as usize;
        if calls.len() <= index {
            calls.push((
                call["id"].as_str().unwrap().into(),
                call["function"]["name"].as_str().unwrap().into(),
                String::new(),
            ));
        }
        calls[index].2.push_str(call["function"]["arguments"].as_str().unwrap());
    }
    calls
}

#[test]
fn anthropic_stream_emits_events_in_api_order_and_reassembles_text_and_tool_arguments() {
    let turn = read_turn();
    let server = ScriptedServer::start(vec![turn.clone().into()]);
    let response = messages(&server, ANTHROPIC_STREAM);
    assert_eq!(response.status, 200);
    assert_eq!(response.header("content-type"), Some("text/event-stream"));
    let names: Vec<String> = response.events().into_iter().map(|(name, _)| name.unwrap()).collect();
    assert_eq!(names.first().map(String::as_str), Some("message_start"));
    assert!(names.contains(&"ping".to_string()));
    assert_eq!(names[names.len() - 2..], ["message_delta", "message_stop"]);
    let data = response.data();
    assert_eq!(data[0]["message"]["usage"]["input_tokens"], 42);
    assert_eq!(data[0]["message"]["model"], "claude-x");
    let deltas = |kind: &str, field: &str| -> Vec<String> {
        let matching = data
            .iter()
            .filter(|d| d["type"] == "content_block_delta" && d["delta"]["type"] == kind);
        matching.map(|d| d["delta"][field].as_str().unwrap().to_string()).collect()
    };
    let text = deltas("text_delta", "text");
    assert!(text.len() >= 3, "text should stream in several deltas: {text:?}");
    assert_eq!(text.concat(), "Let me look at it");
    let arguments = deltas("input_json_delta", "partial_json");
    assert!(arguments.len() >= 3, "arguments should stream in several deltas: {arguments:?}");
    assert_eq!(
        serde_json::from_str::<Value>(&arguments.concat()).unwrap(),
        turn.tool_calls[0].arguments
    );
    let tool_block = data.iter().find(|d| d["content_block"]["type"] == "tool_use").unwrap();
    assert_eq!(tool_block["content_block"]["id"], turn.tool_calls[0].id);
    assert_eq!(tool_block["content_block"]["name"], "read");
    assert_eq!(tool_block["content_block"]["input"], json!({}));
    let end = &data[data.len() - 2];
    assert_eq!(
        (&end["delta"]["stop_reason"], &end["usage"]["output_tokens"]),
        (&json!("tool_use"), &json!(7))
    );
}

#[test]
fn anthropic_non_streaming_answer_is_the_full_message() {
    let server = ScriptedServer::start(vec![read_turn().into(), Turn::text("Done.").into()]);
    let response = messages(&server, r#"{"model":"claude-x"}"#);
    assert_eq!(response.header("content-length"), Some(response.body.len().to_string().as_str()));
    let tool = response.json();
    assert_eq!(
        (&tool["type"], &tool["role"], &tool["stop_reason"]),
        (&json!("message"), &json!("assistant"), &json!("tool_use"))
    );
    assert_eq!(tool["content"][0], json!({"type": "text", "text": "Let me look at it"}));
    assert_eq!(tool["content"][1]["input"], json!({"path": "a.txt", "lines": [1, 2]}));
    assert_eq!(tool["usage"], json!({"input_tokens": 42, "output_tokens": 7}));
    let text = messages(&server, r#"{"model":"claude-x"}"#).json();
    assert_eq!(text["stop_reason"], "end_turn");
    assert_eq!(text["usage"], json!({"input_tokens": 10, "output_tokens": 5}));
}

#[test]
fn openai_stream_splits_content_and_tool_arguments_then_finishes_with_done() {
    let calls = vec![
        ScriptedToolCall::new("read", json!({"path": "a.txt"})),
        ScriptedToolCall::new("ls", json!({})),
    ];
    let server = ScriptedServer::start(vec![
        Turn::tools(calls.clone()).with_text("Reading both files now").into(),
    ]);
    let response = chat(&server, OPENAI_STREAM);
    assert_eq!(response.events().last().unwrap().1, "[DONE]");
    let data = response.data();
    assert!(data.iter().all(|chunk| chunk["object"] == "chat.completion.chunk"));
    let content: Vec<&str> =
        data.iter().filter_map(|c| c["choices"][0]["delta"]["content"].as_str()).collect();
    assert!(content.len() >= 4);
    assert_eq!(content.concat(), "Reading both files now");
    let assembled = openai_tool_calls(&data);
    for (call, (id, name, arguments)) in calls.iter().zip(&assembled) {
        assert_eq!((id, name), (&call.id, &call.name));
        assert_eq!(serde_json::from_str::<Value>(arguments).unwrap(), call.arguments);
    }
    let later: Vec<&Value> = data
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["tool_calls"].get(0))
        .filter(|c| c.get("id").is_none())
        .collect();
    assert!(
        later.len() >= 4 && later.iter().all(|c| c["function"].get("name").is_none()),
        "later chunks carry only arguments"
    );
    assert_eq!(data.last().unwrap()["choices"][0]["finish_reason"], "tool_calls");
    assert!(data.iter().all(|c| c.get("usage").is_none()), "no usage without include_usage");
}

#[test]
fn openai_stream_ends_with_a_usage_chunk_when_include_usage_is_requested() {
    let server = ScriptedServer::start(vec![Turn::text("hi there you").with_usage(3, 2).into()]);
    let data = chat(&server, OPENAI_STREAM_USAGE).data();
    let last = data.last().unwrap();
    assert_eq!(last["choices"], json!([]));
    assert_eq!(
        last["usage"],
        json!({"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5})
    );
    assert_eq!(data[data.len() - 2]["choices"][0]["finish_reason"], "stop");
}

#[test]
fn openai_variant_options_repeat_id_and_name_and_always_send_usage() {
    let options = ServerOptions {
        openai_repeat_id_and_name: true,
        openai_usage_always: true,
        ..Default::default()
    };
    let server = ScriptedServer::start_with(
        vec![Turn::tool("read", json!({"path": "a.txt"})).into()],
        options,
    );
    let data = chat(&server, OPENAI_STREAM).data();
    let calls: Vec<&Value> =
        data.iter().filter_map(|c| c["choices"][0]["delta"]["tool_calls"].get(0)).collect();
    assert!(
        calls.len() >= 4
            && calls.iter().all(|c| c["id"].is_string() && c["function"]["name"] == "read")
    );
    assert_eq!(data.last().unwrap()["usage"]["prompt_tokens"], 10);
}

#[test]
fn openai_non_streaming_answer_is_a_chat_completion() {
    let server =
        ScriptedServer::start(vec![read_turn().into(), Turn::tool("ls", json!({})).into()]);
    let body = chat(&server, r#"{"model":"gpt-x"}"#).json();
    assert_eq!(body["object"], "chat.completion");
    let choice = &body["choices"][0];
    assert_eq!(
        (&choice["finish_reason"], &choice["message"]["content"]),
        (&json!("tool_calls"), &json!("Let me look at it"))
    );
    let call = &choice["message"]["tool_calls"][0];
    assert_eq!(call["type"], "function");
    let arguments: Value =
        serde_json::from_str(call["function"]["arguments"].as_str().unwrap()).unwrap();
    assert_eq!(arguments, json!({"path": "a.txt", "lines": [1, 2]}));
    assert_eq!(body["usage"]["completion_tokens"], 7);
    assert_eq!(
        chat(&server, r#"{"model":"gpt-x"}"#).json()["choices"][0]["message"]["content"],
        Value::Null
    );
}

#[test]
fn status_fault_sends_retry_after_and_an_error_body_in_the_endpoint_format() {
    let limited = Fault::Status { status: 429, body: None, retry_after: Some(3) };
    let overloaded = Fault::Status { status: 529, body: None, retry_after: None };
    let server =
        ScriptedServer::start(vec![limited.clone().into(), overloaded.into(), limited.into()]);
    let response = messages(&server, ANTHROPIC_STREAM);
    assert_eq!((response.status, response.header("retry-after")), (429, Some("3")));
    assert_eq!(response.json()["error"]["type"], "rate_limit_error");
    assert_eq!(messages(&server, ANTHROPIC_STREAM).json()["error"]["type"], "overloaded_error");
    let response = chat(&server, OPENAI_STREAM);
    assert_eq!((response.status, response.header("retry-after")), (429, Some("3")));
    assert_eq!(response.json()["error"]["code"], "rate_limit_exceeded");
}

#[test]
fn cut_mid_stream_sends_some_text_then_drops_the_connection_without_closing_events() {
    let server =
        ScriptedServer::start(vec![Fault::CutMidStream.into(), Fault::CutMidStream.into()]);
    let response = messages(&server, ANTHROPIC_STREAM);
    assert!(!response.complete, "the body must end abruptly: {response:?}");
    assert!(response.body.contains("text_delta") && !response.body.contains("message_stop"));
    let response = chat(&server, OPENAI_STREAM);
    assert!(
        !response.complete
            && response.body.contains("content")
            && !response.body.contains("[DONE]")
    );
    assert!(server.requests().iter().all(|r| r.finished_at.is_none()));
}

#[test]
fn malformed_sse_and_stream_error_event_arrive_as_200_event_streams() {
    let steps = vec![
        Fault::MalformedSse.into(),
        Fault::MalformedSse.into(),
        Fault::StreamErrorEvent.into(),
        Fault::StreamErrorEvent.into(),
    ];
    let server = ScriptedServer::start(steps);
    let malformed = messages(&server, ANTHROPIC_STREAM);
    assert_eq!(
        (malformed.status, malformed.header("content-type")),
        (200, Some("text/event-stream"))
    );
    assert!(serde_json::from_str::<Value>(&malformed.events()[0].1).is_err());
    assert!(serde_json::from_str::<Value>(&chat(&server, OPENAI_STREAM).events()[0].1).is_err());
    let error = messages(&server, ANTHROPIC_STREAM);
    let (name, data) = &error.events()[0];
    assert_eq!((error.status, name.as_deref()), (200, Some("error")));
    assert_eq!(serde_json::from_str::<Value>(data).unwrap()["error"]["type"], "overloaded_error");
    assert!(chat(&server, OPENAI_STREAM).data()[0]["error"]["message"].is_string());
}

#[test]
fn slow_first_byte_waits_then_answers_normally() {
    let server = ScriptedServer::start(vec![
        Fault::SlowFirstByte { delay_ms: 300, then: Turn::text("late but fine") }.into(),
    ]);
    let started = Instant::now();
    let response = messages(&server, r#"{"model":"m"}"#);
    assert!(started.elapsed() >= Duration::from_millis(300));
    assert_eq!(response.json()["content"][0]["text"], "late but fine");
}

#[test]
fn stall_streams_text_then_keeps_the_connection_open_and_silent() {
    let server =
        ScriptedServer::start(vec![Fault::Stall { after_text: "Thinking about it".into() }.into()]);
    let response = request(
        &server.url(),
        "POST",
        "/v1/chat/completions",
        &[],
        OPENAI_STREAM,
        Duration::from_millis(500),
    );
    assert!(response.timed_out && !response.complete);
    let data = response.data();
    let content: Vec<&str> =
        data.iter().filter_map(|c| c["choices"][0]["delta"]["content"].as_str()).collect();
    assert_eq!(content.concat(), "Thinking about it");
}

#[test]
fn requests_are_recorded_in_order_with_lowercase_headers_body_and_finish_time() {
    let server = ScriptedServer::start(vec![Turn::text("one two three").into()]);
    let before = Instant::now();
    request(
        &server.url(),
        "POST",
        "/v1/messages",
        &[("X-Api-Key", "secret")],
        ANTHROPIC_STREAM,
        Duration::from_secs(5),
    );
    request(&server.url(), "GET", "/v1/models", &[], "", Duration::from_secs(5));
    let recorded = server.requests();
    assert_eq!(recorded.len(), 2);
    let first = &recorded[0];
    assert_eq!((first.method.as_str(), first.path.as_str()), ("POST", "/v1/messages"));
    assert!(first.headers.iter().any(|(name, value)| name == "x-api-key" && value == "secret"));
    assert_eq!(first.header("X-API-KEY"), Some("secret"));
    assert_eq!(first.body["model"], "claude-x");
    let finished = first.finished_at.expect("finished_at is set");
    assert!(before <= first.received_at && first.received_at <= finished);
    assert_eq!((recorded[1].method.as_str(), &recorded[1].body), ("GET", &Value::Null));
    assert!(recorded[1].finished_at.is_some(), "content-length bodies are stamped too");
}

#[test]
fn an_exhausted_script_answers_500_unless_repeat_cycles_it() {
    let server = ScriptedServer::start(vec![Turn::text("only").into()]);
    assert_eq!(messages(&server, r#"{"model":"m"}"#).status, 200);
    let exhausted = chat(&server, r#"{"model":"m"}"#);
    assert_eq!(exhausted.status, 500);
    assert_eq!(
        exhausted.json()["error"]["message"],
        "scripted-llm: script exhausted after 1 requests"
    );
    let options = ServerOptions { repeat: true, ..Default::default() };
    let server =
        ScriptedServer::start_with(vec![Turn::text("a").into(), Turn::text("b").into()], options);
    let texts: Vec<Value> = (0..3)
        .map(|_| messages(&server, r#"{"model":"m"}"#).json()["content"][0]["text"].clone())
        .collect();
    assert_eq!(texts, [json!("a"), json!("b"), json!("a")]);
}

#[test]
fn a_reply_can_echo_the_last_user_message_of_each_request() {
    let options = ServerOptions { repeat: true, ..Default::default() };
    let echo = Turn::text(format!("echo: {}", ferroclaw_testkit::LAST_USER));
    let server = ScriptedServer::start_with(vec![echo.into()], options);
    let anthropic = r#"{"model":"m","messages":[{"role":"user","content":"first"},
        {"role":"assistant","content":"x"},
        {"role":"user","content":[{"type":"text","text":"second"}]}]}"#;
    let openai = r#"{"model":"m","messages":[{"role":"user","content":"third"}]}"#;
    assert_eq!(messages(&server, anthropic).json()["content"][0]["text"], "echo: second");
    assert_eq!(chat(&server, openai).json()["choices"][0]["message"]["content"], "echo: third");
}

#[test]
fn a_body_that_is_not_json_gets_400_and_consumes_no_step() {
    let server = ScriptedServer::start(vec![Turn::text("still here").into()]);
    let bad = messages(&server, "{not json");
    assert_eq!(bad.status, 400);
    assert!(bad.json()["error"]["message"].as_str().unwrap().contains("not JSON"));
    assert_eq!(server.requests()[0].body, json!("{not json"));
    assert_eq!(messages(&server, r#"{"model":"m"}"#).json()["content"][0]["text"], "still here");
}

#[test]
fn models_lists_models_in_openai_format() {
    let server = ScriptedServer::start(vec![]);
    let models =
        request(&server.url(), "GET", "/v1/models", &[], "", Duration::from_secs(5)).json();
    assert_eq!(models["object"], "list");
    assert!(models["data"].as_array().unwrap().iter().all(|m| m["object"] == "model"));
    assert_eq!(server.openai_base_url(), format!("{}/v1", server.url()));
}

#[tokio::test]
async fn works_under_tokio_test_and_drop_does_not_hang_on_a_stalled_connection() {
    let server = ScriptedServer::start(vec![Fault::Stall { after_text: "wait".into() }.into()]);
    let url = server.url();
    let stalled = std::thread::spawn(move || {
        request(&url, "POST", "/v1/messages", &[], ANTHROPIC_STREAM, Duration::from_secs(30))
    });
    while server.requests().is_empty() {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let started = Instant::now();
    drop(server);
    assert!(started.elapsed() < Duration::from_secs(2));
    assert!(!stalled.join().unwrap().timed_out, "the stalled connection is closed by the shutdown");
}

#[test]
fn script_json_uses_kind_and_fault_tags_with_optional_turn_fields() {
    let script = r#"[
        {"kind": "reply", "text": "Let me look.", "tool_calls": [{"name": "read", "arguments": {"path": "a.txt"}}]},
        {"kind": "fault", "fault": "status", "status": 429, "retry_after": 1},
        {"kind": "fault", "fault": "slow_first_byte", "delay_ms": 300, "then": {"text": "Slow."}},
        {"kind": "fault", "fault": "cut_mid_stream"},
        {"kind": "fault", "fault": "stall", "after_text": "Thinking"}
    ]"#;
    let steps: Vec<Step> = serde_json::from_str(script).unwrap();
    let Step::Reply(turn) = &steps[0] else { panic!("reply expected") };
    assert_eq!((turn.input_tokens, turn.tool_calls[0].id.as_str()), (10, ""));
    assert_eq!(steps[3], Step::Fault(Fault::CutMidStream));
    let round_trip: Vec<Step> =
        serde_json::from_value(serde_json::to_value(&steps).unwrap()).unwrap();
    assert_eq!(round_trip, steps);
    assert!(serde_json::from_str::<Step>(r#"{"kind": "reply", "txt": "typo"}"#).is_err());
}
