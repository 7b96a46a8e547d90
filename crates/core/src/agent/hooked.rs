//! Where the loop calls the user's hooks ([`crate::hooks`]): one small
//! function per point, so the loop reads `self.hook_pre_tool(..)` and the
//! rules of each event live here. Every hook run is an entry in the session
//! file; what a hook says to the user arrives as a non-fatal error event.

use std::sync::Arc;

use ferroclaw_protocol::{AgentEvent, ContentBlock, Message, ResultPart, ToolCall};
use ferroclaw_tools::ToolOutput;
use ferroclaw_tools::claude::{self, response::FileChange};
use serde_json::{Value, json};

use super::{Agent, EventSink, emit};
use crate::clock;
use crate::hooks::{Common, HookEvent, HookOutcome, Hooks, PermissionAnswer};
use crate::session::Entry;

/// The hooks an agent runs, and where it is in its life.
#[derive(Debug, Clone, Default)]
pub struct HookState {
    pub(super) hooks: Arc<Hooks>,
    /// SessionStart ran (once, before the first request).
    pub(super) started: bool,
    /// For a sub-agent, its type: its end is SubagentStop, not Stop.
    pub(super) subagent: Option<String>,
}

/// What PreToolUse hooks decided about a call.
pub(super) enum PreTool {
    /// Run it with this input (rewritten or not), the hooks' permission say
    /// (if any) weighed with the rules.
    Go { input: Value, permission: Option<PermissionAnswer> },
    /// Do not run it; the reason goes to the model.
    Blocked(String),
}

impl Agent {
    /// Sets the hooks this agent runs; `subagent` names a sub-agent's type.
    pub fn set_hooks(&mut self, hooks: Arc<Hooks>, subagent: Option<String>) {
        self.hook_state = HookState { hooks, started: false, subagent };
    }

    /// The hooks this agent runs.
    pub fn hooks(&self) -> &Arc<Hooks> {
        &self.hook_state.hooks
    }

    /// The fields every hook input carries. A sub-agent's hooks hear of
    /// the session that started it (`session_id`, `transcript_path`) and of
    /// the sub-agent itself (`agent_id`, `agent_type`), as in Claude Code.
    fn hook_common(&self) -> Common {
        let mode = crate::plan::claude_mode_name(self.permissions.mode());
        let meta = self.session.meta();
        let (mut session_id, mut transcript_path) =
            (meta.id.clone(), self.session.path().to_path_buf());
        let mut agent = None;
        if let Some(kind) = &self.hook_state.subagent {
            agent = Some((meta.id.clone(), claude::claude_agent_type(kind).to_string()));
            if let Some(parent) = &meta.parent {
                transcript_path.set_file_name(format!("{parent}.jsonl"));
                session_id.clone_from(parent);
            }
        }
        Common {
            session_id,
            transcript_path,
            cwd: self.workspace.clone(),
            permission_mode: mode.into(),
            agent,
        }
    }

    /// Runs `event`'s hooks, books each run in the session file and shows
    /// the user what they said; `None` when no hook listens.
    async fn run_hooks(
        &mut self,
        event: HookEvent,
        subject: &[&str],
        fields: Value,
        events: &EventSink,
    ) -> Option<HookOutcome> {
        if !self.hook_state.hooks.has(event) {
            return None;
        }
        let hooks = self.hook_state.hooks.clone();
        let outcome = hooks.run(event, subject, &self.hook_common(), fields).await;
        for run in &outcome.runs {
            self.log(Entry::Hook {
                ts: clock::unix_seconds(),
                event: event.name().to_string(),
                command: run.command.clone(),
                exit_code: run.exit_code,
                result: run.result.clone(),
                duration_ms: run.duration_ms,
            });
        }
        for notice in &outcome.notices {
            emit(events, AgentEvent::Error { message: format!("hook: {notice}"), fatal: false });
        }
        Some(outcome)
    }

