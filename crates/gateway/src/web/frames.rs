//! The web chat socket's frames as serde types: what a page sends
//! ([`ClientFrame`]) and what the gateway sends it ([`ServerFrame`]). A frame
//! that is not one of ours is refused with serde's own message, naming the
//! field (`choice: unknown variant "always", expected one of ...`); fields we
//! do not know are ignored.

use ferroclaw_protocol::AgentEvent;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::approval::ApprovalPrompt;

/// A frame from a chat page.
pub(super) enum ClientFrame {
    /// A message (text, pasted images, or both).
    Message(MessageFrame),
    /// Cancel the turns the chat's pages asked for (running or waiting).
    Stop,
    /// An answer to an approval request.
    Approve(ApproveFrame),
}

impl ClientFrame {
    /// The frame in `text`, or why it is not one.
    pub(super) fn parse(text: &str) -> Result<Self, String> {
        let value: Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
        Ok(match typed::<Tag>(&value)?.kind {
            FrameKind::Message => Self::Message(typed(&value)?),
            FrameKind::Stop => Self::Stop,
            FrameKind::Approve => Self::Approve(typed(&value)?),
        })
    }
}

/// `value` read as `T`; an error says which field is wrong.
fn typed<T: DeserializeOwned>(value: &Value) -> Result<T, String> {
    serde_path_to_error::deserialize(value).map_err(|e| e.to_string())
}

/// The `type` every client frame carries.
#[derive(Deserialize)]
struct Tag {
    #[serde(rename = "type")]
    kind: FrameKind,
}

#[derive(Deserialize)]
#[serde(rename_all = "snake_case")]
enum FrameKind {
    Message,
    Stop,
    Approve,
}

/// `{"type": "message", "content", "images": [{"media_type", "data"}],
/// "model"}` (`model`: an alias from the page's model picker).
#[derive(Deserialize)]
pub(super) struct MessageFrame {
    pub content: Option<String>,
    #[serde(default)]
    pub images: Vec<PastedImage>,
    #[serde(default)]
    pub model: Option<String>,
}

/// An image pasted into the message box: base64 bytes and what the page
/// says they are (the gateway checks the bytes).
#[derive(Deserialize)]
pub(super) struct PastedImage {
    #[serde(default)]
    pub media_type: String,
    pub data: String,
}

/// `{"type": "approve", "id", "choice", "reason"}`.
#[derive(Deserialize)]
pub(super) struct ApproveFrame {
    pub id: String,
    pub choice: Choice,
    pub reason: Option<String>,
}

/// How an approval request is answered.
#[derive(Deserialize, Clone, Copy)]
#[serde(rename_all = "snake_case")]
pub(super) enum Choice {
    Once,
    Chat,
    Project,
    Deny,
}

impl Choice {
    /// The word the chat commands use for it.
    pub(super) fn word(self) -> &'static str {
        match self {
            Self::Once => "once",
            Self::Chat => "chat",
            Self::Project => "project",
            Self::Deny => "deny",
        }
    }
}

