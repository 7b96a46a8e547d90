//! The agent loop. Read it top to bottom: build the request, stream the
//! model's answer, and if it asks for tools, check each call's permission, run
//! the calls (independent read-only ones in parallel, the rest in order),
//! append the results and go again, until the model answers without tool calls,
//! the turn cap is hit, the user cancels, or the provider fails.

use std::panic::AssertUnwindSafe;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use ferroclaw_llm::{ChatRequest, LlmError, Provider};
use ferroclaw_protocol::{
    AgentEvent, ContentBlock, Message, ProviderEvent, Role, Sampling, StopReason, ToolCall, Usage,
};
use ferroclaw_tools::{
    JobManager, ReadLedger, SandboxPolicy, Tool, ToolContext, ToolOutput, ToolRegistry,
    format_results,
};
use futures_util::{FutureExt, StreamExt};
use tokio_util::sync::CancellationToken;

mod checkpoints;
mod command;
mod compact;
mod hooked;
mod journalled;
mod learn;
pub mod parts;
mod remember;

pub use compact::{CompactTool, Compaction};
pub use hooked::HookState;
use hooked::PreTool;
pub use learn::Learner;
pub use parts::AgentParts;
pub use remember::Remembering;

use crate::approval::{Approval, Approver};
use crate::clock;
use crate::config;
use crate::context::instructions::nested;
use crate::hooks::PermissionAnswer;
use crate::permission::{Decision, PermissionMode, Permissions};
use crate::session::{Entry, SessionLog};
use crate::todo::{self, TodoList};

/// Where the loop sends its events.
pub type EventSink = tokio::sync::mpsc::UnboundedSender<AgentEvent>;

/// Added to each request made in plan mode.
const PLAN_MODE_REMINDER: &str = "<system-reminder>Plan mode is on: only read-only tools run. \
Investigate, then present your plan with exit_plan_mode(plan) for the user to approve before \
changing anything.</system-reminder>";

/// Characters of a tool result shown in [`AgentEvent::ToolCallFinished`].
const PREVIEW_CHARS: usize = 200;

/// One conversation and everything its loop needs. Opened by the runtime
/// (`ferroclaw_runtime::Runtime::open`); its parts are private, and what a
/// caller may change mid-session has methods (see [`parts`]).
pub struct Agent {
    provider: Arc<dyn Provider>,
    /// The model name as the provider knows it.
    model: String,
    /// `PROVIDER/MODEL`, for display and the session file.
    model_spec: String,
    /// Shared by every agent opened from the same prompt layers.
    system: Arc<str>,
    tools: ToolRegistry,
    permissions: Arc<Permissions>,
    approver: Arc<dyn Approver>,
    session: SessionLog,
    /// The conversation sent to the model, shared with the request in
    /// flight (so a request copies nothing); changed through
    /// [`Arc::make_mut`], which copies only while a provider still holds it.
    messages: Arc<Vec<Message>>,
    workspace: PathBuf,
    allowed_dirs: Vec<PathBuf>,
    max_turns: u32,
    max_tokens: u32,
    /// What the caller asked of the model's sampling (an API client's
    /// temperature, `top_p`, seed, stop), and the answer cap it asked for
    /// in place of `max_tokens`; see [`Agent::set_sampling`].
    sampling: Sampling,
    asked_max_tokens: Option<u32>,
    /// Tokens used since the session was opened.
    total_usage: Usage,
    /// The model's todo list (shared with the `todo_write` tool).
    todos: TodoList,
    /// Background jobs whose results are handed to the model (once each)
    /// before its next request; `None` where background tools are not offered.
    jobs: Option<JobManager>,
    /// How commands are confined.
    sandbox: SandboxPolicy,
    /// Context-window settings and state.
    compaction: Compaction,
    /// Recall index and memory consolidation.
    remembering: Remembering,
    /// Called before each model request (MCP refreshes changed tool lists).
    turn_hook: Option<Arc<dyn TurnHook>>,
    /// Adds messages from outside (a teammate's inbox) before each request.
    injector: Option<Arc<dyn Injector>>,
    /// Files read in this conversation, so a re-read of an unchanged one is
    /// answered with a note; kept in step with `messages` before each batch.
    reads: ReadLedger,
    /// The user's hooks ([`crate::hooks`]) and where this agent is in its life.
    hook_state: HookState,
    /// Workspace snapshots before requests that may change files (`None`: off).
    checkpoints: Option<crate::checkpoint::Checkpoints>,
    /// Where turns are journalled step by step (`None`: off), see [`journalled`].
    journal: Option<journalled::Journalling>,
    /// This request's checkpoint, until a call that may change files takes it.
    checkpoint_due: Option<checkpoints::Due>,
    /// Whether a subfolder's `CLAUDE.md` may import files from outside the
    /// project (the workspace is trusted); see [`crate::context::instructions::nested`].
    trusted_instructions: bool,
}

