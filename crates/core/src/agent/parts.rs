//! How an [`Agent`] is made ([`AgentParts`], filled in by the runtime), what
//! callers may read of it, and what they may change mid-session (model,
//! permission mode, system prompt, sampling, tools, session).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use ferroclaw_llm::Provider;
use ferroclaw_protocol::{Message, Sampling, Usage};
use ferroclaw_tools::{JobManager, ReadLedger, Sandbox, SandboxPolicy, Tool, ToolRegistry};

use super::{Agent, Compaction, Injector, Remembering, TurnHook};
use crate::approval::Approver;
use crate::clock;
use crate::permission::{PermissionMode, Permissions};
use crate::session::{Entry, SessionLog};
use crate::todo::TodoList;

/// Everything an agent is made of. Filled in by `ferroclaw_runtime` (the one
/// place that opens agents) and by tests of the loop itself; everyone else
/// gets an agent from `Runtime::open`.
pub struct AgentParts {
    pub provider: Arc<dyn Provider>,
    /// The model name as the provider knows it.
    pub model: String,
    /// `PROVIDER/MODEL`, for display and the session file.
    pub model_spec: String,
    /// The system prompt, shared by the agents opened from the same layers.
    pub system: Arc<str>,
    pub tools: ToolRegistry,
    pub permissions: Arc<Permissions>,
    pub approver: Arc<dyn Approver>,
    pub session: SessionLog,
    /// The conversation so far (empty for a new session).
    pub messages: Vec<Message>,
    pub workspace: PathBuf,
    pub allowed_dirs: Vec<PathBuf>,
    pub max_turns: u32,
    pub max_tokens: u32,
    pub todos: TodoList,
    pub jobs: Option<JobManager>,
    pub sandbox: SandboxPolicy,
    pub compaction: Compaction,
    pub remembering: Remembering,
    pub turn_hook: Option<Arc<dyn TurnHook>>,
}

impl Agent {
    /// An agent from its parts: for the runtime (and the loop's own tests).
    pub fn new(parts: AgentParts) -> Agent {
        let AgentParts {
            provider,
            model,
            model_spec,
            system,
            tools,
            permissions,
            approver,
            session,
            messages,
            workspace,
            allowed_dirs,
            max_turns,
            max_tokens,
            todos,
            jobs,
            sandbox,
            compaction,
            remembering,
            turn_hook,
        } = parts;
        let reads = ReadLedger::default();
        if let Some(since) = session.written_before_resume() {
            reads.recall(&messages, &Sandbox::new(&workspace, &allowed_dirs), since);
        }
        Agent {
            provider,
            model,
            model_spec,
            system,
            tools,
            permissions,
            approver,
            session,
            messages: Arc::new(messages),
            workspace,
            allowed_dirs,
            max_turns,
            max_tokens,
            sampling: Default::default(),
            asked_max_tokens: None,
            total_usage: Usage::default(),
            todos,
            jobs,
            sandbox,
            compaction,
            remembering,
            turn_hook,
            injector: None,
            reads,
            trusted_instructions: false,
            hook_state: Default::default(),
            checkpoints: None,
            journal: None,
            checkpoint_due: None,
        }
    }

    /// The provider answering this conversation.
    pub fn provider(&self) -> &Arc<dyn Provider> {
        &self.provider
    }

    /// The model name as the provider knows it.
    pub fn model(&self) -> &str {
        &self.model
    }

    /// `PROVIDER/MODEL`.
    pub fn model_spec(&self) -> &str {
        &self.model_spec
    }

    /// The system prompt.
    pub fn system(&self) -> &str {
        &self.system
    }

    /// The tools offered to the model.
    pub fn tools(&self) -> &ToolRegistry {
        &self.tools
    }

    /// The permission rules and mode (rules granted for the session included).
    pub fn permissions(&self) -> &Arc<Permissions> {
        &self.permissions
    }

    /// The session file.
    pub fn session(&self) -> &SessionLog {
        &self.session
    }

    /// Closes the session file until the next write (see
    /// [`SessionLog::release`]): an idle gateway chat holds no descriptor.
    pub fn release_session_file(&mut self) {
        self.session.release();
    }

    /// The conversation sent to the model.
    pub fn messages(&self) -> &[Message] {
        &self.messages
    }

    /// The project folder.
    pub fn workspace(&self) -> &Path {
        &self.workspace
    }

    /// Folders outside the workspace the tools may use.
    pub fn allowed_dirs(&self) -> &[PathBuf] {
        &self.allowed_dirs
    }

    /// How commands are confined.
    pub fn sandbox(&self) -> &SandboxPolicy {
        &self.sandbox
    }

    /// Tokens used since the session was opened.
    pub fn total_usage(&self) -> Usage {
        self.total_usage
    }

