//! A planned HTTP response (status, frames, how it ends) and how answers are cut into deltas.

use std::{io, time::Duration};

use axum::{
    body::Body,
    http::{HeaderValue, StatusCode, header},
    response::Response,
};
use bytes::Bytes;
use serde_json::Value;

use crate::recording::Completion;

/// Pause before cutting a connection, so the frames already sent reach the client first.
const FLUSH_BEFORE_CUT: Duration = Duration::from_millis(20);

/// How a response body ends after its frames.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Ending {
    /// Normally: the body is complete.
    Complete,
    /// The connection is dropped without finishing the body.
    Cut,
    /// The connection stays open and silent forever.
    Hang,
    /// This frame is sent again and again, without end.
    Repeat(Bytes),
}

/// Everything needed to write one response.
pub(crate) struct Reply {
    pub status: StatusCode,
    pub content_type: &'static str,
    pub retry_after: Option<u64>,
    pub delay: Duration,
    pub frames: Vec<Bytes>,
    pub ending: Ending,
}

impl Reply {
    /// A complete JSON response.
    pub(crate) fn json(status: StatusCode, body: &Value) -> Reply {
        Reply::raw_json(status, body.to_string(), Ending::Complete)
    }

    /// A JSON-typed response whose body is sent verbatim (possibly not JSON at all).
    pub(crate) fn raw_json(status: StatusCode, body: impl Into<Bytes>, ending: Ending) -> Reply {
        Reply {
            status,
            content_type: "application/json",
            retry_after: None,
            delay: Duration::ZERO,
            frames: vec![body.into()],
            ending,
        }
    }

    /// A 200 `text/event-stream` response.
    pub(crate) fn sse(frames: Vec<Bytes>, ending: Ending) -> Reply {
        Reply {
            content_type: "text/event-stream",
            frames,
            ..Reply::raw_json(StatusCode::OK, "", ending)
        }
    }

    /// Turns the plan into a response whose body reports to `completion` when fully handed over.
    pub(crate) fn into_response(self, completion: Completion) -> Response {
        let length = (self.ending == Ending::Complete && self.content_type != "text/event-stream")
            .then(|| self.frames.iter().map(Bytes::len).sum::<usize>());
        let state = Some((self.frames.into_iter(), self.ending, completion));
        let body = futures_util::stream::unfold(state, |state| async move {
            let (mut frames, ending, completion) = state?;
            if let Some(frame) = frames.next() {
                // Hyper stops polling once a content-length body is written, so stamp at the last frame.
                if frames.len() == 0 && ending == Ending::Complete {
                    completion.finish();
                }
                return Some((Ok(frame), Some((frames, ending, completion))));
            }
            match ending {
                Ending::Complete => completion.finish(),
                Ending::Cut => {
                    tokio::time::sleep(FLUSH_BEFORE_CUT).await;
                    let cut = io::Error::other("scripted-llm: connection cut mid-stream");
                    return Some((Err(cut), None));
                }
                Ending::Hang => std::future::pending::<()>().await,
                Ending::Repeat(frame) => {
                    return Some((
                        Ok(frame.clone()),
                        Some((frames, Ending::Repeat(frame), completion)),
                    ));
                }
            }
            None
        });
        let mut response = Response::new(Body::from_stream(body));
        *response.status_mut() = self.status;
        let headers = response.headers_mut();
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(self.content_type));
        if self.content_type == "text/event-stream" {
            headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
        }
        if let Some(length) = length {
            headers.insert(header::CONTENT_LENGTH, HeaderValue::from(length));
        }
        if let Some(seconds) = self.retry_after {
            headers.insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        }
        response
    }
}

/// An SSE frame with an event name: `event: NAME\ndata: JSON\n\n`.
pub(crate) fn sse_event(name: &str, data: &Value) -> Bytes {
    Bytes::from(format!("event: {name}\ndata: {data}\n\n"))
}

/// An SSE frame with only a data line: `data: JSON\n\n`.
pub(crate) fn sse_data(data: &Value) -> Bytes {
    Bytes::from(format!("data: {data}\n\n"))
}

/// Text deltas: one per word (whitespace kept) when there are 3+ words, else 3 even pieces.
pub(crate) fn text_deltas(text: &str) -> Vec<String> {
    let words: Vec<String> = text.split_inclusive(char::is_whitespace).map(String::from).collect();
    if words.len() >= 3 { words } else { split_even(text, 3) }
}

/// Argument deltas: the compact JSON text cut into 4 pieces at arbitrary character boundaries.
pub(crate) fn argument_deltas(arguments: &Value) -> Vec<String> {
    split_even(&arguments.to_string(), 4)
}

/// Splits `text` into at most `pieces` non-empty parts of nearly equal character count.
fn split_even(text: &str, pieces: usize) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let size = chars.len().div_ceil(pieces.max(1)).max(1);
    chars.chunks(size).map(|chunk| chunk.iter().collect()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_deltas_concatenate_back_to_the_text() {
        for text in ["", "hi", "hello", "one two three four", "héllo wörld ✓"] {
            let deltas = text_deltas(text);
            assert_eq!(deltas.concat(), text);
            assert!(text.chars().count() < 3 || deltas.len() >= 3, "{text:?} -> {deltas:?}");
        }
    }

    #[test]
    fn argument_deltas_split_json_into_several_pieces() {
        let args = serde_json::json!({"path": "a.txt"});
        let deltas = argument_deltas(&args);
        assert_eq!(deltas.len(), 4);
        assert_eq!(serde_json::from_str::<Value>(&deltas.concat()).ok(), Some(args));
    }
}
