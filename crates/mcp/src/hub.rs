//! The hub: every configured server, started concurrently at session start,
//! their tools ready to register, their prompts and resources on request.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ferroclaw_tools::{Tool, ToolRegistry};
use futures_util::future::join_all;
use rmcp::model::GetPromptRequestParams;
use rmcp::model::GetPromptResponse;
use serde_json::Value;

use crate::config::{McpConfig, ServerConfig};
use crate::connection::Connection;
use crate::content;
use crate::error::McpError;
use crate::hooks::ClientHooks;
use crate::oauth::TokenStore;
use crate::tool::{ListResources, McpTool, ReadResource};

/// What the hub needs besides the server list.
#[derive(Debug, Clone, Default)]
pub struct HubOptions {
    /// The workspace: the servers' root and default working directory.
    pub workspace: PathBuf,
    /// How stdio servers are confined (Landlock, environment), as `bash` is.
    pub sandbox: ferroclaw_tools::SandboxPolicy,
    pub hooks: ClientHooks,
    /// Saved OAuth tokens of HTTP servers (`$FERROCLAW_HOME/mcp-tokens`);
    /// `None` sends none.
    pub tokens: Option<TokenStore>,
}

/// How a server stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServerState {
    /// Connected, offering this many tools.
    Ready { tools: usize },
    /// Not usable, and why.
    Failed(String),
    /// `disabled: true` in its config.
    Disabled,
}

/// One line of `/mcp` or `ferroclaw mcp list`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerStatus {
    pub name: String,
    pub state: ServerState,
}

/// A prompt a server offers (a REPL slash command `/mcp__SERVER__PROMPT`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PromptInfo {
    pub server: String,
    pub name: String,
    pub description: String,
    /// `(name, required)` of each argument, in order.
    pub arguments: Vec<(String, bool)>,
}

impl PromptInfo {
    /// The slash command that runs it.
    pub fn command(&self) -> String {
        format!("/mcp__{}__{}", self.server, self.name)
    }
}

/// Every MCP server of a session. Dropping it does not stop the servers:
/// call [`McpHub::shutdown`].
#[derive(Clone)]
pub struct McpHub {
    inner: Arc<Inner>,
}

/// Shared with the resource tools.
pub(crate) struct Inner {
    connections: Vec<Arc<Connection>>,
    /// Servers that never started (config problems, start failures) or are disabled.
    not_started: Vec<ServerStatus>,
    tools: Mutex<BTreeMap<String, Vec<Arc<McpTool>>>>,
    problems: Vec<String>,
    ready_after: Duration,
}

impl McpHub {
    /// Starts every server at once; each has its own startup timeout, and a
    /// server that fails is reported in [`McpHub::problems`] without
    /// delaying or breaking the others.
    pub async fn start(config: McpConfig, options: HubOptions) -> McpHub {
        let began = Instant::now();
        let mut problems: Vec<String> = config.problems.iter().map(ToString::to_string).collect();
        let mut not_started: Vec<ServerStatus> = config
            .problems
            .iter()
            .map(|p| ServerStatus {
                name: p.server.clone(),
                state: ServerState::Failed(p.message.clone()),
            })
            .collect();
        not_started.extend(
            config
                .disabled
                .iter()
                .map(|name| ServerStatus { name: name.clone(), state: ServerState::Disabled }),
        );
        let started =
            join_all(config.servers.into_iter().map(|server| start_one(server, &options))).await;
        let mut connections = Vec::new();
        let mut tools = BTreeMap::new();
        for result in started {
            match result {
                Ok((conn, listed)) => {
                    tools.insert(conn.name().to_string(), listed);
                    connections.push(conn);
                }
                Err((name, e)) => {
                    problems.push(e.to_string());
                    not_started
                        .push(ServerStatus { name, state: ServerState::Failed(e.to_string()) });
                }
            }
        }
        let ready_after = began.elapsed();
        tracing::info!(
            "mcp: {} server(s) ready in {} ms",
            connections.len(),
            ready_after.as_millis()
        );
        McpHub {
            inner: Arc::new(Inner {
                connections,
                not_started,
                tools: Mutex::new(tools),
                problems,
                ready_after,
            }),
        }
    }

    /// A hub with no servers.
    pub fn empty() -> McpHub {
        McpHub {
            inner: Arc::new(Inner {
                connections: Vec::new(),
                not_started: Vec::new(),
                tools: Mutex::new(BTreeMap::new()),
                problems: Vec::new(),
                ready_after: Duration::ZERO,
            }),
        }
    }

    /// What went wrong at start, one message per server, to report once.
    pub fn problems(&self) -> &[String] {
        &self.inner.problems
    }

    /// Time from [`McpHub::start`] until every server was ready or had failed.
    pub fn ready_after(&self) -> Duration {
        self.inner.ready_after
    }

