//! The worktree tools (learn-claude-code s12's names and arguments):
//! `worktree_create`, `worktree_list`, `worktree_status`, `worktree_run`,
//! `worktree_keep`, `worktree_remove`, `worktree_events`,
//! `task_bind_worktree`.

use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;
use ferroclaw_tools::tool_input::{AtLeastOne, parse, schema_for};
use ferroclaw_tools::{BashTool, Tool, ToolContext, ToolError, ToolOutput, ToolRegistry};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{Worktree, WorktreeError, WorktreeEvent, WorktreeManager, WorktreeStatus};
use crate::error::BoardError;

/// Events `worktree_events` shows when no limit is given.
pub const DEFAULT_EVENT_LIMIT: usize = 20;
/// The most events one call shows.
const MAX_EVENT_LIMIT: usize = 200;

/// `worktree_create`'s input.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct CreateArgs {
    name: String,
    task_id: Option<AtLeastOne>,
    base_ref: Option<String>,
}

/// `worktree_list`'s input: nothing.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ListArgs {}

/// The input of `worktree_status` and `worktree_keep`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct NameArgs {
    name: String,
}

/// `worktree_run`'s input.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct RunArgs {
    name: String,
    command: String,
}

/// `worktree_remove`'s input.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct RemoveArgs {
    name: String,
    force: Option<bool>,
    complete_task: Option<bool>,
}

/// `worktree_events`'s input.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct EventsArgs {
    #[schemars(range(min = 1, max = MAX_EVENT_LIMIT))]
    limit: Option<u64>,
}

/// `task_bind_worktree`'s input.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct BindTaskArgs {
    task_id: AtLeastOne,
    worktree: String,
}

/// The eight worktree tools on the worktrees of `project`.
pub fn worktree_tools(project: impl Into<PathBuf>) -> Vec<Arc<dyn Tool>> {
    let m = WorktreeManager::open(project.into());
    let tool =
        |kind: Kind| -> Arc<dyn Tool> { Arc::new(WorktreeTool { kind, manager: m.clone() }) };
    [
        Kind::Create,
        Kind::List,
        Kind::Status,
        Kind::Run,
        Kind::Keep,
        Kind::Remove,
        Kind::Events,
        Kind::BindTask,
    ]
    .into_iter()
    .map(tool)
    .collect()
}

/// Adds the worktree tools on the worktrees of `project` to `tools`.
pub fn register_worktree_tools(tools: &mut ToolRegistry, project: impl Into<PathBuf>) {
    for tool in worktree_tools(project) {
        tools.register_arc(tool);
    }
}

/// Which of the eight tools.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Create,
    List,
    Status,
    Run,
    Keep,
    Remove,
    Events,
    BindTask,
}

/// One worktree tool over a project's worktrees.
#[derive(Debug, Clone)]
struct WorktreeTool {
    kind: Kind,
    manager: WorktreeManager,
}

#[async_trait]
impl Tool for WorktreeTool {
    fn name(&self) -> &str {
        match self.kind {
            Kind::Create => "worktree_create",
            Kind::List => "worktree_list",
            Kind::Status => "worktree_status",
            Kind::Run => "worktree_run",
            Kind::Keep => "worktree_keep",
            Kind::Remove => "worktree_remove",
            Kind::Events => "worktree_events",
            Kind::BindTask => "task_bind_worktree",
        }
    }

    fn description(&self) -> &str {
        match self.kind {
            Kind::Create => {
                "Creates an isolated git worktree .agent/worktrees/NAME on a new branch wt/NAME \
                 from base_ref (default HEAD), optionally bound to a board task."
            }
            Kind::List => "Lists the worktrees: status, branch, bound task.",
            Kind::Status => "A worktree's uncommitted files and commits since its base.",
            Kind::Run => {
                "Runs a command like bash with the worktree as its workspace (to commit, run \
                 `git -C .agent/worktrees/NAME commit ...` with bash)."
            }
            Kind::Keep => "Keeps a worktree on disk for a human to review.",
            Kind::Remove => {
                "Removes a worktree's folder, keeping its branch; refused with uncommitted \
                 changes unless force. complete_task completes its bound task."
            }
            Kind::Events => "The latest worktree lifecycle events.",
            Kind::BindTask => "Binds a board task to a worktree.",
        }
    }

    fn input_schema(&self) -> Value {
        match self.kind {
            Kind::Create => schema_for::<CreateArgs>(),
            Kind::List => schema_for::<ListArgs>(),
            Kind::Status | Kind::Keep => schema_for::<NameArgs>(),
            Kind::Run => schema_for::<RunArgs>(),
            Kind::Remove => schema_for::<RemoveArgs>(),
            Kind::Events => schema_for::<EventsArgs>(),
            Kind::BindTask => schema_for::<BindTaskArgs>(),
        }
    }

    fn read_only(&self) -> bool {
        matches!(self.kind, Kind::List | Kind::Status | Kind::Events)
    }

