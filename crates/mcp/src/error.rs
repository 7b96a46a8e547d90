//! What can go wrong talking to a server. Every message names the server.

use std::time::Duration;

/// An MCP failure, said so the user (or the model) can act on it.
#[derive(Debug, Clone, thiserror::Error)]
pub enum McpError {
    /// The server did not start or did not complete the handshake.
    #[error("mcp server {server} did not start: {message}")]
    Start { server: String, message: String },
    /// The server died while a request was in flight.
    #[error("mcp server {server} crashed during the call: {reason}")]
    Crashed {
        server: String,
        reason: String,
        /// What the transport said, without what happens next.
        cause: String,
    },
    /// The server is marked failed and is not used any more.
    #[error("mcp server {server} is unavailable: {reason}")]
    Failed { server: String, reason: String },
    /// No answer within `tool_timeout_secs`.
    #[error("mcp server {server} did not answer {what} within {} s (tool_timeout_secs)", after.as_secs())]
    Timeout { server: String, what: String, after: Duration },
    /// The server answered with an error.
    #[error("mcp server {server} refused {what}: {message}")]
    Request { server: String, what: String, message: String },
    /// The HTTP server answered 401 and no usable OAuth tokens are saved.
    #[error("mcp server {server} needs you to log in (OAuth): run `ferroclaw mcp login {server}`")]
    NeedsLogin {
        server: String,
        /// The `WWW-Authenticate` header of the 401, when there was one.
        challenge: Option<String>,
    },
    /// The HTTP server answered 403 `insufficient_scope`: the saved token
    /// lacks scopes it needs, and ferroclaw could not get them here.
    #[error("mcp server {server} refused {what}: it needs the OAuth scope(s) {scopes}; {advice}")]
    NeedsScopes {
        server: String,
        what: String,
        /// The scopes the server demanded, space-separated.
        scopes: String,
        /// What happened and what the user can do.
        advice: String,
    },
    /// No server of that name is configured.
    #[error("no mcp server named {server:?}; configured: {known}")]
    UnknownServer { server: String, known: String },
}