    /// Adds every remote tool (and the resource tools, when a server is
    /// connected) to `registry`.
    pub fn register_tools(&self, registry: &mut ToolRegistry) {
        let tools = self.inner.tools.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        for tool in tools.values().flatten() {
            registry.register_arc(Arc::clone(tool) as Arc<dyn Tool>);
        }
        if !self.inner.connections.is_empty() {
            registry.register(ListResources(Arc::clone(&self.inner)));
            registry.register(ReadResource(Arc::clone(&self.inner)));
        }
    }

    /// Re-lists the tools of servers that sent `tools/list_changed` and
    /// updates `registry`; true when something changed.
    pub async fn refresh_tools(&self, registry: &mut ToolRegistry) -> bool {
        let mut changed = false;
        for conn in &self.inner.connections {
            if !conn.take_tools_changed() {
                continue;
            }
            let Ok(listed) = list_tools(conn).await else {
                continue;
            };
            let old = {
                let mut tools =
                    self.inner.tools.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                tools.insert(conn.name().to_string(), listed.clone()).unwrap_or_default()
            };
            let stale: Vec<&str> = old.iter().map(|t| t.name.as_str()).collect();
            *registry = registry.without(&stale);
            for tool in listed {
                registry.register_arc(tool as Arc<dyn Tool>);
            }
            changed = true;
        }
        changed
    }

    /// Every configured server and how it stands, by name.
    pub async fn statuses(&self) -> Vec<ServerStatus> {
        let mut out = self.inner.not_started.clone();
        let counts: BTreeMap<String, usize> = {
            let tools = self.inner.tools.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            tools.iter().map(|(k, v)| (k.clone(), v.len())).collect()
        };
        for conn in &self.inner.connections {
            let state = match conn.failure().await {
                Some(reason) => ServerState::Failed(reason),
                None => ServerState::Ready { tools: counts.get(conn.name()).copied().unwrap_or(0) },
            };
            out.push(ServerStatus { name: conn.name().to_string(), state });
        }
        out.sort_by(|a, b| a.name.cmp(&b.name));
        out
    }

    /// The names of the tools offered, `mcp__SERVER__TOOL`, by server.
    pub fn tool_names(&self) -> BTreeMap<String, Vec<String>> {
        let tools = self.inner.tools.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        tools.iter().map(|(k, v)| (k.clone(), v.iter().map(|t| t.name.clone()).collect())).collect()
    }

    /// The tools of one server as `(exposed name, description)`.
    pub fn tools_of(&self, server: &str) -> Vec<(String, String)> {
        let tools = self.inner.tools.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        tools
            .get(server)
            .into_iter()
            .flatten()
            .map(|t| (t.name.clone(), t.description.clone()))
            .collect()
    }

    /// Every prompt of every connected server that offers prompts.
    pub async fn prompts(&self) -> Vec<PromptInfo> {
        let mut out = Vec::new();
        for conn in &self.inner.connections {
            if !has_capability(conn, "prompts").await {
                continue;
            }
            let listed = conn
                .request("prompts/list", |peer| async move { peer.list_all_prompts().await })
                .await;
            let Ok(prompts) = listed else { continue };
            for p in
                serde_json::to_value(&prompts).unwrap_or_default().as_array().into_iter().flatten()
            {
                out.push(PromptInfo {
                    server: conn.name().to_string(),
                    name: p["name"].as_str().unwrap_or_default().to_string(),
                    description: p["description"].as_str().unwrap_or_default().to_string(),
                    arguments: p["arguments"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .map(|a| {
                            (
                                a["name"].as_str().unwrap_or_default().to_string(),
                                a["required"].as_bool().unwrap_or(false),
                            )
                        })
                        .collect(),
                });
            }
        }
        out
    }

    /// Runs a prompt and returns its messages' text, joined by blank lines.
    pub async fn get_prompt(
        &self,
        server: &str,
        name: &str,
        arguments: BTreeMap<String, String>,
    ) -> Result<String, McpError> {
        let conn = self.inner.connection(server)?;
        let mut params = GetPromptRequestParams::new(name);
        if !arguments.is_empty() {
            params = params.with_arguments(
                arguments.into_iter().map(|(k, v)| (k, Value::String(v))).collect(),
            );
        }
        let what = format!("the prompt {name}");
        let response =
            conn.request(&what, |peer| async move { peer.get_prompt_once(params).await }).await?;
        let GetPromptResponse::Complete(result) = response else {
            return Err(McpError::Request {
                server: server.to_string(),
                what,
                message: "it asked for more input, which ferroclaw does not support for prompts"
                    .into(),
            });
        };
        let value = serde_json::to_value(&result).unwrap_or_default();
        let texts: Vec<String> = value["messages"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|m| match content::result_part(&m["content"]) {
                ferroclaw_protocol::ResultPart::Text { text } => text,
                ferroclaw_protocol::ResultPart::Image { media_type, .. } => {
                    format!("[{media_type} image]")
                }
            })
            .collect();
        Ok(texts.join("\n\n"))
    }

    /// Lines `server: uri (name, mime) description` for every resource.
    pub async fn list_resources(&self, server: Option<&str>) -> Result<Vec<String>, McpError> {
        self.inner.list_resources(server).await
    }

    /// Stops every server (closes stdin, waits briefly, kills the process group).
    pub async fn shutdown(&self) {
        join_all(self.inner.connections.iter().map(|c| c.shutdown())).await;
    }
}

impl Inner {
    /// The connected server called `name`.
    pub(crate) fn connection(&self, name: &str) -> Result<&Arc<Connection>, McpError> {
        self.connections.iter().find(|c| c.name() == name).ok_or_else(|| McpError::UnknownServer {
            server: name.to_string(),
            known: self.connections.iter().map(|c| c.name()).collect::<Vec<_>>().join(", "),
        })
    }