    /// Before a request: SessionStart once (SubagentStart for a sub-agent),
    /// then UserPromptSubmit. Context
    /// they add joins the request; `Err` (for the user) when a hook blocked
    /// the prompt, which then is not sent.
    pub(super) async fn hook_prompt(
        &mut self,
        prompt: &str,
        input: &mut Message,
        events: &EventSink,
    ) -> Result<(), String> {
        if let Some(kind) = self.hook_state.subagent.clone() {
            // A sub-agent's prompt comes from its parent, not the user.
            if !self.hook_state.started {
                self.hook_state.started = true;
                let names = [kind.as_str(), claude::claude_agent_type(&kind)];
                let out = self.run_hooks(HookEvent::SubagentStart, &names, json!({}), events).await;
                add_context(input, &out.map(|o| o.context).unwrap_or_default());
            }
            return Ok(());
        }
        if !self.hook_state.started {
            self.hook_state.started = true;
            let source = if self.messages.is_empty() { "startup" } else { "resume" };
            let start = json!({"source": source});
            if let Some(out) =
                self.run_hooks(HookEvent::SessionStart, &[source], start, events).await
            {
                add_context(input, &out.context);
            }
        }
        let fields = json!({"prompt": prompt});
        let Some(out) = self.run_hooks(HookEvent::UserPromptSubmit, &[], fields, events).await
        else {
            return Ok(());
        };
        if let Some(reason) = out.blocked.or(out.stop) {
            return Err(format!(
                "UserPromptSubmit operation blocked by hook:\n{reason}\n\nOriginal prompt: {prompt}"
            ));
        }
        add_context(input, &out.context);
        Ok(())
    }

    /// PreToolUse: may block the call, rewrite its input, or decide its permission.
    pub(super) async fn hook_pre_tool(
        &mut self,
        call: &ToolCall,
        name: &str,
        events: &EventSink,
    ) -> PreTool {
        let subject = tool_names(name);
        let fields = self.tool_fields(call, name, &call.input);
        let Some(out) = self.run_hooks(HookEvent::PreToolUse, &subject, fields, events).await
        else {
            return PreTool::Go { input: call.input.clone(), permission: None };
        };
        if let Some(reason) = out.blocked.or(out.stop) {
            return PreTool::Blocked(format!("blocked by a PreToolUse hook: {reason}"));
        }
        if let Some(PermissionAnswer::Deny(reason)) = &out.permission {
            return PreTool::Blocked(format!("denied by a PreToolUse hook: {reason}"));
        }
        let input = match out.updated_input {
            Some(updated) => claude::updated_input(name, &updated, &call.input, &self.workspace),
            None => call.input.clone(),
        };
        PreTool::Go { input, permission: out.permission }
    }

    /// PermissionRequest (and a Notification) when a call would ask the user:
    /// `Some` when a hook answered for them (an allow may rewrite the input).
    pub(super) async fn hook_permission_request(
        &mut self,
        call: &ToolCall,
        name: &str,
        input: &Value,
        events: &EventSink,
    ) -> Option<Result<Option<Value>, String>> {
        let subject = tool_names(name);
        let mut fields = self.tool_fields(call, name, input);
        // Claude Code's PermissionRequest names the tool and input, not the call.
        if let Some(fields) = fields.as_object_mut() {
            fields.remove("tool_use_id");
        }
        let answer =
            match self.run_hooks(HookEvent::PermissionRequest, &subject, fields, events).await {
                Some(out) if out.blocked.is_some() => Some(Err(format!(
                    "denied by a PermissionRequest hook: {}",
                    out.blocked.unwrap_or_default()
                ))),
                Some(out) => match out.permission {
                    Some(PermissionAnswer::Allow) => Some(Ok(out
                        .updated_input
                        .map(|u| claude::updated_input(name, &u, input, &self.workspace)))),
                    Some(PermissionAnswer::Deny(reason)) => {
                        Some(Err(format!("denied by a PermissionRequest hook: {reason}")))
                    }
                    _ => None,
                },
                None => None,
            };
        if answer.is_none() {
            let shown = claude::claude_name(name).unwrap_or(name);
            let fields = json!({
                "message": format!("ferroclaw needs your permission to use {shown}"),
                "notification_type": "permission_prompt",
            });
            self.run_hooks(HookEvent::Notification, &["permission_prompt"], fields, events).await;
        }
        answer
    }

