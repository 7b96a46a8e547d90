//! The Messages request body, serialised straight from the request it
//! borrows: no `serde_json::Value` tree is built, so the conversation, the
//! system prompt and the tool schemas are not copied once more per request
//! on their way to the wire.
//!
//! Prompt caching: the system prompt, the last tool spec and the last block of
//! the last message carry `cache_control` breakpoints (3 of the 4 allowed), so
//! each turn of an agent loop reads the previous turn's prefix from cache.

use ferroclaw_protocol::{ContentBlock, Message, ResultPart, Role, Sampling, ToolSpec};
use serde::ser::{Serialize, SerializeMap, SerializeSeq, Serializer};
use serde_json::Value;

use crate::ChatRequest;
use crate::text_part::TextPart;

/// `{"type": "ephemeral"}`, the cache breakpoint.
struct Ephemeral;

impl Serialize for Ephemeral {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(1))?;
        map.serialize_entry("type", "ephemeral")?;
        map.end()
    }
}

/// The whole body.
pub(crate) struct Body<'a> {
    pub req: &'a ChatRequest,
    pub stream: bool,
}

impl Serialize for Body<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let req = self.req;
        let mut map = s.serialize_map(None)?;
        map.serialize_entry("model", &req.model)?;
        map.serialize_entry("max_tokens", &req.max_tokens)?;
        if !req.system.is_empty() {
            map.serialize_entry("system", &[System(&req.system)])?;
        }
        map.serialize_entry("messages", &Messages(&req.messages))?;
        if !req.tools.is_empty() {
            map.serialize_entry("tools", &Tools(&req.tools))?;
        }
        let sampling = sent_sampling(&req.sampling);
        if let Some(t) = sampling.temperature {
            map.serialize_entry("temperature", &t)?;
        }
        if let Some(p) = sampling.top_p {
            map.serialize_entry("top_p", &p)?;
        }
        if !sampling.stop.is_empty() {
            map.serialize_entry("stop_sequences", &sampling.stop)?;
        }
        map.serialize_entry("stream", &self.stream)?;
        map.end()
    }
}

/// What the Messages API gets of a request's sampling options: no seed (it
/// has none), and no `top_p` beside a temperature (its newer models refuse
/// the two together; the temperature is kept). Each one left out is logged
/// at debug level, never sent to be refused.
fn sent_sampling(asked: &Sampling) -> Sampling {
    let mut sent = asked.clone();
    if let Some(seed) = sent.seed.take() {
        tracing::debug!(seed, "seed not sent: the Anthropic Messages API has none");
    }
    if sent.temperature.is_some()
        && let Some(top_p) = sent.top_p.take()
    {
        tracing::debug!(top_p, "top_p not sent beside temperature: Anthropic models take one");
    }
    sent
}

struct System<'a>(&'a str);

impl Serialize for System<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(3))?;
        map.serialize_entry("type", "text")?;
        map.serialize_entry("text", self.0)?;
        map.serialize_entry("cache_control", &Ephemeral)?;
        map.end()
    }
}

struct Tools<'a>(&'a [ToolSpec]);

impl Serialize for Tools<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(self.0.len()))?;
        for (i, t) in self.0.iter().enumerate() {
            seq.serialize_element(&ToolJson { spec: t, cached: i + 1 == self.0.len() })?;
        }
        seq.end()
    }
}

struct ToolJson<'a> {
    spec: &'a ToolSpec,
    cached: bool,
}

impl Serialize for ToolJson<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(None)?;
        map.serialize_entry("name", &self.spec.name)?;
        map.serialize_entry("description", &self.spec.description)?;
        map.serialize_entry("input_schema", &self.spec.input_schema)?;
        if self.cached {
            map.serialize_entry("cache_control", &Ephemeral)?;
        }
        map.end()
    }
}

struct Messages<'a>(&'a [Message]);

impl Serialize for Messages<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(self.0.len()))?;
        for (i, m) in self.0.iter().enumerate() {
            seq.serialize_element(&MessageJson { message: m, last: i + 1 == self.0.len() })?;
        }
        seq.end()
    }
}

struct MessageJson<'a> {
    message: &'a Message,
    /// The last message: its last block carries the cache breakpoint.
    last: bool,
}

