//! The Chat Completions request body, serialised straight from the request
//! it borrows (as the Anthropic body is): no `serde_json::Value` tree is
//! built, so the conversation and the tool schemas are not copied once more
//! per request on their way to the wire.
//!
//! The mapping: the system prompt is the first message; a user message's
//! tool results each become a `tool` message (they must follow the
//! assistant's `tool_calls`), then one `user` message carries the images the
//! results held (tool messages cannot hold images) and the user's own text
//! and images; plain user text is one string.

use std::fmt::{self, Display, Write as _};

use ferroclaw_protocol::{ContentBlock, Message, ResultPart, Role, ToolCall, ToolSpec};
use serde::ser::{Serialize, SerializeMap, SerializeSeq, Serializer};
use serde_json::Value;

use crate::ChatRequest;
use crate::text_part::TextPart;

/// The whole body.
pub(crate) struct Body<'a> {
    pub req: &'a ChatRequest,
    pub stream: bool,
    /// `max_tokens` or `max_completion_tokens` (see [`super::max_tokens_field`]).
    pub max_tokens_field: &'a str,
}

impl Serialize for Body<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let req = self.req;
        let mut map = s.serialize_map(None)?;
        map.serialize_entry("model", &req.model)?;
        map.serialize_entry(
            "messages",
            &Messages { system: &req.system, messages: &req.messages },
        )?;
        if !req.tools.is_empty() {
            map.serialize_entry("tools", &Tools(&req.tools))?;
        }
        map.serialize_entry(self.max_tokens_field, &req.max_tokens)?;
        let sampling = &req.sampling;
        if let Some(t) = sampling.temperature {
            map.serialize_entry("temperature", &t)?;
        }
        if let Some(p) = sampling.top_p {
            map.serialize_entry("top_p", &p)?;
        }
        if let Some(seed) = sampling.seed {
            map.serialize_entry("seed", &seed)?;
        }
        if !sampling.stop.is_empty() {
            map.serialize_entry("stop", &sampling.stop)?;
        }
        map.serialize_entry("stream", &self.stream)?;
        if self.stream {
            map.serialize_entry("stream_options", &IncludeUsage)?;
        }
        map.end()
    }
}

/// `{"include_usage": true}`: usage arrives in the last chunk.
struct IncludeUsage;

impl Serialize for IncludeUsage {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(1))?;
        map.serialize_entry("include_usage", &true)?;
        map.end()
    }
}

struct Tools<'a>(&'a [ToolSpec]);

impl Serialize for Tools<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(self.0.len()))?;
        for spec in self.0 {
            seq.serialize_element(&Function(spec))?;
        }
        seq.end()
    }
}

/// `{"type": "function", "function": {name, description, parameters}}`.
struct Function<'a>(&'a ToolSpec);

impl Serialize for Function<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        struct Inner<'a>(&'a ToolSpec);
        impl Serialize for Inner<'_> {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                let mut map = s.serialize_map(Some(3))?;
                map.serialize_entry("name", &self.0.name)?;
                map.serialize_entry("description", &self.0.description)?;
                map.serialize_entry("parameters", &self.0.input_schema)?;
                map.end()
            }
        }
        let mut map = s.serialize_map(Some(2))?;
        map.serialize_entry("type", "function")?;
        map.serialize_entry("function", &Inner(self.0))?;
        map.end()
    }
}

/// The system prompt, then each message as one or more wire messages.
struct Messages<'a> {
    system: &'a str,
    messages: &'a [Message],
}

impl Serialize for Messages<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(None)?;
        if !self.system.is_empty() {
            seq.serialize_element(&Plain { role: "system", content: self.system })?;
        }
        for m in self.messages {
            match m.role {
                Role::User => {
                    for block in &m.content {
                        if let ContentBlock::ToolResult { tool_call_id, content, .. } = block {
                            seq.serialize_element(&ToolMessage { tool_call_id, content })?;
                        }
                    }
                    if has_user_parts(m) {
                        seq.serialize_element(&UserMessage(m))?;
                    }
                }
                Role::Assistant => seq.serialize_element(&AssistantMessage(m))?,
            }
        }
        seq.end()
    }
}

/// `{"role": ROLE, "content": TEXT}`.
struct Plain<'a> {
    role: &'a str,
    content: &'a str,
}

impl Serialize for Plain<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(2))?;
        map.serialize_entry("role", self.role)?;
        map.serialize_entry("content", self.content)?;
        map.end()
    }
}

/// A tool result: its text parts, one per line, and a note where its images
/// went (the next `user` message).
struct ToolMessage<'a> {
    tool_call_id: &'a str,
    content: &'a [ResultPart],
}

impl Serialize for ToolMessage<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(3))?;
        map.serialize_entry("role", "tool")?;
        map.serialize_entry("tool_call_id", self.tool_call_id)?;
        map.serialize_entry("content", &AsStr(ResultText(self.content)))?;
        map.end()
    }
}

/// The text of a tool message, written as it is serialised.
struct ResultText<'a>(&'a [ResultPart]);

impl Display for ResultText<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        for text in self.0.iter().filter_map(ResultPart::as_text) {
            if !first {
                f.write_char('\n')?;
            }
            first = false;
            f.write_str(text)?;
        }
        if self.0.iter().any(|p| matches!(p, ResultPart::Image { .. })) {
            if !first {
                f.write_char('\n')?;
            }
            f.write_str("(image attached in the next message)")?;
        }
        Ok(())
    }
}

