//! `ferroclaw mcp serve`: ferroclaw's own tools offered to other MCP clients,
//! over stdio or streamable HTTP on 127.0.0.1 (Host and Origin checked
//! against DNS rebinding). The caller chooses which tools and gates each call,
//! and may add prompts and resources (a [`Catalog`]); a client subscribed to a
//! resource is told when its file changes.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime};

use ferroclaw_tools::{ToolContext, ToolRegistry};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, ErrorData, ListToolsResult, PaginatedRequestParams,
    ServerConfig,
};
use rmcp::service::{RequestContext, RoleServer, ServiceExt};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::catalog::Catalog;

/// How often subscribed resources' files are checked for changes.
const WATCH_INTERVAL: Duration = Duration::from_millis(500);

/// Live HTTP sessions at most: each holds a task and its buffers until the
/// client closes it (`DELETE /mcp`) or it stays idle for rmcp's keep-alive
/// (5 minutes), so a client that opens sessions in a loop would otherwise
/// grow the server without limit. 64 is far more than the few clients one
/// person connects at once; past it a new session is refused with 503.
pub const MAX_HTTP_SESSIONS: usize = 64;

/// Decides one call: `Err(reason)` refuses it (the reason goes to the client).
pub type Gate = Arc<dyn Fn(&str, &Value) -> Result<(), String> + Send + Sync>;

/// Why serving stopped.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("cannot listen on 127.0.0.1:{port}: {source}")]
    Bind {
        port: u16,
        #[source]
        source: std::io::Error,
    },
    #[error("mcp session failed: {0}")]
    Session(String),
}

/// An MCP server offering the tools of a registry.
#[derive(Clone)]
pub struct ToolServer {
    tools: ToolRegistry,
    context: ToolContext,
    gate: Gate,
    catalog: Arc<Catalog>,
    /// This session's subscribed URIs and when each file last changed.
    subscribed: Arc<Mutex<HashMap<String, Option<SystemTime>>>>,
    /// Set once this session's watcher runs.
    watching: Arc<std::sync::atomic::AtomicBool>,
}

impl ToolServer {
    /// Offers `tools`, run in `context`; `gate` may refuse a call.
    pub fn new(tools: ToolRegistry, context: ToolContext, gate: Gate) -> Self {
        Self {
            tools,
            context,
            gate,
            catalog: Arc::default(),
            subscribed: Arc::default(),
            watching: Arc::default(),
        }
    }

    /// Offers the prompts and resources of `catalog` too.
    pub fn with_catalog(mut self, catalog: Catalog) -> Self {
        self.catalog = Arc::new(catalog);
        self
    }

    /// The same offer for a new client session (its own subscriptions).
    fn for_session(&self) -> Self {
        Self { subscribed: Arc::default(), watching: Arc::default(), ..self.clone() }
    }

    /// Checks the subscribed files until the client goes away, telling it
    /// (`notifications/resources/updated`) of each one that changed.
    fn watch(&self, peer: rmcp::service::Peer<RoleServer>) {
        if self.watching.swap(true, Ordering::SeqCst) {
            return;
        }
        let (catalog, subscribed) = (self.catalog.clone(), self.subscribed.clone());
        tokio::spawn(async move {
            while !peer.is_transport_closed() {
                tokio::time::sleep(WATCH_INTERVAL).await;
                let changed: Vec<String> = {
                    let mut subs = subscribed.lock().unwrap_or_else(PoisonError::into_inner);
                    subs.iter_mut()
                        .filter_map(|(uri, seen)| {
                            let now = catalog.modified(uri);
                            (now != *seen).then(|| {
                                *seen = now;
                                uri.clone()
                            })
                        })
                        .collect()
                };
                for uri in changed {
                    let param = rmcp::model::ResourceUpdatedNotificationParam::new(uri);
                    if peer.notify_resource_updated(param).await.is_err() {
                        return;
                    }
                }
            }
        });
    }

