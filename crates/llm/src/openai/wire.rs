//! What a Chat Completions server sends back, as serde types: the streamed
//! chunks and the whole (non-streaming) completion. Unknown fields are
//! ignored and `null` reads as absent, as compatible servers send both; the
//! variations we know are typed as such (`arguments` as text or an object,
//! `error` as an object or text, a `content` that is not text).

use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_json::{Map, Number, Value};

use crate::decode::DecodeError;

/// One streamed chunk, or a whole completion (whose choices carry a
/// `message` where a chunk's carry a `delta`).
#[derive(Deserialize)]
pub(super) struct Chunk {
    pub error: Option<WireError>,
    pub usage: Option<WireUsage>,
    pub choices: Option<Vec<Choice>>,
}

#[derive(Deserialize)]
pub(super) struct Choice {
    pub delta: Option<Message>,
    pub message: Option<Message>,
    pub finish_reason: Option<String>,
}

/// A chunk's delta or a completion's message.
#[derive(Deserialize)]
pub(super) struct Message {
    pub content: Option<Content>,
    pub tool_calls: Option<Vec<ToolCallPart>>,
}

/// Message text; some servers send parts (reasoning, images) instead, which
/// carry no answer text for us.
#[derive(Deserialize)]
#[serde(untagged)]
pub(super) enum Content {
    Text(String),
    Parts(IgnoredAny),
}

impl Content {
    /// The text, or `""` for parts.
    pub(super) fn text(&self) -> &str {
        match self {
            Self::Text(text) => text,
            Self::Parts(_) => "",
        }
    }
}

/// A tool call, or a piece of one in a stream.
#[derive(Deserialize)]
pub(super) struct ToolCallPart {
    pub index: Option<u64>,
    pub id: Option<String>,
    pub function: Option<FunctionPart>,
}

#[derive(Deserialize)]
pub(super) struct FunctionPart {
    pub name: Option<String>,
    pub arguments: Option<Arguments>,
}

/// Tool-call arguments: JSON text (OpenAI), or an object (some servers).
#[derive(Deserialize)]
#[serde(untagged)]
pub(super) enum Arguments {
    Text(String),
    Object(Map<String, Value>),
}

impl Arguments {
    /// The arguments as JSON text.
    pub(super) fn push_to(&self, text: &mut String) {
        match self {
            Self::Text(piece) => text.push_str(piece),
            Self::Object(map) => text.push_str(&Value::Object(map.clone()).to_string()),
        }
    }
}

/// OpenAI's usage object (and DeepSeek's cache field).
#[derive(Deserialize)]
pub(super) struct WireUsage {
    prompt_tokens: Option<u64>,
    completion_tokens: Option<u64>,
    prompt_tokens_details: Option<PromptDetails>,
    prompt_cache_hit_tokens: Option<u64>,
}

#[derive(Deserialize)]
struct PromptDetails {
    cached_tokens: Option<u64>,
}

impl From<&WireUsage> for ferroclaw_protocol::Usage {
    /// `prompt_tokens` includes cached tokens; we report them apart, as
    /// Anthropic does, so `input_tokens` means uncached input.
    fn from(u: &WireUsage) -> Self {
        let cached = u
            .prompt_tokens_details
            .as_ref()
            .and_then(|d| d.cached_tokens)
            .filter(|&n| n > 0)
            .or(u.prompt_cache_hit_tokens) // DeepSeek
            .unwrap_or(0);
        Self {
            input_tokens: u.prompt_tokens.unwrap_or(0).saturating_sub(cached),
            output_tokens: u.completion_tokens.unwrap_or(0),
            cache_read_tokens: cached,
            cache_write_tokens: 0,
        }
    }
}

/// `{"error": {"type"|"code", "message"}}`, or `{"error": "text"}` as some
/// servers send.
#[derive(Deserialize)]
#[serde(untagged)]
pub(super) enum WireError {
    Text(String),
    Object {
        #[serde(rename = "type")]
        kind: Option<Code>,
        code: Option<Code>,
        message: Option<String>,
    },
}

/// An error's `type` or `code`: text, or a number (HTTP-style codes).
#[derive(Deserialize)]
#[serde(untagged)]
pub(super) enum Code {
    Text(String),
    Number(Number),
}

impl Code {
    fn name(self) -> Option<String> {
        match self {
            Self::Text(text) if !text.is_empty() => Some(text),
            Self::Text(_) => None,
            Self::Number(n) => Some(n.to_string()),
        }
    }
}

impl From<WireError> for DecodeError {
    fn from(e: WireError) -> Self {
        match e {
            WireError::Text(message) => Self::Api { kind: "error".into(), message },
            WireError::Object { kind, code, message } => Self::Api {
                kind: kind
                    .and_then(Code::name)
                    .or_else(|| code.and_then(Code::name))
                    .unwrap_or_else(|| "error".into()),
                message: message.unwrap_or_default(),
            },
        }
    }
}
