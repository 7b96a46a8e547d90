//! OpenAI-compatible Chat Completions: request bodies, the streamed chunk
//! assembler, and the non-streaming response.
//!
//! "Compatible" servers (OpenRouter, DeepSeek, Groq, Gemini, Ollama, vLLM,
//! llama.cpp) differ in small ways; the assembler tolerates the ones we know:
//! `id` and `name` repeated in every tool-call chunk, tool-call chunks without
//! `index`, `reasoning_content` deltas, usage in every chunk, and a body that
//! ends after `finish_reason` without `[DONE]`.
//!
//! Reference: <https://platform.openai.com/docs/api-reference/chat/create>.

use std::collections::HashMap;

use ferroclaw_protocol::{ProviderEvent, StopReason, ToolCall, Usage};
use serde_json::Value;

use crate::ChatRequest;
use crate::decode::{DecodeError, parse_arguments, typed};
use crate::sse::SseEvent;
use wire::{Chunk, Content, FunctionPart, Message, ToolCallPart};

/// The request path below the base URL (which includes `/v1`).
pub(crate) const PATH: &str = "/chat/completions";

/// The field that caps answer length. OpenAI's own API rejects `max_tokens`
/// for its reasoning models (o-series, gpt-5) and wants
/// `max_completion_tokens`; most compatible servers know only `max_tokens`.
pub(crate) fn max_tokens_field(base_url: &str) -> &'static str {
    if base_url.contains("://api.openai.com") { "max_completion_tokens" } else { "max_tokens" }
}

mod body;
mod wire;

/// The JSON body of a Chat Completions request, written straight from `req`
/// (see [`body`]).
pub(crate) fn request_bytes(req: &ChatRequest, stream: bool, max_tokens_field: &str) -> Vec<u8> {
    // Serialising borrowed strings and JSON values cannot fail.
    serde_json::to_vec(&body::Body { req, stream, max_tokens_field }).unwrap_or_default()
}

/// The body as a JSON value (tests look into it).
#[cfg(test)]
pub(crate) fn request_body(req: &ChatRequest, stream: bool, max_tokens_field: &str) -> Value {
    serde_json::from_slice(&request_bytes(req, stream, max_tokens_field)).unwrap_or_default()
}

fn stop_reason(reason: &str, saw_tool_call: bool) -> StopReason {
    match reason {
        "stop" | "" if saw_tool_call => StopReason::ToolUse,
        "stop" | "" => StopReason::EndTurn,
        "tool_calls" | "function_call" => StopReason::ToolUse,
        "length" => StopReason::MaxTokens,
        other => StopReason::Other(other.to_string()),
    }
}

/// A tool call being assembled from deltas.
#[derive(Default)]
struct PendingCall {
    id: String,
    name: String,
    arguments: String,
    announced: bool,
}

/// Assembles streamed Chat Completions chunks into provider events.
#[derive(Default)]
pub(crate) struct StreamAssembler {
    calls: Vec<PendingCall>,
    /// Delta `index` -> position in `calls`.
    by_index: HashMap<u64, usize>,
    usage: Option<Usage>,
    finish_reason: Option<String>,
    calls_flushed: bool,
    saw_tool_call: bool,
    done: bool,
}

impl StreamAssembler {
    /// Handles one SSE event (one chunk, or `[DONE]`).
    pub(crate) fn on_event(
        &mut self,
        event: &SseEvent,
        out: &mut Vec<ProviderEvent>,
    ) -> Result<(), DecodeError> {
        if self.done {
            return Ok(());
        }
        if event.data.trim() == "[DONE]" {
            self.complete(out);
            return Ok(());
        }
        let data: Value = serde_json::from_str(&event.data)
            .map_err(|e| DecodeError::bad_json(&event.data, &e))?;
        let chunk: Chunk = typed(&data)?;
        if let Some(err) = chunk.error {
            return Err(err.into());
        }
        if let Some(u) = &chunk.usage {
            self.usage.get_or_insert_default().merge(&Usage::from(u));
        }
        for choice in chunk.choices.into_iter().flatten() {
            let delta = choice.delta.unwrap_or(Message { content: None, tool_calls: None });
            let text = delta.content.as_ref().map(Content::text).unwrap_or_default();
            if !text.is_empty() {
                out.push(ProviderEvent::TextDelta(text.to_string()));
            }
            if !self.calls_flushed {
                for call in delta.tool_calls.iter().flatten() {
                    self.on_tool_delta(call, out);
                }
            }
            if let Some(reason) = choice.finish_reason {
                self.finish_reason = Some(reason);
                self.flush_calls(out);
            }
        }
        Ok(())
    }

    /// Ends the body: fine after a `finish_reason`, incomplete otherwise.
    pub(crate) fn finish(&mut self, out: &mut Vec<ProviderEvent>) -> Result<(), DecodeError> {
        if self.done {
            return Ok(());
        }
        if self.finish_reason.is_none() {
            return Err(DecodeError::Incomplete);
        }
        self.complete(out);
        Ok(())
    }

