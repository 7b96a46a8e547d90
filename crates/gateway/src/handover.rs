//! What one session says to another chat lands in that chat's history.
//!
//! A cron job and the heartbeat run in sessions of their own, and the
//! `message` tool may write to any chat; what they send is handed over to
//! the receiving chat's worker, which adds it to the chat's conversation (so
//! its page shows it when it opens, even if none was open when it was sent,
//! and its model knows it was said) and, for answers, sends it on. Several
//! gateways: the hand-over goes through the shared queue like a message, so
//! the process that holds the chat records it and the database keeps it
//! (`Chats::hand_over`).
//!
//! ```
//! use ferroclaw_gateway::handover::{Handed, conversation};
//! let plain = Handed { from: "cron".into(), text: "Stretch!".into(), media: vec![], send: true };
//! assert_eq!(conversation(&plain, "m1").len(), 1);
//! let file = Handed { media: vec!["chart.png".into()], ..plain };
//! assert_eq!(conversation(&file, "m1").len(), 2, "a `message` call and its result");
//! ```

use ferroclaw_protocol::{ContentBlock, Message, ResultPart, Role, ToolCall};
use serde_json::json;

use crate::bus::InboundMessage;

/// The metadata key of a handed-over message: what it carries.
pub(crate) const HANDED: &str = "handed_over";

/// What a session hands to another chat.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Handed {
    /// Who says it: `cron`, `heartbeat`, or the session of a `message` call.
    pub from: String,
    pub text: String,
    /// Files sent with it (workspace paths), as the `message` tool took them.
    pub media: Vec<String>,
    /// Sent on by the chat's worker (an answer); false when it was sent
    /// already (a `message` call) and is only recorded.
    pub send: bool,
}

/// What `message` carries, if it is a hand-over.
pub fn handed(message: &InboundMessage) -> Option<Handed> {
    serde_json::from_value(message.metadata.get(HANDED)?.clone()).ok()
}

/// The messages that record `handed` in the receiving chat's conversation:
/// its text as the assistant's, or, with files, the `message` call that sent
/// them and its result (as the chat's own agent would have sent them; the
/// history shows the files from it). `id` makes the call's id unique.
pub fn conversation(handed: &Handed, id: &str) -> Vec<Message> {
    if handed.media.is_empty() {
        return vec![Message::assistant(handed.text.clone())];
    }
    let call = ToolCall {
        id: format!("handed-{id}"),
        name: "message".into(),
        input: json!({"content": handed.text, "media": handed.media}),
    };
    let result = ContentBlock::ToolResult {
        tool_call_id: call.id.clone(),
        content: vec![ResultPart::Text { text: format!("Sent to this chat by {}", handed.from) }],
        is_error: false,
    };
    vec![
        Message { role: Role::Assistant, content: vec![ContentBlock::ToolCall(call)] },
        Message { role: Role::User, content: vec![result] },
    ]
}
