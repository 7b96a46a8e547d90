//! ferroclaw as an ACP agent: `ferroclaw acp` speaks the Agent Client
//! Protocol (version 1) on stdin/stdout, one JSON-RPC message per line, so
//! editors (Zed, JetBrains, Neovim plugins, `acpx`) drive it. Logs go to
//! stderr only.
//!
//! Every session is an agent opened through
//! [`Runtime::open`](ferroclaw_runtime::Runtime::open); its
//! [`AgentEvent`](ferroclaw_protocol::AgentEvent)s become `session/update`s
//! (message and thought chunks, tool calls with diffs and locations, the
//! plan, usage), calls that need approval ask the editor
//! (`session/request_permission`), and when the editor offers `fs/*` the
//! `read` and `write` tools go through it. It is not a front end of its own
//! (no rendering) and adds nothing to the loop.
//!
//! The wire types come from the official schema crate
//! (`agent-client-protocol-schema`, pinned), used in [`wire`] only; the
//! JSON-RPC framing ([`rpc`]) is ours: about 150 lines for newline-delimited
//! JSON, where the SDK crate brings its own actor runtime.
//!
//! ```no_run
//! # async fn demo() -> std::io::Result<()> {
//! use ferroclaw_core::{Config, Overrides};
//! let home = Config::default_home();
//! let options = ferroclaw_acp::Options {
//!     load_config: Box::new({
//!         let home = home.clone();
//!         move |cwd| Config::load(home.clone(), cwd.to_path_buf(), &Overrides::default())
//!             .map_err(|e| e.to_string())
//!     }),
//!     home,
//!     cwd: std::env::current_dir()?,
//! };
//! ferroclaw_acp::serve(options).await
//! # }
//! ```

mod approver;
mod client_fs;
pub mod commands;
pub mod rpc;
mod server;
mod updates;
pub mod wire;

pub use approver::{ClientApprover, approval_for};
pub use server::{ConfigLoader, Options, serve};
