//! From ferroclaw's [`AgentEvent`] stream (and a resumed conversation's
//! messages) to ACP `session/update`s.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Mutex, PoisonError};

use ferroclaw_protocol::{AgentEvent, ContentBlock, Message, ResultPart, Role};
use serde_json::{Value, json};

use crate::wire;

/// What the translation of one session's events needs to know.
pub(crate) struct Translator {
    pub workspace: PathBuf,
    /// The model's context window, the `size` of `usage_update`.
    pub context_window: u64,
    /// The model spec, for the cost of `usage_update`.
    pub model: String,
    /// Calls started and not finished: name and input, by id.
    pub running: Mutex<HashMap<String, (String, Value)>>,
}

impl Translator {
    /// The updates for one event (often none: turn boundaries, retries of
    /// no interest to an editor).
    pub(crate) fn updates(&self, event: &AgentEvent) -> Vec<Value> {
        match event {
            AgentEvent::TextDelta { text } => vec![wire::chunk("agent_message_chunk", text)],
            AgentEvent::Retrying { attempt, reason, .. } => vec![wire::chunk(
                "agent_thought_chunk",
                &format!("(the provider failed: {reason}; retry {attempt})\n"),
            )],
            // Shown before the call runs, with its diffs; a call that needs
            // permission was already shown by the permission request.
            AgentEvent::ToolCallStarted { id, name, input } => {
                self.running
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .insert(id.clone(), (name.clone(), input.clone()));
                let mut call = wire::tool_call(&self.workspace, id, name, input, "in_progress");
                call["sessionUpdate"] = json!("tool_call");
                vec![call]
            }
            AgentEvent::PermissionDenied { id, reason, .. } => vec![json!({
                "sessionUpdate": "tool_call_update",
                "toolCallId": id,
                "status": "failed",
                "content": [wire::text_content(reason)],
            })],
            AgentEvent::ToolCallFinished { id, is_error, preview, .. } => {
                vec![self.finished(id, *is_error, preview)]
            }
            AgentEvent::Todos { items } => {
                let entries: Vec<Value> = items.iter().map(wire::plan_entry).collect();
                vec![json!({"sessionUpdate": "plan", "entries": entries})]
            }
            AgentEvent::PlanProposed { plan } => {
                vec![wire::chunk("agent_message_chunk", &format!("{plan}\n"))]
            }
            // A sub-agent's progress is the main agent's thinking, to an editor.
            AgentEvent::SubAgent { agent_type, event, .. } => match event.as_ref() {
                AgentEvent::TextDelta { text } => vec![wire::chunk("agent_thought_chunk", text)],
                AgentEvent::ToolCallStarted { name, input, .. } => vec![wire::chunk(
                    "agent_thought_chunk",
                    &format!("\n[{agent_type}] {}\n", wire::tool_title(name, input)),
                )],
                _ => Vec::new(),
            },
            AgentEvent::Compaction { before_tokens, after_tokens } => vec![wire::chunk(
                "agent_thought_chunk",
                &format!("(conversation compacted: {before_tokens} → {after_tokens} tokens)\n"),
            )],
            AgentEvent::Usage { usage } => {
                let mut update = json!({
                    "sessionUpdate": "usage_update",
                    // The context used: the last call's whole input and output.
                    "used": usage.total(),
                    "size": self.context_window,
                });
                if let Some(cost) = ferroclaw_core::pricing::cost(&self.model, usage) {
                    update["cost"] = json!({"amount": cost, "currency": "USD"});
                }
                vec![update]
            }
            AgentEvent::Error { message, fatal: false } => {
                vec![wire::chunk("agent_thought_chunk", &format!("({message})\n"))]
            }
            _ => Vec::new(),
        }
    }

    /// The update of a finished call: an edit that worked shows its diffs
    /// and files again; anything else its result.
    fn finished(&self, id: &str, is_error: bool, preview: &str) -> Value {
        let started = self.running.lock().unwrap_or_else(PoisonError::into_inner).remove(id);
        let mut update = json!({
            "sessionUpdate": "tool_call_update",
            "toolCallId": id,
            "status": if is_error { "failed" } else { "completed" },
            "content": [wire::text_content(preview)],
            "rawOutput": {"preview": preview},
        });
        if let Some((name, input)) = started {
            let diffs = wire::diffs(&self.workspace, &name, &input);
            if !is_error && !diffs.is_empty() {
                update["content"] = json!(diffs);
                update["locations"] = json!(wire::locations(&self.workspace, &input));
            }
        }
        update
    }