    /// The model's todo list.
    pub fn todos(&self) -> &TodoList {
        &self.todos
    }

    /// Background jobs, where background tools are offered.
    pub fn jobs(&self) -> Option<&JobManager> {
        self.jobs.as_ref()
    }

    /// The session's record of the process groups its commands start
    /// (shared with its background jobs; nothing recorded without them).
    pub fn children(&self) -> ferroclaw_tools::child_groups::ChildGroups {
        self.jobs.as_ref().map(|j| j.children().clone()).unwrap_or_default()
    }

    /// The model's context window, in tokens.
    pub fn context_window(&self) -> u64 {
        self.compaction.context_window
    }

    /// Switches the model for the next requests (`/model`).
    pub fn set_model(&mut self, provider: Arc<dyn Provider>, model: String, model_spec: String) {
        self.provider = provider;
        self.model = model;
        self.model_spec = model_spec;
    }

    /// Sets how the model samples its next answers, and their cap in tokens
    /// (`None`: the configured `max_tokens`), until set again: an API
    /// client's options for its turn. Compaction's summaries keep the
    /// provider's defaults.
    pub fn set_sampling(&mut self, sampling: Sampling, max_tokens: Option<u32>) {
        self.sampling = sampling;
        self.asked_max_tokens = max_tokens;
    }

    /// Makes the conversation go on from an earlier point, as a chat
    /// front-end's regenerate or edit asks: the messages after the first
    /// `keep` leave it (recorded as [`Entry::Branch`], so a session opened
    /// again follows the branch too), and `then` comes after them.
    pub fn branch(&mut self, keep: usize, then: Vec<Message>) {
        let dropped = self.messages.len().saturating_sub(keep);
        if dropped > 0 {
            self.log(Entry::Branch { ts: clock::unix_seconds(), dropped });
            Arc::make_mut(&mut self.messages).truncate(keep);
        }
        for message in then {
            self.record(message);
        }
    }

    /// Switches the permission mode (`/plan`, `exit_plan_mode`).
    pub fn set_permission_mode(&self, mode: PermissionMode) {
        self.permissions.set_mode(mode);
    }

    /// Adds `extra` to the end of the system prompt (`--append-system-prompt`).
    pub fn append_system_prompt(&mut self, extra: &str) {
        self.system = format!("{}\n\n{extra}", self.system).into();
    }

    /// Replaces the system prompt for the next requests (the gateway's API
    /// clients change their own layer of it between requests).
    pub fn set_system_prompt(&mut self, system: &str) {
        self.system = system.into();
    }

    /// Offers one more tool (one of the same name is replaced).
    pub fn add_tool(&mut self, tool: impl Tool + 'static) {
        self.tools.register(tool);
    }

    /// Adds a tool shared with other agents.
    pub fn add_tool_arc(&mut self, tool: Arc<dyn Tool>) {
        self.tools.register_arc(tool);
    }

    /// Replaces the tools with `f` of them (the CLI wraps each to log its calls).
    pub fn map_tools(&mut self, f: impl FnOnce(&ToolRegistry) -> ToolRegistry) {
        self.tools = f(&self.tools);
    }

    /// Trusts the project's instruction files: a subfolder's `CLAUDE.md`
    /// loaded mid-session may then import files from outside the project.
    pub fn trust_instructions(&mut self, trusted: bool) {
        self.trusted_instructions = trusted;
    }

    /// Sets what adds outside messages (an inbox) before each model request.
    pub fn set_injector(&mut self, injector: Option<Arc<dyn Injector>>) {
        self.injector = injector;
    }

    /// Continues in another session file with its conversation (`/new`,
    /// `/resume`): the model, tools and permissions stay.
    pub fn switch_session(&mut self, session: SessionLog, messages: Vec<Message>) {
        // The conversation left behind is a finished segment (`/new`).
        self.learn(crate::learning::SegmentEnd::New, None);
        self.reads = ReadLedger::default();
        if let Some(since) = session.written_before_resume() {
            let sandbox = Sandbox::new(&self.workspace, &self.allowed_dirs);
            self.reads.recall(&messages, &sandbox, since);
        }
        self.session = session;
        self.messages = Arc::new(messages);
        if let Some(checkpoints) = &self.checkpoints {
            self.checkpoints = Some(checkpoints.for_session(&self.session.meta().id));
        }
        if let Some(learner) = &mut self.remembering.learner {
            learner.restart_at(0);
        }
    }

    /// Adds `message` to the conversation between requests (what a
    /// scheduled job told this chat): in what the model sees next, and in
    /// the session file, durable once this returns.
    pub async fn add_message(
        &mut self,
        message: Message,
    ) -> Result<(), crate::session::SessionError> {
        self.session.append_message(&message)?;
        Arc::make_mut(&mut self.messages).push(message);
        self.session.commit().await
    }
}
