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
use ferroclaw_core::agent::Outcome;
use ferroclaw_core::agents::AgentType;
use ferroclaw_core::session::SessionMeta;
use ferroclaw_core::{Approver, Permissions};
use ferroclaw_llm::Provider;
use ferroclaw_protocol::{AgentEvent, Message};
use ferroclaw_tools::tool_input::{parse, schema_for};
use ferroclaw_tools::{Tool, ToolContext, ToolError, ToolOutput, ToolRegistry};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::sync::Semaphore;

use crate::{Resume, Runtime, SessionOptions};

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

/// What a child is opened from: its parent's model, tools, permissions and
/// prompt, and its own type and task. Given to [`Runtime::open`] as
/// [`Resume::Child`] by the `task` tool.
pub struct ChildOf {
    pub(crate) provider: Arc<dyn Provider>,
    pub(crate) model: String,
    pub(crate) model_spec: String,
    /// The parent's tools; [`PARENT_ONLY_TOOLS`] are removed for the child.
    pub(crate) tools: ToolRegistry,
    pub(crate) permissions: Arc<Permissions>,
    pub(crate) parent: SessionMeta,
    /// The parent's system prompt; the child's adds its role to it.
    pub(crate) system: Arc<str>,
    /// The parent's workspace (its worktree when it was opened in one).
    pub(crate) workspace: PathBuf,
    /// The parent's context window and compaction threshold.
    pub(crate) window: (u64, f64),
    pub(crate) kind: AgentType,
    pub(crate) label: String,
    pub(crate) description: String,
}

impl ChildOf {
    /// The tools the child gets: the parent's (MCP tools included) minus
    /// delegation and session state, narrowed to its type's list.
    pub(crate) fn child_tools(&self) -> ToolRegistry {
        let base = self.tools.without(PARENT_ONLY_TOOLS);
        let mut tools = ToolRegistry::new();
        for name in base.names() {
            let Some(tool) = base.get(name) else { continue };
            let allowed =
                self.kind.tools.as_ref().is_none_or(|list| list.iter().any(|t| t == name));
            if allowed && (!self.kind.read_only || tool.read_only()) {
                tools.register_arc(tool.clone());
            }
        }
        tools
    }

    /// The child's system prompt: the parent's and its role.
    pub(crate) fn system(&self) -> String {
        format!(
            "{}\n\n# You are a sub-agent ({})\nThe parent agent delegated this task to you: {}. \
             Work on your own: nobody will answer questions. Your final answer is all the parent sees, \
             so make it a complete, concise report.\n\n{}",
            self.system, self.kind.name, self.description, self.kind.prompt
        )
    }
}

/// Everything a parent needs to start children; shared by its `task` tool.
pub(crate) struct SubAgents {
    pub(crate) runtime: Arc<Runtime>,
    pub(crate) provider: Arc<dyn Provider>,
    pub(crate) model: String,
    pub(crate) model_spec: String,
    pub(crate) tools: ToolRegistry,
    pub(crate) permissions: Arc<Permissions>,
    pub(crate) approver: Arc<dyn Approver>,
    pub(crate) parent: SessionMeta,
    pub(crate) system: Arc<str>,
    pub(crate) workspace: PathBuf,
    pub(crate) window: (u64, f64),
    pub(crate) timeout: Duration,
    pub(crate) limit: Arc<Semaphore>,
    pub(crate) started: AtomicU32,
}

impl SubAgents {
    fn types(&self) -> &[AgentType] {
        self.runtime.agent_types()
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
        let n = self.started.fetch_add(1, Ordering::Relaxed) + 1;
        let child = ChildOf {
            provider: self.provider.clone(),
            model: self.model.clone(),
            model_spec: self.model_spec.clone(),
            tools: self.tools.clone(),
            permissions: self.permissions.clone(),
            parent: self.parent.clone(),
            system: self.system.clone(),
            workspace: self.workspace.clone(),
            window: self.window,
            kind: kind.clone(),
            label: format!("{}-{n}", kind.name),
            description: description.to_string(),
        };
        let opened = self
            .runtime
            .open(Resume::Child(Box::new(child)), self.approver.clone(), SessionOptions::default())
            .map_err(|e| ToolError::Failed(format!("cannot start the sub-agent: {e}")))?;
        let mut child = opened.agent;
        let transcript = child.session().path().to_path_buf();
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
        let calls: usize = child.messages().iter().map(|m| m.tool_calls().count()).sum();
        let summary = format!(
            "[{} sub-agent: {} turn{}, {calls} tool call{}, {} tokens, {:.1} s; transcript {}]",
            kind.name,
            report.as_ref().map_or(0, |r| r.num_turns),
            if report.as_ref().map_or(0, |r| r.num_turns) == 1 { "" } else { "s" },
            if calls == 1 { "" } else { "s" },
            child.total_usage().total(),
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
pub(crate) struct TaskTool(pub(crate) Arc<SubAgents>);

/// `task`'s input; `agent_type`'s choices are filled in at run time.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct TaskArgs {
    /// A few words, shown to the user.
    description: String,
    prompt: String,
    agent_type: Option<String>,
}

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
        let mut schema = schema_for::<TaskArgs>();
        // The agent types are known at run time: named here, one line each.
        let types: Vec<String> = self.0.types().iter().map(|t| t.name.clone()).collect();
        let listing: Vec<String> =
            self.0.types().iter().map(|t| format!("{}: {}", t.name, t.description)).collect();
        schema["properties"]["agent_type"]["enum"] = json!(types);
        schema["properties"]["agent_type"]["description"] = json!(listing.join("; "));
        schema
    }

    /// Delegating changes nothing by itself: every call the sub-agent makes
    /// passes the same permission checks as the parent's.
    fn read_only(&self) -> bool {
        true
    }

    async fn execute(&self, input: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let args: TaskArgs = parse(input)?;
        let kind_name = args.agent_type.as_deref().unwrap_or("general");
        let kind = self.0.types().iter().find(|t| t.name == kind_name).ok_or_else(|| {
            let names: Vec<&str> = self.0.types().iter().map(|t| t.name.as_str()).collect();
            ToolError::InvalidArguments(format!(
                "unknown agent_type {kind_name:?}; available: {}",
                names.join(", ")
            ))
        })?;
        let (description, prompt) = (args.description.as_str(), args.prompt.as_str());
        if prompt.trim().is_empty() {
            return Err(ToolError::InvalidArguments("the prompt is empty".into()));
        }
        self.0.run_child(kind, description, prompt, ctx).await
    }
}
