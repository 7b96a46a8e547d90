//! Sub-agents: the `task` tool (alias `spawn`) runs a child agent with a fresh
//! context, the parent's provider and the parent's tools minus delegation (no
//! recursion), bounded in turns and time, and returns only its final text and
//! a one-line summary. Several run in parallel when the model calls `task`
//! several times in one answer (capped by a semaphore). The child's transcript
//! is saved beside the parent's; its events stream to the parent's renderer
//! wrapped in [`AgentEvent::SubAgent`]; cancelling the parent cancels it.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use ferroclaw_llm::Provider;
use ferroclaw_protocol::{AgentEvent, Message};
use ferroclaw_tools::{SandboxPolicy, Tool, ToolContext, ToolError, ToolOutput, ToolRegistry};
use serde_json::{Value, json};
use tokio::sync::Semaphore;

use crate::agent::{Agent, Compaction, Outcome};
use crate::agents::AgentType;
use crate::approval::Approver;
use crate::permission::Permissions;
use crate::session::{SessionMeta, SessionStore};
use crate::todo::{TodoList, TodoWriteTool};

/// Tools a sub-agent never gets: delegation (no recursion) and the parent's
/// own session state.
pub const PARENT_ONLY_TOOLS: &[&str] = &[
    "task",
    "spawn",
    "todo_write",
    "exit_plan_mode",
    "compact",
    "background_run",
    "check_background",
    "kill_background",
];
/// Default cap on sub-agents running at once.
pub const DEFAULT_MAX_PARALLEL: usize = 4;
/// Default cap on a sub-agent's model turns (learn-claude-code s04: 30).
pub const DEFAULT_MAX_TURNS: u32 = 30;
/// Default cap on a sub-agent's wall time.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(15 * 60);

/// Resolves a `PROVIDER/MODEL` spec for agent types that name their own model.
pub type ModelResolver =
    Arc<dyn Fn(&str) -> Result<(Arc<dyn Provider>, String), String> + Send + Sync>;

/// Everything needed to start children; shared by the `task` tool.
pub struct SubAgents {
    pub provider: Arc<dyn Provider>,
    pub model: String,
    pub model_spec: String,
    pub resolve_model: Option<ModelResolver>,
    /// The parent's tools; [`PARENT_ONLY_TOOLS`] are removed for children.
    pub tools: ToolRegistry,
    pub permissions: Arc<Permissions>,
    pub approver: Arc<dyn Approver>,
    pub store: SessionStore,
    pub parent: SessionMeta,
    /// The parent's system prompt; the child's adds its role to it.
    pub system: String,
    pub workspace: PathBuf,
    pub allowed_dirs: Vec<PathBuf>,
    pub sandbox: SandboxPolicy,
    /// Context-window settings for children (their state starts fresh).
    pub compaction: Compaction,
    pub types: Vec<AgentType>,
    pub max_turns: u32,
    pub max_tokens: u32,
    pub timeout: Duration,
    pub limit: Arc<Semaphore>,
    pub started: AtomicU32,
}

impl SubAgents {
    /// The tools a child of `kind` gets.
    fn child_tools(&self, kind: &AgentType) -> ToolRegistry {
        let base = self.tools.without(PARENT_ONLY_TOOLS);
        let mut tools = ToolRegistry::new();
        for name in base.names() {
            let Some(tool) = base.get(name) else { continue };
            let allowed = kind.tools.as_ref().is_none_or(|list| list.iter().any(|t| t == name));
            if allowed && (!kind.read_only || tool.read_only()) {
                tools.register_arc(tool.clone());
            }
        }
        tools
    }