/// Something to do before each model request, with the tools at hand.
#[async_trait::async_trait]
pub trait TurnHook: Send + Sync {
    /// Runs before each model request; may change the tools offered.
    async fn before_model_call(&self, tools: &mut ToolRegistry);
}

/// Something outside the conversation that has things to tell the model
/// before its next request, even between the tool calls of a running turn
/// (a team member's inbox). What it hands out must not be lost if the
/// process dies, so the loop tells it when the session file holding it is
/// durable.
pub trait Injector: Send + Sync {
    /// Text to add to the conversation (as a user message) before the next
    /// model request; `None` when there is nothing new.
    fn before_request(&self) -> Option<String>;
    /// True when something was handed out (by `before_request` or by a tool)
    /// and not yet [`committed`](Self::committed).
    fn has_uncommitted(&self) -> bool;
    /// Everything recorded so far is durable in the session file.
    fn committed(&self);
    /// Text to add after compaction replaced the history (who the agent is).
    fn after_compaction(&self) -> Option<String> {
        None
    }
    /// The model asked for `calls` in one answer; they run next.
    fn before_tools(&self, _calls: &[ToolCall]) {}
    /// The calls of that answer have run (or were refused or cancelled).
    fn after_tools(&self) {}
}

/// How a request ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The model answered without asking for tools.
    Answered,
    /// `max_turns` model round-trips happened without a final answer.
    MaxTurns,
    /// The user interrupted.
    Cancelled,
    /// The provider failed (after its retries).
    Failed(String),
    /// A UserPromptSubmit hook blocked the prompt before it reached the
    /// model; the report's text says why (Claude Code's words).
    Blocked,
}

/// The result of one user request.
#[derive(Debug, Clone)]
pub struct Report {
    pub outcome: Outcome,
    /// The final answer's text (or the error).
    pub text: String,
    /// Model round-trips made.
    pub num_turns: u32,
    /// Tokens used by this request.
    pub usage: Usage,
}

impl Report {
    /// True unless the model answered.
    pub fn is_error(&self) -> bool {
        self.outcome != Outcome::Answered
    }
}

/// The model's answer to one request, assembled from the stream.
struct Answer {
    message: Message,
    usage: Usage,
    stop: StopReason,
    /// Tool call id -> why its arguments could not be parsed.
    bad_arguments: Vec<(String, String)>,
    /// Our estimate of the request's input tokens, to learn from the real count.
    estimated_input: u64,
}

/// Why a model call produced no answer.
enum CallError {
    Cancelled(String),
    /// The provider failed, after streaming this much text.
    Provider(LlmError, String),
}

/// A request handled up to its answer whose session lines may not be
/// durable yet: [`Agent::commit_turn`] finishes it.
#[must_use = "a request is done only once `commit_turn` made it durable"]
pub struct Uncommitted {
    report: Report,
    /// The user's request, for memory and learning.
    request: String,
    /// A hook refused the request before it reached the model (it is
    /// finished already; nothing to make durable).
    refused: bool,
}

impl Agent {
    /// Handles one user request to the end, streaming events to `events`:
    /// [`run_turn`](Self::run_turn), then [`commit_turn`](Self::commit_turn).
    pub async fn run(
        &mut self,
        input: Message,
        events: &EventSink,
        cancel: &CancellationToken,
    ) -> Report {
        let turn = self.run_turn(input, events, cancel).await;
        self.commit_turn(turn, events).await
    }

