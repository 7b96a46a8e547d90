//! The Anthropic Messages API: request bodies, the streamed event assembler,
//! and the non-streaming response.
//!
//! Reference: <https://docs.anthropic.com/en/api/messages-streaming>.

use std::collections::HashMap;

use ferroclaw_protocol::{ProviderEvent, StopReason, ToolCall, Usage};
use serde_json::{Value, json};

use crate::ChatRequest;
use crate::decode::{DecodeError, parse_arguments, str_field, u64_field};
use crate::sse::SseEvent;

/// The API version header value we speak.
pub(crate) const API_VERSION: &str = "2023-06-01";

/// The request path below the base URL.
pub(crate) const PATH: &str = "/v1/messages";

mod body;

/// The JSON body of a Messages request, written straight from `req` (see [`body`]).
pub(crate) fn request_bytes(req: &ChatRequest, stream: bool) -> Vec<u8> {
    // Serialising borrowed strings and JSON values cannot fail.
    serde_json::to_vec(&body::Body { req, stream }).unwrap_or_default()
}

/// The body as a JSON value (tests look into it).
#[cfg(test)]
pub(crate) fn request_body(req: &ChatRequest, stream: bool) -> Value {
    serde_json::from_slice(&request_bytes(req, stream)).unwrap_or_default()
}

/// Anthropic's usage object: `input_tokens` excludes cache reads and writes.
fn usage_json(u: &Value) -> Usage {
    Usage {
        input_tokens: u64_field(u, "input_tokens"),
        output_tokens: u64_field(u, "output_tokens"),
        cache_read_tokens: u64_field(u, "cache_read_input_tokens"),
        cache_write_tokens: u64_field(u, "cache_creation_input_tokens"),
    }
}

fn stop_reason(reason: &str, saw_tool_call: bool) -> StopReason {
    match reason {
        "end_turn" | "" if saw_tool_call => StopReason::ToolUse,
        "end_turn" | "" => StopReason::EndTurn,
        "tool_use" => StopReason::ToolUse,
        "max_tokens" => StopReason::MaxTokens,
        "stop_sequence" => StopReason::StopSequence,
        other => StopReason::Other(other.to_string()),
    }
}

fn api_error(v: &Value) -> DecodeError {
    let err = v.get("error").unwrap_or(v);
    DecodeError::Api {
        kind: match str_field(err, "type") {
            "" => "error".into(),
            kind => kind.into(),
        },
        message: str_field(err, "message").to_string(),
    }
}

/// A content block whose deltas are still arriving.
enum OpenBlock {
    Text,
    Tool {
        id: String,
        name: String,
        json: String,
        initial: Value,
    },
    /// Thinking and other blocks we do not surface.
    Ignored,
}

/// Assembles streamed Messages events into provider events.
#[derive(Default)]
pub(crate) struct StreamAssembler {
    blocks: HashMap<u64, OpenBlock>,
    usage: Usage,
    stop_reason: String,
    saw_tool_call: bool,
    done: bool,
}

