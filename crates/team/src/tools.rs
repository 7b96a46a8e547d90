//! The board's tools: `task_create`, `task_update`, `task_list`, `task_get`
//! (learn-claude-code's names and arguments).

use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;
use ferroclaw_tools::tool_input::{AtLeastOne, parse, schema_for};
use ferroclaw_tools::{Tool, ToolContext, ToolError, ToolOutput, ToolRegistry};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use crate::board::TaskBoard;
use crate::error::BoardError;
use crate::render::render_board;
use crate::task::{Task, TaskStatus, TaskUpdate};

/// The four board tools on the board of `workspace`.
pub fn board_tools(workspace: impl Into<PathBuf>) -> Vec<Arc<dyn Tool>> {
    let board = TaskBoard::open(workspace.into());
    vec![
        Arc::new(TaskCreateTool(board.clone())),
        Arc::new(TaskUpdateTool(board.clone())),
        Arc::new(TaskListTool(board.clone())),
        Arc::new(TaskGetTool(board)),
    ]
}

/// Adds the four board tools on the board of `workspace` to `tools`.
pub fn register_board_tools(tools: &mut ToolRegistry, workspace: impl Into<PathBuf>) {
    for tool in board_tools(workspace) {
        tools.register_arc(tool);
    }
}

/// `task_create`: adds a pending task.
#[derive(Debug, Clone)]
pub struct TaskCreateTool(pub TaskBoard);

/// `task_update`: status, owner and dependencies of a task.
#[derive(Debug, Clone)]
pub struct TaskUpdateTool(pub TaskBoard);

/// `task_list`: the whole board, compact.
#[derive(Debug, Clone)]
pub struct TaskListTool(pub TaskBoard);

/// `task_get`: one task in full.
#[derive(Debug, Clone)]
pub struct TaskGetTool(pub TaskBoard);

/// `task_create`'s input.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct TaskCreateArgs {
    /// A short title.
    subject: String,
    /// What done means.
    description: Option<String>,
}

/// `task_update`'s input (the id lists in learn-claude-code's spelling).
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct TaskUpdateArgs {
    task_id: AtLeastOne,
    status: Option<TaskStatus>,
    owner: Option<String>,
    subject: Option<String>,
    description: Option<String>,
    #[serde(rename = "addBlockedBy")]
    add_blocked_by: Option<Vec<AtLeastOne>>,
    #[serde(rename = "removeBlockedBy")]
    remove_blocked_by: Option<Vec<AtLeastOne>>,
    #[serde(rename = "addBlocks")]
    add_blocks: Option<Vec<AtLeastOne>>,
    #[serde(rename = "removeBlocks")]
    remove_blocks: Option<Vec<AtLeastOne>>,
}

/// `task_list`'s input: nothing.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct TaskListArgs {}

/// `task_get`'s input.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct TaskGetArgs {
    task_id: AtLeastOne,
}

#[async_trait]
impl Tool for TaskCreateTool {
    fn name(&self) -> &str {
        "task_create"
    }

    fn description(&self) -> &str {
        "Adds a task to the project's task board (.agent/tasks/, kept across sessions, shared \
         with other agents), for work that may outlive this conversation or be split between \
         agents. Returns its id."
    }

    fn input_schema(&self) -> Value {
        schema_for::<TaskCreateArgs>()
    }

    async fn execute(&self, input: Value, _ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let TaskCreateArgs { subject, description } = parse(input)?;
        let description = description.unwrap_or_default();
        let board = self.0.clone();
        let task = blocking(move || board.create(&subject, &description)).await?;
        Ok(ToolOutput::text(task_json(&task)))
    }
}

#[async_trait]
impl Tool for TaskUpdateTool {
    fn name(&self) -> &str {
        "task_update"
    }

    fn description(&self) -> &str {
        "Changes a board task: `status`, `owner` (\"\" clears it), and what it waits for \
         (`addBlockedBy`, `removeBlockedBy`) or blocks (`addBlocks`, `removeBlocks`). A task \
         waiting for open tasks cannot start or complete; cycles are refused. The answer names \
         tasks a completion made ready."
    }

    fn input_schema(&self) -> Value {
        schema_for::<TaskUpdateArgs>()
    }

    async fn execute(&self, input: Value, _ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let args: TaskUpdateArgs = parse(input)?;
        let id = args.task_id.get();
        let task_ids = |ids: Option<Vec<AtLeastOne>>| {
            ids.unwrap_or_default().into_iter().map(AtLeastOne::get).collect()
        };
        let update = TaskUpdate {
            status: args.status,
            owner: args.owner,
            subject: args.subject,
            description: args.description,
            worktree: None,
            add_blocked_by: task_ids(args.add_blocked_by),
            remove_blocked_by: task_ids(args.remove_blocked_by),
            add_blocks: task_ids(args.add_blocks),
            remove_blocks: task_ids(args.remove_blocks),
        };
        let board = self.0.clone();
        let updated = blocking(move || board.update(id, &update)).await?;
        let mut text = task_json(&updated.task);
        if !updated.unblocked.is_empty() {
            let ready: Vec<String> =
                updated.unblocked.iter().map(|t| format!("#{} {}", t.id, t.subject)).collect();
            text.push_str(&format!("\nNow ready: {}", ready.join("; ")));
        }
        for note in &updated.notes {
            text.push_str(&format!("\n[note: {note}]"));
        }
        Ok(ToolOutput::text(text))
    }
}

#[async_trait]
impl Tool for TaskListTool {
    fn name(&self) -> &str {
        "task_list"
    }

    fn description(&self) -> &str {
        "Shows the task board, one line per task ([ ] pending, [>] in progress, [x] completed, \
         owner, open tasks it waits for), then the tasks ready to start."
    }

    fn input_schema(&self) -> Value {
        schema_for::<TaskListArgs>()
    }

    fn read_only(&self) -> bool {
        true
    }

    async fn execute(&self, _input: Value, _ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let board = self.0.clone();
        let listing = blocking(move || board.list()).await?;
        Ok(ToolOutput::text(render_board(&listing)))
    }
}

#[async_trait]
impl Tool for TaskGetTool {
    fn name(&self) -> &str {
        "task_get"
    }

    fn description(&self) -> &str {
        "Shows one task in full: subject, description, status, owner, blockedBy and blocks."
    }

    fn input_schema(&self) -> Value {
        schema_for::<TaskGetArgs>()
    }

    fn read_only(&self) -> bool {
        true
    }

    async fn execute(&self, input: Value, _ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let id = parse::<TaskGetArgs>(input)?.task_id.get();
        let board = self.0.clone();
        let task = blocking(move || board.get(id)).await?;
        Ok(ToolOutput::text(task_json(&task)))
    }
}

/// Runs a board operation off the async threads (it takes a file lock and
/// may wait for another agent).
async fn blocking<T: Send + 'static>(
    op: impl FnOnce() -> Result<T, BoardError> + Send + 'static,
) -> Result<T, ToolError> {
    tokio::task::spawn_blocking(op)
        .await
        .map_err(|e| ToolError::Failed(format!("the task board operation failed: {e}")))?
        .map_err(|e| match e {
            BoardError::Io { context, source } => ToolError::io(context, source),
            BoardError::UnknownTask { .. } | BoardError::Invalid(_) => {
                ToolError::InvalidArguments(e.to_string())
            }
            other => ToolError::Refused(other.to_string()),
        })
}

/// The task as the pretty JSON of its file.
fn task_json(task: &Task) -> String {
    serde_json::to_string_pretty(task).unwrap_or_else(|e| format!("(cannot show the task: {e})"))
}
