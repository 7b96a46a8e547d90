//! The Anthropic Messages API wire format (`POST /v1/messages`).

use bytes::Bytes;
use serde_json::{Value, json};

use crate::{
    render::Exchange,
    reply::{argument_deltas, sse_event, text_deltas},
    script::Turn,
};

/// A first event whose data line is not JSON.
pub(crate) const MALFORMED_FRAME: &str = "event: message_start\ndata: {\"type\": nope\n\n";

/// The full event stream for `turn`.
pub(crate) fn stream(turn: &Turn, ex: &Exchange) -> Vec<Bytes> {
    let mut frames = opening(&turn.text, turn.input_tokens, ex);
    let mut index = 0;
    if !turn.text.is_empty() {
        frames.push(block_stop(index));
        index += 1;
    }
    for call in &turn.tool_calls {
        let block = json!({"type": "tool_use", "id": call.id_or_new("toolu"), "name": call.name, "input": {}});
        frames.push(sse_event(
            "content_block_start",
            &json!({"type": "content_block_start", "index": index, "content_block": block}),
        ));
        for piece in std::iter::once(String::new()).chain(argument_deltas(&call.arguments)) {
            frames.push(block_delta(
                index,
                json!({"type": "input_json_delta", "partial_json": piece}),
            ));
        }
        frames.push(block_stop(index));
        index += 1;
    }
    let delta = json!({"stop_reason": stop_reason(turn), "stop_sequence": null});
    let usage = json!({"output_tokens": turn.output_tokens});
    frames.push(sse_event(
        "message_delta",
        &json!({"type": "message_delta", "delta": delta, "usage": usage}),
    ));
    frames.push(sse_event("message_stop", &json!({"type": "message_stop"})));
    frames
}

/// `message_start`, the text block start, a `ping`, and the text deltas: a stream with no ending.
pub(crate) fn opening(text: &str, input_tokens: u64, ex: &Exchange) -> Vec<Bytes> {
    let mut message = envelope(ex, json!([]), Value::Null);
    message["usage"] = json!({"input_tokens": input_tokens, "output_tokens": 1});
    let mut frames =
        vec![sse_event("message_start", &json!({"type": "message_start", "message": message}))];
    if !text.is_empty() {
        let block = json!({"type": "text", "text": ""});
        frames.push(sse_event(
            "content_block_start",
            &json!({"type": "content_block_start", "index": 0, "content_block": block}),
        ));
    }
    frames.push(sse_event("ping", &json!({"type": "ping"})));
    for piece in text_deltas(text) {
        frames.push(block_delta(0, json!({"type": "text_delta", "text": piece})));
    }
    frames
}

/// The non-streaming message for `turn`.
pub(crate) fn message(turn: &Turn, ex: &Exchange) -> Value {
    let text = (!turn.text.is_empty()).then(|| json!({"type": "text", "text": turn.text}));
    let tools = turn.tool_calls.iter().map(|call| {
        json!({"type": "tool_use", "id": call.id_or_new("toolu"), "name": call.name, "input": call.arguments})
    });
    let mut message =
        envelope(ex, text.into_iter().chain(tools).collect(), json!(stop_reason(turn)));
    message["usage"] =
        json!({"input_tokens": turn.input_tokens, "output_tokens": turn.output_tokens});
    message
}

/// An error body such as `{"type":"error","error":{"type":"overloaded_error","message":..}}`.
pub(crate) fn error_body(status: u16, message: Option<&str>) -> Value {
    let kind = match status {
        400 => "invalid_request_error",
        401 => "authentication_error",
        403 => "permission_error",
        404 => "not_found_error",
        413 => "request_too_large",
        429 => "rate_limit_error",
        529 => "overloaded_error",
        _ => "api_error",
    };
    let message =
        message.map_or_else(|| format!("scripted-llm: {kind} (HTTP {status})"), str::to_string);
    json!({"type": "error", "error": {"type": kind, "message": message}})
}

/// An `event: error` frame carrying `overloaded_error`.
pub(crate) fn error_frame() -> Bytes {
    sse_event("error", &error_body(529, Some("Overloaded")))
}

fn envelope(ex: &Exchange, content: Value, stop_reason: Value) -> Value {
    json!({
        "id": format!("msg_scripted_{}", ex.seq), "type": "message", "role": "assistant", "model": ex.model,
        "content": content, "stop_reason": stop_reason, "stop_sequence": null,
    })
}

fn stop_reason(turn: &Turn) -> &'static str {
    if turn.tool_calls.is_empty() { "end_turn" } else { "tool_use" }
}

fn block_delta(index: usize, delta: Value) -> Bytes {
    sse_event(
        "content_block_delta",
        &json!({"type": "content_block_delta", "index": index, "delta": delta}),
    )
}

fn block_stop(index: usize) -> Bytes {
    sse_event("content_block_stop", &json!({"type": "content_block_stop", "index": index}))
}