/// True when a user message has something besides its tool results' text:
/// text of its own, or an image (its own or a result's).
fn has_user_parts(m: &Message) -> bool {
    m.content.iter().any(|b| match b {
        ContentBlock::Text { .. } | ContentBlock::Image { .. } => true,
        ContentBlock::ToolResult { content, .. } => result_has_image(content),
        ContentBlock::ToolCall(_) => false,
    })
}

fn has_image(m: &Message) -> bool {
    m.content.iter().any(|b| match b {
        ContentBlock::Image { .. } => true,
        ContentBlock::ToolResult { content, .. } => result_has_image(content),
        _ => false,
    })
}

fn result_has_image(content: &[ResultPart]) -> bool {
    content.iter().any(|p| matches!(p, ResultPart::Image { .. }))
}

/// The `user` message after the tool messages: with an image, content parts
/// (each result's images after a line naming its call, then the user's own
/// text and images, in order); without, the texts as one string.
struct UserMessage<'a>(&'a Message);

impl Serialize for UserMessage<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(2))?;
        map.serialize_entry("role", "user")?;
        if has_image(self.0) {
            map.serialize_entry("content", &UserParts(&self.0.content))?;
        } else {
            map.serialize_entry("content", &AsStr(Texts { blocks: &self.0.content, sep: "\n" }))?;
        }
        map.end()
    }
}

struct UserParts<'a>(&'a [ContentBlock]);

impl Serialize for UserParts<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(None)?;
        for block in self.0 {
            match block {
                ContentBlock::ToolResult { tool_call_id, content, .. }
                    if result_has_image(content) =>
                {
                    let label = format!("Image from tool call {tool_call_id}:");
                    seq.serialize_element(&TextPart(&label))?;
                    for part in content {
                        if let ResultPart::Image { media_type, data } = part {
                            seq.serialize_element(&ImageUrl { media_type, data })?;
                        }
                    }
                }
                ContentBlock::Text { text } => seq.serialize_element(&TextPart(text))?,
                ContentBlock::Image { media_type, data } => {
                    seq.serialize_element(&ImageUrl { media_type, data })?;
                }
                ContentBlock::ToolResult { .. } | ContentBlock::ToolCall(_) => {}
            }
        }
        seq.end()
    }
}

/// `{"type": "image_url", "image_url": {"url": "data:TYPE;base64,DATA"}}`.
struct ImageUrl<'a> {
    media_type: &'a str,
    data: &'a str,
}

impl Serialize for ImageUrl<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        struct Url<'a>(&'a ImageUrl<'a>);
        impl Serialize for Url<'_> {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                let mut map = s.serialize_map(Some(1))?;
                let (media_type, data) = (self.0.media_type, self.0.data);
                map.serialize_entry(
                    "url",
                    &AsStr(format_args!("data:{media_type};base64,{data}")),
                )?;
                map.end()
            }
        }
        let mut map = s.serialize_map(Some(2))?;
        map.serialize_entry("type", "image_url")?;
        map.serialize_entry("image_url", &Url(self))?;
        map.end()
    }
}

/// An assistant message; `content` is `""` rather than `null` beside tool
/// calls, because some local servers reject `null`.
struct AssistantMessage<'a>(&'a Message);

impl Serialize for AssistantMessage<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let m = self.0;
        let mut map = s.serialize_map(None)?;
        map.serialize_entry("role", "assistant")?;
        map.serialize_entry("content", &AsStr(Texts { blocks: &m.content, sep: "" }))?;
        if m.tool_calls().next().is_some() {
            map.serialize_entry("tool_calls", &Calls(m))?;
        }
        map.end()
    }
}

struct Calls<'a>(&'a Message);

impl Serialize for Calls<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(None)?;
        for call in self.0.tool_calls() {
            seq.serialize_element(&Call(call))?;
        }
        seq.end()
    }
}

/// `{"id", "type": "function", "function": {"name", "arguments"}}`, the
/// arguments as a JSON string (those that failed to parse as the model's
/// own text).
struct Call<'a>(&'a ToolCall);

impl Serialize for Call<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        struct Named<'a>(&'a ToolCall);
        impl Serialize for Named<'_> {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                let mut map = s.serialize_map(Some(2))?;
                map.serialize_entry("name", &self.0.name)?;
                match &self.0.input {
                    Value::String(raw) => map.serialize_entry("arguments", raw)?,
                    other => map.serialize_entry("arguments", &AsStr(other))?,
                }
                map.end()
            }
        }
        let mut map = s.serialize_map(Some(3))?;
        map.serialize_entry("id", &self.0.id)?;
        map.serialize_entry("type", "function")?;
        map.serialize_entry("function", &Named(self.0))?;
        map.end()
    }
}

/// The text blocks of a message, joined by `sep`.
struct Texts<'a> {
    blocks: &'a [ContentBlock],
    sep: &'a str,
}

impl Display for Texts<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        for block in self.blocks {
            if let ContentBlock::Text { text } = block {
                if !first {
                    f.write_str(self.sep)?;
                }
                first = false;
                f.write_str(text)?;
            }
        }
        Ok(())
    }
}

/// Serialises a [`Display`] as a JSON string, escaped as it is written.
struct AsStr<T>(T);

impl<T: Display> Serialize for AsStr<T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(&self.0)
    }
}
