//! Turning a script step into a [`Reply`] in the wire format of the endpoint that was called.

use std::time::Duration;

use axum::http::StatusCode;
use bytes::Bytes;
use serde_json::Value;

use crate::{
    ServerOptions, anthropic, openai,
    reply::{Ending, Reply},
    script::{DEFAULT_INPUT_TOKENS, Fault, Step, Turn},
};

/// Text streamed before a [`Fault::CutMidStream`] cuts the connection.
const CUT_TEXT: &str = "This answer will be cut off";

/// Which API the client called.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Wire {
    /// `POST /v1/messages`.
    Anthropic,
    /// `POST /v1/chat/completions`.
    OpenAi,
}

/// What the client asked for, as far as the answer's shape is concerned.
pub(crate) struct Exchange<'a> {
    /// 1-based number of the model request, used in message ids.
    pub seq: usize,
    /// The requested model, echoed back.
    pub model: String,
    /// Whether the body had `"stream": true`.
    pub stream: bool,
    /// Whether the body had `stream_options.include_usage: true`.
    pub include_usage: bool,
    /// The server's options.
    pub options: &'a ServerOptions,
}

impl<'a> Exchange<'a> {
    /// Reads the relevant request fields.
    pub(crate) fn new(seq: usize, body: &Value, options: &'a ServerOptions) -> Exchange<'a> {
        Exchange {
            seq,
            model: body["model"].as_str().unwrap_or("scripted-model").to_string(),
            stream: body["stream"] == Value::Bool(true),
            include_usage: body["stream_options"]["include_usage"] == Value::Bool(true),
            options,
        }
    }
}

impl Wire {
    /// An error response in this format.
    pub(crate) fn error(self, status: StatusCode, message: Option<&str>) -> Reply {
        Reply::json(status, &self.error_body(status.as_u16(), message))
    }

    fn error_body(self, status: u16, message: Option<&str>) -> Value {
        match self {
            Wire::Anthropic => anthropic::error_body(status, message),
            Wire::OpenAi => openai::error_body(status, message),
        }
    }

    fn answer(self, turn: &Turn, ex: &Exchange) -> Reply {
        match (self, ex.stream) {
            (Wire::Anthropic, true) => Reply::sse(anthropic::stream(turn, ex), Ending::Complete),
            (Wire::OpenAi, true) => Reply::sse(openai::stream(turn, ex), Ending::Complete),
            (Wire::Anthropic, false) => Reply::json(StatusCode::OK, &anthropic::message(turn, ex)),
            (Wire::OpenAi, false) => Reply::json(StatusCode::OK, &openai::completion(turn, ex)),
        }
    }

    /// A stream (or JSON body) that starts answering `text` and then ends as `ending` says.
    fn unfinished(self, text: &str, ex: &Exchange, ending: Ending) -> Reply {
        if !ex.stream {
            let body = self.answer(&Turn::text(text), ex).frames.concat();
            return Reply::raw_json(StatusCode::OK, body[..body.len() / 2].to_vec(), ending);
        }
        let frames = match self {
            Wire::Anthropic => anthropic::opening(text, DEFAULT_INPUT_TOKENS, ex),
            Wire::OpenAi => openai::opening(text, ex),
        };
        Reply::sse(frames, ending)
    }

    /// An answer of `text` repeated without end: its delta frame again and
    /// again, or a JSON body whose text never closes.
    fn endless(self, text: &str, ex: &Exchange) -> Reply {
        if !ex.stream {
            let body = self.answer(&Turn::text("\u{0}"), ex).frames.concat();
            let cut = body.windows(6).position(|w| w == b"\\u0000").unwrap_or(body.len());
            let ending = Ending::Repeat(Bytes::from(text.replace(['"', '\\'], " ")));
            return Reply::raw_json(StatusCode::OK, body[..cut].to_vec(), ending);
        }
        let mut frames = match self {
            Wire::Anthropic => anthropic::opening(text, DEFAULT_INPUT_TOKENS, ex),
            Wire::OpenAi => openai::opening(text, ex),
        };
        let repeated = frames.pop().unwrap_or_default();
        frames.push(repeated.clone());
        Reply::sse(frames, Ending::Repeat(repeated))
    }

    /// Plays one step.
    pub(crate) fn render(self, step: &Step, ex: &Exchange) -> Reply {
        let fault = match step {
            Step::Reply(turn) => return self.answer(turn, ex),
            Step::Fault(fault) => fault,
        };
        match fault {
            Fault::Status { status, body, retry_after } => {
                let Ok(code) = StatusCode::from_u16(*status) else {
                    let message = format!("scripted-llm: invalid HTTP status {status} in script");
                    return self.error(StatusCode::INTERNAL_SERVER_ERROR, Some(&message));
                };
                let body =
                    body.clone().unwrap_or_else(|| self.error_body(*status, None).to_string());
                Reply { retry_after: *retry_after, ..Reply::raw_json(code, body, Ending::Complete) }
            }
            Fault::HtmlPage { body } => Reply {
                content_type: "text/html; charset=utf-8",
                ..Reply::raw_json(StatusCode::OK, body.clone(), Ending::Complete)
            },
            Fault::CutMidStream => self.unfinished(CUT_TEXT, ex, Ending::Cut),
            Fault::Stall { after_text } => self.unfinished(after_text, ex, Ending::Hang),
            Fault::Endless { text } => self.endless(text, ex),
            Fault::MalformedSse if !ex.stream => {
                Reply::raw_json(StatusCode::OK, "{\"type\": nope", Ending::Complete)
            }
            Fault::MalformedSse => {
                let frame = match self {
                    Wire::Anthropic => anthropic::MALFORMED_FRAME,
                    Wire::OpenAi => openai::MALFORMED_FRAME,
                };
                Reply::sse(vec![Bytes::from_static(frame.as_bytes())], Ending::Complete)
            }
            Fault::StreamErrorEvent if !ex.stream => {
                let status = if self == Wire::Anthropic { 529 } else { 503 };
                let status = Fault::Status { status, body: None, retry_after: None };
                self.render(&status.into(), ex)
            }
            Fault::StreamErrorEvent => {
                let frame = match self {
                    Wire::Anthropic => anthropic::error_frame(),
                    Wire::OpenAi => openai::error_frame(),
                };
                Reply::sse(vec![frame], Ending::Complete)
            }
            Fault::SlowFirstByte { delay_ms, then } => {
                Reply { delay: Duration::from_millis(*delay_ms), ..self.answer(then, ex) }
            }
        }
    }
}
