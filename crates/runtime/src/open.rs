//! [`Runtime::open`]: from a session to choose, an approver and a few
//! options to a ready [`Agent`]. Everything shared comes from the runtime;
//! what is built here is the session's own: its file, permissions, todo list,
//! background jobs, compaction state and the tools bound to them.

use std::path::{Path, PathBuf};
use std::sync::{Arc, PoisonError};

use ferroclaw_core::agent::{CompactTool, Compaction, Learner, Remembering};
use ferroclaw_core::checkpoint::{Checkpoints, Settings};
use ferroclaw_core::context::{PromptProfile, instructions};
use ferroclaw_core::journal::TurnJournal;
use ferroclaw_core::learning::{LearningConfig, Mode, SkillStore};
use ferroclaw_core::memory::MemoryStore;
use ferroclaw_core::model_alias::{self, Resolved};
use ferroclaw_core::plan::ExitPlanModeTool;
use ferroclaw_core::session::{RESUME_TAIL_BYTES, SessionLog, SessionMeta};
use ferroclaw_core::todo::{TodoList, TodoWriteTool};
use ferroclaw_core::{Agent, AgentParts, Approver, Permissions};
use ferroclaw_protocol::Message;
use ferroclaw_tools::{JobManager, Tool, ToolRegistry, background_tools};

use crate::subagent::{ChildOf, DEFAULT_MAX_PARALLEL, DEFAULT_MAX_TURNS, SubAgents, TaskTool};
use crate::{Runtime, RuntimeError};

/// Tool sets remembered to share specs with (a parent's, its sub-agents' of
/// a few types, the gateway's chats'): more kinds rarely run in one process.
const SPEC_TEMPLATES: usize = 8;

/// Which conversation to open.
pub enum Resume {
    New,
    /// The newest session of the workspace.
    Latest,
    /// The session with this id (or a unique prefix of it).
    Id(String),
    /// The session with exactly this id: resumed when its file exists, else
    /// created with that id (the gateway keeps one per chat).
    Named(String),
    /// `--resume` without an id: the user picks from recent sessions.
    Pick,
    /// A sub-agent's new session beside its parent's (the `task` tool).
    Child(Box<ChildOf>),
    /// A new top-level agent whose session is stored beside `parent`'s,
    /// as `PARENT.LABEL` (a teammate): never picked by `--continue`.
    Beside {
        parent: Box<SessionMeta>,
        label: String,
    },
}

/// What a front end asks of one session besides the runtime's defaults.
#[derive(Default)]
pub struct SessionOptions {
    /// Added to the end of the system prompt (`--append-system-prompt`).
    pub append_system_prompt: Option<String>,
    /// Tools only this session offers (the gateway's `message` and `cron`).
    pub extra_tools: Vec<Arc<dyn Tool>>,
    /// Roots the agent in this folder instead of the project (a teammate in
    /// its git worktree): file tools' confinement, relative paths, `bash`'s
    /// working folder, the sandbox's Landlock roots and protected files, the
    /// project files and rules in its prompt, and where its session is
    /// listed. The task board and the worktree tools stay the project's, so
    /// a team shares them. `None` (the default): the project folder.
    pub workspace_root: Option<PathBuf>,
    /// Snapshot the workspace before each request that may change files, so
    /// `/rewind` can restore it (the REPL and one-shot runs; subject to
    /// `[checkpoints] enabled`). Default false.
    pub checkpoints: bool,
    /// Journal each turn step by step, so a turn whose process died is
    /// finished from the journal without calling the model again for the
    /// steps it had finished (the gateway; see `ferroclaw_core::journal`).
    /// A turn is journalled once named with `Agent::journal_turn`. Default
    /// `None`: off (the REPL).
    pub journal: Option<Arc<dyn TurnJournal>>,
    /// The conversation a NEW session starts with, written to it before
    /// the first request (an API client that sends its whole conversation);
    /// ignored when the session exists already. Default: none.
    pub conversation: Vec<Message>,
    /// Keeps the session to itself: its requests are not indexed for recall
    /// (`session_search`), consolidated into memory, or learnt from, so
    /// nothing of it reaches other sessions (the gateway's stateless API
    /// requests). Default false.
    pub private: bool,
}

