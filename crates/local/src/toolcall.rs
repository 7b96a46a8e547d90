//! Tool calls written as text: the `<tool_call>{"name": ..., "arguments":
//! {...}}</tool_call>` convention Qwen and Hermes models are trained on.
//! [`CallSplitter`] separates a streamed answer into text to show and calls to
//! run; [`parse_call`] turns one call's body into a [`ToolCall`].

use ferroclaw_protocol::ToolCall;
use serde_json::Value;

/// Opens a call in the model's output.
pub const CALL_OPEN: &str = "<tool_call>";
/// Closes a call.
pub const CALL_CLOSE: &str = "</tool_call>";
/// Opens a tool's result in the prompt; a model never writes one itself.
pub const RESULT_OPEN: &str = "<tool_response>";

/// One piece of a split answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Segment {
    /// Text to stream to the user.
    Text(String),
    /// The body of one complete call, between the tags.
    Call(String),
}

/// Splits streamed text into [`Segment`]s as it arrives. Text that might be
/// the start of `<tool_call>` is held back until the next piece decides it.
#[derive(Debug, Default)]
pub struct CallSplitter {
    /// Text not yet emitted: a possible tag prefix, or a call's body so far.
    pending: String,
    /// True between `<tool_call>` and `</tool_call>`.
    in_call: bool,
    /// True once the model began a `<tool_response>`: the answer is over.
    ended: bool,
}

impl CallSplitter {
    /// A splitter outside any call.
    pub fn new() -> Self {
        Self::default()
    }

    /// Feeds the next piece of output; returns what it completes.
    pub fn push(&mut self, piece: &str) -> Vec<Segment> {
        if self.ended {
            return Vec::new();
        }
        self.pending.push_str(piece);
        let mut out = Vec::new();
        loop {
            if !self.in_call
                && let Some(start) = self.pending.find(RESULT_OPEN)
                && self.pending.find(CALL_OPEN).is_none_or(|c| c > start)
            {
                // A model writing a tool's result is making it up.
                let text = &self.pending[..start];
                if !text.trim().is_empty() {
                    out.push(Segment::Text(text.to_string()));
                }
                self.pending.clear();
                self.ended = true;
                break;
            }
            if self.in_call {
                let Some(end) = self.pending.find(CALL_CLOSE) else {
                    break;
                };
                let body = self.pending[..end].trim().to_string();
                self.pending.drain(..end + CALL_CLOSE.len());
                self.in_call = false;
                out.push(Segment::Call(body));
            } else if let Some(start) = self.pending.find(CALL_OPEN) {
                let text = &self.pending[..start];
                if !text.trim().is_empty() {
                    out.push(Segment::Text(text.to_string()));
                }
                self.pending.drain(..start + CALL_OPEN.len());
                self.in_call = true;
            } else {
                let keep = partial_tag_len(&self.pending);
                let emit = self.pending.len() - keep;
                if emit > 0 {
                    out.push(Segment::Text(self.pending[..emit].to_string()));
                    self.pending.drain(..emit);
                }
                break;
            }
        }
        out
    }

    /// Ends the answer. An unfinished call (the answer hit its token cap)
    /// comes back as `Err` with its body so far.
    pub fn finish(&mut self) -> Result<Option<Segment>, String> {
        let rest = std::mem::take(&mut self.pending);
        if self.in_call {
            self.in_call = false;
            return Err(rest);
        }
        Ok((!rest.is_empty()).then_some(Segment::Text(rest)))
    }

    /// True while inside a call.
    pub fn in_call(&self) -> bool {
        self.in_call
    }

    /// True once the model began writing a `<tool_response>` itself: the
    /// text before it was the answer, and generation should stop.
    pub fn ended(&self) -> bool {
        self.ended
    }
}

/// Length of the longest suffix of `text` that is a proper prefix of
/// [`CALL_OPEN`] or [`RESULT_OPEN`], so a tag split across pieces is not
/// streamed as text.
fn partial_tag_len(text: &str) -> usize {
    [CALL_OPEN, RESULT_OPEN]
        .iter()
        .filter_map(|tag| {
            (1..tag.len()).rev().find(|&n| {
                text.len() >= n
                    && text.is_char_boundary(text.len() - n)
                    && text.ends_with(&tag[..n])
            })
        })
        .max()
        .unwrap_or(0)
}

/// Why a call body is not a usable call.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CallError {
    #[error("tool call is not valid JSON: {0}")]
    Json(String),
    #[error("tool call has no \"name\" string")]
    NoName,
}

