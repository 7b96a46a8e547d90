//! The OpenAI Chat Completions wire format (`POST /v1/chat/completions`).

use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use serde_json::{Value, json};

use crate::{
    render::Exchange,
    reply::{argument_deltas, sse_data, text_deltas},
    script::Turn,
};

/// A first chunk whose data line is not JSON.
pub(crate) const MALFORMED_FRAME: &str = "data: {\"choices\": nope\n\n";

/// The full chunk stream for `turn`, ending in `data: [DONE]`.
pub(crate) fn stream(turn: &Turn, ex: &Exchange) -> Vec<Bytes> {
    let mut frames = opening(&turn.text, ex);
    let repeat = ex.options.openai_repeat_id_and_name;
    for (index, call) in turn.tool_calls.iter().enumerate() {
        let id = call.id_or_new("call");
        let full = |arguments: &str| json!({"index": index, "id": id, "type": "function", "function": {"name": call.name, "arguments": arguments}});
        frames.push(delta_chunk(ex, json!({"tool_calls": [full("")]})));
        for piece in argument_deltas(&call.arguments) {
            let entry = if repeat {
                full(&piece)
            } else {
                json!({"index": index, "function": {"arguments": piece}})
            };
            frames.push(delta_chunk(ex, json!({"tool_calls": [entry]})));
        }
    }
    let finish = json!([{"index": 0, "delta": {}, "finish_reason": finish_reason(turn)}]);
    frames.push(sse_data(&chunk(ex, finish)));
    if ex.include_usage || ex.options.openai_usage_always {
        let mut last = chunk(ex, json!([]));
        last["usage"] = usage(turn);
        frames.push(sse_data(&last));
    }
    frames.push(Bytes::from_static(b"data: [DONE]\n\n"));
    frames
}

/// The role chunk and the content deltas: a stream with no ending.
pub(crate) fn opening(text: &str, ex: &Exchange) -> Vec<Bytes> {
    let role = delta_chunk(ex, json!({"role": "assistant", "content": ""}));
    let deltas =
        text_deltas(text).into_iter().map(|piece| delta_chunk(ex, json!({"content": piece})));
    std::iter::once(role).chain(deltas).collect()
}

/// The non-streaming `chat.completion` for `turn`.
pub(crate) fn completion(turn: &Turn, ex: &Exchange) -> Value {
    let content = if turn.text.is_empty() { Value::Null } else { json!(turn.text) };
    let mut message = json!({"role": "assistant", "content": content});
    if !turn.tool_calls.is_empty() {
        let calls = turn.tool_calls.iter().map(|call| {
            let function = json!({"name": call.name, "arguments": call.arguments.to_string()});
            json!({"id": call.id_or_new("call"), "type": "function", "function": function})
        });
        message["tool_calls"] = calls.collect();
    }
    let choices = json!([{"index": 0, "message": message, "finish_reason": finish_reason(turn)}]);
    let mut body = json!({"id": id(ex), "object": "chat.completion", "created": now(), "model": ex.model, "choices": choices});
    body["usage"] = usage(turn);
    body
}

/// An error body `{"error":{"message","type","code"}}`.
pub(crate) fn error_body(status: u16, message: Option<&str>) -> Value {
    let (kind, code) = match status {
        401 => ("invalid_request_error", json!("invalid_api_key")),
        429 => ("requests", json!("rate_limit_exceeded")),
        500.. => ("server_error", Value::Null),
        _ => ("invalid_request_error", Value::Null),
    };
    let message =
        message.map_or_else(|| format!("scripted-llm: {kind} (HTTP {status})"), str::to_string);
    json!({"error": {"message": message, "type": kind, "code": code}})
}

/// A data chunk carrying an error object instead of choices.
pub(crate) fn error_frame() -> Bytes {
    sse_data(&error_body(503, Some("scripted-llm: the server had an error while streaming")))
}

/// The `GET /v1/models` list.
pub(crate) fn models() -> Value {
    let model = |id: &str| json!({"id": id, "object": "model", "created": 0, "owned_by": "ferroclaw-testkit"});
    json!({"object": "list", "data": [model("scripted-model"), model("scripted-model-large")]})
}

fn chunk(ex: &Exchange, choices: Value) -> Value {
    json!({"id": id(ex), "object": "chat.completion.chunk", "created": now(), "model": ex.model, "choices": choices})
}

fn delta_chunk(ex: &Exchange, delta: Value) -> Bytes {
    sse_data(&chunk(ex, json!([{"index": 0, "delta": delta, "finish_reason": null}])))
}

fn usage(turn: &Turn) -> Value {
    let total = turn.input_tokens + turn.output_tokens;
    json!({"prompt_tokens": turn.input_tokens, "completion_tokens": turn.output_tokens, "total_tokens": total})
}

fn finish_reason(turn: &Turn) -> &'static str {
    if turn.tool_calls.is_empty() { "stop" } else { "tool_calls" }
}

fn id(ex: &Exchange) -> String {
    format!("chatcmpl-scripted-{}", ex.seq)
}

fn now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |elapsed| elapsed.as_secs())
}
