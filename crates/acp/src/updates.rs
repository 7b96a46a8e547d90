//! From ferroclaw's [`AgentEvent`] stream (and a resumed conversation's
//! messages) to ACP `session/update`s.

use std::path::PathBuf;

use ferroclaw_protocol::{AgentEvent, ContentBlock, Message, ResultPart, Role};
use serde_json::{Value, json};

use crate::wire;

/// What the translation of one session's events needs to know.
pub struct Translator {
    pub workspace: PathBuf,
    /// The model's context window, the `size` of `usage_update`.
    pub context_window: u64,
    /// The model spec, for the cost of `usage_update`.
    pub model: String,
}

impl Translator {
    /// The updates for one event (often none: turn boundaries, retries of
    /// no interest to an editor).
    pub fn updates(&self, event: &AgentEvent) -> Vec<Value> {
        match event {
            AgentEvent::TextDelta { text } => vec![wire::chunk("agent_message_chunk", text)],
            AgentEvent::Retrying { attempt, reason, .. } => vec![wire::chunk(
                "agent_thought_chunk",
                &format!("(the provider failed: {reason}; retry {attempt})\n"),
            )],
            // Shown before the call runs, with its diffs; a call that needs
            // permission was already shown by the permission request.
            AgentEvent::ToolCallStarted { id, name, input } => {
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
            AgentEvent::ToolCallFinished { id, is_error, preview, .. } => vec![json!({
                "sessionUpdate": "tool_call_update",
                "toolCallId": id,
                "status": if *is_error { "failed" } else { "completed" },
                "rawOutput": {"preview": preview},
            })],
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

    /// A conversation as updates, for `session/load`: user text, the
    /// agent's text, and each tool call with its result.
    pub fn history(&self, messages: &[Message]) -> Vec<Value> {
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
