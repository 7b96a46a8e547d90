//! The OpenAI-compatible API: `POST /v1/chat/completions` (streamed and not)
//! and `GET /v1/models`, so any OpenAI client or UI can talk to the agent.
//!
//! The session is chosen by the request's `user` field (or the
//! `X-Ferroclaw-User` header; default `default`): chat `api-USER` of the web
//! channel. The session keeps the history, so only the last user message of
//! the request is taken as the input.

use std::convert::Infallible;

use axum::Json;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, Request, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use ferroclaw_protocol::{AgentEvent, Usage};
use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};

use super::limits::{BODY_READ_TIMEOUT, MAX_BODY_BYTES};
use super::queue::{OutQueue, out_queue};
use super::{App, OWNER, api_error, failure_response};
use crate::bus::{EventTap, Failure, InboundMessage, OutboundMessage};
use crate::files::now_ms;

/// The header that picks the session when the body has no `user`.
pub const USER_HEADER: &str = "x-ferroclaw-user";

/// `GET /v1/models`: the one model the gateway serves (the token was
/// checked by the router before this runs).
pub(super) async fn models(State(app): State<App>) -> Response {
    let model = &app.web.options.model_name;
    Json(json!({
        "object": "list",
        "data": [{"id": model, "object": "model", "created": now_ms() / 1000, "owned_by": "ferroclaw"}]
    }))
    .into_response()
}

/// The text of the request's last user message (string or content parts).
fn last_user_text(body: &Value) -> Option<String> {
    let message = body["messages"].as_array()?.iter().rev().find(|m| m["role"] == "user")?;
    match &message["content"] {
        Value::String(s) => Some(s.clone()),
        Value::Array(parts) => {
            Some(parts.iter().filter_map(|p| p["text"].as_str()).collect::<Vec<_>>().join("\n"))
        }
        _ => None,
    }
}

/// Reads a request body of at most [`MAX_BODY_BYTES`] within [`BODY_READ_TIMEOUT`].
async fn read_json(body: Body) -> Result<Value, Response> {
    let read = axum::body::to_bytes(body, MAX_BODY_BYTES);
    let bytes = match tokio::time::timeout(BODY_READ_TIMEOUT, read).await {
        Err(_) => {
            return Err(api_error(StatusCode::REQUEST_TIMEOUT, "the body took too long to arrive"));
        }
        Ok(Err(_)) => {
            return Err(api_error(
                StatusCode::PAYLOAD_TOO_LARGE,
                &format!("the body is larger than {MAX_BODY_BYTES} bytes"),
            ));
        }
        Ok(Ok(b)) => b,
    };
    serde_json::from_slice(&bytes)
        .map_err(|_| api_error(StatusCode::BAD_REQUEST, "the body must be a JSON object"))
}

/// `POST /v1/chat/completions` (the token was checked before the body is read).
pub(super) async fn completions(State(app): State<App>, request: Request<Body>) -> Response {
    let (parts, body) = request.into_parts();
    let headers: HeaderMap = parts.headers;
    let body = match read_json(body).await {
        Ok(v) => v,
        Err(response) => return response,
    };
    let Some(input) = last_user_text(&body).filter(|t| !t.trim().is_empty()) else {
        return api_error(StatusCode::BAD_REQUEST, "messages has no user message with text");
    };
    let user = body["user"]
        .as_str()
        .map(str::to_string)
        .or_else(|| headers.get(USER_HEADER).and_then(|v| v.to_str().ok()).map(str::to_string))
        .filter(|u| !u.trim().is_empty())
        .unwrap_or_else(|| "default".into());
    let model = body["model"].as_str().unwrap_or(&app.web.options.model_name).to_string();
    let stream = body["stream"].as_bool().unwrap_or(false);
    let include_usage = body["stream_options"]["include_usage"].as_bool().unwrap_or(false);
    let (tap, events) = mpsc::unbounded_channel();
    let message = InboundMessage::new("web", OWNER, format!("api-{user}"), input)
        .with_tap(EventTap::channel(tap));
    let id = message.id.clone();
    let reply = app.web.wait_for_reply(&id);
    if let Err(e) = app.bus.publish(message) {
        app.web.forget_reply(&id);
        return failure_response(Failure::from(&e), &e.to_string());
    }
    let completion_id = format!("chatcmpl-{id}");
    if stream {
        let chunks = Chunks { id: completion_id, model };
        let limit = app.web.options.max_queued_bytes;
        return streamed(chunks, include_usage, events, reply, limit).into_response();
    }
    let mut events = events;
    let Ok(answer) = reply.await else {
        return failure_response(Failure::Closed, "the gateway stopped before answering");
    };
    if let Some(failure) = answer.failure {
        return failure_response(failure, &answer.content);
    }
    let mut usage = Usage::default();
    while let Ok(event) = events.try_recv() {
        if let AgentEvent::Finished { usage: u, .. } = event {
            usage = u;
        }
    }
    Json(json!({
        "id": completion_id,
        "object": "chat.completion",
        "created": now_ms() / 1000,
        "model": model,
        "choices": [{
            "index": 0,
            "message": {"role": "assistant", "content": answer.content},
            "finish_reason": "stop"
        }],
        "usage": usage_json(&usage),
    }))
    .into_response()
}

