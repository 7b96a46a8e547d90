//! One Socket Mode connection: acknowledge every envelope by its
//! `envelope_id` the moment it arrives (Slack resends what is not
//! acknowledged within 3 seconds), hand `events_api` events and
//! `interactive` button presses (`block_actions`) to the channel,
//! and end when Slack sends `disconnect` (it is about to close this
//! connection; a new one is opened through `apps.connections.open`) or the
//! connection goes quiet.

use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::net::TcpStream;
use tokio::time::Instant;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};
use tokio_util::sync::CancellationToken;

use super::CHANNEL_NAME;

/// How long connecting (TCP, TLS, WebSocket handshake) may take.
pub(super) const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);
/// How often the client pings Slack to check that the connection is alive.
pub const PING_INTERVAL: Duration = Duration::from_secs(30);
/// A connection with nothing received for this long (pings unanswered) is
/// given up and a new one opened.
pub const STALE_AFTER: Duration = Duration::from_secs(90);
/// How long closing a connection may take before it is simply dropped.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(2);

/// A Socket Mode WebSocket connection.
pub(super) type Socket = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// How a connection ended.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum SocketEnd {
    /// Shutdown was requested.
    Shutdown,
    /// Slack asked for a new connection, or this one dropped or went quiet.
    Reconnect,
}

/// Opens the WebSocket at `url` (from `apps.connections.open`).
pub(super) async fn connect(url: &str) -> Result<Socket, String> {
    // The URL carries a one-time ticket: keep it out of messages.
    let shown = url.split('?').next().unwrap_or(url);
    match tokio::time::timeout(CONNECT_TIMEOUT, tokio_tungstenite::connect_async(url)).await {
        Ok(Ok((socket, _))) => Ok(socket),
        Ok(Err(e)) => Err(format!("cannot connect to {shown}: {e}")),
        Err(_) => {
            Err(format!("cannot connect to {shown}: no answer in {}s", CONNECT_TIMEOUT.as_secs()))
        }
    }
}

/// Runs one connection until it ends, passing every `events_api` event to
/// `on_event`. `hello` is set (and the channel reported connected in
/// `connections`) once Slack greets the connection.
pub(super) async fn run(
    mut ws: Socket,
    shutdown: &CancellationToken,
    hello: &mut bool,
    connections: &crate::connection::Connections,
    on_event: &mut (dyn FnMut(Value) + Send),
) -> SocketEnd {
    let mut last_seen = Instant::now();
    let mut ping = tokio::time::interval_at(Instant::now() + PING_INTERVAL, PING_INTERVAL);
    loop {
        tokio::select! {
            () = shutdown.cancelled() => {
                let _ = tokio::time::timeout(CLOSE_TIMEOUT, ws.close(None)).await;
                return SocketEnd::Shutdown;
            }
            _ = ping.tick() => {
                if last_seen.elapsed() > STALE_AFTER {
                    tracing::warn!(channel = CHANNEL_NAME, "nothing from Slack for {}s; reconnecting", STALE_AFTER.as_secs());
                    return SocketEnd::Reconnect;
                }
                if ws.send(Message::Ping(Default::default())).await.is_err() {
                    return SocketEnd::Reconnect;
                }
            }
            frame = ws.next() => {
                last_seen = Instant::now();
                let text = match frame {
                    None | Some(Ok(Message::Close(_))) => return SocketEnd::Reconnect,
                    Some(Err(e)) => {
                        tracing::info!(channel = CHANNEL_NAME, "connection lost: {e}");
                        return SocketEnd::Reconnect;
                    }
                    Some(Ok(Message::Text(text))) => text,
                    Some(Ok(_)) => continue,
                };
                let Ok(envelope) = serde_json::from_str::<Value>(&text) else {
                    tracing::debug!(channel = CHANNEL_NAME, "unreadable envelope skipped");
                    continue;
                };
                if let Some(id) = envelope["envelope_id"].as_str() {
                    let ack = json!({ "envelope_id": id }).to_string();
                    if ws.send(Message::text(ack)).await.is_err() {
                        return SocketEnd::Reconnect;
                    }
                }
                match envelope["type"].as_str() {
                    Some("hello") => {
                        *hello = true;
                        connections.set(CHANNEL_NAME, crate::connection::State::Connected);
                        tracing::info!(channel = CHANNEL_NAME, "connected to Slack");
                    }
                    Some("disconnect") => {
                        let reason = envelope["reason"].as_str().unwrap_or("unknown");
                        tracing::info!(channel = CHANNEL_NAME, reason, "Slack asked for a new connection");
                        let _ = tokio::time::timeout(CLOSE_TIMEOUT, ws.close(None)).await;
                        return SocketEnd::Reconnect;
                    }
                    Some("events_api") => {
                        if let Some(event) = envelope.pointer("/payload/event") {
                            on_event(event.clone());
                        }
                    }
                    // A button press: the payload's type (`block_actions`)
                    // tells it from the events above.
                    Some("interactive") if envelope["payload"]["type"] == "block_actions" => {
                        on_event(envelope["payload"].clone());
                    }
                    _ => {}
                }
            }
        }
    }
}
