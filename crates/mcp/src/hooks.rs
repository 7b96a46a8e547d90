//! What a server may ask of us: the workspace roots, the user's input
//! (elicitation), a completion from our model (sampling) and, for an HTTP
//! server, more OAuth scopes mid-session (step-up). The answers come
//! from hooks the front end plugs in; without one, the request is declined
//! with a message that says why.

// Roots, sampling and logging are deprecated by the 2026-07-28 spec (SEP-2577)
// but are what today's servers (2025-xx protocol versions) use.
#![allow(deprecated)]

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use async_trait::async_trait;
use rmcp::model::{
    ClientConfig, CreateMessageRequestParams, CreateMessageResult, ElicitRequestParams,
    ElicitResult, ErrorCode, ErrorData, ListRootsResult, LoggingMessageNotificationParam,
};
use rmcp::service::{NotificationContext, RequestContext, RoleClient};
use serde_json::{Value, json};

/// The user's answer to a server's question.
#[derive(Debug, Clone, PartialEq)]
pub enum Elicitation {
    /// The answer, an object matching the requested schema.
    Accept(Value),
    Decline,
    Cancel,
}

/// Asks the user what a server wants to know (the REPL implements it).
#[async_trait]
pub trait Elicitor: Send + Sync {
    /// `schema` is the JSON schema of the expected object (form mode), or
    /// `{"url": ...}` when the server sends the user to a web page.
    async fn elicit(&self, server: &str, message: &str, schema: &Value) -> Elicitation;
}

/// A server's request for a completion from our model.
#[derive(Debug, Clone, PartialEq)]
pub struct SamplingRequest {
    pub server: String,
    pub system: Option<String>,
    /// `(role, text)` pairs; non-text content is described in the text.
    pub messages: Vec<(String, String)>,
    /// The server's `maxTokens` (saturated at `u32::MAX`; bounded when sent).
    pub max_tokens: u32,
}

/// Answers sampling requests with the agent's own provider, after asking
/// the user.
#[async_trait]
pub trait Sampler: Send + Sync {
    /// The model's text and the model's name, or why not.
    async fn sample(&self, request: SamplingRequest) -> Result<(String, String), String>;
}

/// The hooks a front end provides; the default declines everything.
#[derive(Clone, Default)]
pub struct ClientHooks {
    pub elicitor: Option<Arc<dyn Elicitor>>,
    pub sampler: Option<Arc<dyn Sampler>>,
    /// How the user grants more OAuth scopes when an HTTP server answers a
    /// request with 403 `insufficient_scope` (the REPL: in a browser).
    /// `None`: the request fails with an error that names the scopes and
    /// the `ferroclaw mcp login --scopes` command that grants them.
    pub scope_consent: Option<crate::oauth::Consent>,
}

impl std::fmt::Debug for ClientHooks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientHooks")
            .field("elicitor", &self.elicitor.is_some())
            .field("sampler", &self.sampler.is_some())
            .field("scope_consent", &self.scope_consent)
            .finish()
    }
}

/// The rmcp client handler of one server connection.
pub(crate) struct Handler {
    pub server: String,
    pub roots: Vec<PathBuf>,
    pub hooks: ClientHooks,
    /// Set by `notifications/tools/list_changed`.
    pub tools_changed: Arc<AtomicBool>,
}

fn error(message: impl Into<String>) -> ErrorData {
    // -1 is what the spec's examples use for "user rejected".
    ErrorData::new(ErrorCode(-1), message.into(), None)
}

impl rmcp::ClientHandler for Handler {
    fn get_info(&self) -> ClientConfig {
        let value = json!({
            "protocolVersion": rmcp::model::ProtocolVersion::LATEST_WITH_INITIALIZE,
            "capabilities": {"roots": {"listChanged": false}, "sampling": {}, "elicitation": {"form": {}, "url": {}}},
            "clientInfo": {"name": "ferroclaw", "version": env!("CARGO_PKG_VERSION")},
        });
        serde_json::from_value(value).unwrap_or_default()
    }