/// What was opened, for the renderer.
pub struct Opened {
    pub agent: Agent,
    /// True when an earlier conversation was loaded.
    pub resumed: bool,
    /// Older transcript bytes not loaded into the context.
    pub skipped_bytes: u64,
    /// Lines of the session file that could not be read and were skipped
    /// (`line N: why`); the rest of the conversation was loaded.
    pub skipped_lines: Vec<String>,
}

impl Runtime {
    /// Opens an agent: the one function every front end (REPL, one-shot,
    /// gateway, `eval`) and the `task` tool get agents from.
    pub fn open(
        self: &Arc<Self>,
        resume: Resume,
        approver: Arc<dyn Approver>,
        options: SessionOptions,
    ) -> Result<Opened, RuntimeError> {
        let resume = match resume {
            Resume::Child(child) => return self.open_child(*child, approver),
            other => other,
        };
        let config = &self.config;
        let store = &self.store;
        // The folder the agent works in, and the config its prompt is built
        // from when that is not the project.
        let rooted = match &options.workspace_root {
            Some(root) => Some(rooted_config(config, root)?),
            None => None,
        };
        let workspace = rooted.as_ref().map_or(&config.workspace, |c| &c.workspace).clone();
        let resume_path = self.session_file(&resume, &workspace)?;
        let resumed = match &resume_path {
            Some(path) => {
                let mut r = SessionLog::resume(path, RESUME_TAIL_BYTES)?;
                r.log.adopt_cwd(&workspace);
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
        let (provider, model) = self.providers.get(config, &spec, announce)?;
        let permissions = Permissions::new(
            config.permission_mode(),
            &config.file.permissions.allow,
            &config.file.permissions.deny,
        )
        .and_then(|p| p.with_ask(&config.file.permissions.ask))
        .map_err(RuntimeError::Other)?
        .with_workspace(workspace.clone());
        let (session, messages, skipped_bytes, skipped_lines, was_resumed) = match resumed {
            Some(r) => (r.log, r.messages, r.skipped_bytes, r.skipped_lines, true),
            None => {
                let mut log = match &resume {
                    Resume::Named(id) => store.create_named(&workspace, id, &spec)?,
                    Resume::Beside { parent, label } => store.create_child(parent, label, &spec)?,
                    _ => store.create(&workspace, &spec)?,
                };
                let conversation = options.conversation;
                for message in &conversation {
                    log.append_message(message)?;
                }
                (log, conversation, 0, Vec::new(), false)
            }
        };
        let permissions = Arc::new(permissions);
        let profile = config.prompt_profile(&spec);
        let build = |context: &ferroclaw_core::Config| {
            let (prompt, problems) = crate::prompt::build(
                context,
                config,
                profile,
                &self.shared_tools,
                self.recall.clone(),
            )?;
            // Once per problem, however many roots the same skill was found in.
            for problem in problems {
                self.report(problem);
            }
            Ok(prompt)
        };
        // A rooted agent's prompt is its own (its folder's project files).
        let prompt = match &rooted {
            None => self.prompts.get(profile, || build(config))?,
            Some(rooted) => Arc::new(build(rooted)?),
        };
        let mut system = prompt.system.clone();
        if let Some(extra) =
            options.append_system_prompt.as_deref().filter(|s| !s.trim().is_empty())
        {
            system = format!("{system}\n\n{extra}").into();
        }
        // The session's own tools, after the shared ones.
        let mut tools = prompt.tools.clone();
        // What an earlier process of this workspace left running is killed
        // now; the jobs this session lost are told to the model.
        let project = store.project_dir(&workspace);
        let lost = ferroclaw_tools::child_groups::reap(&project, &session.meta().id);
        let ledger = ferroclaw_tools::child_groups::ledger_path(&project, &session.meta().id);
        let jobs =
            JobManager::recording(ferroclaw_tools::child_groups::ChildGroups::recording(ledger));
        jobs.report_lost(lost);
        for tool in background_tools(&jobs) {
            tools.register_arc(tool);
        }
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
        self.mcp.register_tools(&mut tools);
        // Delegation comes last: sub-agents get every tool registered above,
        // MCP tools included.
        let subagents = SubAgents {
            runtime: self.clone(),
            provider: provider.clone(),
            model: model.clone(),
            model_spec: spec.clone(),
            tools: tools.clone(),
            permissions: permissions.clone(),
            approver: approver.clone(),
            parent: session.meta().clone(),
            system: system.clone(),
            workspace: workspace.clone(),
            window: (compaction.context_window, compaction.threshold),
            timeout: crate::DEFAULT_TIMEOUT,
            limit: Arc::new(tokio::sync::Semaphore::new(DEFAULT_MAX_PARALLEL)),
            started: Default::default(),
        };
        tools.register(TaskTool(Arc::new(subagents)));
        for tool in options.extra_tools {
            tools.register_arc(tool);
        }
        if profile == PromptProfile::Lean {
            tools = ferroclaw_core::context::lean_tools(&tools);
        }
        self.share_specs(&mut tools);
        let memory = MemoryStore::new(&config.home).with_limits(config.file.memory);
        let mut remembering = match options.private {
            true => Remembering::default(),
            false => Remembering::new(self.recall.clone(), Some(memory)),
        };
        let learning = LearningConfig::from_section(config.file.learning.as_ref());
        if learning.mode != Mode::Off && !options.private {
            let store = SkillStore::new(&config.home, &config.workspace);
            // A resumed conversation's last requests count: "remember how to do
            // this" may follow work done before the restart.
            let mut learner = Learner::new(learning.clone(), store, 0);
            if let Some(spec) = &learning.model {
                let (p, m) = self.providers.get(config, spec, false)?;
                learner = learner.with_reviewer(p, m);
            }
            remembering = remembering.with_learner(learner);
        }
        let mut agent = Agent::new(AgentParts {
            provider,
            model,
            max_tokens: config.max_tokens_for(&spec),
            model_spec: spec,
            system,
            tools,
            permissions,
            approver,
            session,
            messages,
            workspace,
            allowed_dirs: config.file.allowed_dirs.clone().unwrap_or_default(),
            max_turns: config.max_turns(),
            todos,
            jobs: Some(jobs),
            sandbox: self.sandbox.clone(),
            compaction,
            remembering,
            turn_hook: Some(self.refresh.clone()),
        });
        agent.set_hooks(self.hooks_for(&agent), None);
        agent.trust_instructions(instructions::outside_imports_allowed(config));
        if options.checkpoints {
            agent.set_checkpoints(self.checkpoints(&agent));
        }
        agent.set_journal(options.journal);
        Ok(Opened { agent, resumed: was_resumed, skipped_bytes, skipped_lines })
    }

    /// Checkpointing for an agent's session, unless `[checkpoints]` turns
    /// it off or the workspace is a home folder or the root (too much to
    /// snapshot). Nothing is run here: the store is made by the first
    /// checkpoint (a store that cannot be made turns checkpoints off then,
    /// with an error event).
    fn checkpoints(&self, agent: &Agent) -> Option<Checkpoints> {
        let settings = Settings::from_section(self.config.file.checkpoints.as_ref());
        let workspace = agent.workspace();
        let home = std::env::var_os("HOME").map(PathBuf::from);
        if !settings.enabled || workspace.parent().is_none() || home.is_some_and(|h| h == workspace)
        {
            return None;
        }
        let session = &agent.session().meta().id;
        Some(Checkpoints::new(&self.config.home, workspace, session, settings))
    }

    /// The file of the session to continue; `None` for a new one.
    fn session_file(
        &self,
        resume: &Resume,
        workspace: &Path,
    ) -> Result<Option<PathBuf>, RuntimeError> {
        Ok(match resume {
            Resume::New | Resume::Child(_) | Resume::Beside { .. } => None,
            Resume::Latest => Some(self.store.latest(workspace).ok_or_else(|| {
                RuntimeError::Other(format!(
                    "no earlier session in {} to continue; start one with `ferroclaw`",
                    workspace.display()
                ))
            })?),
            // A session stored beside its lead's (a teammate rooted in a
            // worktree) is found under the project too.
            Resume::Id(id) => Some(match self.store.find(workspace, id) {
                Err(_) if workspace != self.config.workspace => {
                    self.store.find(&self.config.workspace, id)?
                }
                found => found?,
            }),
            Resume::Named(id) => Some(self.store.path_of(workspace, id)).filter(|p| p.is_file()),
            Resume::Pick => {
                return Err(RuntimeError::Other(
                    "--resume without an id needs the interactive REPL; pass an id (see `ferroclaw sessions list`)".into(),
                ));
            }
        })
    }

    /// A sub-agent: a fresh session beside its parent's, the parent's tools
    /// (MCP tools included) minus delegation, and the same MCP refresh.
    fn open_child(
        &self,
        child: ChildOf,
        approver: Arc<dyn Approver>,
    ) -> Result<Opened, RuntimeError> {
        let wanted =
            child.kind.model.as_deref().map(|m| model_alias::resolve(m, &child.model_spec));
        let (provider, model, model_spec) = match wanted {
            Some(Ok(Resolved::Use(spec))) => {
                let (p, m) = self.providers.get(&self.config, &spec, false).map_err(|e| {
                    RuntimeError::Other(format!("agent type {}: {e}", child.kind.name))
                })?;
                (p, m, spec)
            }
            Some(Err(e)) => {
                tracing::warn!("agent type {}: {e}", child.kind.name);
                (child.provider.clone(), child.model.clone(), child.model_spec.clone())
            }
            _ => (child.provider.clone(), child.model.clone(), child.model_spec.clone()),
        };
        let session = self.store.create_child(&child.parent, &child.label, &model_spec)?;
        let todos = TodoList::default();
        let mut tools = child.child_tools();
        tools.register(TodoWriteTool(todos.clone()));
        self.share_specs(&mut tools);
        let (window, threshold) = child.window;
        let agent = Agent::new(AgentParts {
            provider,
            model,
            model_spec,
            system: child.system().into(),
            tools,
            permissions: child.permissions.clone(),
            approver,
            session,
            messages: Vec::new(),
            workspace: child.workspace.clone(),
            allowed_dirs: self.config.file.allowed_dirs.clone().unwrap_or_default(),
            max_turns: DEFAULT_MAX_TURNS,
            max_tokens: self.config.max_tokens(),
            todos,
            jobs: None,
            sandbox: self.sandbox.clone(),
            compaction: Compaction::new(window, threshold),
            remembering: Default::default(),
            turn_hook: Some(self.refresh.clone()),
        });
        let mut agent = agent;
        agent.set_hooks(self.hooks_for(&agent), Some(child.kind.name.clone()));
        agent.trust_instructions(instructions::outside_imports_allowed(&self.config));
        Ok(Opened { agent, resumed: false, skipped_bytes: 0, skipped_lines: Vec::new() })
    }

    /// The hooks an agent runs: the runtime's, with the agent's own model
    /// for `prompt` and `agent` hooks when there are any.
    fn hooks_for(&self, agent: &Agent) -> Arc<ferroclaw_core::hooks::Hooks> {
        match self.hooks.with_model(agent.provider().clone(), agent.model()) {
            Some(hooks) => Arc::new(hooks),
            None => self.hooks.clone(),
        }
    }

    /// Gives `tools` the specs of an agent opened before with the same tools,
    /// so they are built once, not per agent; else keeps it as a template.
    fn share_specs(&self, tools: &mut ToolRegistry) {
        let mut templates = self.spec_templates.lock().unwrap_or_else(PoisonError::into_inner);
        if templates.iter().any(|t| tools.share_specs_with(t)) {
            return;
        }
        if templates.len() == SPEC_TEMPLATES {
            templates.remove(0);
        }
        templates.push(tools.clone());
    }
}

/// The config of an agent rooted in `root`: the project's, with `root` (an
/// existing folder, made absolute) as its workspace.
fn rooted_config(
    config: &ferroclaw_core::Config,
    root: &Path,
) -> Result<ferroclaw_core::Config, RuntimeError> {
    let root = config
        .workspace
        .join(root)
        .canonicalize()
        .map_err(|e| RuntimeError::Other(format!("workspace_root {}: {e}", root.display())))?;
    if !root.is_dir() {
        return Err(RuntimeError::Other(format!(
            "workspace_root {} is not a folder",
            root.display()
        )));
    }
    let mut rooted = config.clone();
    rooted.workspace = root;
    Ok(rooted)
}
