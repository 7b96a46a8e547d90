//! The always-on assistant behind `ferroclaw gateway`: chat channels (the
//! built-in web app, an OpenAI-compatible API, Telegram, Discord, Slack) feed a bounded
//! [`MessageBus`]; the [`Gateway`] admits each message by its channel's DM
//! policy ([`pairing`]), and runs it in the chat's own session (one worker per
//! live chat: each chat in order, chats in parallel up to a limit). Answers go
//! back through the channel's [`Channel::send`]; the agent can also write to
//! any chat with the `message` tool and schedule work with the `cron` tool.
//! [`cron`] jobs and the [`heartbeat`] run turns on a clock. A tool call that
//! needs approval asks the chat's owner in the chat ([`approval`]); pictures,
//! files and voice notes travel both ways ([`media`]).
//!
//! It does not build agents: it opens each chat's agent from the
//! [`ferroclaw_runtime::Runtime`] it is given, as every front end does, and it
//! does not render anything.
//!
//! ```
//! use ferroclaw_gateway::{InboundMessage, MessageBus, BusError, ANY_CHANNEL};
//! use ferroclaw_gateway::cron::Schedule;
//!
//! // The bus is bounded: a full queue says "busy" instead of growing.
//! let bus = MessageBus::new(1);
//! let _rx = bus.subscribe(ANY_CHANNEL);
//! bus.publish(InboundMessage::new("telegram", "42", "42", "hi")).unwrap();
//! assert_eq!(bus.publish(InboundMessage::new("telegram", "42", "42", "again")), Err(BusError::Busy));
//!
//! // A cron expression that does not parse is refused, with the reason.
//! assert!(Schedule::cron("0 9 * * 1-5", Some("Europe/Paris")).is_ok());
//! assert!(Schedule::cron("every morning", None).is_err());
//! ```

pub mod api_turn;
pub mod approval;
mod backoff;
pub mod bus;
pub mod channel;
pub mod chats;
pub mod commands;
pub mod config;
pub mod connection;
pub mod cron;
pub mod cron_words;
pub mod discord;
pub mod files;
pub mod format;
#[cfg(test)]
mod fuzz;
pub mod gateway;
pub mod handover;
pub mod heartbeat;
pub mod history;
pub mod home_lock;
pub mod idempotency;
pub mod intake;
pub mod liveness;
pub mod media;
pub mod media_retention;
pub mod multipart;
pub mod outbox;
pub mod pairing;
pub mod pg_journal;
pub mod resume;
pub mod scaleout;
pub mod scheduler;
pub mod sessions;
pub mod shared_media;
pub mod shared_sessions;
pub mod slack;
pub mod status;
pub mod store_link;
pub mod telegram;
pub mod tools;
pub mod web;
pub mod worker;
mod worktree_log;

pub use bus::{ANY_CHANNEL, BusError, InboundMessage, MessageBus, OutboundMessage, SYSTEM_CHANNEL};
pub use channel::{Channel, ChannelError};
pub use config::{ChannelSettings, DmPolicy, GatewayConfigError, GatewaySettings};
pub use gateway::Gateway;
pub use sessions::SessionKey;
