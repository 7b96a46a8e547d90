//! Remote tools as ferroclaw tools: one [`McpTool`] per server tool, named
//! `mcp__SERVER__TOOL`, plus `mcp_list_resources` and `mcp_read_resource`.

use std::sync::Arc;

use async_trait::async_trait;
use ferroclaw_tools::tool_input::{parse, schema_for};
use ferroclaw_tools::{Tool, ToolContext, ToolError, ToolOutput};
use rmcp::model::{CallToolRequestParams, ReadResourceRequestParams};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::connection::Connection;
use crate::content;
use crate::hub::Inner;

/// Longest tool name providers accept (OpenAI's limit; Anthropic allows 128).
pub const MAX_TOOL_NAME_LEN: usize = 64;

/// The name the model sees: `mcp__SERVER__TOOL`, with characters providers
/// refuse replaced by `_`. `None` when it would be too long.
pub fn exposed_name(server: &str, tool: &str) -> Option<String> {
    let clean = |s: &str| -> String {
        s.chars()
            .map(|c| if c.is_ascii_alphanumeric() || c == '_' || c == '-' { c } else { '_' })
            .collect()
    };
    let name = format!("mcp__{}__{}", clean(server), clean(tool));
    (name.len() <= MAX_TOOL_NAME_LEN).then_some(name)
}

/// One tool of one server.
pub(crate) struct McpTool {
    pub name: String,
    pub remote_name: String,
    pub description: String,
    pub schema: Value,
    pub read_only: bool,
    pub conn: Arc<Connection>,
}

impl McpTool {
    /// From a `tools/list` entry (as JSON); `None` when it cannot be named.
    pub(crate) fn from_listing(conn: &Arc<Connection>, tool: &Value) -> Option<McpTool> {
        let remote_name = tool["name"].as_str()?.to_string();
        let Some(name) = exposed_name(conn.name(), &remote_name) else {
            tracing::warn!(
                "mcp server {}: tool {remote_name} skipped: its name is longer than {MAX_TOOL_NAME_LEN} characters",
                conn.name()
            );
            return None;
        };
        let description = tool["description"]
            .as_str()
            .or(tool["title"].as_str())
            .unwrap_or("(no description)")
            .to_string();
        let mut schema = tool["inputSchema"].clone();
        if !schema.is_object() {
            schema = json!({"type": "object"});
        }
        Some(McpTool {
            name,
            remote_name,
            description,
            schema,
            read_only: tool["annotations"]["readOnlyHint"].as_bool().unwrap_or(false),
            conn: Arc::clone(conn),
        })
    }
}

#[async_trait]
impl Tool for McpTool {
    fn name(&self) -> &str {
        &self.name
    }
    fn description(&self) -> &str {
        &self.description
    }
    fn input_schema(&self) -> Value {
        self.schema.clone()
    }
    fn read_only(&self) -> bool {
        self.read_only
    }
    async fn execute(&self, input: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let arguments = match input {
            Value::Object(map) => map,
            Value::Null => Default::default(),
            other => {
                return Err(ToolError::InvalidArguments(format!(
                    "expected an object, got {other}"
                )));
            }
        };
        let params = CallToolRequestParams::new(self.remote_name.clone()).with_arguments(arguments);
        let what = format!("the call of {}", self.remote_name);
        let call = self.conn.request(&what, |peer| async move { peer.call_tool(params).await });
        tokio::select! {
            result = call => Ok(match result {
                Ok(result) => content::tool_output(&serde_json::to_value(&result).unwrap_or_default()),
                Err(e) => ToolOutput::error(e.to_string()),
            }),
            () = ctx.cancel.cancelled() => Err(ToolError::Cancelled),
        }
    }
}

/// `mcp_list_resources`'s input.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ListResourcesArgs {
    /// Only this server's resources.
    server: Option<String>,
}

/// `mcp_read_resource`'s input.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ReadResourceArgs {
    /// The server's name.
    server: String,
    /// The resource URI.
    uri: String,
}

/// `mcp_list_resources(server?)`.
pub(crate) struct ListResources(pub Arc<Inner>);

#[async_trait]
impl Tool for ListResources {
    fn name(&self) -> &str {
        "mcp_list_resources"
    }
    fn description(&self) -> &str {
        "Lists the resources (files, records, documents) that connected MCP servers offer, one per line as `server: uri (name, mime type) description`, and their resource templates as `server: uri-template (template, name, mime type) description` (fill in the {placeholders} to get a URI). Give `server` to list one server's only. Read one with mcp_read_resource."
    }
    fn input_schema(&self) -> Value {
        schema_for::<ListResourcesArgs>()
    }
    fn read_only(&self) -> bool {
        true
    }
    async fn execute(&self, input: Value, _ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let args: ListResourcesArgs = parse(input)?;
        match self.0.list_resources(args.server.as_deref()).await {
            Ok(lines) if lines.is_empty() => Ok(ToolOutput::text("(no resources)")),
            Ok(lines) => Ok(ToolOutput::text(lines.join("\n"))),
            Err(e) => Ok(ToolOutput::error(e.to_string())),
        }
    }
}

/// `mcp_read_resource(server, uri)`.
pub(crate) struct ReadResource(pub Arc<Inner>);

#[async_trait]
impl Tool for ReadResource {
    fn name(&self) -> &str {
        "mcp_read_resource"
    }
    fn description(&self) -> &str {
        "Reads one resource of an MCP server by its URI (from mcp_list_resources or a resource link in a tool result). Text comes back as text, images as images, other binary data as a note with its type and size."
    }
    fn input_schema(&self) -> Value {
        schema_for::<ReadResourceArgs>()
    }
    fn read_only(&self) -> bool {
        true
    }
    async fn execute(&self, input: Value, _ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let ReadResourceArgs { server, uri } = parse(input)?;
        let server = server.as_str();
        let conn = match self.0.connection(server) {
            Ok(c) => c,
            Err(e) => return Ok(ToolOutput::error(e.to_string())),
        };
        let what = format!("the read of {uri}");
        let result = conn
            .request(&what, |peer| async move {
                peer.read_resource(ReadResourceRequestParams::new(uri)).await
            })
            .await;
        Ok(match result {
            Ok(result) => {
                let value = serde_json::to_value(&result).unwrap_or_default();
                let content: Vec<_> = value["contents"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(content::resource_part)
                    .collect();
                if content.is_empty() {
                    ToolOutput::text("(empty resource)")
                } else {
                    ToolOutput { content, is_error: false }
                }
            }
            Err(e) => ToolOutput::error(e.to_string()),
        })
    }
}