    /// Whether `[DONE]` has been seen.
    pub(crate) fn is_done(&self) -> bool {
        self.done
    }

    fn on_tool_delta(&mut self, delta: &ToolCallPart, out: &mut Vec<ProviderEvent>) {
        let id = delta.id.as_deref().unwrap_or_default();
        let slot = self.slot_for(delta.index, id);
        let call = &mut self.calls[slot];
        if call.id.is_empty() {
            id.clone_into(&mut call.id);
        }
        let function = delta.function.as_ref();
        // Some servers repeat the whole name in every chunk: set it once.
        if call.name.is_empty() {
            let name = function.and_then(|f| f.name.as_deref()).unwrap_or_default();
            name.clone_into(&mut call.name);
        }
        if let Some(arguments) = function.and_then(|f| f.arguments.as_ref()) {
            arguments.push_to(&mut call.arguments);
        }
        if !call.announced && !call.id.is_empty() && !call.name.is_empty() {
            call.announced = true;
            out.push(ProviderEvent::ToolCallStarted {
                id: call.id.clone(),
                name: call.name.clone(),
            });
        }
    }

    /// Which pending call a delta continues: by `index`, unless that slot
    /// already has a different id; else by id; else (neither given) the
    /// latest call; else a new one.
    fn slot_for(&mut self, index: Option<u64>, id: &str) -> usize {
        if let Some(&slot) = index.and_then(|i| self.by_index.get(&i)) {
            let known = &self.calls[slot].id;
            if id.is_empty() || known.is_empty() || known == id {
                return slot;
            }
        } else if let Some(slot) = self.calls.iter().position(|c| !id.is_empty() && c.id == id) {
            return slot;
        } else if index.is_none() && id.is_empty() && !self.calls.is_empty() {
            return self.calls.len() - 1;
        }
        self.calls.push(PendingCall::default());
        let slot = self.calls.len() - 1;
        if let Some(i) = index {
            self.by_index.insert(i, slot);
        }
        slot
    }

    /// Emits every assembled call (once), giving id-less calls an id.
    fn flush_calls(&mut self, out: &mut Vec<ProviderEvent>) {
        if self.calls_flushed {
            return;
        }
        self.calls_flushed = true;
        self.saw_tool_call = !self.calls.is_empty();
        for (n, call) in self.calls.drain(..).enumerate() {
            let id = if call.id.is_empty() { format!("call_{n}") } else { call.id };
            if !call.announced {
                out.push(ProviderEvent::ToolCallStarted {
                    id: id.clone(),
                    name: call.name.clone(),
                });
            }
            let (input, parse_error) = parse_arguments(&call.arguments);
            out.push(ProviderEvent::ToolCall {
                call: ToolCall { id, name: call.name, input },
                parse_error,
            });
        }
    }

    fn complete(&mut self, out: &mut Vec<ProviderEvent>) {
        self.flush_calls(out);
        self.done = true;
        if let Some(usage) = self.usage.filter(|u| *u != Usage::default()) {
            out.push(ProviderEvent::Usage(usage));
        }
        let reason = self.finish_reason.as_deref().unwrap_or("");
        out.push(ProviderEvent::Stop(stop_reason(reason, self.saw_tool_call)));
    }
}

/// Decodes a whole (non-streaming) completion.
pub(crate) fn parse_response(v: &Value) -> Result<Vec<ProviderEvent>, DecodeError> {
    let completion: Chunk = typed(v)?;
    if let Some(err) = completion.error {
        return Err(err.into());
    }
    let Some(choice) = completion.choices.and_then(|c| c.into_iter().next()) else {
        return Err(DecodeError::unexpected("no `choices` in the completion", v));
    };
    let message = choice.message.unwrap_or(Message { content: None, tool_calls: None });
    let mut out = Vec::new();
    let text = message.content.as_ref().map(Content::text).unwrap_or_default();
    if !text.is_empty() {
        out.push(ProviderEvent::TextDelta(text.to_string()));
    }
    let mut assembler = StreamAssembler::default();
    for call in message.tool_calls.into_iter().flatten() {
        // Complete calls, announced only once whole: no index, so none match.
        let mut arguments = String::new();
        let function = call.function.unwrap_or(FunctionPart { name: None, arguments: None });
        if let Some(whole) = &function.arguments {
            whole.push_to(&mut arguments);
        }
        assembler.calls.push(PendingCall {
            id: call.id.unwrap_or_default(),
            name: function.name.unwrap_or_default(),
            arguments,
            announced: false,
        });
    }
    assembler.usage = completion.usage.as_ref().map(Usage::from);
    assembler.finish_reason = Some(choice.finish_reason.unwrap_or_default());
    assembler.complete(&mut out);
    Ok(out)
}

#[cfg(test)]
mod tests;