    /// The file a write, edit or read is about to touch, as it is now, for
    /// the PostToolUse hooks' `tool_response` (`originalFile`); `None` when
    /// no PostToolUse hook listens or the tool touches no file.
    pub(super) fn hook_file_before(&self, name: &str, input: &Value) -> Option<Option<String>> {
        if !self.hook_state.hooks.has(HookEvent::PostToolUse)
            || !matches!(name, "write" | "edit" | "multi_edit")
        {
            return None;
        }
        Some(self.file_now(input))
    }

    /// The text of the file a call's `path` names (`None`: missing, too big, not text).
    fn file_now(&self, input: &Value) -> Option<String> {
        let path = claude::absolute_path(input.get("path")?.as_str()?, &self.workspace);
        ferroclaw_tools::own_file::read_text(&path, MAX_RESPONSE_FILE_BYTES).ok()
    }

    /// PostToolUse (or PostToolUseFailure) after a call ran: what the hooks
    /// say back (a block's reason, added context) is added to the result the
    /// model reads. `before` is [`Agent::hook_file_before`]'s.
    pub(super) async fn hook_post_tool(
        &mut self,
        ran: Ran<'_>,
        output: &mut ToolOutput,
        events: &EventSink,
    ) {
        let Ran { call, name, input, before, duration_ms } = ran;
        let mut fields = self.tool_fields(call, name, input);
        let event = if output.is_error {
            fields["error"] = claude::response::tool_error(name, &output.joined_text()).into();
            fields["is_interrupt"] = false.into();
            HookEvent::PostToolUseFailure
        } else {
            if !self.hook_state.hooks.has(HookEvent::PostToolUse) {
                return;
            }
            let change = FileChange {
                before: before.flatten(),
                after: matches!(name, "write" | "edit" | "multi_edit" | "read")
                    .then(|| self.file_now(input))
                    .flatten(),
            };
            let text = output.joined_text();
            let response =
                claude::response::tool_response(name, &fields["tool_input"], &text, Some(&change));
            fields["tool_response"] = response;
            HookEvent::PostToolUse
        };
        fields["duration_ms"] = duration_ms.into();
        let subject = tool_names(name);
        let Some(out) = self.run_hooks(event, &subject, fields, events).await else { return };
        let label = event.name();
        if let Some(reason) = out.blocked.or(out.stop) {
            output.content.push(ResultPart::Text { text: format!("[{label} hook] {reason}") });
        }
        for context in out.context {
            output.content.push(ResultPart::Text { text: format!("[{label} hook] {context}") });
        }
    }

    /// Stop (or SubagentStop) when the model answered: `Some(reason)` when a
    /// hook wants the model to go on, with that reason as its next input.
    pub(super) async fn hook_stop(
        &mut self,
        active: bool,
        answer: &str,
        events: &EventSink,
    ) -> Option<String> {
        let kind = self.hook_state.subagent.clone().unwrap_or_default();
        let (event, mut fields) = match self.hook_state.subagent {
            Some(_) => {
                let own = self.session.path().to_string_lossy().into_owned();
                (HookEvent::SubagentStop, json!({"agent_transcript_path": own}))
            }
            None => (HookEvent::Stop, json!({})),
        };
        fields["stop_hook_active"] = active.into();
        fields["last_assistant_message"] = answer.into();
        let names = [kind.as_str(), claude::claude_agent_type(&kind)];
        let out = self.run_hooks(event, &names, fields, events).await?;
        if out.stop.is_some() {
            return None;
        }
        out.blocked.map(|reason| format!("[{} hook] {reason}", event.name()))
    }

