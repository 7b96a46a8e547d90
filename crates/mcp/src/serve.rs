//! `ferroclaw mcp serve`: ferroclaw's own tools offered to other MCP clients,
//! over stdio or streamable HTTP on 127.0.0.1 (Host and Origin checked
//! against DNS rebinding). The caller chooses which tools and gates each call.

use std::sync::Arc;

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
}

impl ToolServer {
    /// Offers `tools`, run in `context`; `gate` may refuse a call.
    pub fn new(tools: ToolRegistry, context: ToolContext, gate: Gate) -> Self {
        Self { tools, context, gate }
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
    pub async fn serve_http(
        self,
        port: u16,
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
        let service = StreamableHttpService::new(
            move || Ok(server.clone()),
            LocalSessionManager::default().into(),
            config,
        );
        let router = axum::Router::new().nest_service("/mcp", service);
        on_ready(port);
        axum::serve(listener, router)
            .with_graceful_shutdown(async move { stop.cancelled().await })
            .await
            .map_err(|e| ServeError::Session(e.to_string()))
    }
}

impl rmcp::ServerHandler for ToolServer {
    fn get_info(&self) -> ServerConfig {
        let value = json!({
            "protocolVersion": rmcp::model::ProtocolVersion::LATEST,
            "capabilities": {"tools": {"listChanged": false}, "logging": {}},
            "serverInfo": {"name": "ferroclaw", "version": env!("CARGO_PKG_VERSION")},
            "instructions": "ferroclaw's built-in tools: file reads and edits confined to the workspace, search, shell commands, web fetch.",
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