/// Parses a call body `{"name": "...", "arguments": {...}}`. `arguments` may
/// be missing (no arguments) or, as some models write it, a JSON string.
pub fn parse_call(id: String, body: &str) -> Result<ToolCall, CallError> {
    let value: Value = serde_json::from_str(body).map_err(|e| CallError::Json(e.to_string()))?;
    let name = value.get("name").and_then(Value::as_str).ok_or(CallError::NoName)?.to_string();
    let input = match value.get("arguments") {
        None | Some(Value::Null) => Value::Object(Default::default()),
        Some(Value::String(s)) => {
            serde_json::from_str(s).map_err(|e| CallError::Json(e.to_string()))?
        }
        Some(v) => v.clone(),
    };
    Ok(ToolCall { id, name, input })
}

/// Writes a call back in the convention, for earlier turns of a conversation.
pub fn render_call(call: &ToolCall) -> String {
    let name = Value::String(call.name.clone());
    format!("{CALL_OPEN}\n{{\"name\": {name}, \"arguments\": {}}}\n{CALL_CLOSE}", call.input)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn split_all(pieces: &[&str]) -> (Vec<Segment>, Result<Option<Segment>, String>) {
        let mut s = CallSplitter::new();
        let mut out = Vec::new();
        for p in pieces {
            out.extend(s.push(p));
        }
        (out, s.finish())
    }

    #[test]
    fn plain_text_streams_through_unchanged() {
        let (out, rest) = split_all(&["Hello", ", world"]);
        assert_eq!(out, [Segment::Text("Hello".into()), Segment::Text(", world".into())]);
        assert_eq!(rest, Ok(None));
    }

    #[test]
    fn a_tag_split_across_pieces_is_held_back_and_recognised() {
        let (out, rest) = split_all(&[
            "Let me look.\n<tool",
            "_call>\n{\"name\": \"ls\", ",
            "\"arguments\": {}}\n</tool_",
            "call>",
        ]);
        assert_eq!(
            out,
            [
                Segment::Text("Let me look.\n".into()),
                Segment::Call("{\"name\": \"ls\", \"arguments\": {}}".into())
            ]
        );
        assert_eq!(rest, Ok(None));
    }

    #[test]
    fn a_lone_angle_bracket_that_is_not_a_tag_is_released() {
        let (out, rest) = split_all(&["a <", "b"]);
        assert_eq!(out, [Segment::Text("a ".into()), Segment::Text("<b".into())]);
        assert_eq!(rest, Ok(None));
    }

    #[test]
    fn a_made_up_tool_response_ends_the_answer_and_is_never_shown() {
        let mut s = CallSplitter::new();
        let mut out = s.push("The files are");
        out.extend(s.push(" here.\n<tool_res"));
        assert!(!s.ended());
        out.extend(s.push("ponse>\nfake.txt"));
        assert!(s.ended());
        out.extend(s.push("more"));
        assert_eq!(out, [Segment::Text("The files are".into()), Segment::Text(" here.\n".into())]);
        assert_eq!(s.finish(), Ok(None));
    }

    #[test]
    fn two_calls_in_one_answer_come_out_in_order() {
        let (out, _) = split_all(&[
            "<tool_call>{\"name\":\"a\"}</tool_call>\n<tool_call>{\"name\":\"b\"}</tool_call>",
        ]);
        assert_eq!(
            out,
            [Segment::Call("{\"name\":\"a\"}".into()), Segment::Call("{\"name\":\"b\"}".into())]
        );
    }

    #[test]
    fn an_unfinished_call_is_reported_with_its_body() {
        let (_, rest) = split_all(&["<tool_call>{\"name\": \"rea"]);
        assert_eq!(rest, Err("{\"name\": \"rea".into()));
    }

    #[test]
    fn a_call_parses_with_object_string_or_missing_arguments() {
        let c = parse_call("c1".into(), r#"{"name":"read","arguments":{"path":"a"}}"#).unwrap();
        assert_eq!((c.name.as_str(), c.input), ("read", json!({"path": "a"})));
        let c =
            parse_call("c2".into(), r#"{"name":"read","arguments":"{\"path\":\"b\"}"}"#).unwrap();
        assert_eq!(c.input, json!({"path": "b"}));
        let c = parse_call("c3".into(), r#"{"name":"now"}"#).unwrap();
        assert_eq!(c.input, json!({}));
    }

    #[test]
    fn a_call_without_a_name_or_with_bad_json_is_an_error() {
        assert_eq!(parse_call("c".into(), r#"{"arguments":{}}"#), Err(CallError::NoName));
        assert!(matches!(parse_call("c".into(), "{nope"), Err(CallError::Json(_))));
    }

    #[test]
    fn a_rendered_call_parses_back_to_the_same_call() {
        let call =
            ToolCall { id: "x".into(), name: "bash".into(), input: json!({"command": "ls"}) };
        let text = render_call(&call);
        let (out, _) = split_all(&[&text]);
        let [Segment::Call(body)] = out.as_slice() else { panic!("{out:?}") };
        assert_eq!(parse_call("x".into(), body).unwrap(), call);
    }
}