impl Serialize for MessageJson<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let role = match self.message.role {
            Role::User => "user",
            Role::Assistant => "assistant",
        };
        let content = Blocks::new(&self.message.content, self.last);
        let mut map = s.serialize_map(Some(2))?;
        map.serialize_entry("role", role)?;
        map.serialize_entry("content", &content)?;
        map.end()
    }
}

/// A message's blocks: empty text blocks are left out (the API rejects
/// them) unless nothing else is left.
struct Blocks<'a> {
    blocks: &'a [ContentBlock],
    drop_empty: bool,
    cache_last: bool,
}

impl<'a> Blocks<'a> {
    fn new(blocks: &'a [ContentBlock], cache_last: bool) -> Self {
        let drop_empty = blocks.iter().any(|b| !is_empty_text(b));
        Blocks { blocks, drop_empty, cache_last }
    }

    fn kept(&self) -> impl Iterator<Item = &'a ContentBlock> {
        let drop_empty = self.drop_empty;
        self.blocks.iter().filter(move |b| !drop_empty || !is_empty_text(b))
    }
}

impl Serialize for Blocks<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let count = self.kept().count();
        let mut seq = s.serialize_seq(Some(count))?;
        for (i, block) in self.kept().enumerate() {
            let cached = self.cache_last && i + 1 == count;
            seq.serialize_element(&BlockJson { block, cached })?;
        }
        seq.end()
    }
}

fn is_empty_text(b: &ContentBlock) -> bool {
    matches!(b, ContentBlock::Text { text } if text.is_empty())
}

struct BlockJson<'a> {
    block: &'a ContentBlock,
    cached: bool,
}

impl Serialize for BlockJson<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(None)?;
        match self.block {
            ContentBlock::Text { text } => {
                map.serialize_entry("type", "text")?;
                map.serialize_entry("text", text)?;
            }
            ContentBlock::Image { media_type, data } => {
                map.serialize_entry("type", "image")?;
                map.serialize_entry("source", &ImageSource { media_type, data })?;
            }
            ContentBlock::ToolCall(call) => {
                map.serialize_entry("type", "tool_use")?;
                map.serialize_entry("id", &call.id)?;
                map.serialize_entry("name", &call.name)?;
                // The API insists on an object; a call whose arguments failed
                // to parse (kept as a string) is replayed as `{}`.
                match &call.input {
                    input @ Value::Object(_) => map.serialize_entry("input", input)?,
                    _ => map.serialize_entry("input", &serde_json::Map::new())?,
                }
            }
            ContentBlock::ToolResult { tool_call_id, content, is_error } => {
                map.serialize_entry("type", "tool_result")?;
                map.serialize_entry("tool_use_id", tool_call_id)?;
                map.serialize_entry("is_error", is_error)?;
                let parts = Parts(content);
                if parts.len() > 0 {
                    map.serialize_entry("content", &parts)?;
                }
            }
        }
        if self.cached {
            map.serialize_entry("cache_control", &Ephemeral)?;
        }
        map.end()
    }
}

struct ImageSource<'a> {
    media_type: &'a str,
    data: &'a str,
}

impl Serialize for ImageSource<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(3))?;
        map.serialize_entry("type", "base64")?;
        map.serialize_entry("media_type", self.media_type)?;
        map.serialize_entry("data", self.data)?;
        map.end()
    }
}

/// A tool result's parts, empty texts left out.
struct Parts<'a>(&'a [ResultPart]);

impl Parts<'_> {
    fn kept(&self) -> impl Iterator<Item = &ResultPart> {
        self.0.iter().filter(|p| !matches!(p, ResultPart::Text { text } if text.is_empty()))
    }

    fn len(&self) -> usize {
        self.kept().count()
    }
}

impl Serialize for Parts<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(self.len()))?;
        for part in self.kept() {
            match part {
                ResultPart::Text { text } => {
                    seq.serialize_element(&TextPart(text))?;
                }
                ResultPart::Image { media_type, data } => {
                    seq.serialize_element(&ImagePart(ImageSource { media_type, data }))?;
                }
            }
        }
        seq.end()
    }
}

struct ImagePart<'a>(ImageSource<'a>);

impl Serialize for ImagePart<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(2))?;
        map.serialize_entry("type", "image")?;
        map.serialize_entry("source", &self.0)?;
        map.end()
    }
}
