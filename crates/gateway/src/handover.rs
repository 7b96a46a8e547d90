//! What one session says to another chat lands in that chat's history.
//!
//! A cron job and the heartbeat run in sessions of their own, and the
//! `message` tool may write to any chat; what they send is handed over to
//! the receiving chat's worker, which adds it to the chat's conversation (so
//! its page shows it when it opens, even if none was open when it was sent,
//! and its model knows it was said) and, for answers, sends it on. Several
//! gateways: the hand-over goes through the shared queue like a message, so
//! the process that holds the chat records it and the database keeps it.
//!
//! ```
//! use ferroclaw_gateway::handover::{Handed, conversation};
//! let plain = Handed { from: "cron".into(), text: "Stretch!".into(), media: vec![], send: true };
//! assert_eq!(conversation(&plain, "m1").len(), 1);
//! let file = Handed { media: vec!["chart.png".into()], ..plain };
//! assert_eq!(conversation(&file, "m1").len(), 2, "a `message` call and its result");
//! ```

use std::sync::Arc;

use ferroclaw_protocol::{ContentBlock, Message, ResultPart, Role, ToolCall};
use serde_json::json;

use crate::bus::InboundMessage;
use crate::gateway::Shared;
use crate::sessions::SessionKey;
use crate::worker::{Delivery, Work};

/// The metadata key of a handed-over message: what it carries.
const HANDED: &str = "handed_over";

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

/// Gives `handed` to chat `to`'s worker (see the module's documentation).
pub fn hand_over(shared: &Arc<Shared>, to: &SessionKey, handed: Handed) {
    let from = handed.from.clone();
    let mut message =
        InboundMessage::new(to.channel.clone(), &from, to.chat_id.clone(), handed.text.clone());
    message.metadata.insert(HANDED.into(), json!(handed));
    let queued = match &shared.store {
        Some(link) => link.accept(message),
        None => {
            let delivery = Delivery::To(to.clone());
            shared.enqueue(to.clone(), Work { message, delivery, quiet_if_ok: false, done: None })
        }
    };
    if let Err(e) = queued {
        tracing::warn!(chat = %to.address(), "what {from} said here was not delivered: {e}");
    }
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
