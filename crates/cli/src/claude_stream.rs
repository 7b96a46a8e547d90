//! `--output-format stream-json --stream-format claude` and
//! `--output-format json`: a run in Claude Code's schema, field by field as
//! Claude Code 2.1.332 prints it, so programs built on `claude -p` read
//! ferroclaw too. Tool names and inputs are Claude's, through the one table
//! in [`ferroclaw_tools::claude`]. One JSON object per line:
//!
//! - `{"type":"system","subtype":"init","session_id","tools":["Read",...],"model","permissionMode":"bypassPermissions",...}`
//! - `{"type":"assistant","message":{"id","model","content":[{"type":"text"}|{"type":"tool_use"}],"stop_reason":null,"usage"},"uuid",...}`
//! - `{"type":"user","message":{"content":[{"type":"tool_result",...}]},"tool_use_result":{...},"uuid",...}`
//! - `{"type":"system","subtype":"permission_denied","tool_name","tool_use_id","message"}`
//!   when a rule or the mode refused a call
//! - `{"type":"system","subtype":"task_started"|"task_updated"|"task_notification",...}`
//!   around a sub-agent (an `Agent` call), with its prompt as a `user`
//!   message whose `parent_tool_use_id` is the call's ([`SubAgentTask`])
//! - `{"type":"result","subtype":"success","usage":{"cache_read_input_tokens",...},"total_cost_usd","uuid",...}`
//!   ([`result`], written by the caller at the end)

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use ferroclaw_core::{Agent, Config, Outcome, PermissionMode, Report};
use ferroclaw_protocol::{AgentEvent, Usage};
use ferroclaw_tools::claude::{self, response::FileChange};
use serde_json::{Value, json};
use tokio::sync::mpsc::UnboundedReceiver;

use crate::oneshot::Denial;
use crate::tool_log::ToolLog;

/// The `system`/`init` event's fields, taken before the run.
pub(crate) struct Init {
    event: Value,
    session_id: String,
    model: String,
    workspace: PathBuf,
}

/// Claude Code's name of a permission mode (`bypassPermissions`, ...).
pub(crate) fn mode_name(mode: PermissionMode) -> &'static str {
    ferroclaw_core::plan::claude_mode_name(mode)
}

/// The model as Claude Code names it: without ferroclaw's `provider/`.
pub(crate) fn model_name(spec: &str) -> &str {
    spec.split_once('/').map_or(spec, |(_, model)| model)
}

/// A fresh random id in the UUID v4 form Claude Code gives its messages.
pub(crate) fn uuid() -> String {
    let (a, b) = (fastrand::u64(..), fastrand::u64(..));
    let hex = format!("{a:016x}{b:016x}");
    format!(
        "{}-{}-4{}-{:x}{}-{}",
        &hex[..8],
        &hex[8..12],
        &hex[13..16],
        8 + (b >> 60) % 4,
        &hex[17..20],
        &hex[20..32]
    )
}

/// The init event for this agent.
pub(crate) fn init(agent: &Agent, config: &Config) -> Init {
    let session_id = agent.session().meta().id.clone();
    let mut tools: Vec<String> = Vec::new();
    for name in agent.tools().names() {
        let shown = claude::claude_name(name).unwrap_or(name).to_string();
        if !tools.contains(&shown) {
            tools.push(shown);
        }
    }
    let model = model_name(agent.model_spec()).to_string();
    let event = json!({
        "type": "system",
        "subtype": "init",
        "cwd": agent.workspace(),
        "session_id": session_id,
        "tools": tools,
        "mcp_servers": config.file.mcp_servers.keys().map(|name| json!({"name": name, "status": "configured"})).collect::<Vec<_>>(),
        "model": model,
        "permissionMode": mode_name(agent.permissions().mode()),
        "apiKeySource": "environment",
        "output_style": "default",
        "uuid": uuid(),
    });
    Init { event, session_id, model, workspace: agent.workspace().to_path_buf() }
}

/// The lines that end one turn (its `result`), made when the writer gets
/// there: by then every event of the turn has passed, refusals included.
pub(crate) type TurnResult = Box<dyn FnOnce() -> Vec<Value> + Send>;

/// The event a caller sends after a turn whose [`TurnResult`] it queued:
/// a `Finished` without a session id, which the agent never sends.
pub(crate) fn turn_end_marker() -> AgentEvent {
    AgentEvent::Finished {
        result: String::new(),
        session_id: String::new(),
        num_turns: 0,
        usage: Usage::default(),
        is_error: false,
    }
}

