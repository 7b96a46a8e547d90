//! The model's todo list (`todo_write`): a hard rule of at most one item in
//! progress and at most [`MAX_TODOS`] items, kept as session state, shown as
//! it changes, and a reminder when the model forgets about it.

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use ferroclaw_protocol::{AgentEvent, ContentBlock, Message, TodoItem, TodoStatus};
use ferroclaw_tools::tool_input::{parse, schema_for};
use ferroclaw_tools::{Tool, ToolContext, ToolError, ToolOutput};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

/// Most items a list may hold.
pub const MAX_TODOS: usize = 50;
/// Model turns without an update, with open items, before a reminder
/// (learn-claude-code s03).
pub const REMINDER_AFTER_TURNS: u32 = 3;
/// The reminder appended to tool results.
pub const REMINDER: &str = "<reminder>Update your todos.</reminder>";

/// The list and how long since the model touched it. Cloning shares it.
#[derive(Debug, Clone, Default)]
pub struct TodoList {
    state: Arc<Mutex<State>>,
}

#[derive(Debug, Default)]
struct State {
    items: Vec<TodoItem>,
    turns_since_update: u32,
}

impl TodoList {
    /// The list restored from a conversation: the last `todo_write` call's items.
    pub fn restore(messages: &[Message]) -> Self {
        let last = messages
            .iter()
            .rev()
            .flat_map(|m| m.tool_calls().collect::<Vec<_>>().into_iter().rev())
            .find(|c| c.name == "todo_write")
            .and_then(|c| serde_json::from_value::<Vec<TodoItem>>(c.input["items"].clone()).ok());
        let list = Self::default();
        if let Some(items) = last {
            list.lock().items = items;
        }
        list
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The items, in order.
    pub fn items(&self) -> Vec<TodoItem> {
        self.lock().items.clone()
    }

    /// Replaces the whole list, or refuses with the reason and changes nothing.
    pub fn replace(&self, items: Vec<TodoItem>) -> Result<(), String> {
        if items.len() > MAX_TODOS {
            return Err(format!(
                "{} items is too many; keep the list at {MAX_TODOS} or fewer",
                items.len()
            ));
        }
        let in_progress: Vec<&str> = items
            .iter()
            .filter(|i| i.status == TodoStatus::InProgress)
            .map(|i| i.content.as_str())
            .collect();
        if in_progress.len() > 1 {
            return Err(format!(
                "only ONE item may be in_progress at a time, got {}: {}. Finish one, mark it completed, then start the next",
                in_progress.len(),
                in_progress.join("; ")
            ));
        }
        if let Some(empty) = items.iter().position(|i| i.content.trim().is_empty()) {
            return Err(format!("item {} has no content", empty + 1));
        }
        let mut state = self.lock();
        state.items = items;
        state.turns_since_update = 0;
        Ok(())
    }

    /// Counts a model turn; call once per model answer.
    pub fn note_model_turn(&self) {
        self.lock().turns_since_update += 1;
    }

    /// True (once) when the list has open items and the model has not
    /// updated it for [`REMINDER_AFTER_TURNS`] turns; the count restarts.
    pub fn take_reminder(&self) -> bool {
        let mut state = self.lock();
        let open = state.items.iter().any(|i| i.status != TodoStatus::Completed);
        if open && state.turns_since_update >= REMINDER_AFTER_TURNS {
            state.turns_since_update = 0;
            return true;
        }
        false
    }

    /// The list as text, for re-injection after compaction; empty when there is none.
    pub fn render(&self) -> String {
        render(&self.items())
    }
}

/// `[x] done`, `[>] in progress`, `[ ] pending`, one per line.
pub fn render(items: &[TodoItem]) -> String {
    items
        .iter()
        .map(|i| {
            let mark = match i.status {
                TodoStatus::Completed => "[x]",
                TodoStatus::InProgress => "[>]",
                TodoStatus::Pending => "[ ]",
            };
            format!("{mark} {}", i.content)
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Appends the reminder to a tool-results message.
pub fn add_reminder(results: &mut Vec<ContentBlock>) {
    results.push(ContentBlock::text(REMINDER));
}

/// The `todo_write` tool.
pub struct TodoWriteTool(pub TodoList);

/// `todo_write`'s input.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct TodoWriteArgs {
    items: Vec<ItemArgs>,
}

/// One item of `todo_write`'s list ([`TodoItem`] as the model writes it).
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ItemArgs {
    content: String,
    status: StatusArg,
    /// Shown while in progress.
    active_form: Option<String>,
}

/// [`TodoStatus`] as the model writes it.
#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
enum StatusArg {
    Pending,
    InProgress,
    Completed,
}

impl From<ItemArgs> for TodoItem {
    fn from(item: ItemArgs) -> Self {
        let status = match item.status {
            StatusArg::Pending => TodoStatus::Pending,
            StatusArg::InProgress => TodoStatus::InProgress,
            StatusArg::Completed => TodoStatus::Completed,
        };
        TodoItem { content: item.content, status, active_form: item.active_form }
    }
}

#[async_trait]
impl Tool for TodoWriteTool {
    fn name(&self) -> &str {
        "todo_write"
    }

    fn description(&self) -> &str {
        "Replaces your todo list (send the whole list). Use it for tasks of 3 or more steps: \
         mark one item in_progress before starting it and completed as soon as it is done. \
         More than one in_progress or 50 items is refused. The user sees the list."
    }

    fn input_schema(&self) -> Value {
        schema_for::<TodoWriteArgs>()
    }

    /// Only session state changes: no approval needed, and plan mode may use it.
    fn read_only(&self) -> bool {
        true
    }

    async fn execute(&self, input: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let args: TodoWriteArgs = parse(input)?;
        let items: Vec<TodoItem> = args.items.into_iter().map(TodoItem::from).collect();
        self.0.replace(items.clone()).map_err(ToolError::Refused)?;
        ctx.emit(AgentEvent::Todos { items: items.clone() });
        let done = items.iter().filter(|i| i.status == TodoStatus::Completed).count();
        Ok(ToolOutput::text(format!(
            "Todo list updated ({done}/{} completed):\n{}",
            items.len(),
            render(&items)
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(content: &str, status: TodoStatus) -> TodoItem {
        TodoItem { content: content.into(), status, active_form: None }
    }

    #[test]
    fn two_items_in_progress_are_refused_and_the_list_is_unchanged() {
        let list = TodoList::default();
        list.replace(vec![item("a", TodoStatus::InProgress), item("b", TodoStatus::Pending)])
            .unwrap();
        let err = list
            .replace(vec![item("a", TodoStatus::InProgress), item("b", TodoStatus::InProgress)])
            .unwrap_err();
        assert!(err.contains("only ONE item"), "{err}");
        assert_eq!(list.items()[1].status, TodoStatus::Pending);
    }

    #[test]
    fn more_than_fifty_items_are_refused() {
        let many = (0..51).map(|i| item(&i.to_string(), TodoStatus::Pending)).collect();
        assert!(TodoList::default().replace(many).unwrap_err().contains("50"));
    }

    #[test]
    fn the_reminder_comes_after_three_idle_turns_with_open_items_and_only_once() {
        let list = TodoList::default();
        list.replace(vec![item("a", TodoStatus::Pending)]).unwrap();
        for _ in 0..2 {
            list.note_model_turn();
            assert!(!list.take_reminder());
        }
        list.note_model_turn();
        assert!(list.take_reminder());
        assert!(!list.take_reminder(), "the count restarts");
        list.replace(vec![item("a", TodoStatus::Completed)]).unwrap();
        for _ in 0..5 {
            list.note_model_turn();
        }
        assert!(!list.take_reminder(), "a finished list needs no reminder");
    }
}