    /// Serves one client on stdin/stdout until it disconnects.
    pub async fn serve_stdio(self) -> Result<(), ServeError> {
        let running = self
            .serve(rmcp::transport::stdio())
            .await
            .map_err(|e| ServeError::Session(e.to_string()))?;
        running.waiting().await.map_err(|e| ServeError::Session(e.to_string()))?;
        Ok(())
    }

    /// Serves streamable HTTP at `http://127.0.0.1:PORT/mcp` until `stop`
    /// is cancelled. `on_ready` gets the bound port (useful with port 0).
    /// With `token`, every request must carry `Authorization: Bearer TOKEN`
    /// (401 otherwise): loopback is reachable by every local user and
    /// container on the host network, not only by the one who started it.
    pub async fn serve_http(
        self,
        port: u16,
        token: Option<String>,
        stop: CancellationToken,
        on_ready: impl FnOnce(u16),
    ) -> Result<(), ServeError> {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
            .await
            .map_err(|source| ServeError::Bind { port, source })?;
        let port =
            listener.local_addr().map_err(|source| ServeError::Bind { port, source })?.port();
        let config = StreamableHttpServerConfig::default()
            .with_allowed_hosts([
                format!("127.0.0.1:{port}"),
                format!("localhost:{port}"),
                "127.0.0.1".to_string(),
                "localhost".to_string(),
            ])
            .with_allowed_origins([
                format!("http://127.0.0.1:{port}"),
                format!("http://localhost:{port}"),
            ])
            .with_cancellation_token(stop.child_token());
        let server = self;
        let sessions = Arc::new(LocalSessionManager::default());
        let service =
            StreamableHttpService::new(move || Ok(server.for_session()), sessions.clone(), config);
        let cap = Arc::new(SessionCap { sessions, opening: AtomicUsize::new(0) });
        let mut router = axum::Router::new().nest_service("/mcp", service).layer(
            axum::middleware::from_fn(move |request, next| session_cap(cap.clone(), request, next)),
        );
        if let Some(token) = token {
            let token: Arc<str> = token.into();
            router = router.layer(axum::middleware::from_fn(move |request, next| {
                bearer_gate(token.clone(), request, next)
            }));
        }
        on_ready(port);
        axum::serve(listener, router)
            .with_graceful_shutdown(async move { stop.cancelled().await })
            .await
            .map_err(|e| ServeError::Session(e.to_string()))
    }
}

/// The open sessions, and how many are being opened now (counted with them,
/// so that requests opening sessions at once cannot pass the cap together;
/// nothing waits on a lock a slow client could hold).
struct SessionCap {
    sessions: Arc<LocalSessionManager>,
    opening: AtomicUsize,
}

/// One session being opened, counted in [`SessionCap::opening`] until dropped.
struct Opening<'a>(&'a AtomicUsize);

