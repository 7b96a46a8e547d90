//! Streams of events: from a provider to the loop, and from the loop outward.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::{ToolCall, Usage};

/// The state of one todo item.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TodoStatus {
    Pending,
    InProgress,
    Completed,
}

/// One item of the model's todo list.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TodoItem {
    /// What to do, imperative ("Run the tests").
    pub content: String,
    pub status: TodoStatus,
    /// Present continuous, shown while in progress ("Running the tests").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_form: Option<String>,
}

/// Why the model stopped producing output.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// The model finished its answer.
    EndTurn,
    /// The model wants tools run.
    ToolUse,
    /// The answer hit `max_tokens`.
    MaxTokens,
    /// A stop sequence matched.
    StopSequence,
    /// Anything else a provider reports, kept verbatim.
    Other(String),
}

/// One event of a provider's streamed answer. Providers assemble tool calls
/// (Anthropic `input_json_delta`, OpenAI `tool_calls` deltas by index) and hand
/// the loop whole calls; text streams as deltas.
#[derive(Debug, Clone, PartialEq)]
pub enum ProviderEvent {
    /// A piece of answer text.
    TextDelta(String),
    /// The model started a tool call; arguments are still streaming.
    ToolCallStarted { id: String, name: String },
    /// A complete tool call. `parse_error` is set when the arguments the model
    /// streamed are not valid JSON (then `input` holds the raw text as a string).
    ToolCall { call: ToolCall, parse_error: Option<String> },
    /// Token usage for this call (may come more than once; later reports merge).
    Usage(Usage),
    /// The answer is complete.
    Stop(StopReason),
    /// The provider is retrying after a transient failure.
    Retrying { attempt: u32, delay_ms: u64, reason: String },
}

/// The one event type that flows out of the agent loop to whoever renders it:
/// the terminal, the gateway, `--output-format stream-json`, a test.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum AgentEvent {
    /// A session is open (new or resumed).
    SessionStarted { session_id: String, model: String, resumed: bool },
    /// A model round-trip begins (1-based within the user's request).
    TurnStarted { turn: u32 },
    /// A piece of the model's answer.
    TextDelta { text: String },
    /// The provider hit a transient failure and will retry.
    Retrying { attempt: u32, delay_ms: u64, reason: String },
    /// A tool call is about to run.
    ToolCallStarted { id: String, name: String, input: Value },
    /// A tool call needs the user's approval; the answer comes through the
    /// approver (REPL prompt, chat message), the event lets renderers show it.
    PermissionRequested { id: String, name: String, input: Value },
    /// A tool call was refused: by a deny rule, by the user, or because
    /// nobody could be asked (`-p` without `--yes`). Its `tool_call_finished`
    /// (an error result carrying `reason`) follows.
    PermissionDenied { id: String, name: String, input: Value, reason: String },
    /// A tool call finished (or was refused).
    ToolCallFinished {
        id: String,
        name: String,
        is_error: bool,
        duration_ms: u64,
        /// The first part of the result, for display.
        preview: String,
    },
    /// Tokens used by the model round-trip that just ended.
    Usage { usage: Usage },
    /// The conversation was compacted.
    Compaction { before_tokens: u64, after_tokens: u64 },
    /// Something went wrong; `fatal` errors end the request.
    Error { message: String, fatal: bool },
    /// A model round-trip ended.
    TurnFinished { turn: u32, stop_reason: StopReason },
    /// The todo list changed (the whole list).
    Todos { items: Vec<TodoItem> },
    /// In plan mode the model presented its plan for approval.
    PlanProposed { plan: String },
    /// An event of a sub-agent started by the tool call `call_id`.
    SubAgent { call_id: String, agent_type: String, event: Box<AgentEvent> },
    /// A teammate's news: its status (`working`, `idle`, `shutdown`) and
    /// what happened (spawned, claimed a task, sent a message, stopped).
    Team { name: String, status: String, detail: String },
    /// The user's request is done: the final answer and totals.
    Finished { result: String, session_id: String, num_turns: u32, usage: Usage, is_error: bool },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agent_events_serialise_as_one_tagged_json_object_per_event() {
        let e = AgentEvent::TurnFinished { turn: 2, stop_reason: StopReason::ToolUse };
        assert_eq!(
            serde_json::to_string(&e).unwrap(),
            r#"{"type":"turn_finished","turn":2,"stop_reason":"tool_use"}"#
        );
        let other =
            AgentEvent::TurnFinished { turn: 1, stop_reason: StopReason::Other("refusal".into()) };
        let s = serde_json::to_string(&other).unwrap();
        assert_eq!(serde_json::from_str::<AgentEvent>(&s).unwrap(), other);
    }
}