/// A frame to a chat page.
#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(super) enum ServerFrame<'a> {
    /// First frame: the conversation the page continues (its history at
    /// `/api/sessions/ID`, when `history`: a new chat has none to ask for),
    /// whether a message from the chat is still being answered, and the
    /// models the page may offer.
    Ready {
        chat: &'a str,
        session: Option<&'a str>,
        history: bool,
        running: bool,
        models: &'a Value,
    },
    /// An event of the turn being answered (text deltas, tool calls).
    Event { event: &'a AgentEvent },
    /// The final answer to a message.
    Reply(Answer<'a>),
    /// A message the agent sends on its own.
    Message(Answer<'a>),
    /// A message not taken, or a turn that failed (then with its answer's fields).
    Error(Refusal<'a>),
    /// A tool call waiting for approval.
    Approval { id: &'a str, tool: &'a str, input: &'a Value, summary: &'a str },
    /// An approval request answered, timed out or cancelled.
    ApprovalResolved { id: &'a str, outcome: &'a str },
    /// The chat's background jobs, when they change.
    Jobs { jobs: Vec<Value> },
}

impl<'a> ServerFrame<'a> {
    /// An error frame saying `message`.
    pub(super) fn error(message: &'a str) -> Self {
        Self::Error(Refusal { message, answer: None })
    }

    /// The frame that shows an approval request.
    pub(super) fn approval(prompt: &'a ApprovalPrompt) -> Self {
        Self::Approval {
            id: &prompt.id,
            tool: &prompt.tool,
            input: &prompt.input,
            summary: &prompt.summary,
        }
    }

    /// The frame as the socket's text.
    pub(super) fn text(&self) -> String {
        // Serialising strings and JSON values cannot fail.
        serde_json::to_string(self).unwrap_or_default()
    }
}

/// An answer's fields (`message` and `content` both hold its text).
#[derive(Serialize)]
pub(super) struct Answer<'a> {
    pub message: &'a str,
    pub content: &'a str,
    pub media: &'a [String],
    pub reply_to: Option<&'a str>,
}

/// An error frame: what went wrong, and for a failed turn its answer.
#[derive(Serialize)]
pub(super) struct Refusal<'a> {
    message: &'a str,
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    answer: Option<FailedAnswer<'a>>,
}

impl<'a> Refusal<'a> {
    /// A failed turn's answer as an error frame.
    pub(super) fn failed(answer: Answer<'a>) -> Self {
        Self {
            message: answer.message,
            answer: Some(FailedAnswer {
                content: answer.content,
                media: answer.media,
                reply_to: answer.reply_to,
            }),
        }
    }
}

#[derive(Serialize)]
struct FailedAnswer<'a> {
    content: &'a str,
    media: &'a [String],
    reply_to: Option<&'a str>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn refusal(text: &str) -> String {
        ClientFrame::parse(text).err().unwrap_or_default()
    }

    #[test]
    fn a_wrong_field_is_refused_with_serdes_message_and_its_path() {
        let bad_choice = r#"{"type":"approve","id":"a1","choice":"sometimes"}"#;
        assert!(
            refusal(bad_choice)
                .starts_with("choice: unknown variant `sometimes`, expected one of `once`")
        );
        let bad_image = r#"{"type":"message","content":"hi","images":[{"data":5}]}"#;
        assert_eq!(
            refusal(bad_image),
            "images[0].data: invalid type: integer `5`, expected a string"
        );
        let unknown = r#"{"type":"shout","content":"hi"}"#;
        assert!(
            refusal(unknown).starts_with("type: unknown variant `shout`"),
            "{}",
            refusal(unknown)
        );
        assert_eq!(refusal(r#"{"content":"hi"}"#), "missing field `type`");
        assert!(refusal("hi").starts_with("not JSON: "));
    }

    #[test]
    fn unknown_fields_and_nulls_are_tolerated() {
        let frame = r#"{"type":"message","content":"hi","sent_at":1,"images":[]}"#;
        assert!(
            matches!(ClientFrame::parse(frame), Ok(ClientFrame::Message(m)) if m.content.as_deref() == Some("hi"))
        );
        let frame = r#"{"type":"approve","id":"a1","choice":"deny","reason":null}"#;
        assert!(
            matches!(ClientFrame::parse(frame), Ok(ClientFrame::Approve(a)) if a.reason.is_none())
        );
        assert!(matches!(
            ClientFrame::parse(r#"{"type":"stop","why":"bored"}"#),
            Ok(ClientFrame::Stop)
        ));
    }

    #[test]
    fn server_frames_have_the_shapes_pages_read() {
        let text =
            |f: ServerFrame<'_>| serde_json::from_str::<Value>(&f.text()).unwrap_or_default();
        assert_eq!(text(ServerFrame::error("busy")), json!({"type": "error", "message": "busy"}));
        let media = vec!["out.png".to_string()];
        let answer =
            |reply_to| Answer { message: "done", content: "done", media: &media, reply_to };
        let full =
            json!({"message": "done", "content": "done", "media": ["out.png"], "reply_to": "m1"});
        let mut reply = full.clone();
        reply["type"] = json!("reply");
        assert_eq!(text(ServerFrame::Reply(answer(Some("m1")))), reply);
        let mut failed = full.clone();
        failed["type"] = json!("error");
        assert_eq!(text(ServerFrame::Error(Refusal::failed(answer(Some("m1"))))), failed);
        let mut own = full;
        own["type"] = json!("message");
        own["reply_to"] = Value::Null;
        assert_eq!(text(ServerFrame::Message(answer(None))), own);
        let models = json!([{"id": "ferroclaw", "spec": "openai/gpt-5"}]);
        let ready = ServerFrame::Ready {
            chat: "c",
            session: None,
            history: false,
            running: true,
            models: &models,
        };
        assert_eq!(
            text(ready),
            json!({"type": "ready", "chat": "c", "session": null, "history": false,
                   "running": true, "models": [{"id": "ferroclaw", "spec": "openai/gpt-5"}]})
        );
        let resolved = ServerFrame::ApprovalResolved { id: "a1", outcome: "denied" };
        assert_eq!(
            text(resolved),
            json!({"type": "approval_resolved", "id": "a1", "outcome": "denied"})
        );
    }
}
