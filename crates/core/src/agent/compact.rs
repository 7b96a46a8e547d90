//! Keeping the conversation inside the context window, for the loop:
//! micro-compaction once the context is half-way to the threshold, a
//! model-written summary that replaces the history past it, and compaction on
//! request (the `compact` tool, `/compact`). The session file keeps every
//! original message; compaction is an entry in it.

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use ferroclaw_llm::ChatRequest;
use ferroclaw_protocol::{AgentEvent, ProviderEvent, ToolSpec};
use ferroclaw_tools::tool_input::{parse, schema_for};
use ferroclaw_tools::{Tool, ToolContext, ToolError, ToolOutput};
use futures_util::StreamExt;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::{Agent, EventSink, emit};
use crate::compaction::{
    self, DEFAULT_COMPACTION_THRESHOLD, MicroPolicy, TokenEstimator, compacted_history,
    compaction_entry, needs_compaction, summary_request, tokens_of_chars,
};
use crate::hooks::HookEvent;

/// Tool specs and their characters as [`compaction::tools_chars`] counts them.
type CountedSpecs = (Arc<[ToolSpec]>, usize);

/// Compaction settings and state of one agent.
#[derive(Debug, Clone)]
pub struct Compaction {
    /// The model's context window in tokens.
    pub context_window: u64,
    /// Share of the window at which the history is summarised.
    pub threshold: f64,
    pub micro: MicroPolicy,
    /// Estimates corrected by the provider's real counts.
    pub estimator: TokenEstimator,
    /// Set by the `compact` tool: compact before the next request, with this focus.
    pub requested: Arc<Mutex<Option<String>>>,
    /// The characters of the last tool specs estimated, kept until the
    /// specs change (their JSON schemas are the costly part of an estimate,
    /// made twice per model request).
    specs_chars: Arc<Mutex<Option<CountedSpecs>>>,
}

impl Compaction {
    /// Settings for a window and threshold, nothing requested yet.
    pub fn new(context_window: u64, threshold: f64) -> Self {
        Self {
            context_window,
            threshold,
            micro: MicroPolicy::default(),
            estimator: TokenEstimator::default(),
            requested: Arc::default(),
            specs_chars: Arc::default(),
        }
    }

    /// [`compaction::tools_chars`] of `specs`, counted once per set of specs.
    pub fn tools_chars(&self, specs: &Arc<[ToolSpec]>) -> usize {
        let Ok(mut cached) = self.specs_chars.lock() else {
            return compaction::tools_chars(specs);
        };
        match &*cached {
            Some((counted, chars)) if Arc::ptr_eq(counted, specs) => *chars,
            _ => {
                let chars = compaction::tools_chars(specs);
                *cached = Some((specs.clone(), chars));
                chars
            }
        }
    }

    /// Settings for a model, from its known window.
    pub fn for_model(model: &str) -> Self {
        Self::new(compaction::context_window(model, None), DEFAULT_COMPACTION_THRESHOLD)
    }
}

impl Agent {
    /// The request estimate, corrected by what the provider counted so far.
    pub fn estimated_tokens(&self) -> u64 {
        self.compaction.estimator.correct(self.request_tokens(&self.tools.shared_specs()))
    }

    /// [`compaction::estimate_tokens`] of the next request with `specs`
    /// (the specs counted once per change).
    pub(super) fn request_tokens(&self, specs: &Arc<[ToolSpec]>) -> u64 {
        tokens_of_chars(
            self.system.len()
                + compaction::messages_chars(&self.messages)
                + self.compaction.tools_chars(specs),
        )
    }

    /// Before a model request: compacts when asked to or when the context
    /// passed the threshold; old tool results are trimmed (micro) once it is
    /// half-way there (not earlier: rewriting old results breaks the
    /// provider's prompt cache, so it is done only when it pays).
    pub(super) async fn fit_context(&mut self, events: &EventSink, cancel: &CancellationToken) {
        let requested = self.compaction.requested.lock().map(|mut r| r.take()).unwrap_or(None);
        let limit = self.compaction.context_window as f64 * self.compaction.threshold;
        // The tool specs are counted once per change of them.
        let estimator = self.compaction.estimator;
        let specs = self.compaction.tools_chars(&self.tools.shared_specs());
        let fixed = estimator.correct(tokens_of_chars(self.system.len() + specs));
        let messages = |agent: &Agent| {
            estimator.correct(tokens_of_chars(compaction::messages_chars(&agent.messages)))
        };
        let mut in_messages = messages(self);
        if (fixed + in_messages) as f64 >= limit / 2.0 {
            let history: &mut Vec<_> = Arc::make_mut(&mut self.messages);
            compaction::micro_compact_with(history, &self.compaction.micro);
            in_messages = messages(self);
        }
        // Compaction only shrinks the messages: when they are a small part of
        // the request (the system prompt and tools fill the window), or just
        // the request itself, it would repeat on every turn for nothing.
        let estimate = fixed + in_messages;
        let shrinkable = self.messages.len() > 2 && in_messages as f64 >= limit / 2.0;
        let over =
            needs_compaction(estimate, self.compaction.context_window, self.compaction.threshold);
        if (requested.is_some() && self.messages.len() > 1) || (over && shrinkable) {
            let trigger = if requested.is_some() { "manual" } else { "auto" };
            let _ = self.compact_as(trigger, requested.as_deref(), events, cancel).await;
        }
    }