    async fn list_roots(
        &self,
        _context: RequestContext<RoleClient>,
    ) -> Result<ListRootsResult, ErrorData> {
        let roots: Vec<Value> = self
            .roots
            .iter()
            .map(|p| {
                json!({
                    "uri": format!("file://{}", p.display()),
                    "name": p.file_name().map(|n| n.to_string_lossy().into_owned()),
                })
            })
            .collect();
        serde_json::from_value(json!({ "roots": roots }))
            .map_err(|e| ErrorData::internal_error(e.to_string(), None))
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        let request = serde_json::to_value(&request).unwrap_or_default();
        let message = request["message"].as_str().unwrap_or_default();
        let schema = match request.get("url") {
            Some(url) => json!({ "url": url }),
            None => request["requestedSchema"].clone(),
        };
        let answer = match &self.hooks.elicitor {
            Some(elicitor) => elicitor.elicit(&self.server, message, &schema).await,
            None => {
                tracing::info!(
                    "mcp server {} asked for input ({message}); declined: nobody can be asked in this non-interactive run",
                    self.server
                );
                Elicitation::Decline
            }
        };
        let value = match answer {
            Elicitation::Accept(content) => json!({"action": "accept", "content": content}),
            Elicitation::Decline => json!({"action": "decline"}),
            Elicitation::Cancel => json!({"action": "cancel"}),
        };
        serde_json::from_value(value).map_err(|e| ErrorData::internal_error(e.to_string(), None))
    }

    async fn create_message(
        &self,
        params: CreateMessageRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<CreateMessageResult, ErrorData> {
        let Some(sampler) = &self.hooks.sampler else {
            return Err(error(
                "sampling declined: nobody can approve it in this non-interactive run",
            ));
        };
        let request =
            sampling_request(&self.server, &serde_json::to_value(&params).unwrap_or_default());
        let (text, model) = sampler.sample(request).await.map_err(error)?;
        serde_json::from_value(json!({
            "role": "assistant",
            "content": {"type": "text", "text": text},
            "model": model,
            "stopReason": "endTurn",
        }))
        .map_err(|e| ErrorData::internal_error(e.to_string(), None))
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        tracing::debug!("mcp server {}: tool list changed", self.server);
        self.tools_changed.store(true, Ordering::SeqCst);
    }

    async fn on_logging_message(
        &self,
        params: LoggingMessageNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        let value = serde_json::to_value(&params).unwrap_or_default();
        tracing::info!("mcp server {} log: {}", self.server, value["data"]);
    }
}

/// Our plain view of `sampling/createMessage` params.
fn sampling_request(server: &str, params: &Value) -> SamplingRequest {
    let content_text = |c: &Value| match c["type"].as_str() {
        Some("text") => c["text"].as_str().unwrap_or_default().to_string(),
        Some(other) => format!("[{other} content]"),
        None => String::new(),
    };
    let messages = params["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|m| {
            let text = match &m["content"] {
                Value::Array(parts) => {
                    parts.iter().map(content_text).collect::<Vec<_>>().join("\n")
                }
                c => content_text(c),
            };
            (m["role"].as_str().unwrap_or("user").to_string(), text)
        })
        .collect();
    SamplingRequest {
        server: server.to_string(),
        system: params["systemPrompt"].as_str().map(str::to_string),
        messages,
        // Saturated, not wrapped (2^32 + 5 is not 5); the provider bounds it
        // to `ferroclaw_llm::MAX_TOKENS_CEILING` where every request is sent.
        max_tokens: params["maxTokens"]
            .as_u64()
            .map_or(1024, |n| u32::try_from(n).unwrap_or(u32::MAX)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sampling_max_tokens_past_u32_saturates_instead_of_wrapping_to_a_small_number() {
        let ask = |max: Value| sampling_request("srv", &serde_json::json!({"maxTokens": max}));
        assert_eq!(ask(serde_json::json!(4_294_967_301u64)).max_tokens, u32::MAX);
        assert_eq!(ask(serde_json::json!(2000)).max_tokens, 2000);
        assert_eq!(ask(Value::Null).max_tokens, 1024);
    }
}