    /// Handles one user request up to its answer, without waiting for the
    /// session file to be durable. A caller that limits how many requests run
    /// at once (the gateway) frees its slot here, so the wait for the disk
    /// does not hold it, then calls [`commit_turn`](Self::commit_turn).
    pub async fn run_turn(
        &mut self,
        mut input: Message,
        events: &EventSink,
        cancel: &CancellationToken,
    ) -> Uncommitted {
        let request = input.text();
        // A turn its journal already holds was prepared in the process that began it.
        let resumed = self.journal_start(&mut input).await;
        if !resumed && self.permissions.mode() == PermissionMode::Plan {
            input.content.push(ContentBlock::text(PLAN_MODE_REMINDER));
        }
        if !resumed && let Err(reason) = self.hook_prompt(&request, &mut input, events).await {
            self.permissions.end_turn();
            let report = self.refuse(reason, events);
            return Uncommitted { report, request, refused: true };
        }
        if !resumed {
            self.checkpoint_due(&request);
        }
        self.journal_begin(&input).await;
        self.record(input);
        let mut usage = Usage::default();
        let mut turn = 0;
        // A Stop hook already sent the model back once (Claude Code's `stop_hook_active`).
        let mut stop_hook_active = false;
        let report = loop {
            if turn == self.max_turns {
                let text = format!(
                    "stopped after {turn} model turns without a final answer (raise --max-turns or max_turns in config)"
                );
                break self.fail(Outcome::MaxTurns, text, turn, usage, events);
            }
            turn += 1;
            self.deliver_background_results();
            self.deliver_injected().await;
            self.fit_context(events, cancel).await;
            if let Some(hook) = &self.turn_hook {
                hook.before_model_call(&mut self.tools).await;
            }
            emit(events, AgentEvent::TurnStarted { turn });
            let answer = match self.next_answer(events, cancel).await {
                Ok(answer) => answer,
                Err(CallError::Cancelled(partial)) => {
                    if !partial.is_empty() {
                        self.record(Message::assistant(format!(
                            "{partial}\n\n[interrupted by the user]"
                        )));
                    }
                    break self.report(
                        Outcome::Cancelled,
                        "cancelled by the user".into(),
                        turn,
                        usage,
                    );
                }
                Err(CallError::Provider(e, partial)) => {
                    let text = e.to_string();
                    if !partial.is_empty() {
                        // What was shown stays in the conversation, marked as cut.
                        self.record(Message::assistant(format!(
                            "{partial}\n\n[the answer was cut off: {text}]"
                        )));
                    }
                    self.hook_stop_failure(&text, &partial, events).await;
                    break self.fail(Outcome::Failed(text.clone()), text, turn, usage, events);
                }
            };
            usage.add(&answer.usage);
            self.account(&answer, events);
            let text = answer.message.text();
            let calls: Vec<ToolCall> =
                answer.message.tool_calls().map(|c| self.in_our_terms(c)).collect();
            self.record(answer.message);
            emit(events, AgentEvent::TurnFinished { turn, stop_reason: answer.stop });
            if calls.is_empty() {
                if let Some(reason) = self.hook_stop(stop_hook_active, &text, events).await {
                    stop_hook_active = true;
                    self.record(Message::user(reason));
                    continue;
                }
                break self.report(Outcome::Answered, text, turn, usage);
            }
            if let Some(injector) = &self.injector {
                injector.before_tools(&calls);
            }
            let mut results =
                self.run_tools_journalled(&calls, &answer.bad_arguments, events, cancel).await;
            if let Some(injector) = &self.injector {
                injector.after_tools();
            }
            if self.todos.take_reminder() {
                todo::add_reminder(&mut results);
            }
            // A subfolder's CLAUDE.md, the first time the agent works there.
            let nested = nested::reminders(
                &self.workspace,
                self.trusted_instructions,
                &calls,
                &results,
                &self.messages,
            );
            results.extend(nested);
            self.record(Message { role: Role::User, content: results });
            if cancel.is_cancelled() {
                break self.report(Outcome::Cancelled, "cancelled by the user".into(), turn, usage);
            }
        };
        // A custom command's allowed-tools were for this request only.
        self.permissions.end_turn();
        Uncommitted { report, request, refused: false }
    }

    /// Finishes a request: makes its session lines durable (batched with
    /// other sessions' by the group committer) and only then reports it done
    /// (a failed sync fails the request), remembers and learns from it.
    pub async fn commit_turn(&mut self, turn: Uncommitted, events: &EventSink) -> Report {
        let Uncommitted { report, request, refused } = turn;
        if refused {
            return report;
        }
        let report = match self.session.commit().await {
            Ok(()) => {
                if let Some(injector) = self.injector.as_ref().filter(|i| i.has_uncommitted()) {
                    injector.committed();
                }
                report
            }
            Err(e) => {
                let text = format!("the conversation could not be saved: {e}");
                self.fail(
                    Outcome::Failed(text.clone()),
                    text,
                    report.num_turns,
                    report.usage,
                    events,
                )
            }
        };
        self.remember(&request, &report);
        self.learn(crate::learning::SegmentEnd::Answer, Some(&report));
        emit(
            events,
            AgentEvent::Finished {
                result: report.text.clone(),
                session_id: self.session.meta().id.clone(),
                num_turns: report.num_turns,
                usage: report.usage,
                is_error: report.is_error(),
            },
        );
        report
    }