    /// Runs one child to the end and describes the result.
    async fn run_child(
        &self,
        kind: &AgentType,
        description: &str,
        prompt: &str,
        ctx: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        let _permit = tokio::select! {
            permit = self.limit.acquire() => permit.map_err(|_| ToolError::Failed("sub-agents are shut down".into()))?,
            _ = ctx.cancel.cancelled() => return Err(ToolError::Cancelled),
        };
        let (provider, model, model_spec) = match (&kind.model, &self.resolve_model) {
            (Some(spec), Some(resolve)) => {
                let (p, m) = resolve(spec)
                    .map_err(|e| ToolError::Failed(format!("agent type {}: {e}", kind.name)))?;
                (p, m, spec.clone())
            }
            _ => (self.provider.clone(), self.model.clone(), self.model_spec.clone()),
        };
        let n = self.started.fetch_add(1, Ordering::Relaxed) + 1;
        let label = format!("{}-{n}", kind.name);
        let session = self.store.create_child(&self.parent, &label, &model_spec).map_err(|e| {
            ToolError::Failed(format!("cannot start the sub-agent's transcript: {e}"))
        })?;
        let transcript = session.path().to_path_buf();
        let todos = TodoList::default();
        let mut tools = self.child_tools(kind);
        tools.register(TodoWriteTool(todos.clone()));
        let mut child = Agent {
            provider,
            model,
            model_spec,
            system: format!(
                "{}\n\n# You are a sub-agent ({})\nThe parent agent delegated this task to you: {description}. \
                 Work on your own: nobody will answer questions. Your final answer is all the parent sees, \
                 so make it a complete, concise report.\n\n{}",
                self.system, kind.name, kind.prompt
            ),
            tools,
            permissions: self.permissions.clone(),
            approver: self.approver.clone(),
            session,
            messages: Vec::new(),
            workspace: self.workspace.clone(),
            allowed_dirs: self.allowed_dirs.clone(),
            max_turns: self.max_turns,
            max_tokens: self.max_tokens,
            total_usage: Default::default(),
            todos,
            jobs: None,
            sandbox: self.sandbox.clone(),
            compaction: Compaction::new(self.compaction.context_window, self.compaction.threshold),
            remembering: Default::default(),
            turn_hook: None,
            reads: Default::default(),
        };
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let forward = {
            let ctx = ctx.clone();
            let agent_type = kind.name.clone();
            async move {
                while let Some(event) = rx.recv().await {
                    ctx.emit(AgentEvent::SubAgent {
                        call_id: ctx.call_id.clone(),
                        agent_type: agent_type.clone(),
                        event: Box::new(event),
                    });
                }
            }
        };
        let started = Instant::now();
        let run = async {
            let report = tokio::time::timeout(
                self.timeout,
                child.run(Message::user(prompt), &tx, &ctx.cancel),
            )
            .await;
            drop(tx);
            report
        };
        let (report, ()) = tokio::join!(run, forward);
        let elapsed = started.elapsed();
        let calls: usize = child.messages.iter().map(|m| m.tool_calls().count()).sum();
        let summary = format!(
            "[{} sub-agent: {} turn{}, {calls} tool call{}, {} tokens, {:.1} s; transcript {}]",
            kind.name,
            report.as_ref().map_or(0, |r| r.num_turns),
            if report.as_ref().map_or(0, |r| r.num_turns) == 1 { "" } else { "s" },
            if calls == 1 { "" } else { "s" },
            child.total_usage.total(),
            elapsed.as_secs_f64(),
            transcript.display()
        );
        match report {
            Err(_) => Ok(ToolOutput::error(format!(
                "the sub-agent ran out of time ({} s) before finishing\n{summary}",
                self.timeout.as_secs()
            ))),
            Ok(r) if r.outcome == Outcome::Answered => {
                Ok(ToolOutput::text(format!("{}\n\n{summary}", r.text)))
            }
            Ok(r) if r.outcome == Outcome::Cancelled => Err(ToolError::Cancelled),
            Ok(r) => Ok(ToolOutput::error(format!(
                "the sub-agent did not finish: {}\n{summary}",
                r.text
            ))),
        }
    }
}

/// The `task` tool (also answers to `spawn`).
pub struct TaskTool(pub Arc<SubAgents>);

#[async_trait]
impl Tool for TaskTool {
    fn name(&self) -> &str {
        "task"
    }

    fn description(&self) -> &str {
        "Delegates self-contained work to a sub-agent with a fresh context: it has your tools \
         (minus task), works alone and returns only its final report. Several calls in one \
         answer run in parallel. It sees nothing of this conversation: give a complete prompt."
    }

    fn input_schema(&self) -> Value {
        let types: Vec<String> = self.0.types.iter().map(|t| t.name.clone()).collect();
        let listing: Vec<String> =
            self.0.types.iter().map(|t| format!("{}: {}", t.name, t.description)).collect();
        json!({
            "type": "object",
            "properties": {
                "description": {"type": "string", "description": "A few words, shown to the user."},
                "prompt": {"type": "string"},
                "agent_type": {"type": "string", "enum": types, "description": listing.join("; ")}
            },
            "required": ["description", "prompt"],
            "additionalProperties": false
        })
    }

    /// Delegating changes nothing by itself: every call the sub-agent makes
    /// passes the same permission checks as the parent's.
    fn read_only(&self) -> bool {
        true
    }

    async fn execute(&self, input: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let kind_name = input["agent_type"].as_str().unwrap_or("general");
        let kind = self.0.types.iter().find(|t| t.name == kind_name).ok_or_else(|| {
            let names: Vec<&str> = self.0.types.iter().map(|t| t.name.as_str()).collect();
            ToolError::InvalidArguments(format!(
                "unknown agent_type {kind_name:?}; available: {}",
                names.join(", ")
            ))
        })?;
        let description = input["description"].as_str().unwrap_or_default();
        let prompt = input["prompt"].as_str().unwrap_or_default();
        if prompt.trim().is_empty() {
            return Err(ToolError::InvalidArguments("the prompt is empty".into()));
        }
        self.0.run_child(kind, description, prompt, ctx).await
    }
}