/// Writes the run's events in Claude Code's schema until the channel closes.
/// With `results` (stream-json input, a result per turn), each
/// [`turn_end_marker`] writes the next queued result there.
pub(crate) async fn write(
    mut rx: UnboundedReceiver<AgentEvent>,
    init: Init,
    log: Arc<ToolLog>,
    mut results: Option<UnboundedReceiver<TurnResult>>,
) {
    let mut out = std::io::stdout();
    let mut line = |value: Value| {
        let _ = writeln!(out, "{value}");
        let _ = out.flush();
    };
    line(init.event.clone());
    let mut text = String::new();
    let mut turn = 0u32;
    let mut usage = Usage::default();
    let mut calls: Vec<(String, String, Value)> = Vec::new();
    let mut tasks: Vec<SubAgentTask> = Vec::new();
    let session = init.session_id.clone();
    let message = |turn: u32, usage: &Usage, content: Value| {
        json!({
            "type": "assistant",
            "message": {
                "id": format!("msg_{}_{turn}", init.session_id),
                "type": "message",
                "role": "assistant",
                "model": init.model,
                "content": [content],
                "stop_reason": null,
                "stop_sequence": null,
                "usage": {"input_tokens": usage.input_tokens, "output_tokens": usage.output_tokens},
            },
            "parent_tool_use_id": null,
            "session_id": init.session_id,
            "uuid": uuid(),
        })
    };
    while let Some(event) = rx.recv().await {
        match event {
            // Numbered across the run's requests: one id per model answer.
            AgentEvent::TurnStarted { .. } => {
                turn += 1;
                text.clear();
            }
            AgentEvent::TextDelta { text: delta } => text.push_str(&delta),
            AgentEvent::Usage { usage: u } => usage = u,
            AgentEvent::TurnFinished { .. } if !text.is_empty() => {
                let block = json!({"type": "text", "text": std::mem::take(&mut text)});
                line(message(turn, &usage, block));
            }
            AgentEvent::ToolCallStarted { id, name, input } => {
                let ours = ferroclaw_tools::canonical_tool_name(&name).to_string();
                let (shown, input) = claude::to_claude(&ours, &input, &init.workspace);
                let block = json!({"type": "tool_use", "id": id, "name": shown, "input": input});
                line(message(turn, &usage, block));
                if ours == "task" {
                    let mut task = SubAgentTask::new(&id);
                    task.started(&input, &session).into_iter().for_each(&mut line);
                    tasks.push(task);
                }
                calls.push((id, ours, input));
            }
            // Claude Code tells of a call its rules or mode refused (not one
            // a hook refused: the hook said so itself).
            AgentEvent::PermissionDenied { id, name, reason, .. }
                if !ferroclaw_core::hooks::refused_by_hook(&reason) =>
            {
                let ours = ferroclaw_tools::canonical_tool_name(&name);
                line(json!({
                    "type": "system",
                    "subtype": "permission_denied",
                    "tool_name": claude::claude_name(ours).unwrap_or(ours),
                    "tool_use_id": id,
                    "message": reason,
                    "uuid": uuid(),
                    "session_id": session,
                }));
            }
            AgentEvent::SubAgent { call_id, event, .. } => {
                if let Some(task) = tasks.iter_mut().find(|t| t.call_id == call_id) {
                    let said = task.heard(*event, &init.model, &init.workspace, &session);
                    said.into_iter().for_each(&mut line);
                }
            }
            AgentEvent::ToolCallFinished { id, is_error, preview, .. } => {
                if let Some(at) = tasks.iter().position(|t| t.call_id == id) {
                    tasks.remove(at).finished(is_error, &session).into_iter().for_each(&mut line);
                }
                let record = log.get(&id);
                let content = record.as_ref().map(|r| r.output.clone()).unwrap_or(preview);
                let call = calls.iter().find(|(c, _, _)| *c == id);
                let tool_use_result = match (call, is_error) {
                    (Some((_, ours, _)), true) => Value::String(format!(
                        "Error: {}",
                        claude::response::tool_error(ours, &content)
                    )),
                    (None, true) => Value::String(format!("Error: {content}")),
                    (Some((_, ours, input)), false) => {
                        let change = FileChange {
                            before: record.as_ref().and_then(|r| r.before.clone()),
                            after: file_now(input),
                        };
                        claude::response::tool_response(ours, input, &content, Some(&change))
                    }
                    (None, false) => json!({"content": content}),
                };
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
                    "uuid": uuid(),
                    "tool_use_result": tool_use_result,
                }));
            }
            AgentEvent::Finished { session_id, .. } if session_id.is_empty() => {
                if let Some(result) = results.as_mut()
                    && let Some(lines) = result.recv().await
                {
                    lines().into_iter().for_each(&mut line);
                }
            }
            _ => {}
        }
    }
}