    /// A conversation as updates, for `session/load`: user text, the
    /// agent's text, and each tool call with its result.
    pub(crate) fn history(&self, messages: &[Message]) -> Vec<Value> {
        let mut out = Vec::new();
        for message in messages {
            for block in &message.content {
                match (message.role, block) {
                    (Role::User, ContentBlock::Text { text }) => {
                        out.push(wire::chunk("user_message_chunk", text));
                    }
                    (Role::Assistant, ContentBlock::Text { text }) => {
                        out.push(wire::chunk("agent_message_chunk", text));
                    }
                    (_, ContentBlock::ToolCall(call)) => {
                        let mut update = wire::tool_call(
                            &self.workspace,
                            &call.id,
                            &call.name,
                            &call.input,
                            "in_progress",
                        );
                        update["sessionUpdate"] = json!("tool_call");
                        out.push(update);
                    }
                    (_, ContentBlock::ToolResult { tool_call_id, content, is_error }) => {
                        let text: String = content
                            .iter()
                            .filter_map(|p| match p {
                                ResultPart::Text { text } => Some(text.as_str()),
                                ResultPart::Image { .. } => None,
                            })
                            .collect();
                        out.push(json!({
                            "sessionUpdate": "tool_call_update",
                            "toolCallId": tool_call_id,
                            "status": if *is_error { "failed" } else { "completed" },
                            "content": [wire::text_content(&text)],
                        }));
                    }
                    _ => {}
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferroclaw_protocol::{TodoItem, TodoStatus, ToolCall, Usage};

    fn translator() -> Translator {
        Translator {
            workspace: PathBuf::from("/ws"),
            context_window: 200_000,
            model: "anthropic/claude-test".into(),
            running: Default::default(),
        }
    }

    #[test]
    fn an_edit_is_shown_with_its_diff_and_the_file_it_touches() {
        let event = AgentEvent::ToolCallStarted {
            id: "c1".into(),
            name: "edit".into(),
            input: json!({"path": "src/a.rs", "old_string": "x", "new_string": "y"}),
        };
        let t = translator();
        let update = &t.updates(&event)[0];
        assert_eq!(update["sessionUpdate"], "tool_call");
        assert_eq!(update["kind"], "edit");
        assert_eq!(update["locations"][0]["path"], "/ws/src/a.rs");
        assert_eq!(
            update["content"][0],
            json!({"type": "diff", "path": "/ws/src/a.rs", "oldText": "x", "newText": "y"})
        );
        let done = AgentEvent::ToolCallFinished {
            id: "c1".into(),
            name: "edit".into(),
            is_error: false,
            duration_ms: 1,
            preview: "Edited src/a.rs".into(),
        };
        let finished = &t.updates(&done)[0];
        assert_eq!(finished["status"], "completed");
        assert_eq!(finished["content"][0]["type"], "diff", "the update shows the diff too");
        assert_eq!(finished["locations"][0]["path"], "/ws/src/a.rs");
    }

    #[test]
    fn the_todo_list_is_the_plan_and_usage_is_measured_against_the_window() {
        let todos = AgentEvent::Todos {
            items: vec![TodoItem {
                content: "Run the tests".into(),
                status: TodoStatus::InProgress,
                active_form: None,
            }],
        };
        let plan = &translator().updates(&todos)[0];
        assert_eq!(plan["entries"][0]["status"], "in_progress");
        let usage = AgentEvent::Usage {
            usage: Usage { input_tokens: 100, output_tokens: 20, ..Default::default() },
        };
        let update = &translator().updates(&usage)[0];
        assert_eq!((update["used"].as_u64(), update["size"].as_u64()), (Some(120), Some(200_000)));
    }

    #[test]
    fn history_replays_requests_tool_calls_results_and_answers_in_order() {
        let messages = vec![
            Message::user("fix it"),
            Message {
                role: Role::Assistant,
                content: vec![ContentBlock::ToolCall(ToolCall {
                    id: "c1".into(),
                    name: "bash".into(),
                    input: json!({"command": "cargo test"}),
                })],
            },
            Message {
                role: Role::User,
                content: vec![ContentBlock::tool_result("c1", "ok", false)],
            },
            Message::assistant("fixed"),
        ];
        let updates = translator().history(&messages);
        let kinds: Vec<&str> =
            updates.iter().map(|u| u["sessionUpdate"].as_str().unwrap()).collect();
        assert_eq!(
            kinds,
            ["user_message_chunk", "tool_call", "tool_call_update", "agent_message_chunk"]
        );
        assert_eq!(updates[1]["kind"], "execute");
        assert_eq!(updates[2]["status"], "completed");
    }
}
