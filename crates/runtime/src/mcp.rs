//! The process's MCP hub: the configured servers, started once and shared by
//! every agent (sub-agents included), their problems reported once; and the
//! turn hook that refreshes an agent's MCP tools when a server's list changes.

use ferroclaw_core::Config;
use ferroclaw_mcp::{ClientHooks, HubOptions, McpConfig, McpHub, TokenStore};

/// The configured servers of this workspace.
pub fn load_servers(config: &Config) -> McpConfig {
    // `--strict-mcp-config`: the configured servers are not even read.
    let mut servers = match config.mcp_strict {
        true => McpConfig::default(),
        false => McpConfig::load_layers(
            &config.file.mcp_servers,
            &config.home.join("config.toml"),
            &config.workspace,
            config.trusted,
        ),
    };
    servers.add_given(&config.mcp_given);
    servers
}

/// Where `ferroclaw mcp login` keeps OAuth tokens: `$FERROCLAW_HOME/mcp-tokens/`.
pub fn token_store(config: &Config) -> TokenStore {
    TokenStore::new(config.home.join("mcp-tokens"))
}

/// Starts `servers` for this workspace, with its OAuth token store.
pub async fn connect(config: &Config, servers: McpConfig, hooks: ClientHooks) -> McpHub {
    let mut sandbox = crate::sandbox_policy(config);
    sandbox.writable.extend(config.file.allowed_dirs.iter().flatten().cloned());
    let options = HubOptions {
        workspace: config.workspace.clone(),
        sandbox,
        hooks,
        tokens: Some(token_store(config)),
    };
    McpHub::start(servers, options).await
}

/// Starts the configured servers and reports, once, those that failed.
pub async fn start_hub(config: &Config, hooks: ClientHooks) -> McpHub {
    let servers = load_servers(config);
    if servers.servers.is_empty() && servers.problems.is_empty() {
        return McpHub::empty();
    }
    let hub = connect(config, servers, hooks).await;
    for problem in hub.problems() {
        eprintln!("ferroclaw: warning: {problem}");
    }
    hub
}

/// Refreshes the MCP tools before each model request, so a server's
/// `tools/list_changed` takes effect during a request and in `-p` too.
pub struct McpRefresh(pub McpHub);

#[async_trait::async_trait]
impl ferroclaw_core::agent::TurnHook for McpRefresh {
    async fn before_model_call(&self, tools: &mut ferroclaw_tools::ToolRegistry) {
        self.0.refresh_tools(tools).await;
    }
}
