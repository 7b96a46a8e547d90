//! From command-line flags to a ready [`Agent`]: config layers, provider,
//! tools, permissions and the session (new, continued or resumed).

use std::path::PathBuf;
use std::sync::Arc;

use ferroclaw_core::agent::{CompactTool, Compaction, Remembering};
use ferroclaw_core::config::WebSearchSection;
use ferroclaw_core::context::PromptProfile;
use ferroclaw_core::plan::ExitPlanModeTool;
use ferroclaw_core::session::{RESUME_TAIL_BYTES, SessionLog};
use ferroclaw_core::subagent::{self, SubAgents, TaskTool};
use ferroclaw_core::todo::{TodoList, TodoWriteTool};
use ferroclaw_core::{
    Agent, Approver, Config, Overrides, PermissionMode, Permissions, SessionStore,
};
use ferroclaw_tools::{JobManager, SandboxPolicy, SearchBackend, WebSearchTool, background_tools};

use crate::args::Cli;

/// Errors before the agent exists: all are the user's to fix (exit code 2).
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    #[error(transparent)]
    Config(#[from] ferroclaw_core::ConfigError),
    #[error(transparent)]
    Session(#[from] ferroclaw_core::session::SessionError),
    #[error("{0}")]
    Other(String),
}

/// Which conversation to open.
#[derive(Debug, Clone)]
pub enum Resume {
    New,
    Latest,
    Id(String),
    /// The session with exactly this id: resumed when its file exists, else
    /// created with that id (the gateway keeps one per chat).
    Named(String),
    /// `--resume` without an id: the user picks from recent sessions.
    Pick,
}

impl Resume {
    /// From `--continue` / `--resume ID`.
    pub fn from_cli(cli: &Cli) -> Self {
        match (&cli.resume, cli.continue_) {
            (Some(id), _) if id.is_empty() => Resume::Pick,
            (Some(id), _) => Resume::Id(id.clone()),
            (None, true) => Resume::Latest,
            (None, false) => Resume::New,
        }
    }
}

/// The workspace: `--cwd`, else the current directory, made absolute.
pub fn workspace(cli: &Cli) -> Result<PathBuf, SetupError> {
    let dir = match &cli.cwd {
        Some(d) => d.clone(),
        None => std::env::current_dir()
            .map_err(|e| SetupError::Other(format!("cannot read the current directory: {e}")))?,
    };
    dir.canonicalize().map_err(|e| SetupError::Other(format!("workspace {}: {e}", dir.display())))
}

/// Loads the config for the flags given.
pub fn load_config(cli: &Cli) -> Result<Config, SetupError> {
    let mut mode = cli.permission_mode;
    if cli.yes {
        mode = Some(PermissionMode::Bypass);
    }
    if cli.max_turns == Some(0) {
        return Err(SetupError::Other(
            "--max-turns must be at least 1 (it caps the model round-trips of a request)".into(),
        ));
    }
    let overrides =
        Overrides { model: cli.model.clone(), max_turns: cli.max_turns, permission_mode: mode };
    let mut config = Config::load(Config::default_home(), workspace(cli)?, &overrides)?;
    if let Some(alias) = &cli.model {
        config.file.model = Some(crate::model_alias::resolve(alias, &config));
    }
    let (allow, deny) = cli.rules();
    config.file.permissions.allow.extend(allow);
    config.file.permissions.deny.extend(deny);
    if !cli.add_dir.is_empty() {
        let dirs = config.file.allowed_dirs.get_or_insert_with(Vec::new);
        for dir in &cli.add_dir {
            let dir = config.workspace.join(dir);
            let dir = dir
                .canonicalize()
                .map_err(|e| SetupError::Other(format!("--add-dir {}: {e}", dir.display())))?;
            dirs.push(dir);
        }
    }
    Ok(config)
}

/// Applies the flags that shape one run's agent: `--append-system-prompt`.
pub fn apply_flags(agent: &mut Agent, cli: &Cli) {
    if let Some(extra) = cli.append_system_prompt.as_deref().filter(|s| !s.trim().is_empty()) {
        agent.system.push_str("\n\n");
        agent.system.push_str(extra);
    }
}

/// What was opened, for the renderer.
pub struct Opened {
    pub agent: Agent,
    /// True when an earlier conversation was loaded.
    pub resumed: bool,
    /// Older transcript bytes not loaded into the context.
    pub skipped_bytes: u64,
}

/// Builds the agent: provider, tools, permissions, session.
pub fn open_agent(
    config: &Config,
    resume: &Resume,
    approver: Arc<dyn Approver>,
) -> Result<Opened, SetupError> {
    let store = SessionStore::new(&config.home);
    let resume_path = match resume {
        Resume::New => None,
        Resume::Latest => Some(store.latest(&config.workspace).ok_or_else(|| {
            SetupError::Other(format!(
                "no earlier session in {} to continue; start one with `ferroclaw`",
                config.workspace.display()
            ))
        })?),
        Resume::Id(id) => Some(store.find(&config.workspace, id)?),
        Resume::Named(id) => Some(store.path_of(&config.workspace, id)).filter(|p| p.is_file()),
        Resume::Pick => {
            return Err(SetupError::Other(
                "--resume without an id needs the interactive REPL; pass an id (see `ferroclaw sessions list`)".into(),
            ));
        }
    };
    let resumed = match &resume_path {
        Some(path) => {
            let mut r = SessionLog::resume(path, RESUME_TAIL_BYTES)?;
            r.log.adopt_cwd(&config.workspace);
            Some(r)
        }
        None => None,
    };
    // A resumed session keeps its model unless one is given now (or its
    // metadata was lost).
    let spec = match (&config.file.model, &resumed) {
        (None, Some(r)) if !r.log.meta().model.is_empty() => r.log.meta().model.clone(),
        _ => config.model_spec()?,
    };
    let announce = config.file.model.is_none() && resumed.is_none();
    let (provider, model) = match crate::model_cmd::local_provider(config, &spec, announce) {
        Some(local) => (local?, spec.clone()),
        None => {
            let (provider_config, model) = config.resolve_model(&spec)?;
            (ferroclaw_llm::connect(provider_config), model)
        }
    };
    let permissions = Permissions::new(
        config.permission_mode(),
        &config.file.permissions.allow,
        &config.file.permissions.deny,
    )
    .map_err(SetupError::Other)?
    .with_workspace(config.workspace.clone());
    let (session, messages, skipped_bytes, was_resumed) = match resumed {
        Some(r) => (r.log, r.messages, r.skipped_bytes, true),
        None => {
            let log = match resume {
                Resume::Named(id) => store.create_named(&config.workspace, id, &spec)?,
                _ => store.create(&config.workspace, &spec)?,
            };
            (log, Vec::new(), 0, false)
        }
    };
    let permissions = Arc::new(permissions);
    let profile = config.prompt_profile(&spec);
    let context = ferroclaw_core::ContextBuilder::for_config(config).profile(profile).build();
    // Once per problem, however many roots the same skill was found in.
    let warnings: std::collections::BTreeSet<&String> = context.warnings.iter().collect();
    for w in warnings {
        tracing::warn!("{w}");
    }
    let system = context.system_prompt();
    let mut tools = ferroclaw_tools::builtin_tools();
    if let Some(fetch) = &config.file.web_fetch {
        let tool = ferroclaw_tools::WebFetchTool::allowing_private(&fetch.allow_private)
            .map_err(SetupError::Other)?;
        tools.register(tool);
    }
    let recall = ferroclaw_core::recall::Recall::shared(&config.home)
        .map_err(|e| tracing::warn!("session_search is off: {e}"))
        .ok();
    context.register_tools(&mut tools, recall.clone());
    let memory =
        ferroclaw_core::memory::MemoryStore::new(&config.home).with_limits(config.file.memory);
    if let Some(search) = &config.file.web_search {
        tools.register(web_search_tool(search)?);
    }
    ferroclaw_team::register_board_tools(&mut tools, config.workspace.clone());
    let jobs = JobManager::new();
    for tool in background_tools(&jobs) {
        tools.register_arc(tool);
    }
    let sandbox = sandbox_policy(config);
    let compaction = Compaction::new(
        ferroclaw_core::compaction::context_window(&model, config.file.context_window),
        config
            .file
            .compaction_threshold
            .unwrap_or(ferroclaw_core::compaction::DEFAULT_COMPACTION_THRESHOLD),
    );
    tools.register(CompactTool(compaction.requested.clone()));
    let todos = TodoList::restore(&messages);
    tools.register(TodoWriteTool(todos.clone()));
    tools.register(ExitPlanModeTool {
        permissions: permissions.clone(),
        approver: approver.clone(),
    });
    // Delegation comes last: sub-agents get every tool registered above.
    let (types, warnings) = ferroclaw_core::agents::load(&config.workspace, &config.home);
    for w in warnings {
        tracing::warn!("agent type skipped: {w}");
    }
    let resolver_config = config.clone();
    let subagents = SubAgents {
        provider: provider.clone(),
        model: model.clone(),
        model_spec: spec.clone(),
        resolve_model: Some(Arc::new(move |spec: &str| {
            if let Some(local) = crate::model_cmd::local_provider(&resolver_config, spec, false) {
                return local.map(|p| (p, spec.to_string())).map_err(|e| e.to_string());
            }
            let (p, m) = resolver_config.resolve_model(spec).map_err(|e| e.to_string())?;
            Ok((ferroclaw_llm::connect(p), m))
        })),
        tools: tools.clone(),
        permissions: permissions.clone(),
        approver: approver.clone(),
        store: store.clone(),
        parent: session.meta().clone(),
        system: system.clone(),
        workspace: config.workspace.clone(),
        allowed_dirs: config.file.allowed_dirs.clone().unwrap_or_default(),
        sandbox: sandbox.clone(),
        compaction: compaction.clone(),
        types,
        max_turns: subagent::DEFAULT_MAX_TURNS,
        max_tokens: config.max_tokens(),
        timeout: subagent::DEFAULT_TIMEOUT,
        limit: Arc::new(tokio::sync::Semaphore::new(subagent::DEFAULT_MAX_PARALLEL)),
        started: Default::default(),
    };
    tools.register(TaskTool(Arc::new(subagents)));
    if profile == PromptProfile::Lean {
        tools = ferroclaw_core::context::lean_tools(&tools);
    }
    let max_tokens = config.max_tokens_for(&spec);
    let agent = Agent {
        provider,
        model,
        model_spec: spec,
        system,
        tools,
        permissions,
        approver,
        session,
        messages,
        workspace: config.workspace.clone(),
        allowed_dirs: config.file.allowed_dirs.clone().unwrap_or_default(),
        max_turns: config.max_turns(),
        max_tokens,
        total_usage: Default::default(),
        todos,
        jobs: Some(jobs),
        sandbox,
        compaction,
        remembering: Remembering::new(recall, Some(memory)),
        turn_hook: None,
        reads: Default::default(),
    };
    Ok(Opened { agent, resumed: was_resumed, skipped_bytes })
}

/// The `web_search` tool for the configured backend; a missing key or URL is
/// a configuration error.
fn web_search_tool(search: &WebSearchSection) -> Result<WebSearchTool, SetupError> {
    let backend = SearchBackend::parse(&search.backend)
        .map_err(|e| SetupError::Other(format!("[web_search] {e}")))?;
    let key_env = search.api_key_env.clone().or(match backend {
        SearchBackend::Brave => Some("BRAVE_API_KEY".to_string()),
        SearchBackend::Tavily => Some("TAVILY_API_KEY".to_string()),
        SearchBackend::Searxng => None,
    });
    let key = key_env.as_deref().and_then(|v| std::env::var(v).ok()).filter(|k| !k.is_empty());
    if let (None, Some(env)) = (&key, &key_env)
        && backend != SearchBackend::Searxng
    {
        return Err(SetupError::Other(format!(
            "[web_search] {} needs an API key: set {env}",
            search.backend
        )));
    }
    WebSearchTool::new(backend, search.url.clone(), key).map_err(SetupError::Other)
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
        tcp: ferroclaw_tools::landlock::TcpPolicy {
            connect: section.tcp_connect.clone(),
            bind: section.tcp_bind.clone(),
        },
    }
}
