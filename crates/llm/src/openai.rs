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
use crate::decode::{DecodeError, parse_arguments, str_field, u64_field};
use crate::sse::SseEvent;

/// The request path below the base URL (which includes `/v1`).
pub(crate) const PATH: &str = "/chat/completions";

/// The field that caps answer length. OpenAI's own API rejects `max_tokens`
/// for its reasoning models (o-series, gpt-5) and wants
/// `max_completion_tokens`; most compatible servers know only `max_tokens`.
pub(crate) fn max_tokens_field(base_url: &str) -> &'static str {
    if base_url.contains("://api.openai.com") { "max_completion_tokens" } else { "max_tokens" }
}

mod body;

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

/// OpenAI's usage object. `prompt_tokens` includes cached tokens; we report
/// them apart, as Anthropic does, so `input_tokens` means uncached input.
fn usage_json(u: &Value) -> Usage {
    let cached = u
        .get("prompt_tokens_details")
        .map(|d| u64_field(d, "cached_tokens"))
        .filter(|&n| n > 0)
        .unwrap_or_else(|| u64_field(u, "prompt_cache_hit_tokens")); // DeepSeek
    Usage {
        input_tokens: u64_field(u, "prompt_tokens").saturating_sub(cached),
        output_tokens: u64_field(u, "completion_tokens"),
        cache_read_tokens: cached,
        cache_write_tokens: 0,
    }
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

/// `{"error": {...}}`, or `{"error": "text"}` as some servers send.
fn api_error(err: &Value) -> DecodeError {
    let kind = ["type", "code"]
        .iter()
        .find_map(|k| match err.get(*k) {
            Some(Value::String(s)) if !s.is_empty() => Some(s.clone()),
            Some(Value::Number(n)) => Some(n.to_string()),
            _ => None,
        })
        .unwrap_or_else(|| "error".into());
    let message = match err {
        Value::String(s) => s.clone(),
        other => str_field(other, "message").to_string(),
    };
    DecodeError::Api { kind, message }
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
        let chunk: Value = serde_json::from_str(&event.data)
            .map_err(|e| DecodeError::bad_json(&event.data, &e))?;
        if let Some(err) = chunk.get("error").filter(|e| !e.is_null()) {
            return Err(api_error(err));
        }
        if let Some(u) = chunk.get("usage").filter(|u| u.is_object()) {
            self.usage.get_or_insert_default().merge(&usage_json(u));
        }
        for choice in chunk.get("choices").and_then(Value::as_array).into_iter().flatten() {
            let delta = choice.get("delta").unwrap_or(&Value::Null);
            if let Some(text) = delta.get("content").and_then(Value::as_str)
                && !text.is_empty()
            {
                out.push(ProviderEvent::TextDelta(text.to_string()));
            }
            if !self.calls_flushed {
                for call in delta.get("tool_calls").and_then(Value::as_array).into_iter().flatten()
                {
                    self.on_tool_delta(call, out);
                }
            }
            if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
                self.finish_reason = Some(reason.to_string());
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

    fn on_tool_delta(&mut self, delta: &Value, out: &mut Vec<ProviderEvent>) {
        let index = delta.get("index").and_then(Value::as_u64);
        let id = str_field(delta, "id");
        let function = delta.get("function").unwrap_or(&Value::Null);
        let slot = self.slot_for(index, id);
        let call = &mut self.calls[slot];
        if call.id.is_empty() {
            id.clone_into(&mut call.id);
        }
        // Some servers repeat the whole name in every chunk: set it once.
        let name = str_field(function, "name");
        if call.name.is_empty() {
            name.clone_into(&mut call.name);
        }
        match function.get("arguments") {
            Some(Value::String(piece)) => call.arguments.push_str(piece),
            Some(args @ Value::Object(_)) => call.arguments.push_str(&args.to_string()),
            _ => {}
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
    if let Some(err) = v.get("error").filter(|e| !e.is_null()) {
        return Err(api_error(err));
    }
    let Some(choice) = v.get("choices").and_then(Value::as_array).and_then(|c| c.first()) else {
        return Err(DecodeError::unexpected("no `choices` in the completion", v));
    };
    let message = choice.get("message").unwrap_or(&Value::Null);
    let mut out = Vec::new();
    let text = str_field(message, "content");
    if !text.is_empty() {
        out.push(ProviderEvent::TextDelta(text.to_string()));
    }
    let mut assembler = StreamAssembler::default();
    for call in message.get("tool_calls").and_then(Value::as_array).into_iter().flatten() {
        // Complete calls, announced only once whole: no index, so none match.
        assembler.calls.push(PendingCall {
            id: str_field(call, "id").to_string(),
            name: call.get("function").map(|f| str_field(f, "name")).unwrap_or("").to_string(),
            arguments: match call.get("function").and_then(|f| f.get("arguments")) {
                Some(Value::String(s)) => s.clone(),
                Some(args @ Value::Object(_)) => args.to_string(),
                _ => String::new(),
            },
            announced: false,
        });
    }
    assembler.usage = v.get("usage").filter(|u| u.is_object()).map(usage_json);
    assembler.finish_reason = Some(str_field(choice, "finish_reason").to_string());
    assembler.complete(&mut out);
    Ok(out)
}

#[cfg(test)]
mod tests;
