//! The types every part of ferroclaw speaks: conversation messages made of
//! content blocks, tool specifications, token usage, sampling options, stop reasons, the events a
//! provider streams ([`ProviderEvent`]) and the one event stream that flows out
//! of the agent loop ([`AgentEvent`]).
//!
//! This crate does no I/O and has no async runtime: a renderer, the gateway or a
//! test depends on these types, not on the engine.
//!
//! ```
//! use ferroclaw_protocol::{ContentBlock, Message};
//!
//! let m = Message::user("summarise README.md");
//! assert_eq!(m.text(), "summarise README.md");
//! let line = serde_json::to_string(&m).unwrap();
//! assert!(line.contains("\"role\":\"user\""));
//! assert!(matches!(m.content[0], ContentBlock::Text { .. }));
//! ```

pub mod config_keys;
mod event;
mod message;
mod sampling;
mod usage;

pub use event::{AgentEvent, ProviderEvent, StopReason, TodoItem, TodoStatus};
pub use message::{ContentBlock, Message, ResultPart, Role, ToolCall, ToolSpec};
pub use sampling::Sampling;
pub use usage::Usage;
