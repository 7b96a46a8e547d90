//! The runtime opens agents. It loads once per process what every agent
//! shares and nothing changes: the config, the provider connections (one
//! HTTP client per model, one loaded local model), the MCP hub (started
//! once, shared by every agent and sub-agent), the prompt layers and tools
//! (built once per change, shared through `Arc`), the agent types and the
//! recall index. [`Runtime::open`] is the one way to get an
//! [`Agent`](ferroclaw_core::Agent): the CLI's REPL and one-shot, the
//! gateway's chats, `eval`, and sub-agents (the `task` tool) all call it.
//!
//! It is not a front end: it renders nothing and parses no flags (that is
//! `ferroclaw-cli`), and it runs no loop (that is `ferroclaw-core`).
//!
//! ```no_run
//! # async fn demo(config: ferroclaw_core::Config) -> Result<(), ferroclaw_runtime::RuntimeError> {
//! use std::sync::Arc;
//! use ferroclaw_runtime::{Resume, Runtime, SessionOptions};
//!
//! let runtime = Runtime::load(config, Default::default()).await?;
//! let opened = runtime.open(Resume::New, Arc::new(ferroclaw_core::NoOneToAsk), SessionOptions::default())?;
//! println!("session {}", opened.agent.session().meta().id);
//! runtime.shutdown().await;
//! # Ok(()) }
//! ```

mod commands;
mod error;
mod input;
mod mcp;
mod open;
mod prompt;
mod providers;
mod serve;
mod subagent;
pub mod team;
mod tools;

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, PoisonError};

use ferroclaw_core::agent::TurnHook;
use ferroclaw_core::agents::AgentType;
use ferroclaw_core::hooks::Hooks;
use ferroclaw_core::recall::Recall;
use ferroclaw_core::{Config, SessionStore};
use ferroclaw_llm::Provider;
use ferroclaw_mcp::{ClientHooks, McpHub};
use ferroclaw_tools::{SandboxPolicy, ToolRegistry};

pub use error::RuntimeError;
/// Worktree lifecycle events of this process, for front ends to show.
pub use ferroclaw_team::worktree::{WorktreeEvent, subscribe as worktree_events};
pub use input::{InputRules, Turn};
pub use mcp::{McpRefresh, connect as connect_mcp, load_servers, start_hub, token_store};
pub use open::{Opened, Resume, SessionOptions};
pub use prompt::{PROMPT_MAX_AGE, repo_map_layer};
pub use providers::local_model_path;
pub use serve::tool_server;
pub use subagent::{
    ChildOf, DEFAULT_MAX_PARALLEL, DEFAULT_MAX_TURNS, DEFAULT_TIMEOUT, PARENT_ONLY_TOOLS,
};
pub use tools::{sandbox_policy, web_search_tool};

/// What the agents of one process share. Load it once
/// ([`Runtime::load`]), open agents from it ([`Runtime::open`]).
pub struct Runtime {
    config: Config,
    store: SessionStore,
    mcp: McpHub,
    providers: providers::Providers,
    prompts: prompt::Prompts,
    /// Built-ins and `web_fetch`: the tools before the context's own.
    shared_tools: ToolRegistry,
    types: Vec<AgentType>,
    recall: Option<Arc<Recall>>,
    sandbox: SandboxPolicy,
    /// Every agent's turn hook: refreshes its MCP tools when a list changed.
    refresh: Arc<dyn TurnHook>,
    /// Tool sets of agents opened so far, whose specs later ones share.
    spec_templates: Mutex<Vec<ToolRegistry>>,
    /// Problems already reported, so each is said once per process.
    reported: Mutex<BTreeSet<String>>,
    /// The user's hooks, run by every agent opened here.
    hooks: Arc<Hooks>,
}

impl Runtime {
    /// Loads what agents share and starts the MCP servers (`hooks` answer
    /// their elicitation and sampling requests). An agent type, skill or MCP
    /// server that fails to load is reported once, with its path and
    /// reason, and the others load; a bad `[web_fetch]` or `[web_search]`
    /// section is an error.
    pub async fn load(config: Config, hooks: ClientHooks) -> Result<Arc<Runtime>, RuntimeError> {
        let mcp = start_hub(&config, hooks).await;
        Self::with_hub(config, mcp)
    }

    /// Like [`load`](Self::load), with MCP servers already started (or
    /// [`McpHub::empty`] for none).
    pub fn with_hub(config: Config, mcp: McpHub) -> Result<Arc<Runtime>, RuntimeError> {
        let shared_tools = tools::shared_tools(&config)?;
        let recall = Recall::shared(&config.home)
            .map_err(|e| tracing::warn!("session_search is off: {e}"))
            .ok();
        let (types, problems) =
            ferroclaw_core::agents::load(&config.workspace, &config.home, config.trusted);
        let hooks = Arc::new(Hooks::load(&config).map_err(|e| RuntimeError::Other(e.to_string()))?);
        let runtime = Runtime {
            hooks,
            store: SessionStore::new(&config.home),
            sandbox: sandbox_policy(&config),
            refresh: Arc::new(McpRefresh(mcp.clone())),
            mcp,
            providers: Default::default(),
            prompts: Default::default(),
            shared_tools,
            types,
            recall,
            spec_templates: Default::default(),
            reported: Default::default(),
            config,
        };
        for problem in problems {
            runtime.report(format!("agent type skipped: {problem}"));
        }
        Ok(Arc::new(runtime))
    }

    /// The loaded config.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The MCP hub every agent's MCP tools come from.
    pub fn mcp(&self) -> &McpHub {
        &self.mcp
    }

    /// The sub-agent types (built-in and from `agents/*.md`).
    pub fn agent_types(&self) -> &[AgentType] {
        &self.types
    }

    /// The hooks every agent opened here runs.
    pub fn hooks(&self) -> &Arc<Hooks> {
        &self.hooks
    }

    /// The session store of this home.
    pub fn sessions(&self) -> &SessionStore {
        &self.store
    }

    /// The provider for `spec` and the model name it knows, connected once
    /// per process (`/model` switches through it).
    pub fn provider(&self, spec: &str) -> Result<(Arc<dyn Provider>, String), RuntimeError> {
        self.providers.get(&self.config, spec, false)
    }

    /// Stops the MCP servers.
    pub async fn shutdown(&self) {
        self.mcp.shutdown().await;
    }

    /// Logs a problem unless it was logged before in this process.
    fn report(&self, problem: String) {
        let mut reported = self.reported.lock().unwrap_or_else(PoisonError::into_inner);
        if !reported.contains(&problem) {
            tracing::warn!("{problem}");
            reported.insert(problem);
        }
    }
}