    /// StopFailure when the turn ends on a model API error: its hooks are
    /// told (`error`, `error_details`), and cannot change anything.
    pub(super) async fn hook_stop_failure(
        &mut self,
        error: &str,
        partial: &str,
        events: &EventSink,
    ) {
        if self.hook_state.subagent.is_some() {
            return;
        }
        let kind = error_kind(error);
        let fields =
            json!({"error": kind, "error_details": error, "last_assistant_message": partial});
        self.run_hooks(HookEvent::StopFailure, &[kind], fields, events).await;
    }

    /// PreCompact / PostCompact around a compaction (`manual` when asked for).
    pub(super) async fn hook_compact(
        &mut self,
        event: HookEvent,
        trigger: &str,
        events: &EventSink,
    ) {
        let fields = json!({"trigger": trigger, "custom_instructions": ""});
        self.run_hooks(event, &[trigger], fields, events).await;
    }

    /// SessionEnd, from [`Agent::finish`] when the session ran a request:
    /// its hooks cannot stop anything, and what they say goes to the log.
    pub(super) async fn hook_session_end(&mut self, reason: &str) {
        if !self.hook_state.started || self.hook_state.subagent.is_some() {
            return;
        }
        let (events, _unheard) = tokio::sync::mpsc::unbounded_channel();
        let fields = json!({"reason": reason});
        if let Some(out) = self.run_hooks(HookEvent::SessionEnd, &[reason], fields, &events).await {
            for notice in out.notices {
                tracing::warn!("hook: {notice}");
            }
        }
        if let Err(e) = self.session.commit().await {
            tracing::error!("{e}");
        }
    }
}

/// A tool's names for matchers: ours and Claude Code's (`bash`, `Bash`).
fn tool_names(name: &str) -> Vec<&str> {
    let mut names = vec![name];
    names.extend(claude::claude_name(name));
    names
}

/// Claude Code's StopFailure matcher value for a model API error's text.
fn error_kind(error: &str) -> &'static str {
    let has = |needles: &[&str]| needles.iter().any(|n| error.contains(n));
    if has(&["429", "rate limit", "rate_limit"]) {
        "rate_limit"
    } else if has(&["401", "403", "authentication", "API key"]) {
        "authentication_failed"
    } else if has(&["402", "billing", "credit"]) {
        "billing_error"
    } else if has(&["400", "404", "invalid_request"]) {
        "invalid_request"
    } else if has(&["500", "502", "503", "529", "overloaded"]) {
        "server_error"
    } else {
        "unknown"
    }
}

/// Most bytes of a file read for a PostToolUse hook's `originalFile`/`content`.
const MAX_RESPONSE_FILE_BYTES: u64 = 4 * 1024 * 1024;

/// A call that ran, as PostToolUse hooks hear of it.
pub(super) struct Ran<'a> {
    pub call: &'a ToolCall,
    /// Our tool's name (the call may have used another agent's).
    pub name: &'a str,
    /// The input it ran with.
    pub input: &'a Value,
    /// [`Agent::hook_file_before`]'s.
    pub before: Option<Option<String>>,
    pub duration_ms: u64,
}

impl Agent {
    /// The tool fields of a hook input, in Claude Code's terms
    /// ([`ferroclaw_tools::claude`]): its tool name and input shape (absolute
    /// `file_path`, ...) where the tool has a counterpart, ours otherwise.
    fn tool_fields(&self, call: &ToolCall, name: &str, input: &Value) -> Value {
        let (tool_name, tool_input) = claude::to_claude(name, input, &self.workspace);
        json!({
            "tool_name": tool_name,
            "tool_input": tool_input,
            "tool_use_id": call.id,
        })
    }
}

/// Adds hook context to a user message, marked as coming from hooks.
fn add_context(input: &mut Message, context: &[String]) {
    for text in context {
        input.content.push(ContentBlock::text(format!("<hook-context>\n{text}\n</hook-context>")));
    }
}