fn usage_json(u: &Usage) -> Value {
    let prompt = u.input_tokens + u.cache_read_tokens + u.cache_write_tokens;
    json!({"prompt_tokens": prompt, "completion_tokens": u.output_tokens, "total_tokens": prompt + u.output_tokens})
}

/// Builds the `chat.completion.chunk`s of one streamed answer.
struct Chunks {
    id: String,
    model: String,
}

impl Chunks {
    fn object(&self, choices: Value) -> Value {
        json!({
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": now_ms() / 1000,
            "model": self.model,
            "choices": choices,
        })
    }

    fn delta(&self, delta: Value, finish: Option<&str>) -> Event {
        let choice = json!([{"index": 0, "delta": delta, "finish_reason": finish}]);
        Event::default().data(self.object(choice).to_string())
    }

    /// The last chunk when `stream_options.include_usage` asks for it: no choices, the usage.
    fn usage(&self, usage: &Usage) -> Event {
        let mut chunk = self.object(json!([]));
        chunk["usage"] = usage_json(usage);
        Event::default().data(chunk.to_string())
    }
}

/// What a streamed answer has sent so far.
#[derive(Default)]
struct Progress {
    streamed: String,
    usage: Usage,
}

impl Progress {
    /// Sends a text delta on; remembers the usage.
    fn take(&mut self, event: AgentEvent, chunks: &Chunks, tx: &OutQueue<Event>) {
        match event {
            AgentEvent::TextDelta { text } => {
                self.streamed.push_str(&text);
                let bytes = text.len() + CHUNK_OVERHEAD_BYTES;
                tx.push(chunks.delta(json!({"content": text}), None), bytes);
            }
            AgentEvent::Finished { usage, .. } => self.usage = usage,
            // A new model round-trip after tools: what was streamed so far
            // was a preamble; keep streaming after it.
            _ => {}
        }
    }
}

/// What a chunk's JSON adds to its text, counted against the queue's bytes.
const CHUNK_OVERHEAD_BYTES: usize = 256;

/// The answer as server-sent `chat.completion.chunk`s, ending with `[DONE]`.
/// A client that stops reading is cut off once `limit` bytes wait for it
/// (the stream ends without `[DONE]`).
///
/// Every event of the turn is queued on `events` before the answer arrives
/// on `reply` (the worker delivers the answer only after its last event), so
/// once the answer is here, what is still queued is taken first: the deltas
/// always join to the answer, and the answer is never sent twice.
fn streamed(
    chunks: Chunks,
    include_usage: bool,
    mut events: mpsc::UnboundedReceiver<AgentEvent>,
    reply: oneshot::Receiver<OutboundMessage>,
    limit: usize,
) -> Sse<impl futures_util::Stream<Item = Result<Event, Infallible>>> {
    let (tx, rx) = out_queue::<Event>(limit);
    tokio::spawn(async move {
        let send = |event: Event| tx.push(event, CHUNK_OVERHEAD_BYTES);
        send(chunks.delta(json!({"role": "assistant", "content": ""}), None));
        let mut progress = Progress::default();
        tokio::pin!(reply);
        let answer = loop {
            tokio::select! {
                biased;
                event = events.recv() => match event {
                    Some(event) => progress.take(event, &chunks, &tx),
                    None => break reply.await.ok(),
                },
                answer = &mut reply => break answer.ok(),
            }
        };
        while let Ok(event) = events.try_recv() {
            progress.take(event, &chunks, &tx);
        }
        match answer {
            Some(OutboundMessage { failure: Some(failure), content, .. }) => {
                let error = super::error_body(failure_status(failure), &content);
                send(Event::default().data(error.to_string()));
            }
            Some(answer) => {
                // Text not streamed (a command's reply): send it whole.
                if !progress.streamed.ends_with(answer.content.as_str()) {
                    let bytes = answer.content.len() + CHUNK_OVERHEAD_BYTES;
                    tx.push(chunks.delta(json!({"content": answer.content}), None), bytes);
                }
                send(chunks.delta(json!({}), Some("stop")));
                if include_usage {
                    send(chunks.usage(&progress.usage));
                }
            }
            None => {
                let message = "the gateway stopped before answering";
                let error = super::error_body(StatusCode::SERVICE_UNAVAILABLE, message);
                send(Event::default().data(error.to_string()));
            }
        }
        send(Event::default().data("[DONE]"));
    });
    let stream = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|event| (Ok(event), rx))
    });
    Sse::new(stream).keep_alive(KeepAlive::default())
}

/// The status code of a failed answer.
pub(super) fn failure_status(failure: Failure) -> StatusCode {
    match failure {
        Failure::Busy => StatusCode::TOO_MANY_REQUESTS,
        Failure::Closed => StatusCode::SERVICE_UNAVAILABLE,
        Failure::Failed => StatusCode::INTERNAL_SERVER_ERROR,
    }
}
