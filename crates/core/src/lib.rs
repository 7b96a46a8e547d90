//! The agent engine: the loop that turns a user request into model calls and
//! tool runs ([`Agent::run`]), configuration layering ([`Config`]), sessions
//! on disk ([`SessionStore`], [`SessionLog`]), permissions
//! ([`Permissions`]), and context engineering: the layered system prompt
//! ([`ContextBuilder`]), skills, memory, recall and compaction.
//!
//! It does not render anything: it emits [`ferroclaw_protocol::AgentEvent`]s
//! to whoever listens (terminal, gateway, JSON stream, test).
//!
//! ```
//! use ferroclaw_core::{Decision, PermissionMode, Permissions};
//! use serde_json::json;
//!
//! let p = Permissions::new(PermissionMode::Default, &[], &["bash(curl *)".into()]).unwrap();
//! assert_eq!(p.decide("read", true, &json!({"path": "README.md"})), Decision::Allow);
//! assert_eq!(p.decide("bash", false, &json!({"command": "ls"})), Decision::Ask);
//! assert!(matches!(p.decide("bash", false, &json!({"command": "curl x"})), Decision::Deny(_)));
//! ```

pub mod agent;
pub mod agents;
pub mod approval;
pub mod checkpoint;
pub mod clock;
pub mod commands;
pub mod compaction;
pub mod config;
pub mod context;
pub mod frontmatter;
pub mod hooks;
pub mod journal;
pub mod learning;
pub mod memory;
pub mod mentions;
pub mod model_alias;
pub mod permission;
pub mod plan;
pub mod pricing;
pub mod private_files;
pub mod prompt;
pub mod recall;
pub mod redact;
pub mod session;
pub mod skills;
pub mod todo;
pub mod trust;

pub use agent::{Agent, AgentParts, EventSink, Outcome, Report, Uncommitted};
pub use approval::{Approval, Approver, NoOneToAsk, PlanVerdict};
pub use config::{Config, ConfigError, Overrides};
pub use context::{Context, ContextBuilder};
pub use permission::{Decision, PermissionMode, Permissions, Rule};
pub use session::{SessionLog, SessionStore};