impl StreamAssembler {
    /// Handles one SSE event.
    pub(crate) fn on_event(
        &mut self,
        event: &SseEvent,
        out: &mut Vec<ProviderEvent>,
    ) -> Result<(), DecodeError> {
        if self.done {
            return Ok(());
        }
        let data: Value = serde_json::from_str(&event.data)
            .map_err(|e| DecodeError::bad_json(&event.data, &e))?;
        let kind = match event.event.as_str() {
            "" => str_field(&data, "type"),
            named => named,
        };
        let index = u64_field(&data, "index");
        match kind {
            "message_start" => {
                if let Some(u) = data.get("message").and_then(|m| m.get("usage")) {
                    self.usage.merge(&usage_json(u));
                }
            }
            "content_block_start" => {
                let block = data.get("content_block").unwrap_or(&Value::Null);
                let open = match str_field(block, "type") {
                    "text" => {
                        push_text(out, str_field(block, "text"));
                        OpenBlock::Text
                    }
                    "tool_use" => {
                        let (id, name) = (
                            str_field(block, "id").to_string(),
                            str_field(block, "name").to_string(),
                        );
                        out.push(ProviderEvent::ToolCallStarted {
                            id: id.clone(),
                            name: name.clone(),
                        });
                        let initial = block.get("input").cloned().unwrap_or(Value::Null);
                        OpenBlock::Tool { id, name, json: String::new(), initial }
                    }
                    _ => OpenBlock::Ignored,
                };
                self.blocks.insert(index, open);
            }
            "content_block_delta" => {
                let delta = data.get("delta").unwrap_or(&Value::Null);
                match (self.blocks.get_mut(&index), str_field(delta, "type")) {
                    (Some(OpenBlock::Text), "text_delta") => {
                        push_text(out, str_field(delta, "text"))
                    }
                    (Some(OpenBlock::Tool { json, .. }), "input_json_delta") => {
                        json.push_str(str_field(delta, "partial_json"));
                    }
                    _ => {}
                }
            }
            "content_block_stop" => {
                if let Some(OpenBlock::Tool { id, name, json, initial }) =
                    self.blocks.remove(&index)
                {
                    self.saw_tool_call = true;
                    out.push(finish_tool(id, name, &json, initial));
                }
            }
            "message_delta" => {
                if let Some(reason) =
                    data.get("delta").and_then(|d| d.get("stop_reason")).and_then(Value::as_str)
                {
                    reason.clone_into(&mut self.stop_reason);
                }
                if let Some(u) = data.get("usage") {
                    self.usage.merge(&usage_json(u));
                }
            }
            "message_stop" => {
                self.done = true;
                if self.usage != Usage::default() {
                    out.push(ProviderEvent::Usage(self.usage));
                }
                out.push(ProviderEvent::Stop(stop_reason(&self.stop_reason, self.saw_tool_call)));
            }
            "error" => return Err(api_error(&data)),
            _ => {} // `ping` and event types added after this was written.
        }
        Ok(())
    }

    /// Ends the body: without `message_stop` the answer is incomplete.
    pub(crate) fn finish(&mut self, _out: &mut Vec<ProviderEvent>) -> Result<(), DecodeError> {
        if self.done { Ok(()) } else { Err(DecodeError::Incomplete) }
    }

    /// Whether `message_stop` has been seen.
    pub(crate) fn is_done(&self) -> bool {
        self.done
    }
}

fn push_text(out: &mut Vec<ProviderEvent>, text: &str) {
    if !text.is_empty() {
        out.push(ProviderEvent::TextDelta(text.to_string()));
    }
}

fn finish_tool(id: String, name: String, json: &str, initial: Value) -> ProviderEvent {
    let (input, parse_error) = if json.trim().is_empty() && initial.is_object() {
        (initial, None)
    } else {
        parse_arguments(json)
    };
    ProviderEvent::ToolCall { call: ToolCall { id, name, input }, parse_error }
}

/// Decodes a whole (non-streaming) Messages response.
pub(crate) fn parse_response(v: &Value) -> Result<Vec<ProviderEvent>, DecodeError> {
    if str_field(v, "type") == "error" {
        return Err(api_error(v));
    }
    let Some(content) = v.get("content").and_then(Value::as_array) else {
        return Err(DecodeError::unexpected("no `content` in the message", v));
    };
    let mut out = Vec::new();
    let mut saw_tool_call = false;
    for block in content {
        match str_field(block, "type") {
            "text" => push_text(&mut out, str_field(block, "text")),
            "tool_use" => {
                let (id, name) =
                    (str_field(block, "id").to_string(), str_field(block, "name").to_string());
                out.push(ProviderEvent::ToolCallStarted { id: id.clone(), name: name.clone() });
                let input = match block.get("input") {
                    Some(input @ Value::Object(_)) => input.clone(),
                    _ => json!({}),
                };
                out.push(ProviderEvent::ToolCall {
                    call: ToolCall { id, name, input },
                    parse_error: None,
                });
                saw_tool_call = true;
            }
            _ => {}
        }
    }
    let usage = v.get("usage").map(usage_json).unwrap_or_default();
    if usage != Usage::default() {
        out.push(ProviderEvent::Usage(usage));
    }
    out.push(ProviderEvent::Stop(stop_reason(str_field(v, "stop_reason"), saw_tool_call)));
    Ok(out)
}

#[cfg(test)]
mod tests;
