//! A custom slash command's request ([`crate::commands`]): its arguments
//! filled in, its `` !`cmd` `` spans replaced by their output (each through
//! the same permission check as the model's `bash` calls), and its
//! `allowed-tools` granted until the request ends.

use ferroclaw_protocol::{AgentEvent, ToolCall};
use ferroclaw_tools::ToolContext;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::{Agent, EventSink, emit, execute};
use crate::clock;
use crate::commands::{Arguments, CustomCommand, shell_spans};
use crate::permission::{Decision, Rule};
use crate::session::Entry;

impl Agent {
    /// The text of `cmd`'s request with `args`, and its `allowed-tools`
    /// granted for the next [`run`](Agent::run) only. Front ends build the
    /// user message from it (with their `@file` handling) and run it.
    pub async fn command_prompt(
        &mut self,
        cmd: &CustomCommand,
        args: &str,
        events: &EventSink,
        cancel: &CancellationToken,
    ) -> String {
        let rules: Vec<Rule> =
            cmd.allowed_tools.iter().filter_map(|r| Rule::parse(r).ok()).collect();
        self.permissions.allow_for_turn(rules);
        // The spans are the command file's: the arguments are filled in
        // around and inside them, so typed text (a chat message's
        // `/review !`cmd``) never becomes a command run before the model
        // sees the request.
        let arguments = Arguments::new(args, &cmd.arguments);
        let mut text = String::new();
        let mut rest = cmd.body.as_str();
        for (n, (span, command)) in shell_spans(&cmd.body).into_iter().enumerate() {
            let Some(at) = rest.find(&span) else { break };
            text.push_str(&arguments.fill(&rest[..at]));
            let command = arguments.fill(&command);
            text.push_str(&self.command_output(&cmd.name, n, &command, events, cancel).await);
            rest = &rest[at + span.len()..];
        }
        text.push_str(&arguments.fill(rest));
        // Claude Code appends the arguments to a body that has no place for them.
        if !args.trim().is_empty() && !arguments.has_placeholder(&cmd.body) {
            text.push_str(&format!("\n\nARGUMENTS: {}", args.trim()));
        }
        text
    }

    /// Runs one `` !`cmd` `` of a command file as the `bash` tool would,
    /// if the rules allow it or the user says yes; else says why not.
    async fn command_output(
        &mut self,
        name: &str,
        n: usize,
        command: &str,
        events: &EventSink,
        cancel: &CancellationToken,
    ) -> String {
        let input = json!({"command": command});
        let call = ToolCall {
            id: format!("command-{name}-{n}"),
            name: "bash".into(),
            input: input.clone(),
        };
        let Some(tool) = self.tools.get("bash").cloned() else {
            return format!("[`{command}` not run: the bash tool is not offered]");
        };
        let verdict = match self.permissions.decide("bash", false, &input) {
            Decision::Allow => Ok(()),
            Decision::Deny(reason) => Err(reason),
            Decision::Ask => self.ask(&call, "bash", &input, events).await,
        };
        self.log(Entry::Permission {
            ts: clock::unix_seconds(),
            tool: "bash".into(),
            call_id: call.id.clone(),
            decision: match &verdict {
                Ok(()) => "allow".into(),
                Err(reason) => format!("deny: {reason}"),
            },
        });
        if let Err(reason) = verdict {
            emit(
                events,
                AgentEvent::Error {
                    message: format!("/{name}: `{command}` was not run: {reason}"),
                    fatal: false,
                },
            );
            return format!("[`{command}` not run: {reason}]");
        }
        let ctx = ToolContext {
            workspace: self.workspace.clone(),
            allowed_dirs: self.allowed_dirs.clone(),
            cancel: cancel.child_token(),
            call_id: call.id.clone(),
            events: None,
            sandbox: self.sandbox.clone(),
            reads: self.reads.clone(),
            children: self.children(),
            open_rules: self.permissions.open_rules("bash"),
        };
        execute(tool, &call, input, &ctx).await.joined_text().trim_end().to_string()
    }
}
