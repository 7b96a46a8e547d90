//! Normal answers against the scripted server, in both wire formats,
//! streaming and not: text, tool-call round trips, and what goes on the wire.

mod common;

use common::{MODES, ask, config, run};
use ferroclaw_llm::WireFormat;
use ferroclaw_protocol::{
    ContentBlock, Message, ProviderEvent, Role, StopReason, ToolCall, ToolSpec, Usage,
};
use ferroclaw_testkit::{ScriptedServer, ServerOptions, Turn};
use serde_json::json;

#[tokio::test]
async fn a_text_answer_arrives_as_text_then_usage_then_end_turn() {
    for (wire, stream) in MODES {
        let server =
            ScriptedServer::start(vec![Turn::text("Hello there, friend").with_usage(12, 7).into()]);
        let outcome = run(config(&server, wire, stream), ask("hi")).await;
        let mode = format!("{wire:?} stream={stream}");
        assert!(outcome.error.is_none(), "{mode}: {:?}", outcome.error);
        assert_eq!(outcome.text(), "Hello there, friend", "{mode}");
        let tail = &outcome.events[outcome.events.len() - 2..];
        let usage = Usage { input_tokens: 12, output_tokens: 7, ..Usage::default() };
        assert_eq!(
            tail,
            [ProviderEvent::Usage(usage), ProviderEvent::Stop(StopReason::EndTurn)],
            "{mode}"
        );
        assert!(outcome.retries().is_empty(), "{mode}");
        let requests = server.requests();
        assert_eq!(requests.len(), 1, "{mode}");
        assert_eq!(requests[0].body["stream"], json!(stream), "{mode}");
        assert_eq!(requests[0].body["model"], json!("scripted-model"), "{mode}");
    }
}

#[tokio::test]
async fn a_tool_call_round_trip_sends_the_result_back_in_the_wire_format() {
    for (wire, stream) in MODES {
        let mode = format!("{wire:?} stream={stream}");
        let server = ScriptedServer::start(vec![
            Turn::tool("read", json!({"path": "a.txt"})).with_text("Let me look.").into(),
            Turn::text("It says hello.").into(),
        ]);
        let mut request = ask("what is in a.txt?");
        request.system = "You are terse.".into();
        request.tools = vec![ToolSpec {
            name: "read".into(),
            description: "Reads a file".into(),
            input_schema: json!({"type": "object", "properties": {"path": {"type": "string"}}}),
        }]
        .into();
        let first = run(config(&server, wire, stream), request.clone()).await;
        assert!(first.error.is_none(), "{mode}: {:?}", first.error);
        assert_eq!(first.stop(), Some(&StopReason::ToolUse), "{mode}");
        let Some(call) = first.events.iter().find_map(|e| match e {
            ProviderEvent::ToolCall { call, parse_error: None } => Some(call.clone()),
            _ => None,
        }) else {
            panic!("{mode}: no tool call in {:?}", first.events);
        };
        assert_eq!(
            (call.name.as_str(), &call.input),
            ("read", &json!({"path": "a.txt"})),
            "{mode}"
        );
        assert!(
            first.events.contains(&ProviderEvent::ToolCallStarted {
                id: call.id.clone(),
                name: "read".into()
            }),
            "{mode}"
        );

        std::sync::Arc::make_mut(&mut request.messages).push(Message {
            role: Role::Assistant,
            content: vec![ContentBlock::text(first.text()), ContentBlock::ToolCall(call.clone())],
        });
        std::sync::Arc::make_mut(&mut request.messages).push(Message {
            role: Role::User,
            content: vec![ContentBlock::tool_result(&call.id, "hello", false)],
        });
        let second = run(config(&server, wire, stream), request).await;
        assert_eq!(second.text(), "It says hello.", "{mode}");

        let sent = &server.requests()[1].body;
        match wire {
            WireFormat::Anthropic => {
                assert_eq!(sent["system"][0]["text"], json!("You are terse."), "{mode}");
                assert_eq!(
                    sent["messages"][1]["content"][1],
                    json!({"type": "tool_use", "id": call.id, "name": "read", "input": {"path": "a.txt"}}),
                    "{mode}"
                );
                let result = &sent["messages"][2]["content"][0];
                assert_eq!(result["type"], json!("tool_result"), "{mode}");
                assert_eq!(result["tool_use_id"], json!(call.id), "{mode}");
                assert_eq!(result["content"], json!([{"type": "text", "text": "hello"}]), "{mode}");
                assert_eq!(result["is_error"], json!(false), "{mode}");
            }
            WireFormat::OpenAi => {
                assert_eq!(
                    sent["messages"][0],
                    json!({"role": "system", "content": "You are terse."})
                );
                let assistant = &sent["messages"][2];
                assert_eq!(assistant["content"], json!("Let me look."), "{mode}");
                assert_eq!(
                    assistant["tool_calls"],
                    json!([{"id": call.id, "type": "function", "function": {"name": "read", "arguments": "{\"path\":\"a.txt\"}"}}]),
                    "{mode}"
                );
                assert_eq!(
                    sent["messages"][3],
                    json!({"role": "tool", "tool_call_id": call.id, "content": "hello"}),
                    "{mode}"
                );
            }
        }
    }
}

