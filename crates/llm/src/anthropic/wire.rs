//! What the Messages API sends back, as serde types: the stream's events
//! (<https://docs.anthropic.com/en/api/messages-streaming>) and the whole
//! (non-streaming) message. Unknown event, block and delta types read as
//! `Other` and unknown fields are ignored: Anthropic adds both.

use serde::Deserialize;
use serde_json::Value;

use crate::decode::{DecodeError, typed};

/// One streamed event, chosen by its name (the SSE `event:` line, else the
/// data's `type`).
pub(super) enum StreamEvent {
    MessageStart(MessageStart),
    ContentBlockStart(BlockStart),
    ContentBlockDelta(BlockDelta),
    ContentBlockStop(BlockStop),
    MessageDelta(MessageDelta),
    MessageStop,
    Error(ApiError),
    /// `ping` and event types added after this was written.
    Other,
}

impl StreamEvent {
    /// The event named `name` (or, when empty, by `data`'s `type`).
    pub(super) fn read(name: &str, data: &Value) -> Result<Self, DecodeError> {
        let tag: Tag;
        let name = if name.is_empty() {
            tag = typed(data)?;
            tag.kind.as_deref().unwrap_or_default()
        } else {
            name
        };
        Ok(match name {
            "message_start" => Self::MessageStart(typed(data)?),
            "content_block_start" => Self::ContentBlockStart(typed(data)?),
            "content_block_delta" => Self::ContentBlockDelta(typed(data)?),
            "content_block_stop" => Self::ContentBlockStop(typed(data)?),
            "message_delta" => Self::MessageDelta(typed(data)?),
            "message_stop" => Self::MessageStop,
            "error" => Self::Error(typed(data)?),
            _ => Self::Other,
        })
    }
}

/// The `type` of an event or body.
#[derive(Deserialize)]
pub(super) struct Tag {
    #[serde(rename = "type")]
    pub kind: Option<String>,
}

/// `message_start`: the message's first usage (the input tokens).
#[derive(Deserialize)]
pub(super) struct MessageStart {
    pub message: Option<StartedMessage>,
}

#[derive(Deserialize)]
pub(super) struct StartedMessage {
    pub usage: Option<WireUsage>,
}

/// `content_block_start`: block `index` opens.
#[derive(Deserialize)]
pub(super) struct BlockStart {
    pub index: Option<u64>,
    pub content_block: Block,
}

/// `content_block_delta`: more of block `index`.
#[derive(Deserialize)]
pub(super) struct BlockDelta {
    pub index: Option<u64>,
    pub delta: Delta,
}

/// `content_block_stop`: block `index` is whole.
#[derive(Deserialize)]
pub(super) struct BlockStop {
    pub index: Option<u64>,
}

/// `message_delta`: the stop reason and the final usage.
#[derive(Deserialize)]
pub(super) struct MessageDelta {
    pub delta: Option<StopDelta>,
    pub usage: Option<WireUsage>,
}

#[derive(Deserialize)]
pub(super) struct StopDelta {
    pub stop_reason: Option<String>,
}

/// A content block, as it starts in a stream or whole in a message.
#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(super) enum Block {
    Text {
        text: Option<String>,
    },
    ToolUse {
        id: Option<String>,
        name: Option<String>,
        input: Option<Value>,
    },
    /// Thinking and block types we do not surface.
    #[serde(other)]
    Other,
}

/// A piece of an open block.
#[derive(Deserialize)]
#[serde(tag = "type")]
pub(super) enum Delta {
    #[serde(rename = "text_delta")]
    Text { text: Option<String> },
    #[serde(rename = "input_json_delta")]
    InputJson { partial_json: Option<String> },
    /// Thinking, signatures and delta types added later.
    #[serde(other)]
    Other,
}

/// Anthropic's usage object: `input_tokens` excludes cache reads and writes.
#[derive(Deserialize)]
pub(super) struct WireUsage {
    input_tokens: Option<u64>,
    output_tokens: Option<u64>,
    cache_read_input_tokens: Option<u64>,
    cache_creation_input_tokens: Option<u64>,
}

impl From<&WireUsage> for ferroclaw_protocol::Usage {
    fn from(u: &WireUsage) -> Self {
        Self {
            input_tokens: u.input_tokens.unwrap_or(0),
            output_tokens: u.output_tokens.unwrap_or(0),
            cache_read_tokens: u.cache_read_input_tokens.unwrap_or(0),
            cache_write_tokens: u.cache_creation_input_tokens.unwrap_or(0),
        }
    }
}

/// An `error` event or body: `{"type": "error", "error": {"type", "message"}}`.
#[derive(Deserialize)]
pub(super) struct ApiError {
    error: Option<ErrorDetail>,
    message: Option<String>,
}

#[derive(Deserialize)]
struct ErrorDetail {
    #[serde(rename = "type")]
    kind: Option<String>,
    message: Option<String>,
}

impl From<ApiError> for DecodeError {
    fn from(e: ApiError) -> Self {
        let (kind, message) = match e.error {
            Some(detail) => (detail.kind, detail.message),
            None => (None, e.message),
        };
        Self::Api {
            kind: kind.filter(|k| !k.is_empty()).unwrap_or_else(|| "error".into()),
            message: message.unwrap_or_default(),
        }
    }
}

/// A whole (non-streaming) message.
#[derive(Deserialize)]
pub(super) struct WholeMessage {
    pub content: Option<Vec<Block>>,
    pub usage: Option<WireUsage>,
    pub stop_reason: Option<String>,
}