    /// Replaces the history with a model-written summary (plus the transcript
    /// path and the todo list). On failure the history is left as it was.
    pub async fn compact(
        &mut self,
        focus: Option<&str>,
        events: &EventSink,
        cancel: &CancellationToken,
    ) -> Result<(), String> {
        self.compact_as("manual", focus, events, cancel).await
    }

    /// [`compact`](Self::compact), run by `trigger` (`manual` or `auto`,
    /// as the PreCompact and PostCompact hooks are told).
    async fn compact_as(
        &mut self,
        trigger: &str,
        focus: Option<&str>,
        events: &EventSink,
        cancel: &CancellationToken,
    ) -> Result<(), String> {
        if self.messages.is_empty() {
            return Err("nothing to compact yet".into());
        }
        self.hook_compact(HookEvent::PreCompact, trigger, events).await;
        let before = self.estimated_tokens();
        let request = summary_request(&self.messages, focus);
        let mut stream = self.provider.stream(ChatRequest {
            model: self.model.clone(),
            system: request.system.into(),
            messages: Arc::new(request.messages),
            tools: Arc::from([]),
            max_tokens: self.max_tokens,
            sampling: Default::default(),
        });
        let mut summary = String::new();
        loop {
            let next = tokio::select! {
                _ = cancel.cancelled() => return Err("compaction cancelled".into()),
                next = stream.next() => next,
            };
            match next {
                None => break,
                Some(Ok(ProviderEvent::TextDelta(t))) => summary.push_str(&t),
                Some(Ok(ProviderEvent::Usage(u))) => self.total_usage.add(&u),
                Some(Ok(_)) => {}
                Some(Err(e)) => {
                    let message = format!("compaction failed, the history is kept as it was: {e}");
                    emit(events, AgentEvent::Error { message: message.clone(), fatal: false });
                    return Err(message);
                }
            }
        }
        if summary.trim().is_empty() {
            return Err("the model returned an empty summary; the history is kept".into());
        }
        let todos = self.todos.render();
        let history = compacted_history(
            &summary,
            self.session.path(),
            Some(todos).filter(|t| !t.is_empty()),
            None,
        );
        self.log(compaction_entry(&history, self.messages.len()));
        self.messages = Arc::new(history);
        // Who the agent is (a teammate's name, role and team) survives.
        if let Some(identity) = self.injector.as_ref().and_then(|i| i.after_compaction()) {
            self.record(ferroclaw_protocol::Message::user(identity));
        }
        self.remembering.history_replaced();
        self.checkpoint_history_replaced();
        if let Err(e) = self.session.commit().await {
            tracing::error!("{e}");
        }
        let after = self.estimated_tokens();
        emit(events, AgentEvent::Compaction { before_tokens: before, after_tokens: after });
        self.hook_compact(HookEvent::PostCompact, trigger, events).await;
        Ok(())
    }
}

/// `compact`'s input.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct CompactArgs {
    /// What the summary must keep.
    focus: Option<String>,
}

/// The `compact` tool: the model asks for its own history to be summarised.
pub struct CompactTool(pub Arc<Mutex<Option<String>>>);

#[async_trait]
impl Tool for CompactTool {
    fn name(&self) -> &str {
        "compact"
    }

    fn description(&self) -> &str {
        "Summarises the conversation and continues from the summary, freeing context: for when \
         a long task moves to a new phase. The full transcript stays on disk."
    }

    fn input_schema(&self) -> Value {
        schema_for::<CompactArgs>()
    }

    /// Only the in-memory history changes; the transcript keeps everything.
    fn read_only(&self) -> bool {
        true
    }

    async fn execute(&self, input: Value, _ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let focus = parse::<CompactArgs>(input)?.focus.unwrap_or_default();
        if let Ok(mut slot) = self.0.lock() {
            *slot = Some(focus);
        }
        Ok(ToolOutput::text("The conversation will be compacted before your next turn."))
    }
}