/// A sub-agent started by an `Agent` call, told in Claude Code's `task_*`
/// system messages: `task_started` when the call starts (then the
/// sub-agent's prompt as a `user` message under the call), `task_progress`
/// and the sub-agent's own tool calls and results (their
/// `parent_tool_use_id` the call's) as it works, `task_updated` and
/// `task_notification` (its final answer as `summary`) when it ends.
struct SubAgentTask {
    call_id: String,
    task_id: String,
    subagent_type: Value,
    started: Instant,
    summary: String,
    tokens: u64,
    tool_uses: u64,
}

impl SubAgentTask {
    fn new(call_id: &str) -> Self {
        let task_id = format!("a{:016x}", fastrand::u64(..));
        let (summary, tokens, tool_uses) = (String::new(), 0, 0);
        let (call_id, started, subagent_type) = (call_id.into(), Instant::now(), Value::Null);
        Self { call_id, task_id, subagent_type, started, summary, tokens, tool_uses }
    }

    /// `task_started` and the prompt, for the call's Claude-shaped `input`.
    fn started(&mut self, input: &Value, session: &str) -> [Value; 2] {
        self.subagent_type = input["subagent_type"].clone();
        let started = json!({
            "type": "system",
            "subtype": "task_started",
            "task_id": self.task_id,
            "tool_use_id": self.call_id,
            "description": input["description"],
            "subagent_type": input["subagent_type"],
            "is_backgrounded": false,
            "spawn_depth": 1,
            "task_type": "local_agent",
            "prompt": input["prompt"],
            "uuid": uuid(),
            "session_id": session,
        });
        let prompt = json!({
            "type": "user",
            "message": {"role": "user", "content": [{"type": "text", "text": input["prompt"]}]},
            "parent_tool_use_id": self.call_id,
            "session_id": session,
            "uuid": uuid(),
        });
        [started, prompt]
    }

    /// One of the sub-agent's own events, and the lines it makes.
    fn heard(
        &mut self,
        event: AgentEvent,
        model: &str,
        workspace: &std::path::Path,
        session: &str,
    ) -> Vec<Value> {
        let under_call = |mut message: Value| {
            message["parent_tool_use_id"] = self.call_id.clone().into();
            message["agent_id"] = self.task_id.clone().into();
            message["session_id"] = session.into();
            message["uuid"] = uuid().into();
            message
        };
        match event {
            AgentEvent::ToolCallStarted { id, name, input } => {
                self.tool_uses += 1;
                let ours = ferroclaw_tools::canonical_tool_name(&name);
                let (shown, input) = claude::to_claude(ours, &input, workspace);
                let progress = json!({
                    "type": "system",
                    "subtype": "task_progress",
                    "task_id": self.task_id,
                    "tool_use_id": self.call_id,
                    "description": format!("Using {shown}"),
                    "subagent_type": self.subagent_type,
                    "usage": {
                        "total_tokens": self.tokens,
                        "tool_uses": self.tool_uses,
                        "duration_ms": self.started.elapsed().as_millis() as u64,
                    },
                    "last_tool_name": shown,
                    "uuid": uuid(),
                    "session_id": session,
                });
                let call = under_call(json!({
                    "type": "assistant",
                    "message": {
                        "id": format!("msg_{}_{id}", self.task_id),
                        "type": "message",
                        "role": "assistant",
                        "model": model,
                        "content": [{"type": "tool_use", "id": id, "name": shown, "input": input}],
                        "stop_reason": null,
                        "stop_sequence": null,
                    },
                }));
                vec![progress, call]
            }
            AgentEvent::ToolCallFinished { id, is_error, preview, .. } => {
                let result = json!({
                    "type": "tool_result", "tool_use_id": id, "content": preview, "is_error": is_error,
                });
                let message = json!({"role": "user", "content": [result]});
                vec![under_call(json!({"type": "user", "message": message}))]
            }
            AgentEvent::Usage { usage } => {
                self.tokens = usage.total();
                Vec::new()
            }
            AgentEvent::Finished { result, usage, .. } => {
                self.summary = result;
                self.tokens = usage.total();
                Vec::new()
            }
            _ => Vec::new(),
        }
    }

    /// `task_updated` and `task_notification` when the call has ended.
    fn finished(self, is_error: bool, session: &str) -> [Value; 2] {
        let status = if is_error { "failed" } else { "completed" };
        let end_time = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        let updated = json!({
            "type": "system",
            "subtype": "task_updated",
            "task_id": self.task_id,
            "patch": {"status": status, "end_time": end_time},
            "uuid": uuid(),
            "session_id": session,
        });
        let notification = json!({
            "type": "system",
            "subtype": "task_notification",
            "task_id": self.task_id,
            "tool_use_id": self.call_id,
            "status": status,
            "summary": self.summary,
            "usage": {
                "total_tokens": self.tokens,
                "tool_uses": self.tool_uses,
                "duration_ms": self.started.elapsed().as_millis() as u64,
            },
            "uuid": uuid(),
            "session_id": session,
        });
        [updated, notification]
    }
}

