//! The Anthropic Messages API: request bodies, the streamed event assembler,
//! and the non-streaming response.
//!
//! Reference: <https://docs.anthropic.com/en/api/messages-streaming>.

use std::collections::HashMap;

use ferroclaw_protocol::{ProviderEvent, StopReason, ToolCall, Usage};
use serde_json::{Value, json};

use crate::ChatRequest;
use crate::decode::{DecodeError, parse_arguments, typed};
use crate::sse::SseEvent;
use wire::{ApiError, Block, Delta, StreamEvent, Tag, WholeMessage};

/// The API version header value we speak.
pub(crate) const API_VERSION: &str = "2023-06-01";

/// The request path below the base URL.
pub(crate) const PATH: &str = "/v1/messages";

mod body;
mod wire;

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
        match StreamEvent::read(&event.event, &data)? {
            StreamEvent::MessageStart(start) => {
                if let Some(u) = start.message.and_then(|m| m.usage) {
                    self.usage.merge(&Usage::from(&u));
                }
            }
            StreamEvent::ContentBlockStart(start) => {
                let open = match start.content_block {
                    Block::Text { text } => {
                        push_text(out, text.as_deref().unwrap_or_default());
                        OpenBlock::Text
                    }
                    Block::ToolUse { id, name, input } => {
                        let (id, name) = (id.unwrap_or_default(), name.unwrap_or_default());
                        out.push(ProviderEvent::ToolCallStarted {
                            id: id.clone(),
                            name: name.clone(),
                        });
                        let initial = input.unwrap_or(Value::Null);
                        OpenBlock::Tool { id, name, json: String::new(), initial }
                    }
                    Block::Other => OpenBlock::Ignored,
                };
                self.blocks.insert(start.index.unwrap_or(0), open);
            }
            StreamEvent::ContentBlockDelta(piece) => {
                match (self.blocks.get_mut(&piece.index.unwrap_or(0)), piece.delta) {
                    (Some(OpenBlock::Text), Delta::Text { text }) => {
                        push_text(out, text.as_deref().unwrap_or_default());
                    }
                    (Some(OpenBlock::Tool { json, .. }), Delta::InputJson { partial_json }) => {
                        json.push_str(partial_json.as_deref().unwrap_or_default());
                    }
                    _ => {}
                }
            }
            StreamEvent::ContentBlockStop(stop) => {
                if let Some(OpenBlock::Tool { id, name, json, initial }) =
                    self.blocks.remove(&stop.index.unwrap_or(0))
                {
                    self.saw_tool_call = true;
                    out.push(finish_tool(id, name, &json, initial));
                }
            }
            StreamEvent::MessageDelta(delta) => {
                if let Some(reason) = delta.delta.and_then(|d| d.stop_reason) {
                    self.stop_reason = reason;
                }
                if let Some(u) = delta.usage {
                    self.usage.merge(&Usage::from(&u));
                }
            }
            StreamEvent::MessageStop => {
                self.done = true;
                if self.usage != Usage::default() {
                    out.push(ProviderEvent::Usage(self.usage));
                }
                out.push(ProviderEvent::Stop(stop_reason(&self.stop_reason, self.saw_tool_call)));
            }
            StreamEvent::Error(error) => return Err(error.into()),
            StreamEvent::Other => {}
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
    if typed::<Tag>(v)?.kind.as_deref() == Some("error") {
        return Err(typed::<ApiError>(v)?.into());
    }
    let message: WholeMessage = typed(v)?;
    let Some(content) = message.content else {
        return Err(DecodeError::unexpected("no `content` in the message", v));
    };
    let mut out = Vec::new();
    let mut saw_tool_call = false;
    for block in content {
        match block {
            Block::Text { text } => push_text(&mut out, text.as_deref().unwrap_or_default()),
            Block::ToolUse { id, name, input } => {
                let (id, name) = (id.unwrap_or_default(), name.unwrap_or_default());
                out.push(ProviderEvent::ToolCallStarted { id: id.clone(), name: name.clone() });
                let input = match input {
                    Some(input @ Value::Object(_)) => input,
                    _ => json!({}),
                };
                out.push(ProviderEvent::ToolCall {
                    call: ToolCall { id, name, input },
                    parse_error: None,
                });
                saw_tool_call = true;
            }
            Block::Other => {}
        }
    }
    let usage = message.usage.as_ref().map(Usage::from).unwrap_or_default();
    if usage != Usage::default() {
        out.push(ProviderEvent::Usage(usage));
    }
    let reason = message.stop_reason.as_deref().unwrap_or_default();
    out.push(ProviderEvent::Stop(stop_reason(reason, saw_tool_call)));
    Ok(out)
}

#[cfg(test)]
mod tests;
