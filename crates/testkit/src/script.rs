//! The script: the ordered steps a [`ScriptedServer`](crate::ScriptedServer) plays back.

use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Input tokens reported for a turn that does not set them (non-zero so clients can assert usage flows).
pub const DEFAULT_INPUT_TOKENS: u64 = 10;
/// Output tokens reported for a turn that does not set them.
pub const DEFAULT_OUTPUT_TOKENS: u64 = 5;

/// One scripted answer; each model request (either endpoint) consumes the next step.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Step {
    /// Answer normally with this turn.
    Reply(Turn),
    /// Misbehave in the way described.
    Fault(Fault),
}

/// A normal assistant answer: optional text, then tool calls, with the usage to report.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct Turn {
    /// Assistant text, streamed in several deltas.
    pub text: String,
    /// Tool calls, in order, after the text.
    pub tool_calls: Vec<ScriptedToolCall>,
    /// Reported prompt/input tokens.
    pub input_tokens: u64,
    /// Reported completion/output tokens.
    pub output_tokens: u64,
}

/// A tool call the scripted model makes.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ScriptedToolCall {
    /// Call id; when empty (or omitted in JSON) the server generates `toolu_N` / `call_N`.
    #[serde(default)]
    pub id: String,
    /// Tool name.
    pub name: String,
    /// Arguments; streamed as JSON text split across several deltas.
    #[serde(default = "empty_object")]
    pub arguments: Value,
}

/// A way for the server to misbehave, for testing client resilience.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(tag = "fault", rename_all = "snake_case", deny_unknown_fields)]
pub enum Fault {
    /// Plain HTTP error; `body` defaults to an error body in the endpoint's format.
    Status {
        /// HTTP status, e.g. 429, 500, 529.
        status: u16,
        /// Raw response body replacing the default one.
        #[serde(default)]
        body: Option<String>,
        /// Seconds to send in a `retry-after` header.
        #[serde(default)]
        retry_after: Option<u64>,
    },
    /// A 200 `text/html` page instead of an answer (a proxy, a captive portal, a wrong base URL).
    HtmlPage {
        /// The page.
        body: String,
    },
    /// Start streaming a few text deltas, then drop the connection without the closing events.
    CutMidStream,
    /// A 200 event stream whose data line is not JSON.
    MalformedSse,
    /// An error event as the first event of a 200 stream (Anthropic `event: error`, OpenAI `{"error":..}`).
    StreamErrorEvent,
    /// Wait before sending the headers, then answer normally.
    SlowFirstByte {
        /// Delay before the first byte, in milliseconds.
        delay_ms: u64,
        /// The answer sent after the delay.
        then: Turn,
    },
    /// Stream some text deltas, then keep the connection open silently forever.
    Stall {
        /// Text streamed before going silent.
        after_text: String,
    },
    /// A provider that ignores `max_tokens`: text deltas of `text` without
    /// end (a JSON answer whose text never closes when not streaming).
    Endless {
        /// The text of each delta.
        text: String,
    },
}

impl Default for Turn {
    fn default() -> Self {
        Turn {
            text: String::new(),
            tool_calls: Vec::new(),
            input_tokens: DEFAULT_INPUT_TOKENS,
            output_tokens: DEFAULT_OUTPUT_TOKENS,
        }
    }
}

impl Turn {
    /// A plain text answer.
    pub fn text(text: impl Into<String>) -> Turn {
        Turn { text: text.into(), ..Turn::default() }
    }

    /// An answer making a single tool call, with a generated unique id.
    pub fn tool(name: impl Into<String>, arguments: Value) -> Turn {
        Turn::tools(vec![ScriptedToolCall::new(name, arguments)])
    }

    /// An answer that reads the file named by `arguments["path"]` and then
    /// makes the call `name` (an `edit` or `multi_edit`: ferroclaw, like
    /// Claude Code, refuses to change a file the conversation never read).
    pub fn read_then(name: impl Into<String>, arguments: Value) -> Turn {
        let read = serde_json::json!({"path": arguments["path"].clone()});
        Turn::tools(vec![
            ScriptedToolCall::new("read", read),
            ScriptedToolCall::new(name, arguments),
        ])
    }

    /// An answer making these tool calls (parallel calls when more than one).
    pub fn tools(tool_calls: Vec<ScriptedToolCall>) -> Turn {
        Turn { tool_calls, ..Turn::default() }
    }

    /// Replaces the text streamed before the tool calls.
    pub fn with_text(mut self, text: impl Into<String>) -> Turn {
        self.text = text.into();
        self
    }

    /// Replaces the reported usage.
    pub fn with_usage(mut self, input_tokens: u64, output_tokens: u64) -> Turn {
        self.input_tokens = input_tokens;
        self.output_tokens = output_tokens;
        self
    }
}

impl ScriptedToolCall {
    /// A tool call with a generated unique id (`call_N`).
    pub fn new(name: impl Into<String>, arguments: Value) -> ScriptedToolCall {
        ScriptedToolCall { id: next_call_id("call"), name: name.into(), arguments }
    }
}

impl From<Turn> for Step {
    fn from(turn: Turn) -> Step {
        Step::Reply(turn)
    }
}

impl From<Fault> for Step {
    fn from(fault: Fault) -> Step {
        Step::Fault(fault)
    }
}

impl ScriptedToolCall {
    /// The scripted id, or a fresh `{prefix}_N` when the script left it empty.
    pub(crate) fn id_or_new(&self, prefix: &str) -> String {
        if self.id.is_empty() { next_call_id(prefix) } else { self.id.clone() }
    }
}

/// A process-wide unique tool call id such as `call_7` or `toolu_8`.
pub(crate) fn next_call_id(prefix: &str) -> String {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    format!("{prefix}_{}", NEXT.fetch_add(1, Ordering::Relaxed))
}

fn empty_object() -> Value {
    Value::Object(Default::default())
}