/// The file a Claude-shaped input's `file_path` names, as it is now.
fn file_now(input: &Value) -> Option<String> {
    let path = input.get("file_path")?.as_str()?;
    crate::tool_log::read_text(std::path::Path::new(path))
}

/// The result object of `--output-format json` (and the last line of
/// Claude-style stream-json), with Claude Code's fields; `num_turns` is
/// counted as Claude Code counts it.
pub(crate) fn result(
    report: &Report,
    num_turns: u32,
    session_id: &str,
    model: &str,
    denials: &[Denial],
    started: Instant,
    workspace: &std::path::Path,
) -> Value {
    // A prompt a hook blocked is, as in Claude Code, a successful run whose
    // result is the hook's reason.
    let blocked = report.outcome == Outcome::Blocked;
    let subtype = match report.outcome {
        Outcome::Answered | Outcome::Blocked => "success",
        Outcome::MaxTurns => "error_max_turns",
        Outcome::Cancelled | Outcome::Failed(_) => "error_during_execution",
    };
    let denials: Vec<Value> = denials
        .iter()
        .map(|d| {
            let ours = ferroclaw_tools::canonical_tool_name(&d.tool_name);
            let (name, input) = claude::to_claude(ours, &d.tool_input, workspace);
            json!({"tool_name": name, "tool_use_id": d.tool_use_id, "tool_input": input, "reason": d.reason})
        })
        .collect();
    let u = &report.usage;
    let cost = ferroclaw_core::pricing::cost(model, u).unwrap_or(0.0);
    let stop_reason = match report.outcome {
        Outcome::Answered => json!("end_turn"),
        _ => Value::Null,
    };
    json!({
        "type": "result",
        "subtype": subtype,
        "is_error": report.is_error() && !blocked,
        "duration_ms": started.elapsed().as_millis() as u64,
        "num_turns": num_turns,
        "result": report.text,
        "stop_reason": stop_reason,
        "session_id": session_id,
        "total_cost_usd": cost,
        "usage": usage(u),
        "modelUsage": {
            model_name(model): {
                "inputTokens": u.input_tokens,
                "outputTokens": u.output_tokens,
                "cacheReadInputTokens": u.cache_read_tokens,
                "cacheCreationInputTokens": u.cache_write_tokens,
                "webSearchRequests": 0,
                "costUSD": cost,
            }
        },
        "permission_denials": denials,
        "uuid": uuid(),
    })
}

/// The `system`/`informational` message Claude Code prints before the
/// result when a UserPromptSubmit hook blocked the prompt (`text` is the
/// report's: the reason and the original prompt).
pub(crate) fn prompt_blocked(text: &str, session_id: &str) -> Value {
    let reason = text
        .split_once('\n')
        .map_or(text, |(_, rest)| rest.split("\n\nOriginal prompt: ").next().unwrap_or(rest));
    json!({
        "type": "system",
        "subtype": "informational",
        "content": text,
        "level": "warning",
        "prevent_continuation": true,
        "prompt_submit_outcome": {"kind": "blocked_by_hook", "prompt_kept": false, "reason": reason},
        "uuid": uuid(),
        "session_id": session_id,
    })
}

/// Token counts with Claude Code's names.
pub(crate) fn usage(u: &Usage) -> Value {
    json!({
        "input_tokens": u.input_tokens,
        "cache_creation_input_tokens": u.cache_write_tokens,
        "cache_read_input_tokens": u.cache_read_tokens,
        "output_tokens": u.output_tokens,
        "server_tool_use": {"web_search_requests": 0, "web_fetch_requests": 0},
        "service_tier": "standard",
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_claude_codes() {
        assert_eq!(model_name("anthropic/claude-sonnet-4-5"), "claude-sonnet-4-5");
        assert_eq!(model_name("claude-sonnet-4-5"), "claude-sonnet-4-5");
        assert_eq!(mode_name(PermissionMode::Bypass), "bypassPermissions");
        assert_eq!(mode_name(PermissionMode::AcceptEdits), "acceptEdits");
        let id = uuid();
        let parts: Vec<usize> = id.split('-').map(str::len).collect();
        assert_eq!(parts, [8, 4, 4, 4, 12], "{id}");
        assert!(id.chars().nth(14) == Some('4') && id != uuid());
    }
}
