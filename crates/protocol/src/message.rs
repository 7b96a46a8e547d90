//! Conversation messages and their content blocks.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Who said a message. The system prompt is not a message: it travels beside them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    User,
    Assistant,
}

/// One message of a conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    pub role: Role,
    pub content: Vec<ContentBlock>,
}

/// A piece of a message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ContentBlock {
    /// Plain text.
    Text { text: String },
    /// An image, base64-encoded.
    Image { media_type: String, data: String },
    /// The model asks for a tool to run.
    ToolCall(ToolCall),
    /// What a tool returned, answering the call with the same id.
    ToolResult {
        tool_call_id: String,
        content: Vec<ResultPart>,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        is_error: bool,
    },
}

/// A tool call requested by the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    /// The arguments; an object when the model produced valid JSON.
    pub input: Value,
}

/// A part of a tool result: text or an image.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ResultPart {
    Text { text: String },
    Image { media_type: String, data: String },
}

/// What the model is told a tool is: name, description, JSON schema of its input.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    pub input_schema: Value,
}

impl Message {
    /// A user message holding one text block.
    pub fn user(text: impl Into<String>) -> Self {
        Self { role: Role::User, content: vec![ContentBlock::text(text)] }
    }

    /// An assistant message holding one text block.
    pub fn assistant(text: impl Into<String>) -> Self {
        Self { role: Role::Assistant, content: vec![ContentBlock::text(text)] }
    }

    /// All text blocks joined, tool calls and results left out.
    pub fn text(&self) -> String {
        let mut out = String::new();
        for block in &self.content {
            if let ContentBlock::Text { text } = block {
                out.push_str(text);
            }
        }
        out
    }

    /// The tool calls this message asks for, in order.
    pub fn tool_calls(&self) -> impl Iterator<Item = &ToolCall> {
        self.content.iter().filter_map(|b| match b {
            ContentBlock::ToolCall(call) => Some(call),
            _ => None,
        })
    }

    /// True for a user message that carries only tool results: it continues a
    /// model turn rather than starting a new exchange.
    pub fn is_tool_results(&self) -> bool {
        self.role == Role::User
            && !self.content.is_empty()
            && self.content.iter().all(|b| matches!(b, ContentBlock::ToolResult { .. }))
    }

    /// Rough size in characters, the basis of token estimates (chars / 4).
    pub fn char_len(&self) -> usize {
        self.content.iter().map(ContentBlock::char_len).sum()
    }
}

impl ContentBlock {
    /// A text block.
    pub fn text(text: impl Into<String>) -> Self {
        Self::Text { text: text.into() }
    }

    /// A tool result holding one text part.
    pub fn tool_result(
        tool_call_id: impl Into<String>,
        text: impl Into<String>,
        is_error: bool,
    ) -> Self {
        Self::ToolResult {
            tool_call_id: tool_call_id.into(),
            content: vec![ResultPart::Text { text: text.into() }],
            is_error,
        }
    }

    fn char_len(&self) -> usize {
        match self {
            Self::Text { text } => text.len(),
            Self::Image { data, .. } => data.len() / 4,
            Self::ToolCall(call) => call.name.len() + call.input.to_string().len(),
            Self::ToolResult { content, .. } => content
                .iter()
                .map(|p| match p {
                    ResultPart::Text { text } => text.len(),
                    ResultPart::Image { data, .. } => data.len() / 4,
                })
                .sum(),
        }
    }
}

impl ResultPart {
    /// The text of a text part, `None` for an image.
    pub fn as_text(&self) -> Option<&str> {
        match self {
            Self::Text { text } => Some(text),
            Self::Image { .. } => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn content_blocks_round_trip_through_json_with_a_type_tag() {
        let m = Message {
            role: Role::Assistant,
            content: vec![
                ContentBlock::text("hi"),
                ContentBlock::ToolCall(ToolCall {
                    id: "c1".into(),
                    name: "read".into(),
                    input: json!({"path": "a"}),
                }),
            ],
        };
        let s = serde_json::to_string(&m).unwrap();
        assert!(s.contains(r#""type":"tool_call""#), "{s}");
        let back: Message = serde_json::from_str(&s).unwrap();
        assert_eq!(back, m);
    }

    #[test]
    fn is_error_is_omitted_when_false_and_defaults_on_read() {
        let ok = ContentBlock::tool_result("c1", "fine", false);
        let s = serde_json::to_string(&ok).unwrap();
        assert!(!s.contains("is_error"));
        let back: ContentBlock = serde_json::from_str(&s).unwrap();
        assert_eq!(back, ok);
        let err = serde_json::to_string(&ContentBlock::tool_result("c1", "bad", true)).unwrap();
        assert!(err.contains(r#""is_error":true"#));
    }

    #[test]
    fn a_message_of_only_tool_results_is_recognised() {
        let m = Message {
            role: Role::User,
            content: vec![ContentBlock::tool_result("c1", "x", false)],
        };
        assert!(m.is_tool_results());
        assert!(!Message::user("hello").is_tool_results());
    }
}
