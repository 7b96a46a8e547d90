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

use ferroclaw_protocol::{
    ContentBlock, Message, ProviderEvent, ResultPart, Role, StopReason, ToolCall, Usage,
};
use serde_json::{Map, Value, json};

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

/// Builds the JSON body of a Chat Completions request.
pub(crate) fn request_body(req: &ChatRequest, stream: bool, max_tokens_field: &str) -> Value {
    let mut messages = Vec::new();
    if !req.system.is_empty() {
        messages.push(json!({"role": "system", "content": req.system}));
    }
    for m in &req.messages {
        match m.role {
            Role::User => push_user(&mut messages, m),
            Role::Assistant => messages.push(assistant_json(m)),
        }
    }
    let mut body = Map::new();
    body.insert("model".into(), json!(req.model));
    body.insert("messages".into(), Value::Array(messages));
    if !req.tools.is_empty() {
        let tools = req
            .tools
            .iter()
            .map(|t| {
                json!({"type": "function", "function": {
                    "name": t.name, "description": t.description, "parameters": t.input_schema,
                }})
            })
            .collect();
        body.insert("tools".into(), Value::Array(tools));
    }
    body.insert(max_tokens_field.into(), json!(req.max_tokens));
    if let Some(t) = req.temperature {
        body.insert("temperature".into(), json!(t));
    }
    body.insert("stream".into(), json!(stream));
    if stream {
        body.insert("stream_options".into(), json!({"include_usage": true}));
    }
    Value::Object(body)
}

fn image_part(media_type: &str, data: &str) -> Value {
    json!({"type": "image_url", "image_url": {"url": format!("data:{media_type};base64,{data}")}})
}

/// A user message: its tool results first, each as its own `tool` message
/// (they must follow the assistant's `tool_calls`), then one `user` message
/// with the images the results carried (tool messages cannot hold images)
/// and the user's own text and images.
fn push_user(messages: &mut Vec<Value>, m: &Message) {
    let mut parts = Vec::new();
    let mut has_image = false;
    for block in &m.content {
        match block {
            ContentBlock::ToolResult { tool_call_id, content, .. } => {
                let mut text: Vec<&str> = content.iter().filter_map(ResultPart::as_text).collect();
                let images: Vec<Value> = content
                    .iter()
                    .filter_map(|p| match p {
                        ResultPart::Image { media_type, data } => {
                            Some(image_part(media_type, data))
                        }
                        ResultPart::Text { .. } => None,
                    })
                    .collect();
                if !images.is_empty() {
                    text.push("(image attached in the next message)");
                    parts.push(json!({"type": "text", "text": format!("Image from tool call {tool_call_id}:")}));
                    parts.extend(images);
                    has_image = true;
                }
                messages.push(json!({"role": "tool", "tool_call_id": tool_call_id, "content": text.join("\n")}));
            }
            ContentBlock::Text { text } => parts.push(json!({"type": "text", "text": text})),
            ContentBlock::Image { media_type, data } => {
                parts.push(image_part(media_type, data));
                has_image = true;
            }
            // A tool call in a user message has no meaning on this wire.
            ContentBlock::ToolCall(_) => {}
        }
    }
    if parts.is_empty() {
        return;
    }
    let content = if has_image {
        Value::Array(parts)
    } else {
        Value::String(parts.iter().map(|p| str_field(p, "text")).collect::<Vec<_>>().join("\n"))
    };
    messages.push(json!({"role": "user", "content": content}));
}

/// An assistant message; `content` is `""` rather than `null` beside tool
/// calls, because some local servers reject `null`.
fn assistant_json(m: &Message) -> Value {
    let calls: Vec<Value> = m
        .tool_calls()
        .map(|c| {
            // Arguments that failed to parse are kept as the model's own text.
            let arguments = match &c.input {
                Value::String(raw) => raw.clone(),
                other => other.to_string(),
            };
            json!({"id": c.id, "type": "function", "function": {"name": c.name, "arguments": arguments}})
        })
        .collect();
    let mut msg = json!({"role": "assistant", "content": m.text()});
    if !calls.is_empty()
        && let Value::Object(map) = &mut msg
    {
        map.insert("tool_calls".into(), Value::Array(calls));
    }
    msg
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