    async fn execute(&self, input: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let m = self.manager.clone();
        let text = match self.kind {
            Kind::Create => {
                let CreateArgs { name, task_id, base_ref } = parse(input)?;
                let task = task_id.map(AtLeastOne::get);
                let w = blocking(move || m.create(&name, task, base_ref.as_deref())).await?;
                format!(
                    "created worktree {} on branch {} at {}\n(run commands there with worktree_run)",
                    w.name,
                    w.branch,
                    w.path.display()
                )
            }
            Kind::List => render_worktrees(&blocking(move || m.list()).await?),
            Kind::Status => {
                let NameArgs { name } = parse(input)?;
                let state = blocking(move || m.status(&name)).await?;
                let mut text = render_worktrees(std::slice::from_ref(&state.worktree));
                if !state.present {
                    text.push_str("\nits folder is gone (deleted by hand?)");
                }
                text.push_str(&format!("\nuncommitted changes: {}", state.changes.len()));
                for file in &state.changes {
                    text.push_str(&format!("\n  {file}"));
                }
                text.push_str(&format!(
                    "\ncommits since {}: {}",
                    state.worktree.base_ref,
                    state.commits.len()
                ));
                for commit in &state.commits {
                    text.push_str(&format!("\n  {commit}"));
                }
                text
            }
            Kind::Run => return self.run(input, ctx).await,
            Kind::Keep => {
                let NameArgs { name } = parse(input)?;
                let w = blocking(move || m.keep(&name)).await?;
                format!("kept worktree {} at {}", w.name, w.path.display())
            }
            Kind::Remove => {
                let RemoveArgs { name, force, complete_task } = parse(input)?;
                let (force, complete) = (force.unwrap_or(false), complete_task.unwrap_or(false));
                let r = blocking(move || m.remove(&name, force, complete)).await?;
                let mut text = format!(
                    "removed worktree {} (branch {} kept)",
                    r.worktree.name, r.worktree.branch
                );
                if let Some(task) = &r.completed {
                    text.push_str(&format!("\ntask #{} {} is completed", task.id, task.subject));
                }
                for note in &r.notes {
                    text.push_str(&format!("\n[note: {note}]"));
                }
                text
            }
            Kind::Events => {
                let limit = match parse::<EventsArgs>(input)?.limit {
                    Some(n) => (n as usize).clamp(1, MAX_EVENT_LIMIT),
                    None => DEFAULT_EVENT_LIMIT,
                };
                render_events(&blocking(move || m.events(limit)).await?)
            }
            Kind::BindTask => {
                let BindTaskArgs { task_id, worktree: name } = parse(input)?;
                let id = task_id.get();
                let task = blocking(move || m.bind_task(id, &name)).await?;
                format!(
                    "task #{} {} is bound to worktree {}",
                    task.id,
                    task.subject,
                    name_of(&task)
                )
            }
        };
        Ok(ToolOutput::text(text))
    }
}

impl WorktreeTool {
    /// `worktree_run`: the bash tool, with the worktree as its workspace:
    /// same deny list, timeout and sandbox (Landlock rooted in the worktree),
    /// relative paths inside it.
    async fn run(&self, input: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let RunArgs { name, command } = parse(input)?;
        let m = self.manager.clone();
        let worktree = blocking(move || m.get(&name)).await?;
        if !worktree.path.is_dir() {
            return Err(ToolError::Refused(format!(
                "worktree {}'s folder {} is gone; remove it with worktree_remove",
                worktree.name,
                worktree.path.display()
            )));
        }
        let ctx = ToolContext { workspace: worktree.path.clone(), ..ctx.clone() };
        BashTool::new().execute(json!({"command": command}), &ctx).await
    }
}

/// The worktrees, one line each, for the model and for `ferroclaw worktrees`.
pub fn render_worktrees(worktrees: &[Worktree]) -> String {
    if worktrees.is_empty() {
        return "(no worktrees)".to_string();
    }
    let mut lines = Vec::new();
    for w in worktrees {
        let mut line = format!("{:<8} {}  {}", w.status.as_str(), w.name, w.branch);
        if let Some(task) = w.task_id {
            line.push_str(&format!("  task #{task}"));
        }
        if w.status != WorktreeStatus::Removed {
            line.push_str(&format!("  {}", w.path.display()));
        }
        lines.push(line);
    }
    lines.join("\n")
}

/// The events, one line each, oldest first.
pub fn render_events(events: &[WorktreeEvent]) -> String {
    if events.is_empty() {
        return "(no worktree events)".to_string();
    }
    events.iter().map(WorktreeEvent::line).collect::<Vec<_>>().join("\n")
}

fn name_of(task: &crate::Task) -> &str {
    task.worktree.as_deref().unwrap_or("")
}

/// Runs a worktree operation off the async threads (git and a file lock).
async fn blocking<T: Send + 'static>(
    op: impl FnOnce() -> Result<T, WorktreeError> + Send + 'static,
) -> Result<T, ToolError> {
    tokio::task::spawn_blocking(op)
        .await
        .map_err(|e| ToolError::Failed(format!("the worktree operation failed: {e}")))?
        .map_err(|e| match e {
            WorktreeError::Io { context, source } => ToolError::io(context, source),
            WorktreeError::InvalidName { .. }
            | WorktreeError::Unknown { .. }
            | WorktreeError::Board(BoardError::UnknownTask { .. }) => {
                ToolError::InvalidArguments(e.to_string())
            }
            other => ToolError::Refused(other.to_string()),
        })
}