    /// Ends a request a hook refused before it reached the model.
    fn refuse(&mut self, reason: String, events: &EventSink) -> Report {
        let report = self.fail(Outcome::Blocked, reason, 0, Usage::default(), events);
        emit(
            events,
            AgentEvent::Finished {
                result: report.text.clone(),
                session_id: self.session.meta().id.clone(),
                num_turns: 0,
                usage: report.usage,
                is_error: true,
            },
        );
        report
    }

    /// Books a model answer's usage: totals, the session file, the event, the
    /// token estimator and the todo reminder's turn count.
    fn account(&mut self, answer: &Answer, events: &EventSink) {
        self.total_usage.add(&answer.usage);
        let u = answer.usage;
        let counted = u.input_tokens + u.cache_read_tokens + u.cache_write_tokens;
        self.compaction.estimator.observe(answer.estimated_input, counted);
        self.log(Entry::Usage {
            ts: clock::unix_seconds(),
            model: self.model_spec.clone(),
            usage: u,
        });
        emit(events, AgentEvent::Usage { usage: u });
        self.todos.note_model_turn();
    }

    /// Ends a request with an error: event, session entry, report.
    fn fail(
        &mut self,
        outcome: Outcome,
        text: String,
        turn: u32,
        usage: Usage,
        events: &EventSink,
    ) -> Report {
        emit(events, AgentEvent::Error { message: text.clone(), fatal: true });
        self.log(Entry::Error { ts: clock::unix_seconds(), message: text.clone() });
        self.report(outcome, text, turn, usage)
    }

    /// The request the next model call sends: system prompt, conversation,
    /// every tool offered (`ferroclaw context` measures this same request).
    pub fn request(&self) -> ChatRequest {
        ChatRequest {
            model: self.model.clone(),
            system: Arc::clone(&self.system),
            messages: Arc::clone(&self.messages),
            tools: self.tools.shared_specs(),
            max_tokens: self.asked_max_tokens.unwrap_or(self.max_tokens),
            sampling: self.sampling.clone(),
        }
    }

    /// Sends the conversation to the model and assembles its streamed answer.
    async fn call_model(
        &self,
        events: &EventSink,
        cancel: &CancellationToken,
    ) -> Result<Answer, CallError> {
        let request = self.request();
        let estimated_input = self.request_tokens(&request.tools);
        let mut stream = self.provider.stream(request);
        let mut text = String::new();
        let mut calls = Vec::new();
        let mut bad_arguments = Vec::new();
        let mut usage = Usage::default();
        let mut stop = StopReason::EndTurn;
        loop {
            let next = tokio::select! {
                biased;
                _ = cancel.cancelled() => return Err(CallError::Cancelled(text)),
                next = stream.next() => next,
            };
            match next {
                None => break,
                Some(Err(e)) => return Err(CallError::Provider(e, text)),
                Some(Ok(ProviderEvent::TextDelta(delta))) => {
                    text.push_str(&delta);
                    emit(events, AgentEvent::TextDelta { text: delta });
                }
                Some(Ok(ProviderEvent::ToolCallStarted { .. })) => {}
                Some(Ok(ProviderEvent::ToolCall { call, parse_error })) => {
                    if let Some(problem) = parse_error {
                        bad_arguments.push((call.id.clone(), problem));
                    }
                    calls.push(ContentBlock::ToolCall(call));
                }
                Some(Ok(ProviderEvent::Usage(u))) => usage.merge(&u),
                Some(Ok(ProviderEvent::Stop(reason))) => stop = reason,
                Some(Ok(ProviderEvent::Retrying { attempt, delay_ms, reason })) => {
                    emit(events, AgentEvent::Retrying { attempt, delay_ms, reason });
                }
            }
        }
        let mut content = Vec::with_capacity(calls.len() + 1);
        if !text.is_empty() {
            content.push(ContentBlock::text(text));
        }
        content.extend(calls);
        Ok(Answer {
            message: Message { role: Role::Assistant, content },
            usage,
            stop,
            bad_arguments,
            estimated_input,
        })
    }

