//! `--output-format stream-json --stream-format claude`: the events of a
//! run in Claude Code's stream-json schema, so tools built on `claude -p`
//! read ferroclaw too. One JSON object per line:
//!
//! - `{"type":"system","subtype":"init","session_id",...,"tools":[...],"model"}`
//! - `{"type":"assistant","message":{"role":"assistant","content":[{"type":"text"}|{"type":"tool_use"}]}}`
//! - `{"type":"user","message":{"role":"user","content":[{"type":"tool_result",...}]}}`
//! - `{"type":"result","subtype":"success",...}` (written by the caller at the end)

use std::io::Write;
use std::sync::Arc;

use ferroclaw_core::{Agent, Config};
use ferroclaw_protocol::AgentEvent;
use serde_json::{Value, json};
use tokio::sync::mpsc::UnboundedReceiver;

use crate::tool_log::ToolLog;

/// The `system`/`init` event's fields, taken before the run.
pub struct Init {
    event: Value,
    session_id: String,
    model: String,
}

/// The init event for this agent.
pub fn init(agent: &Agent, config: &Config) -> Init {
    let session_id = agent.session().meta().id.clone();
    let mode = ferroclaw_core::plan::mode_name(agent.permissions().mode());
    let event = json!({
        "type": "system",
        "subtype": "init",
        "cwd": agent.workspace(),
        "session_id": session_id,
        "tools": agent.tools().names(),
        "mcp_servers": config.file.mcp_servers.keys().map(|name| json!({"name": name, "status": "configured"})).collect::<Vec<_>>(),
        "model": agent.model_spec(),
        "permissionMode": mode,
        "apiKeySource": "environment",
    });
    Init { event, session_id, model: agent.model_spec().to_string() }
}

/// Writes the run's events in Claude Code's schema until the channel closes.
pub async fn write(mut rx: UnboundedReceiver<AgentEvent>, init: Init, log: Arc<ToolLog>) {
    let mut out = std::io::stdout();
    let mut line = |value: Value| {
        let _ = writeln!(out, "{value}");
        let _ = out.flush();
    };
    line(init.event.clone());
    let mut text = String::new();
    let mut turn = 0u32;
    let message = |turn: u32, content: Value| {
        json!({
            "type": "assistant",
            "message": {
                "id": format!("msg_{}_{turn}", init.session_id),
                "type": "message",
                "role": "assistant",
                "model": init.model,
                "content": [content],
            },
            "parent_tool_use_id": null,
            "session_id": init.session_id,
        })
    };
    while let Some(event) = rx.recv().await {
        match event {
            AgentEvent::TurnStarted { turn: t } => {
                turn = t;
                text.clear();
            }
            AgentEvent::TextDelta { text: delta } => text.push_str(&delta),
            AgentEvent::TurnFinished { .. } if !text.is_empty() => {
                line(message(turn, json!({"type": "text", "text": std::mem::take(&mut text)})));
            }
            AgentEvent::ToolCallStarted { id, name, input } => {
                line(message(
                    turn,
                    json!({"type": "tool_use", "id": id, "name": name, "input": input}),
                ));
            }
            AgentEvent::ToolCallFinished { id, is_error, preview, .. } => {
                let content = log.get(&id).map(|r| r.output).unwrap_or(preview);
                line(json!({
                    "type": "user",
                    "message": {
                        "role": "user",
                        "content": [{
                            "type": "tool_result",
                            "tool_use_id": id,
                            "content": content,
                            "is_error": is_error,
                        }],
                    },
                    "parent_tool_use_id": null,
                    "session_id": init.session_id,
                }));
            }
            _ => {}
        }
    }
}
