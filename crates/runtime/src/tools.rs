//! The tools every agent of a process shares (built-ins, `web_fetch`,
//! `web_search`, the task board and its worktrees, the code graph's tools where the project has
//! an index), and the sandbox policy from `[sandbox]`.

use std::path::PathBuf;

use ferroclaw_core::Config;
use ferroclaw_core::config::WebSearchSection;
use ferroclaw_core::learning::{LearningConfig, Mode, SkillManageTool, SkillStore};
use ferroclaw_tools::{SandboxPolicy, SearchBackend, ToolRegistry, WebSearchTool};

use crate::RuntimeError;

/// The tools without per-session state, in the order the model sees them.
pub(crate) fn shared_tools(config: &Config) -> Result<ToolRegistry, RuntimeError> {
    let mut tools = ferroclaw_tools::builtin_tools();
    if let Some(fetch) = &config.file.web_fetch {
        let tool = ferroclaw_tools::WebFetchTool::allowing_private(&fetch.allow_private)
            .map_err(RuntimeError::Other)?;
        tools.register(tool);
    }
    Ok(tools)
}

/// The tools registered after the context's own (`load_skill`, `memory`, ...).
pub(crate) fn after_context_tools(
    config: &Config,
    tools: &mut ToolRegistry,
) -> Result<(), RuntimeError> {
    if let Some(search) = &config.file.web_search {
        tools.register(web_search_tool(search)?);
    }
    ferroclaw_team::register_board_tools(tools, config.workspace.clone());
    let learning = LearningConfig::from_section(config.file.learning.as_ref());
    // Only where learning is on: in the default mode (reviews when asked)
    // the tool's spec would cost tokens on every request.
    if learning.mode == Mode::Auto {
        let store = SkillStore::new(&config.home, &config.workspace);
        tools.register(SkillManageTool::new(store, learning));
    }
    // The worktree tools where they can work (a git repository: a few
    // stats, no git process) and are wanted: a team is configured or
    // formed, or the project has worktrees already. Eight more specs on
    // every request of every session would push the first request past
    // 16 KB for nothing.
    let wanted = config.file.team.is_some()
        || ferroclaw_team::Team::open(&config.workspace).exists()
        || config.workspace.join(".agent/worktrees/index.json").is_file();
    if wanted && ferroclaw_team::worktree::in_git_repo(&config.workspace) {
        ferroclaw_team::register_worktree_tools(tools, config.workspace.clone());
    }
    // The code graph's tools once the project has an index (`ferroclaw
    // index`): one stat here, never a walk of the project at start-up.
    if ferroclaw_codegraph::db_path(&config.home, &config.workspace).is_file() {
        ferroclaw_codegraph::register_code_tools(tools, &config.workspace, &config.home);
    }
    Ok(())
}

/// The `web_search` tool for the configured backend; a missing key or URL is
/// a configuration error.
pub fn web_search_tool(search: &WebSearchSection) -> Result<WebSearchTool, RuntimeError> {
    let backend = SearchBackend::parse(&search.backend)
        .map_err(|e| RuntimeError::Other(format!("[web_search] {e}")))?;
    let key_env = search.api_key_env.clone().or(match backend {
        SearchBackend::Brave => Some("BRAVE_API_KEY".to_string()),
        SearchBackend::Tavily => Some("TAVILY_API_KEY".to_string()),
        SearchBackend::Searxng => None,
    });
    let key = key_env.as_deref().and_then(|v| std::env::var(v).ok()).filter(|k| !k.is_empty());
    if let (None, Some(env)) = (&key, &key_env)
        && backend != SearchBackend::Searxng
    {
        return Err(RuntimeError::Other(format!(
            "[web_search] {} needs an API key: set {env}",
            search.backend
        )));
    }
    WebSearchTool::new(backend, search.url.clone(), key).map_err(RuntimeError::Other)
}

/// The `[sandbox]` config as the tools' policy; `~` in writable folders is
/// the user's home.
pub fn sandbox_policy(config: &Config) -> SandboxPolicy {
    let section = config.file.sandbox.clone().unwrap_or_default();
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let writable = section
        .writable
        .iter()
        .map(|p| match (p.strip_prefix("~"), &home) {
            (Ok(rest), Some(home)) => home.join(rest),
            _ => p.clone(),
        })
        .collect();
    SandboxPolicy {
        confine_writes: section.enabled.unwrap_or(true),
        writable,
        env: section.env.clone(),
        set_env: config.claude_env.clone(),
        tcp: ferroclaw_tools::landlock::TcpPolicy {
            connect: section.tcp_connect.clone(),
            bind: section.tcp_bind.clone(),
        },
        max_file_bytes: config
            .file
            .max_file_bytes
            .unwrap_or(ferroclaw_tools::file_limit::DEFAULT_MAX_FILE_BYTES),
    }
}