    pub(crate) async fn list_resources(
        &self,
        server: Option<&str>,
    ) -> Result<Vec<String>, McpError> {
        let conns: Vec<&Arc<Connection>> = match server {
            Some(name) => vec![self.connection(name)?],
            None => self.connections.iter().collect(),
        };
        let mut lines = Vec::new();
        for conn in conns {
            if !has_capability(conn, "resources").await {
                continue;
            }
            let listed = conn
                .request("resources/list", |peer| async move { peer.list_all_resources().await })
                .await;
            let resources = match listed {
                Ok(r) => r,
                Err(e) if server.is_some() => return Err(e),
                Err(e) => {
                    lines.push(format!("{}: (error: {e})", conn.name()));
                    continue;
                }
            };
            let templates = conn
                .request("resources/templates/list", |peer| async move {
                    peer.list_all_resource_templates().await
                })
                .await
                // Servers without templates may answer "method not found".
                .unwrap_or_default();
            let listed = serde_json::to_value(&resources).unwrap_or_default();
            for r in listed.as_array().into_iter().flatten() {
                lines.push(resource_line(conn.name(), r, "uri", ""));
            }
            let listed = serde_json::to_value(&templates).unwrap_or_default();
            for t in listed.as_array().into_iter().flatten() {
                lines.push(resource_line(conn.name(), t, "uriTemplate", "template, "));
            }
        }
        Ok(lines)
    }
}

/// `server: uri (kind name, mime) description` for one resource or template
/// (whose URI is under `uri_key`).
fn resource_line(server: &str, r: &Value, uri_key: &str, kind: &str) -> String {
    let mut line = format!(
        "{server}: {} ({kind}{}",
        r[uri_key].as_str().unwrap_or_default(),
        r["name"].as_str().unwrap_or_default()
    );
    if let Some(mime) = r["mimeType"].as_str() {
        line.push_str(&format!(", {mime}"));
    }
    line.push(')');
    if let Some(d) = r["description"].as_str() {
        line.push_str(&format!(" {d}"));
    }
    line
}

/// Whether the server announced `capability` in its handshake.
async fn has_capability(conn: &Connection, capability: &str) -> bool {
    conn.server_capabilities().await.is_some_and(|c| !c[capability].is_null())
}

/// Starts one server and lists its tools, within its startup timeout.
async fn start_one(
    server: ServerConfig,
    options: &HubOptions,
) -> Result<(Arc<Connection>, Vec<Arc<McpTool>>), (String, McpError)> {
    let name = server.name.clone();
    let timeout = server.startup_timeout;
    let conn = match Connection::start(
        server,
        &options.workspace,
        options.sandbox.clone(),
        options.hooks.clone(),
        options.tokens.clone(),
    )
    .await
    {
        Ok(conn) => Arc::new(conn),
        Err((_, e)) => return Err((name, e)),
    };
    conn.take_tools_changed();
    match tokio::time::timeout(timeout, list_tools(&conn)).await {
        Ok(Ok(tools)) => Ok((conn, tools)),
        // No call can come to restart it: it failed to start.
        Ok(Err(McpError::Crashed { cause, .. })) => {
            let message = match conn.http_url() {
                // No process to have exited: the connection failed.
                Some(url) => format!("{url} failed while listing its tools: {cause}"),
                None => conn.died_starting("during start-up, while listing its tools").await,
            };
            conn.shutdown().await;
            Err((name.clone(), McpError::Start { server: name, message }))
        }
        Ok(Err(e)) => {
            conn.shutdown().await;
            Err((name, e))
        }
        Err(_) => {
            conn.shutdown().await;
            Err((
                name.clone(),
                McpError::Start {
                    server: name,
                    message: format!(
                        "no tool list within {} s (startup_timeout_secs)",
                        timeout.as_secs()
                    ),
                },
            ))
        }
    }
}

/// The server's tools that its config offers.
async fn list_tools(conn: &Arc<Connection>) -> Result<Vec<Arc<McpTool>>, McpError> {
    if !has_capability(conn, "tools").await {
        return Ok(Vec::new());
    }
    let tools =
        conn.request("tools/list", |peer| async move { peer.list_all_tools().await }).await?;
    let listed = serde_json::to_value(&tools).unwrap_or_default();
    Ok(listed
        .as_array()
        .into_iter()
        .flatten()
        .filter(|t| conn.config.offers(t["name"].as_str().unwrap_or_default()))
        .filter_map(|t| McpTool::from_listing(conn, t).map(Arc::new))
        .collect())
}
