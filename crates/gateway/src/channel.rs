//! The [`Channel`] trait: one chat platform (web, Telegram, Discord, ...) as
//! the gateway sees it. A channel turns the platform's incoming messages into
//! [`InboundMessage`](crate::InboundMessage)s on the bus and delivers [`OutboundMessage`]s back.
//!
//! A channel does not decide who may talk to the agent (the gateway checks
//! every inbound message against the channel's `dm_policy` and allow-list
//! before it reaches a model) and does not run agents.

use async_trait::async_trait;
use tokio_util::sync::CancellationToken;

use crate::approval::prompt::{ApprovalPrompt, Decided};
use crate::bus::{InboundMessage, MessageBus, OutboundMessage};

/// Why a channel could not start or deliver.
#[derive(Debug, thiserror::Error)]
pub enum ChannelError {
    /// The channel's configuration is unusable (missing token, bad URL, ...).
    #[error("channel {channel}: {message}")]
    Config { channel: String, message: String },
    /// The platform refused or could not be reached.
    #[error("channel {channel}: {message}")]
    Platform { channel: String, message: String },
    /// No chat with that id is reachable on this channel.
    #[error("channel {channel}: no chat {chat_id:?}")]
    UnknownChat { channel: String, chat_id: String },
}

/// A chat platform the gateway talks through.
///
/// Implementations are cheap to share (`Arc<dyn Channel>`): `start` runs the
/// receiving side until `shutdown` is cancelled, while `send` may be called at
/// any time, from any task, including after `start` has returned.
#[async_trait]
pub trait Channel: Send + Sync {
    /// The name used in config (`[channels.NAME]`), session keys and the
    /// `message` tool, e.g. `"telegram"`.
    fn name(&self) -> &str;

    /// Receives messages until `shutdown` is cancelled, publishing each one on
    /// `bus` (with `channel` set to [`Channel::name`]). Returns when stopped;
    /// an error means the channel could not run at all.
    async fn start(&self, bus: MessageBus, shutdown: CancellationToken)
    -> Result<(), ChannelError>;

    /// Shows `chat_id`'s background jobs, now that they changed (one started,
    /// finished or was stopped), where the channel can show them live (the
    /// web app). The default shows nothing.
    fn show_jobs(&self, _chat_id: &str, _jobs: &[ferroclaw_tools::JobSummary]) {}

    /// Delivers one message to `message.chat_id`, splitting or converting it
    /// as the platform requires.
    async fn send(&self, message: OutboundMessage) -> Result<(), ChannelError>;

    /// Asks the chat for approval of a tool call: buttons where the platform
    /// has them, always with the `/approve` and `/deny` commands in the text.
    /// The default sends [`ApprovalPrompt::text`] as a message.
    async fn ask_approval(
        &self,
        chat_id: &str,
        prompt: &ApprovalPrompt,
    ) -> Result<(), ChannelError> {
        let message = OutboundMessage {
            channel: self.name().to_string(),
            chat_id: chat_id.to_string(),
            content: prompt.text(),
            media: Vec::new(),
            reply_to: None,
            failure: None,
        };
        self.send(message).await
    }

    /// Tells the chat that request `id` ended without an answer there
    /// (`outcome`: timed out, cancelled). The default says nothing.
    async fn approval_resolved(
        &self,
        _chat_id: &str,
        _id: &str,
        _outcome: &str,
    ) -> Result<(), ChannelError> {
        Ok(())
    }

    /// Answers the person who sent `decision` (an `/approve`, `/deny` or a
    /// button press) with `text`: privately where the platform can (a button's
    /// toast, an ephemeral message), else as a reply in the chat.
    async fn answer_decision(
        &self,
        decision: &InboundMessage,
        _decided: &Decided,
        text: &str,
    ) -> Result<(), ChannelError> {
        self.send(OutboundMessage::reply(decision, text)).await
    }
}