    /// Runs the calls: consecutive concurrent-safe calls (read-only tools,
    /// sub-agents) together, others one by one. Results come back in call order.
    async fn run_tools(
        &mut self,
        calls: &[ToolCall],
        bad_arguments: &[(String, String)],
        events: &EventSink,
        cancel: &CancellationToken,
    ) -> Vec<ContentBlock> {
        self.reads.sync(&self.messages);
        let ctx = ToolContext {
            workspace: self.workspace.clone(),
            allowed_dirs: self.allowed_dirs.clone(),
            cancel: cancel.child_token(),
            call_id: String::new(),
            events: Some(events.clone()),
            sandbox: self.sandbox.clone(),
            reads: self.reads.clone(),
            children: self.children(),
            open_rules: ferroclaw_tools::OpenRules::default(),
        };
        let cap = ferroclaw_tools::result_cap_chars(self.compaction.context_window);
        let mut results = Vec::with_capacity(calls.len());
        let mut start = 0;
        while start < calls.len() {
            let mut end = start + 1;
            if self.is_concurrent(&calls[start]) {
                while end < calls.len() && self.is_concurrent(&calls[end]) {
                    end += 1;
                }
            }
            let batch = &calls[start..end];
            let mut checked = Vec::with_capacity(batch.len());
            for call in batch {
                emit(
                    events,
                    AgentEvent::ToolCallStarted {
                        id: call.id.clone(),
                        name: call.name.clone(),
                        input: call.input.clone(),
                    },
                );
                checked.push(self.check(call, bad_arguments, events, cancel).await);
            }
            let snapshot = self.checkpoint_before_change(&checked, events).await;
            let befores: Vec<Option<Option<String>>> = batch
                .iter()
                .zip(&checked)
                .map(|(call, checked)| {
                    let input = checked.as_ref().ok()?;
                    self.hook_file_before(self.tool_name(&call.name), &input.1)
                })
                .collect();
            let permissions = &self.permissions;
            let runs = batch.iter().zip(checked).map(|(call, checked)| {
                // The tool's opens answer to the deny rules again, on the
                // path they open: the path decided above may be a link by now.
                let open_rules = match &checked {
                    Ok((tool, _)) => permissions.open_rules(tool.name()),
                    Err(_) => ferroclaw_tools::OpenRules::default(),
                };
                let ctx = ToolContext { call_id: call.id.clone(), open_rules, ..ctx.clone() };
                async move {
                    let started = Instant::now();
                    let (output, ran) = match checked {
                        Ok((tool, input)) => {
                            let output = execute(tool, call, input.clone(), &ctx).await;
                            (ferroclaw_tools::cap_result(output, cap), Some(input))
                        }
                        Err(message) => (ToolOutput::error(message), None),
                    };
                    (call, output, ran, started.elapsed())
                }
            });
            let ran_calls = futures_util::future::join_all(runs).await;
            for ((call, mut output, ran, elapsed), before) in ran_calls.into_iter().zip(befores) {
                if let Some(input) = ran {
                    let name = self.tool_name(&call.name).to_string();
                    let duration_ms = elapsed.as_millis() as u64;
                    let ran = hooked::Ran { call, name: &name, input: &input, before, duration_ms };
                    self.hook_post_tool(ran, &mut output, events).await;
                }
                emit(
                    events,
                    AgentEvent::ToolCallFinished {
                        id: call.id.clone(),
                        name: call.name.clone(),
                        is_error: output.is_error,
                        duration_ms: elapsed.as_millis() as u64,
                        preview: preview(&output),
                    },
                );
                results.push(ContentBlock::ToolResult {
                    tool_call_id: call.id.clone(),
                    content: output.content,
                    is_error: output.is_error,
                });
                self.journal_result(results.last()).await;
            }
            if let Some(snapshot) = snapshot {
                self.checkpoint_after_change(snapshot).await;
            }
            start = end;
        }
        results
    }