impl Drop for Opening<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Refuses to open a session past [`MAX_HTTP_SESSIONS`] (503, saying how to
/// free one); requests within an open session pass untouched.
async fn session_cap(
    cap: Arc<SessionCap>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    let opens_session = request.method() == axum::http::Method::POST
        && !request.headers().contains_key("mcp-session-id");
    if !opens_session {
        return next.run(request).await;
    }
    let opening = Opening(&cap.opening);
    let others_opening = cap.opening.fetch_add(1, Ordering::SeqCst);
    if cap.sessions.sessions.read().await.len() + others_opening >= MAX_HTTP_SESSIONS {
        tracing::warn!("mcp serve: new session refused, {MAX_HTTP_SESSIONS} are open");
        return (
            axum::http::StatusCode::SERVICE_UNAVAILABLE,
            [(axum::http::header::RETRY_AFTER, "60")],
            format!(
                "too many open MCP sessions ({MAX_HTTP_SESSIONS}): close one (DELETE /mcp with its \
                 Mcp-Session-Id header) or wait until one has been idle for 5 minutes\n"
            ),
        )
            .into_response();
    }
    let response = next.run(request).await;
    drop(opening);
    response
}

/// Lets a request through only with `Authorization: Bearer TOKEN`
/// (compared in constant time); anything else gets 401 and never reaches
/// the MCP session.
async fn bearer_gate(
    token: Arc<str>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    let given = request
        .headers()
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or_default();
    if same_secret(given.as_bytes(), token.as_bytes()) {
        return next.run(request).await;
    }
    (
        axum::http::StatusCode::UNAUTHORIZED,
        [(axum::http::header::WWW_AUTHENTICATE, "Bearer")],
        "missing or wrong token: send Authorization: Bearer TOKEN (printed by `ferroclaw mcp serve --http`, or set with FERROCLAW_MCP_TOKEN)\n",
    )
        .into_response()
}

/// Equality that takes the same time wherever two equal-length values differ.
fn same_secret(given: &[u8], expected: &[u8]) -> bool {
    given.len() == expected.len()
        && given.iter().zip(expected).fold(0u8, |acc, (a, b)| acc | (a ^ b)) == 0
}

impl rmcp::ServerHandler for ToolServer {
    fn get_info(&self) -> ServerConfig {
        let value = json!({
            "protocolVersion": rmcp::model::ProtocolVersion::LATEST,
            "capabilities": {
                "tools": {"listChanged": false},
                "logging": {},
                "prompts": {"listChanged": false},
                "resources": {"subscribe": true, "listChanged": false},
                "completions": {},
            },
            "serverInfo": {"name": "ferroclaw", "version": env!("CARGO_PKG_VERSION")},
            "instructions": "ferroclaw's built-in tools: file reads and edits confined to the workspace, search, shell commands, web fetch. Prompts are ferroclaw's skills; resources are its memory files and session transcripts.",
        });
        serde_json::from_value(value).unwrap_or_else(|_| ServerConfig::default())
    }

    /// Accepts any level: this server sends no log notifications to filter.
    #[allow(deprecated)]
    async fn set_level(
        &self,
        request: rmcp::model::SetLevelRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        tracing::debug!("mcp client set the log level to {:?}", request.level);
        Ok(())
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ListPromptsResult, ErrorData> {
        typed(self.catalog.list_prompts())
    }

    async fn get_prompt(
        &self,
        request: rmcp::model::GetPromptRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::GetPromptResponse, ErrorData> {
        let arguments = request.arguments.unwrap_or_default();
        let value = self
            .catalog
            .get_prompt(&request.name, &arguments)
            .map_err(|e| ErrorData::invalid_params(e, None))?;
        Ok(typed::<rmcp::model::GetPromptResult>(value)?.into())
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ListResourcesResult, ErrorData> {
        typed(self.catalog.list_resources())
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ListResourceTemplatesResult, ErrorData> {
        typed(self.catalog.list_templates())
    }

    async fn read_resource(
        &self,
        request: rmcp::model::ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ReadResourceResponse, ErrorData> {
        let value = self
            .catalog
            .read_resource(&request.uri)
            .map_err(|e| ErrorData::resource_not_found(e, None))?;
        Ok(typed::<rmcp::model::ReadResourceResult>(value)?.into())
    }

    /// Any URI may be subscribed to, one that does not exist yet included
    /// (a session transcript not yet written); its creation is a change.
    #[allow(deprecated)]
    async fn subscribe(
        &self,
        request: rmcp::model::SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let seen = self.catalog.modified(&request.uri);
        self.subscribed
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(request.uri.clone(), seen);
        self.watch(context.peer);
        Ok(())
    }

    #[allow(deprecated)]
    async fn unsubscribe(
        &self,
        request: rmcp::model::UnsubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.subscribed.lock().unwrap_or_else(PoisonError::into_inner).remove(&request.uri);
        Ok(())
    }

    async fn complete(
        &self,
        request: rmcp::model::CompleteRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::CompleteResult, ErrorData> {
        let reference = serde_json::to_value(&request.r#ref)
            .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
        typed(self.catalog.complete(&reference, &request.argument.name, &request.argument.value))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let tools: Vec<Value> = self
            .tools
            .names()
            .into_iter()
            .filter_map(|name| self.tools.get(name))
            .map(|tool| {
                json!({
                    "name": tool.name(),
                    "description": tool.description(),
                    "inputSchema": tool.input_schema(),
                    "annotations": {"readOnlyHint": tool.read_only()},
                })
            })
            .collect();
        serde_json::from_value(json!({ "tools": tools }))
            .map_err(|e| ErrorData::internal_error(e.to_string(), None))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let name = request.name.to_string();
        let input = Value::Object(request.arguments.unwrap_or_default());
        let Some(tool) = self.tools.get(&name).cloned() else {
            return Err(ErrorData::invalid_params(self.tools.unknown_tool_message(&name), None));
        };
        let output =
            match self.tools.validate(&name, &input).and_then(|()| (self.gate)(&name, &input)) {
                Err(reason) => ferroclaw_tools::ToolOutput::error(reason),
                Ok(()) => match tool.execute(input, &self.context).await {
                    Ok(out) => out,
                    Err(e) => ferroclaw_tools::ToolOutput::error(e.to_string()),
                },
            };
        let content: Vec<Value> = output
            .content
            .iter()
            .map(|part| match part {
                ferroclaw_protocol::ResultPart::Text { text } => {
                    json!({"type": "text", "text": text})
                }
                ferroclaw_protocol::ResultPart::Image { media_type, data } => {
                    json!({"type": "image", "mimeType": media_type, "data": data})
                }
            })
            .collect();
        let result: rmcp::model::CallToolResult =
            serde_json::from_value(json!({"content": content, "isError": output.is_error}))
                .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
        Ok(result.into())
    }
}

/// A protocol type from its JSON.
fn typed<T: serde::de::DeserializeOwned>(value: Value) -> Result<T, ErrorData> {
    serde_json::from_value(value).map_err(|e| ErrorData::internal_error(e.to_string(), None))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::{ResourceUpdatedNotificationParam, SubscribeRequestParams};
    use rmcp::service::{NotificationContext, RoleClient};

    /// A client that records the resources it is told changed.
    #[derive(Clone, Default)]
    struct Recorder(Arc<Mutex<Vec<String>>>);

    impl rmcp::ClientHandler for Recorder {
        async fn on_resource_updated(
            &self,
            params: ResourceUpdatedNotificationParam,
            _context: NotificationContext<RoleClient>,
        ) {
            self.0.lock().unwrap().push(params.uri);
        }
    }

    #[tokio::test]
    #[allow(deprecated)]
    async fn a_subscribed_client_is_told_when_the_file_behind_a_resource_changes() {
        let dir = tempfile::tempdir().unwrap();
        let catalog = Catalog {
            prompts: Vec::new(),
            folders: vec![crate::ResourceFolder {
                uri_prefix: "ferroclaw://memory/".into(),
                dir: dir.path().to_path_buf(),
                extension: ".md".into(),
                mime_type: "text/markdown".into(),
                description: "memory".into(),
            }],
        };
        let gate: Gate = Arc::new(|_: &str, _: &Value| Ok(()));
        let server = ToolServer::new(ToolRegistry::new(), ToolContext::new(dir.path()), gate)
            .with_catalog(catalog);
        let (server_io, client_io) = tokio::io::duplex(64 * 1024);
        tokio::spawn(async move {
            if let Ok(running) = server.serve(server_io).await {
                let _ = running.waiting().await;
            }
        });
        let recorder = Recorder::default();
        let client = recorder.clone().serve(client_io).await.unwrap();
        let uri = "ferroclaw://memory/MEMORY.md";
        client.peer().subscribe(SubscribeRequestParams::new(uri)).await.unwrap();
        std::fs::write(dir.path().join("MEMORY.md"), "a new fact").unwrap();
        // Bounded wait for the watcher's next look (not a timing assertion).
        for _ in 0..200 {
            if !recorder.0.lock().unwrap().is_empty() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert_eq!(*recorder.0.lock().unwrap(), vec![uri.to_string()], "created: one update");
        let _ = client.cancel().await;
    }
}