#[tokio::test]
async fn openai_servers_repeating_id_and_name_and_always_sending_usage_are_understood() {
    let options = ServerOptions {
        openai_repeat_id_and_name: true,
        openai_usage_always: true,
        ..ServerOptions::default()
    };
    let server = ScriptedServer::start_with(
        vec![Turn::tool("grep", json!({"pattern": "fn main"})).into()],
        options,
    );
    let outcome = run(config(&server, WireFormat::OpenAi, true), ask("find main")).await;
    assert!(outcome.error.is_none(), "{:?}", outcome.error);
    let calls: Vec<&ToolCall> = outcome
        .events
        .iter()
        .filter_map(|e| match e {
            ProviderEvent::ToolCall { call, .. } => Some(call),
            _ => None,
        })
        .collect();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].name, "grep");
    assert_eq!(calls[0].input, json!({"pattern": "fn main"}));
    let started = outcome
        .events
        .iter()
        .filter(|e| matches!(e, ProviderEvent::ToolCallStarted { .. }))
        .count();
    assert_eq!(started, 1);
    assert_eq!(outcome.stop(), Some(&StopReason::ToolUse));
}

#[tokio::test]
async fn anthropic_requests_carry_the_key_version_and_configured_headers() {
    let server = ScriptedServer::start(vec![Turn::text("ok").into()]);
    let mut config = config(&server, WireFormat::Anthropic, true);
    config.base_url.push('/');
    config.headers = vec![("x-team".into(), "blue".into())];
    let outcome = run(config, ask("hi")).await;
    assert!(outcome.error.is_none(), "{:?}", outcome.error);
    let request = &server.requests()[0];
    assert_eq!((request.method.as_str(), request.path.as_str()), ("POST", "/v1/messages"));
    assert_eq!(request.header("x-api-key"), Some("sk-test-key"));
    assert_eq!(request.header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(request.header("content-type"), Some("application/json"));
    assert_eq!(request.header("x-team"), Some("blue"));
    assert_eq!(request.header("authorization"), None);
}

#[tokio::test]
async fn openai_requests_carry_a_bearer_key_only_when_one_is_set() {
    let server = ScriptedServer::start(vec![Turn::text("ok").into(), Turn::text("ok").into()]);
    let outcome = run(config(&server, WireFormat::OpenAi, true), ask("hi")).await;
    assert!(outcome.error.is_none(), "{:?}", outcome.error);
    let mut keyless = config(&server, WireFormat::OpenAi, true);
    keyless.api_key = None;
    let outcome = run(keyless, ask("hi")).await;
    assert!(outcome.error.is_none(), "{:?}", outcome.error);
    let requests = server.requests();
    assert_eq!(requests[0].path, "/v1/chat/completions");
    assert_eq!(requests[0].header("authorization"), Some("Bearer sk-test-key"));
    assert_eq!(requests[0].body["stream_options"], json!({"include_usage": true}));
    assert_eq!(requests[1].header("authorization"), None);
    assert_eq!(requests[1].header("x-api-key"), None);
}
