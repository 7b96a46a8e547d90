//! `--input-format stream-json`: stdin as Claude Code's Agent SDK writes it,
//! one JSON object per line, read while the turns run:
//!
//! - `{"type":"user","message":{"role":"user","content":"..." | [{"type":"text","text":"..."}]}}`:
//!   a prompt, run as the next turn of the conversation;
//! - `{"type":"control_request","request_id","request":{"subtype":...}}`:
//!   answered at once, even mid-turn ([`Control::handle_request`]);
//! - `{"type":"control_response","response":{"request_id",...}}`: the
//!   answer to a request of ours (a `can_use_tool` prompt);
//! - `{"type":"control_cancel_request","request_id"}`, `keep_alive`: skipped.
//!
//! The end of stdin ends the run once the prompts read have run.

use std::io::BufRead;
use std::sync::Arc;

use serde_json::Value;
use tokio::sync::mpsc::{UnboundedReceiver, unbounded_channel};

use crate::stream_control::Control;

/// One line of stdin, understood.
#[derive(Debug, PartialEq)]
enum Line {
    /// A user message's text (empty when it had no text).
    Prompt(String),
    /// A control request of the SDK: its id and the request object.
    Request { id: String, request: Value },
    /// The SDK's answer to one of our control requests (the `response` object).
    Response(Value),
    /// Anything else (`keep_alive`, `control_cancel_request`, ...).
    Other,
}

/// Reads `line` (number `n`, from 1); an error names the line that is not JSON.
fn parse(line: &str, n: usize) -> Result<Line, String> {
    let value: Value = serde_json::from_str(line).map_err(|e| {
        format!("--input-format stream-json: line {n} is not JSON ({e}): {line:.80}")
    })?;
    Ok(match value["type"].as_str() {
        Some("user") => Line::Prompt(text_of(&value["message"]["content"])),
        Some("control_request") => Line::Request {
            id: value["request_id"].as_str().unwrap_or_default().to_string(),
            request: value["request"].clone(),
        },
        Some("control_response") => Line::Response(value["response"].clone()),
        _ => {
            tracing::debug!("stream-json input: skipped a {} line", value["type"]);
            Line::Other
        }
    })
}

/// The text of a message's content: a string, or its text blocks joined.
fn text_of(content: &Value) -> String {
    match content {
        Value::String(text) => text.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .filter(|b| b["type"] == "text")
            .filter_map(|b| b["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// Starts reading stdin on its own thread: prompts come out of the returned
/// channel in order (an `Err` for a line that is not JSON, after which
/// reading stops); control lines go to `control`. The channel closes at the
/// end of stdin, and `control` is told, so that nothing waits on it any more.
pub(crate) fn spawn_reader(control: Arc<Control>) -> UnboundedReceiver<Result<String, String>> {
    let (tx, rx) = unbounded_channel();
    let read = move || {
        let stdin = std::io::stdin().lock();
        for (n, line) in stdin.lines().enumerate() {
            let line = match line {
                Ok(line) => line,
                Err(e) => {
                    let _ = tx.send(Err(format!("cannot read stdin: {e}")));
                    break;
                }
            };
            if line.trim().is_empty() {
                continue;
            }
            match parse(&line, n + 1) {
                Ok(Line::Prompt(text)) if text.trim().is_empty() => {}
                Ok(Line::Prompt(text)) => {
                    let _ = tx.send(Ok(text));
                }
                Ok(Line::Request { id, request }) => control.handle_request(&id, &request),
                Ok(Line::Response(response)) => control.deliver(&response),
                Ok(Line::Other) => {}
                Err(e) => {
                    let _ = tx.send(Err(e));
                    break;
                }
            }
        }
        control.close();
    };
    if let Err(e) = std::thread::Builder::new().name("stdin-stream-json".into()).spawn(read) {
        tracing::error!("cannot start the stdin reader: {e}");
    }
    rx
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_messages_are_prompts_and_control_lines_are_told_apart() {
        let line = |s: &str| parse(s, 1).unwrap();
        assert_eq!(
            line(r#"{"type":"user","message":{"role":"user","content":"first"}}"#),
            Line::Prompt("first".into())
        );
        assert_eq!(
            line(
                r#"{"type":"user","message":{"content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}}"#
            ),
            Line::Prompt("a\nb".into())
        );
        assert_eq!(
            line(
                r#"{"type":"control_request","request_id":"7","request":{"subtype":"interrupt"}}"#
            ),
            Line::Request { id: "7".into(), request: serde_json::json!({"subtype": "interrupt"}) }
        );
        assert_eq!(
            line(
                r#"{"type":"control_response","response":{"subtype":"success","request_id":"f-1"}}"#
            ),
            Line::Response(serde_json::json!({"subtype": "success", "request_id": "f-1"}))
        );
        assert_eq!(line(r#"{"type":"keep_alive"}"#), Line::Other);
        assert!(parse("not json", 3).unwrap_err().contains("line 3"));
    }
}
