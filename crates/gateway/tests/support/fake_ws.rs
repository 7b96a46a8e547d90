//! Helpers of the fake platform servers (Discord, Slack): the caller's
//! token, and JSON frames over a server-side WebSocket.

use std::time::Duration;

use axum::extract::ws::{Message, WebSocket};
use axum::http::HeaderMap;
use serde_json::Value;

/// How long a fake waits for the client.
const WAIT: Duration = Duration::from_secs(5);

/// The `Authorization` header, or empty.
pub(crate) fn auth(headers: &HeaderMap) -> String {
    headers.get("authorization").and_then(|v| v.to_str().ok()).unwrap_or_default().to_string()
}

pub(crate) async fn send(ws: &mut WebSocket, payload: Value) {
    ws.send(Message::Text(payload.to_string().into())).await.unwrap();
}

/// The next JSON payload from the client.
pub(crate) async fn recv(ws: &mut WebSocket) -> Value {
    loop {
        match tokio::time::timeout(WAIT, ws.recv()).await.expect("client sent nothing") {
            Some(Ok(Message::Text(text))) => return serde_json::from_str(&text).unwrap(),
            Some(Ok(Message::Close(frame))) => panic!("client closed: {frame:?}"),
            Some(Ok(_)) => {}
            other => panic!("connection ended: {other:?}"),
        }
    }
}