    /// Everything that must hold before a call runs: parseable arguments, a
    /// known tool, arguments matching its schema, the PreToolUse hooks, and
    /// permission. Gives the tool and the input to run it with (as hooks
    /// rewrote it); the error text tells the model exactly what was wrong.
    async fn check(
        &mut self,
        call: &ToolCall,
        bad_arguments: &[(String, String)],
        events: &EventSink,
        cancel: &CancellationToken,
    ) -> Result<(Arc<dyn Tool>, serde_json::Value), String> {
        if let Some((_, problem)) = bad_arguments.iter().find(|(id, _)| *id == call.id) {
            return Err(format!(
                "the arguments of this {} call are not valid JSON ({problem}); send the call again with a JSON object",
                call.name
            ));
        }
        let name = self.tool_name(&call.name);
        let tool = self
            .tools
            .get(name)
            .cloned()
            .ok_or_else(|| self.tools.unknown_tool_message(&call.name))?;
        self.tools.validate(name, &call.input)?;
        if cancel.is_cancelled() {
            return Err("cancelled by the user before it ran".into());
        }
        let (mut input, hook_permission) = match self.hook_pre_tool(call, name, events).await {
            PreTool::Go { input, permission } => (input, permission),
            PreTool::Blocked(reason) => return Err(self.refused(call, reason, events)),
        };
        if input != call.input {
            self.tools.validate(name, &input)?;
        }
        // Rules and answers apply to the tool, not to the name it was called by.
        // A call that only shows something in this conversation is as free as a read.
        let free = tool.read_only() || tool.stays_in_conversation(&input);
        let decision = match (self.permissions.decide(name, free, &input), hook_permission) {
            // A hook may loosen "ask" but never a deny rule or plan mode.
            (Decision::Deny(reason), _) => Decision::Deny(reason),
            (_, Some(PermissionAnswer::Ask)) => Decision::Ask,
            (_, Some(PermissionAnswer::Allow)) => Decision::Allow,
            (decision, _) => decision,
        };
        let verdict = match decision {
            Decision::Allow => Ok(()),
            Decision::Deny(reason) => Err(format!("permission denied: {reason}")),
            Decision::Ask => match self.hook_permission_request(call, name, &input, events).await {
                Some(Ok(Some(rewritten))) => {
                    self.tools.validate(name, &rewritten)?;
                    input = rewritten;
                    Ok(())
                }
                Some(answer) => answer.map(drop),
                None => self.ask(call, name, &input, events).await,
            },
        };
        if let Err(reason) = &verdict {
            emit(
                events,
                AgentEvent::PermissionDenied {
                    id: call.id.clone(),
                    name: call.name.clone(),
                    input: input.clone(),
                    reason: reason.clone(),
                },
            );
        }
        let decision = match &verdict {
            Ok(()) => "allow".to_string(),
            Err(reason) => format!("deny: {reason}"),
        };
        self.log(Entry::Permission {
            ts: clock::unix_seconds(),
            tool: call.name.clone(),
            call_id: call.id.clone(),
            decision,
        });
        verdict.map(|()| (tool, input))
    }

    /// A call a hook refused: the event and session entry a denial gets.
    fn refused(&mut self, call: &ToolCall, reason: String, events: &EventSink) -> String {
        emit(
            events,
            AgentEvent::PermissionDenied {
                id: call.id.clone(),
                name: call.name.clone(),
                input: call.input.clone(),
                reason: reason.clone(),
            },
        );
        self.log(Entry::Permission {
            ts: clock::unix_seconds(),
            tool: call.name.clone(),
            call_id: call.id.clone(),
            decision: format!("deny: {reason}"),
        });
        reason
    }

    /// Asks the approver about a call (with `input`, as hooks left it).
    async fn ask(
        &mut self,
        call: &ToolCall,
        name: &str,
        input: &serde_json::Value,
        events: &EventSink,
    ) -> Result<(), String> {
        let rewritten;
        let call = if *input == call.input {
            call
        } else {
            rewritten = ToolCall { input: input.clone(), ..call.clone() };
            &rewritten
        };
        emit(
            events,
            AgentEvent::PermissionRequested {
                id: call.id.clone(),
                name: call.name.clone(),
                input: call.input.clone(),
            },
        );
        match self.approver.approve(call).await {
            Approval::Yes => Ok(()),
            Approval::AlwaysForSession => {
                for rule in self.permissions.always_rules(name, &call.input) {
                    self.permissions.allow_for_session(rule);
                }
                Ok(())
            }
            Approval::AlwaysForProject => {
                for rule in self.permissions.always_rules(name, &call.input) {
                    if let Err(e) =
                        config::add_project_allow_rule(&self.workspace, &rule.to_string())
                    {
                        emit(
                            events,
                            AgentEvent::Error {
                                message: format!("cannot save the rule {rule}: {e}"),
                                fatal: false,
                            },
                        );
                    }
                    self.permissions.allow_for_session(rule);
                }
                Ok(())
            }
            Approval::No(reason) => Err(reason),
        }
    }

