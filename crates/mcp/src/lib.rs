//! Model Context Protocol for ferroclaw, on the official `rmcp` SDK.
//!
//! As a client, [`McpHub`] starts every configured server at once (stdio
//! child processes in their own process group, or streamable HTTP), each
//! within its startup timeout, and turns their tools into ferroclaw tools
//! named `mcp__SERVER__TOOL`, plus `mcp_list_resources` and
//! `mcp_read_resource`. Every request has a timeout; a server that dies is
//! restarted on the next call, once. Servers' prompts are listed for the
//! REPL's `/mcp__SERVER__PROMPT` commands. [`McpConfig::load`] reads the
//! servers from config.toml, `.agent/mcp.json` and `.mcp.json`.
//!
//! HTTP servers that answer 401 get OAuth ([`login`], [`TokenStore`]): the
//! tokens `ferroclaw mcp login` saved are sent and refreshed. A request
//! refused with 403 `insufficient_scope` mid-session gets a new token with
//! the missing scopes (with the user's consent, [`ClientHooks::scope_consent`])
//! and is retried once.
//!
//! As a server, [`ToolServer`] offers a [`ToolRegistry`](ferroclaw_tools::ToolRegistry)
//! over stdio or streamable HTTP.
//!
//! It does not decide whether a call may run: remote tools report their
//! `readOnlyHint`, and the permission gate in `ferroclaw-core` does the rest.
//!
//! ```no_run
//! # async fn demo() {
//! use ferroclaw_mcp::{HubOptions, McpConfig, McpHub, ServerConfig};
//!
//! let mut config = McpConfig::default();
//! config.servers.push(ServerConfig::stdio("everything", "npx", &["-y", "@modelcontextprotocol/server-everything"]));
//! let hub = McpHub::start(config, HubOptions { workspace: ".".into(), ..Default::default() }).await;
//! let mut tools = ferroclaw_tools::builtin_tools();
//! hub.register_tools(&mut tools);
//! assert!(tools.get("mcp__everything__echo").is_some());
//! hub.shutdown().await;
//! # }
//! ```

mod catalog;
mod config;
mod connection;
mod content;
mod edit;
mod error;
mod hooks;
mod hub;
mod oauth;
mod serve;
mod step_up;
mod tool;

pub use catalog::{Catalog, PromptDef, ResourceFolder};
pub use config::{
    ConfigProblem, DEFAULT_STARTUP_TIMEOUT, DEFAULT_TOOL_TIMEOUT, McpConfig, ServerConfig,
    Transport, expand,
};
pub use connection::{MAX_RESTARTS, SHUTDOWN_GRACE};
pub use content::{resource_part, result_part, tool_output};
pub use edit::{EditError, NewServer, add_server, remove_server};
pub use error::McpError;
pub use hooks::{ClientHooks, Elicitation, Elicitor, Sampler, SamplingRequest};
pub use hub::{HubOptions, McpHub, PromptInfo, ServerState, ServerStatus};
pub use oauth::{Consent, LOGIN_TIMEOUT, OAuthClient, OAuthError, TokenStore, login};
pub use serve::{Gate, MAX_HTTP_SESSIONS, ServeError, ToolServer};
pub use tool::{MAX_TOOL_NAME_LEN, exposed_name};
