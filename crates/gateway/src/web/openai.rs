//! The OpenAI-compatible API: `POST /v1/chat/completions` (streamed and not)
//! and `GET /v1/models`, so any OpenAI client or UI can talk to the agent.
//!
//! The session is chosen by the request's `user` field (or the
//! `X-Ferroclaw-User` header; default `default`): chat `api-USER` of the web
//! channel. The session keeps the history, so only the last user message of
//! the request is taken as the input.

use std::convert::Infallible;

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use ferroclaw_protocol::{AgentEvent, Usage};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::{App, OWNER, api_error};
use crate::bus::{BusError, InboundMessage};
use crate::files::now_ms;

/// The header that picks the session when the body has no `user`.
pub const USER_HEADER: &str = "x-ferroclaw-user";

/// `GET /v1/models`: the one model the gateway serves.
pub(super) async fn models(State(app): State<App>, headers: HeaderMap) -> Response {
    if !app.web.bearer_ok(&headers) {
        return api_error(StatusCode::UNAUTHORIZED, "bad or missing bearer token");
    }
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

/// `POST /v1/chat/completions`.
pub(super) async fn completions(
    State(app): State<App>,
    headers: HeaderMap,
    body: Result<Json<Value>, axum::extract::rejection::JsonRejection>,
) -> Response {
    if !app.web.bearer_ok(&headers) {
        return api_error(StatusCode::UNAUTHORIZED, "bad or missing bearer token");
    }
    let Ok(Json(body)) = body else {
        return api_error(StatusCode::BAD_REQUEST, "the body must be a JSON object");
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
    let (tap, events) = mpsc::unbounded_channel();
    let message = InboundMessage::new("web", OWNER, format!("api-{user}"), input).with_tap(tap);
    let id = message.id.clone();
    let reply = app.web.wait_for_reply(&id);
    if let Err(e) = app.bus.publish(message) {
        app.web.forget_reply(&id);
        let status = match e {
            BusError::Busy => StatusCode::TOO_MANY_REQUESTS,
            BusError::Closed => StatusCode::SERVICE_UNAVAILABLE,
        };
        return api_error(status, &e.to_string());
    }
    let completion_id = format!("chatcmpl-{id}");
    if stream {
        return streamed(completion_id, model, events, reply).into_response();
    }
    let mut events = events;
    let Ok(answer) = reply.await else {
        return api_error(StatusCode::SERVICE_UNAVAILABLE, "the gateway stopped before answering");
    };
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

/// The answer as server-sent `chat.completion.chunk`s, ending with `[DONE]`.
fn streamed(
    id: String,
    model: String,
    mut events: mpsc::UnboundedReceiver<AgentEvent>,
    reply: tokio::sync::oneshot::Receiver<crate::bus::OutboundMessage>,
) -> Sse<impl futures_util::Stream<Item = Result<Event, Infallible>>> {
    let (tx, rx) = mpsc::unbounded_channel::<Event>();
    let chunk = move |delta: Value, finish: Option<&str>| {
        Event::default().data(
            json!({
                "id": id,
                "object": "chat.completion.chunk",
                "created": now_ms() / 1000,
                "model": model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]
            })
            .to_string(),
        )
    };
    tokio::spawn(async move {
        let _ = tx.send(chunk(json!({"role": "assistant", "content": ""}), None));
        let mut streamed = String::new();
        tokio::pin!(reply);
        let answer = loop {
            tokio::select! {
                event = events.recv() => match event {
                    Some(AgentEvent::TextDelta { text }) => {
                        streamed.push_str(&text);
                        let _ = tx.send(chunk(json!({"content": text}), None));
                    }
                    // A new model round-trip after tools: what was streamed
                    // so far was a preamble; keep streaming after it.
                    Some(_) => {}
                    None => break reply.await.ok(),
                },
                answer = &mut reply => break answer.ok(),
            }
        };
        // Text not streamed (a command's reply, an error): send it whole.
        if let Some(answer) = answer
            && !streamed.ends_with(answer.content.as_str())
        {
            let _ = tx.send(chunk(json!({"content": answer.content}), None));
        }
        let _ = tx.send(chunk(json!({}), Some("stop")));
        let _ = tx.send(Event::default().data("[DONE]"));
    });
    let stream = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|event| (Ok(event), rx))
    });
    Sse::new(stream).keep_alive(KeepAlive::default())
}