    fn is_concurrent(&self, call: &ToolCall) -> bool {
        self.tools.get(self.tool_name(&call.name)).is_some_and(|t| t.concurrent())
    }

    /// A call made with Claude Code's tool name and input (`Write` with
    /// `file_path`) as the same call of ours (`write` with `path`), through
    /// [`ferroclaw_tools::claude`]; other calls unchanged.
    fn in_our_terms(&self, call: &ToolCall) -> ToolCall {
        let mut call = call.clone();
        if self.tools.get(&call.name).is_none()
            && ferroclaw_tools::claude::ours_name(&call.name).is_some()
        {
            let (ours, input) =
                ferroclaw_tools::claude::from_claude(&call.name, &call.input, &self.workspace);
            if self.tools.get(&ours).is_some() {
                call.name = ours;
                call.input = input;
            }
        }
        call
    }

    /// The registered name for what the model called: itself, or the tool it
    /// is an alias of (`read_file` -> `read`, `spawn` -> `task`, Claude Code's `Read`).
    fn tool_name<'a>(&self, called: &'a str) -> &'a str {
        if self.tools.get(called).is_some() {
            return called;
        }
        match called {
            "spawn" => "task",
            other => ferroclaw_tools::canonical_tool_name(other),
        }
    }

    /// Hands finished background jobs to the model, each exactly once, as a
    /// `<background-results>` message before the next request.
    fn deliver_background_results(&mut self) {
        let Some(jobs) = &self.jobs else { return };
        let block = format_results(&jobs.drain_finished());
        if !block.is_empty() {
            self.record(Message::user(block));
        }
    }

    /// Adds what the injector has (a teammate's `<inbox>`) before the next
    /// request, then makes the session durable before the injector may
    /// forget it (so a crash neither loses nor repeats it).
    async fn deliver_injected(&mut self) {
        let Some(injector) = self.injector.clone() else { return };
        if let Some(text) = injector.before_request() {
            self.record(Message::user(text));
        }
        if injector.has_uncommitted() {
            match self.session.commit().await {
                Ok(()) => injector.committed(),
                Err(e) => tracing::error!("{e}"),
            }
        }
    }

    /// Appends a message to the conversation and the session file.
    fn record(&mut self, message: Message) {
        if let Err(e) = self.session.append_message(&message) {
            tracing::error!("{e}");
        }
        Arc::make_mut(&mut self.messages).push(message);
    }

    fn log(&mut self, entry: Entry) {
        if let Err(e) = self.session.append(&entry) {
            tracing::error!("{e}");
        }
    }

    fn report(&self, outcome: Outcome, text: String, num_turns: u32, usage: Usage) -> Report {
        Report { outcome, text, num_turns, usage }
    }
}

/// Runs one tool; an error or a panic becomes an error result naming it.
async fn execute(
    tool: Arc<dyn Tool>,
    call: &ToolCall,
    input: serde_json::Value,
    ctx: &ToolContext,
) -> ToolOutput {
    match AssertUnwindSafe(tool.execute(input, ctx)).catch_unwind().await {
        Ok(Ok(output)) => output,
        Ok(Err(e)) => ToolOutput::error(format!("{} failed: {e}", call.name)),
        Err(panic) => {
            let what = panic
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| panic.downcast_ref::<&str>().copied())
                .unwrap_or("unknown panic");
            ToolOutput::error(format!(
                "{} crashed ({what}); this is a bug in ferroclaw, the session goes on",
                call.name
            ))
        }
    }
}

/// The first characters of a result, on one line.
fn preview(output: &ToolOutput) -> String {
    let text = output.joined_text();
    let mut out: String =
        text.chars().take(PREVIEW_CHARS).map(|c| if c == '\n' { ' ' } else { c }).collect();
    if text.chars().count() > PREVIEW_CHARS {
        out.push('…');
    }
    out
}

fn emit(events: &EventSink, event: AgentEvent) {
    // A renderer that went away must not stop the loop.
    let _ = events.send(event);
}
