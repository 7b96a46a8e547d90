//! The board's tools: `task_create`, `task_update`, `task_list`, `task_get`
//! (learn-claude-code's names and arguments).

use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;
use ferroclaw_tools::{Tool, ToolContext, ToolError, ToolOutput, ToolRegistry};
use serde_json::{Value, json};

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
        json!({
            "type": "object",
            "properties": {
                "subject": {"type": "string", "description": "A short title."},
                "description": {"type": "string", "description": "What done means."}
            },
            "required": ["subject"],
            "additionalProperties": false
        })
    }

    async fn execute(&self, input: Value, _ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let subject = string(&input, "subject").unwrap_or_default().to_string();
        let description = string(&input, "description").unwrap_or_default().to_string();
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
        let ids = json!({"type": "array", "items": {"type": "integer", "minimum": 1}});
        json!({
            "type": "object",
            "properties": {
                "task_id": {"type": "integer", "minimum": 1},
                "status": {"type": "string", "enum": ["pending", "in_progress", "completed"]},
                "owner": {"type": "string"},
                "subject": {"type": "string"},
                "description": {"type": "string"},
                "addBlockedBy": ids.clone(),
                "removeBlockedBy": ids.clone(),
                "addBlocks": ids.clone(),
                "removeBlocks": ids
            },
            "required": ["task_id"],
            "additionalProperties": false
        })
    }

    async fn execute(&self, input: Value, _ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let id = task_id(&input)?;
        let update = TaskUpdate {
            status: match string(&input, "status") {
                Some(name) => Some(TaskStatus::parse(name).ok_or_else(|| {
                    ToolError::InvalidArguments(format!(
                        "status {name:?} is not one of pending, in_progress, completed"
                    ))
                })?),
                None => None,
            },
            owner: string(&input, "owner").map(str::to_string),
            subject: string(&input, "subject").map(str::to_string),
            description: string(&input, "description").map(str::to_string),
            worktree: None,
            add_blocked_by: ids(&input, "addBlockedBy")?,
            remove_blocked_by: ids(&input, "removeBlockedBy")?,
            add_blocks: ids(&input, "addBlocks")?,
            remove_blocks: ids(&input, "removeBlocks")?,
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
        json!({"type": "object", "properties": {}, "additionalProperties": false})
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
        json!({
            "type": "object",
            "properties": {"task_id": {"type": "integer", "minimum": 1}},
            "required": ["task_id"],
            "additionalProperties": false
        })
    }

    fn read_only(&self) -> bool {
        true
    }

    async fn execute(&self, input: Value, _ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let id = task_id(&input)?;
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

fn string<'a>(input: &'a Value, key: &str) -> Option<&'a str> {
    input.get(key).and_then(Value::as_str)
}

/// The required `task_id`.
fn task_id(input: &Value) -> Result<u64, ToolError> {
    input
        .get("task_id")
        .and_then(Value::as_u64)
        .ok_or_else(|| ToolError::InvalidArguments("`task_id` (a task number) is required".into()))
}

/// The optional list of task ids `key`.
fn ids(input: &Value, key: &str) -> Result<Vec<u64>, ToolError> {
    match input.get(key) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => items
            .iter()
            .map(|v| {
                v.as_u64().ok_or_else(|| {
                    ToolError::InvalidArguments(format!("`{key}` holds {v}, not a task number"))
                })
            })
            .collect(),
        Some(v) => Err(ToolError::InvalidArguments(format!(
            "`{key}` must be a list of task numbers, got {v}"
        ))),
    }
}
