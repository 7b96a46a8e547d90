//! The web chat's WebSocket: JSON frames both ways.
//!
//! Client to server: `{"type": "message", "content": "..."}`.
//! Server to client: `{"type": "ready", "chat": ID}`; `{"type": "event",
//! "event": AgentEvent}` while the answer is written (text deltas, tool
//! calls); `{"type": "reply", "content", "reply_to"}` with the final answer;
//! `{"type": "message", "content"}` for messages the agent sends on its own;
//! `{"type": "error", "message"}` when a message was not taken.

use std::sync::PoisonError;

use axum::extract::ws::{Message as Frame, WebSocket, WebSocketUpgrade};
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use futures_util::{SinkExt, StreamExt};
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::{App, OWNER};
use crate::bus::InboundMessage;

/// Longest chat id a page may ask for.
const MAX_CHAT_CHARS: usize = 64;

#[derive(Deserialize)]
pub(super) struct SocketQuery {
    token: Option<String>,
    chat: Option<String>,
}

/// `GET /ws?token=TOKEN&chat=CHAT_ID`.
pub(super) async fn upgrade(
    ws: WebSocketUpgrade,
    Query(query): Query<SocketQuery>,
    State(app): State<App>,
) -> Response {
    if !app.web.authorized(query.token.as_deref()) {
        return (StatusCode::UNAUTHORIZED, "bad or missing token").into_response();
    }
    let chat = query
        .chat
        .filter(|c| {
            !c.is_empty()
                && c.len() <= MAX_CHAT_CHARS
                && c.chars().all(|ch| ch.is_ascii_alphanumeric() || ch == '-' || ch == '_')
        })
        .unwrap_or_else(|| "default".into());
    ws.on_upgrade(move |socket| talk(socket, chat, app))
}

async fn talk(socket: WebSocket, chat: String, app: App) {
    let (mut sink, mut stream) = socket.split();
    let (out, mut out_rx) = mpsc::unbounded_channel::<Value>();
    app.web
        .sockets
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .entry(chat.clone())
        .or_default()
        .push(out.clone());
    let writer = tokio::spawn(async move {
        while let Some(frame) = out_rx.recv().await {
            if sink.send(Frame::Text(frame.to_string().into())).await.is_err() {
                break;
            }
        }
    });
    let _ = out.send(json!({"type": "ready", "chat": chat}));
    while let Some(Ok(frame)) = stream.next().await {
        let text = match frame {
            Frame::Text(t) => t.to_string(),
            Frame::Close(_) => break,
            _ => continue,
        };
        let content = match serde_json::from_str::<Value>(&text) {
            Ok(v) if v["type"] == "message" => {
                v["content"].as_str().unwrap_or_default().to_string()
            }
            _ => {
                let _ = out.send(json!({"type": "error", "message": "expected {\"type\":\"message\",\"content\":...}"}));
                continue;
            }
        };
        if content.trim().is_empty() {
            continue;
        }
        let (tap, mut events) = mpsc::unbounded_channel();
        let forward_to = out.clone();
        tokio::spawn(async move {
            while let Some(event) = events.recv().await {
                let _ = forward_to.send(json!({"type": "event", "event": event}));
            }
        });
        let message = InboundMessage::new("web", OWNER, chat.clone(), content).with_tap(tap);
        if let Err(e) = app.bus.publish(message) {
            let _ = out.send(json!({"type": "error", "message": e.to_string()}));
        }
    }
    writer.abort();
    let mut sockets = app.web.sockets.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(list) = sockets.get_mut(&chat) {
        list.retain(|tx| !tx.same_channel(&out));
        if list.is_empty() {
            sockets.remove(&chat);
        }
    }
}
