//! One connection to Discord's Gateway WebSocket: wait for HELLO, IDENTIFY
//! (or RESUME a session that dropped), heartbeat at the interval HELLO gave
//! (the first beat after a random share of it, as Discord asks), and hand
//! every dispatch to the channel until the connection ends.
//!
//! The connection ends with a [`SessionEnd`] that tells the channel what to
//! do next: stop, connect again (resuming when [`SessionState`] still has a
//! session), or give up because Discord refused the bot for good (bad token,
//! intents not enabled).

use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::net::TcpStream;
use tokio::time::Instant;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};
use tokio_util::sync::CancellationToken;

use super::{CHANNEL_NAME, INTENTS};
use crate::channel::ChannelError;

/// How long connecting (TCP, TLS, WebSocket handshake) may take.
pub(super) const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);
/// How long to wait for HELLO after connecting; Discord sends it at once.
pub(super) const HELLO_TIMEOUT: Duration = Duration::from_secs(20);
/// How long closing a connection may take before it is simply dropped.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(2);
/// The close code this client uses when it drops a connection to resume it:
/// any code but 1000/1001 keeps the session resumable.
const RESUMABLE_CLOSE: u16 = 4000;
/// Discord asks for a random 1-5 s wait after an INVALID_SESSION.
const INVALID_SESSION_WAIT_MS: std::ops::Range<u64> = 1000..5000;

/// Gateway opcodes (Discord developer docs, "Gateway Opcodes").
mod op {
    pub(super) const DISPATCH: u8 = 0;
    pub(super) const HEARTBEAT: u8 = 1;
    pub(super) const IDENTIFY: u8 = 2;
    pub(super) const RESUME: u8 = 6;
    pub(super) const RECONNECT: u8 = 7;
    pub(super) const INVALID_SESSION: u8 = 9;
    pub(super) const HELLO: u8 = 10;
    pub(super) const HEARTBEAT_ACK: u8 = 11;
}

/// A Gateway WebSocket connection.
pub(super) type Socket = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// What outlives one connection: enough to resume, and the bot's own id.
#[derive(Debug, Default, Clone)]
pub(super) struct SessionState {
    /// The bot's user id (from READY), to skip its own messages and spot mentions.
    pub bot_id: Option<String>,
    /// The session to resume (from READY).
    pub session_id: Option<String>,
    /// Where to resume it (READY's `resume_gateway_url`).
    pub resume_url: Option<String>,
    /// The last sequence number received.
    pub seq: Option<u64>,
    /// True once this connection got READY or RESUMED.
    pub ready: bool,
}

impl SessionState {
    /// True when a dropped connection can be resumed rather than identified anew.
    pub(super) fn can_resume(&self) -> bool {
        self.session_id.is_some() && self.resume_url.is_some()
    }

    /// Forgets the session, so the next connection identifies anew.
    pub(super) fn forget(&mut self) {
        self.session_id = None;
        self.resume_url = None;
        self.seq = None;
    }
}

/// How a connection ended.
#[derive(Debug)]
pub(super) enum SessionEnd {
    /// Shutdown was requested.
    Shutdown,
    /// The connection dropped or Discord asked for a new one: connect again.
    Reconnect,
    /// Discord refused the bot for good.
    Fatal(ChannelError),
}

/// A Gateway payload: opcode, data, sequence number, event name.
#[derive(Deserialize)]
struct Payload {
    op: u8,
    #[serde(default)]
    d: Value,
    #[serde(default)]
    s: Option<u64>,
    #[serde(default)]
    t: Option<String>,
}

/// Opens a WebSocket to `url`.
pub(super) async fn connect(url: &str) -> Result<Socket, String> {
    match tokio::time::timeout(CONNECT_TIMEOUT, tokio_tungstenite::connect_async(url)).await {
        Ok(Ok((socket, _))) => Ok(socket),
        Ok(Err(e)) => Err(format!("cannot connect to {url}: {e}")),
        Err(_) => {
            Err(format!("cannot connect to {url}: no answer in {}s", CONNECT_TIMEOUT.as_secs()))
        }
    }
}

/// Runs one connection until it ends, passing every dispatch other than
/// READY and RESUMED to `on_dispatch` with the event name, its data and the
/// bot's id; READY and RESUMED report the channel connected in `connections`.
///
/// The steps, in order: wait for HELLO, greet (RESUME or IDENTIFY), then the
/// event loop, which beats the heartbeat and handles every frame until one
/// of them ends the connection; the [`Stop`] that ended it closes the socket.
pub(super) async fn run(
    mut ws: Socket,
    token: &str,
    state: &mut SessionState,
    shutdown: &CancellationToken,
    connections: &crate::connection::Connections,
    on_dispatch: &mut (dyn FnMut(&str, Value, Option<&str>) + Send),
) -> SessionEnd {
    let interval = match hello(&mut ws, shutdown).await {
        Ok(interval) => interval,
        Err(stop) => return stop.finish(ws, shutdown).await,
    };
    if send(&mut ws, &greeting(token, state)).await.is_err() {
        return SessionEnd::Reconnect;
    }
    let mut connection =
        Connection { ws, state, connections, on_dispatch, heartbeat: Heartbeat::new(interval) };
    let stop = connection.event_loop(shutdown).await;
    stop.finish(connection.ws, shutdown).await
}

/// Waits for HELLO (at most [`HELLO_TIMEOUT`]) and returns its heartbeat
/// interval, or how to stop when shutdown comes or HELLO does not.
async fn hello(ws: &mut Socket, shutdown: &CancellationToken) -> Result<Duration, Stop> {
    tokio::select! {
        () = shutdown.cancelled() => Err(Stop::closing(CloseCode::Normal, SessionEnd::Shutdown)),
        hello = tokio::time::timeout(HELLO_TIMEOUT, await_hello(ws)) => match hello {
            Ok(Some(interval)) => Ok(interval),
            Ok(None) => Err(Stop::dropped()),
            Err(_) => {
                tracing::warn!(channel = CHANNEL_NAME, "no HELLO within {}s; reconnecting", HELLO_TIMEOUT.as_secs());
                Err(Stop::dropped())
            }
        },
    }
}

/// The first payload after HELLO: RESUME when `state` holds a session to
/// resume, IDENTIFY otherwise.
fn greeting(token: &str, state: &SessionState) -> Value {
    match (&state.session_id, state.can_resume()) {
        (Some(session_id), true) => json!({
            "op": op::RESUME,
            "d": { "token": token, "session_id": session_id, "seq": state.seq },
        }),
        _ => json!({
            "op": op::IDENTIFY,
            "d": {
                "token": token,
                "intents": INTENTS,
                "properties": { "os": std::env::consts::OS, "browser": "ferroclaw", "device": "ferroclaw" },
            },
        }),
    }
}

/// How a connection stops: the end to report, the close code to send first
/// (none when the socket is already gone), and how long Discord asked to
/// wait before the next connection.
struct Stop {
    end: SessionEnd,
    close: Option<CloseCode>,
    wait: Option<Duration>,
}

impl Stop {
    /// The connection is gone (or sending failed): connect again.
    fn dropped() -> Self {
        Self::ended(SessionEnd::Reconnect)
    }

    /// Discord ended the connection itself: report `end` without closing.
    fn ended(end: SessionEnd) -> Self {
        Stop { end, close: None, wait: None }
    }

    /// Close the socket with `code`, then report `end`.
    fn closing(code: CloseCode, end: SessionEnd) -> Self {
        Stop { end, close: Some(code), wait: None }
    }

    /// Closes the socket as asked, waits as asked (unless shutdown comes
    /// first), and says how the connection ended.
    async fn finish(self, ws: Socket, shutdown: &CancellationToken) -> SessionEnd {
        if let Some(code) = self.close {
            close(ws, code).await;
        }
        let Some(wait) = self.wait else { return self.end };
        tokio::select! {
            () = shutdown.cancelled() => SessionEnd::Shutdown,
            () = tokio::time::sleep(wait) => self.end,
        }
    }
}

/// The heartbeat schedule: the first beat after a random share of the
/// interval, then one per interval; a beat due while the last one has no
/// ACK yet means the connection is dead.
struct Heartbeat {
    interval: Duration,
    next: Instant,
    awaiting_ack: bool,
}

impl Heartbeat {
    fn new(interval: Duration) -> Self {
        Heartbeat {
            interval,
            next: Instant::now() + interval.mul_f64(fastrand::f64()),
            awaiting_ack: false,
        }
    }

    /// Sends the beat that is due, or stops when the last one was never acknowledged.
    async fn beat(&mut self, ws: &mut Socket, seq: Option<u64>) -> Result<(), Stop> {
        if self.awaiting_ack {
            tracing::warn!(channel = CHANNEL_NAME, "no heartbeat ACK; reconnecting");
            return Err(Stop::closing(CloseCode::from(RESUMABLE_CLOSE), SessionEnd::Reconnect));
        }
        send(ws, &heartbeat(seq)).await.map_err(|()| Stop::dropped())?;
        self.awaiting_ack = true;
        self.next = Instant::now() + self.interval;
        Ok(())
    }
}

/// A connection past its greeting: the socket, what outlives it, and where
/// its events go.
struct Connection<'a> {
    ws: Socket,
    state: &'a mut SessionState,
    connections: &'a crate::connection::Connections,
    on_dispatch: &'a mut (dyn FnMut(&str, Value, Option<&str>) + Send),
    heartbeat: Heartbeat,
}

impl Connection<'_> {
    /// Beats the heartbeat and handles frames until something ends the connection.
    async fn event_loop(&mut self, shutdown: &CancellationToken) -> Stop {
        loop {
            let step = tokio::select! {
                () = shutdown.cancelled() => Err(Stop::closing(CloseCode::Normal, SessionEnd::Shutdown)),
                () = tokio::time::sleep_until(self.heartbeat.next) => {
                    self.heartbeat.beat(&mut self.ws, self.state.seq).await
                }
                frame = self.ws.next() => self.on_frame(frame).await,
            };
            if let Err(stop) = step {
                return stop;
            }
        }
    }

    /// Handles one frame from the socket: text frames carry payloads; a close
    /// frame or the end of the stream ends the connection.
    async fn on_frame(
        &mut self,
        frame: Option<Result<Message, tokio_tungstenite::tungstenite::Error>>,
    ) -> Result<(), Stop> {
        let text = match frame {
            None => return Err(Stop::dropped()),
            Some(Err(e)) => {
                tracing::info!(channel = CHANNEL_NAME, "connection lost: {e}");
                return Err(Stop::dropped());
            }
            Some(Ok(Message::Close(frame))) => {
                return Err(Stop::ended(closed_by_discord(frame, self.state)));
            }
            Some(Ok(Message::Text(text))) => text,
            Some(Ok(_)) => return Ok(()),
        };
        let Ok(payload) = serde_json::from_str::<Payload>(&text) else {
            tracing::debug!(channel = CHANNEL_NAME, "unreadable gateway payload skipped");
            return Ok(());
        };
        if payload.s.is_some() {
            self.state.seq = payload.s;
        }
        self.on_payload(payload).await
    }

    /// Acts on one payload by its opcode.
    async fn on_payload(&mut self, payload: Payload) -> Result<(), Stop> {
        match payload.op {
            op::DISPATCH => self.dispatch(payload.t.unwrap_or_default(), payload.d),
            op::HEARTBEAT => {
                // Discord asks for a beat now; it does not move the schedule.
                send(&mut self.ws, &heartbeat(self.state.seq))
                    .await
                    .map_err(|()| Stop::dropped())?;
            }
            op::HEARTBEAT_ACK => self.heartbeat.awaiting_ack = false,
            op::RECONNECT => {
                return Err(Stop::closing(CloseCode::from(RESUMABLE_CLOSE), SessionEnd::Reconnect));
            }
            op::INVALID_SESSION => {
                if payload.d.as_bool() != Some(true) {
                    self.state.forget();
                }
                let wait = Duration::from_millis(fastrand::u64(INVALID_SESSION_WAIT_MS));
                let close = Some(CloseCode::from(RESUMABLE_CLOSE));
                return Err(Stop { end: SessionEnd::Reconnect, close, wait: Some(wait) });
            }
            _ => {}
        }
        Ok(())
    }

    /// READY and RESUMED mark the channel connected; every other event goes
    /// to the channel.
    fn dispatch(&mut self, event: String, d: Value) {
        match event.as_str() {
            "READY" | "RESUMED" => {
                if event == "READY" {
                    ready(d, self.state);
                }
                self.state.ready = true;
                self.connections.set(CHANNEL_NAME, crate::connection::State::Connected);
            }
            _ => (self.on_dispatch)(&event, d, self.state.bot_id.as_deref()),
        }
    }
}

/// A HEARTBEAT payload carrying the last sequence number received.
fn heartbeat(seq: Option<u64>) -> Value {
    json!({ "op": op::HEARTBEAT, "d": seq })
}

/// Reads until HELLO and returns its heartbeat interval; `None` when the
/// connection ends first.
async fn await_hello(ws: &mut Socket) -> Option<Duration> {
    while let Some(frame) = ws.next().await {
        let Ok(Message::Text(text)) = frame else {
            if frame.is_err() {
                return None;
            }
            continue;
        };
        let Ok(payload) = serde_json::from_str::<Payload>(&text) else { continue };
        if payload.op == op::HELLO {
            let ms = payload.d.get("heartbeat_interval").and_then(Value::as_u64)?;
            return Some(Duration::from_millis(ms.max(1)));
        }
    }
    None
}

/// Takes the session id, resume URL and bot id from READY.
fn ready(d: Value, state: &mut SessionState) {
    let text = |v: &Value| v.as_str().map(str::to_string);
    state.session_id = d.get("session_id").and_then(text);
    state.resume_url = d.get("resume_gateway_url").and_then(text);
    if let Some(id) = d.pointer("/user/id").and_then(text) {
        state.bot_id = Some(id);
    }
    state.ready = true;
    tracing::info!(channel = CHANNEL_NAME, "connected to Discord");
}

/// What Discord's close code means for the next connection
/// (Discord developer docs, "Gateway Close Event Codes").
fn closed_by_discord(frame: Option<CloseFrame>, state: &mut SessionState) -> SessionEnd {
    let Some(frame) = frame else { return SessionEnd::Reconnect };
    let code = u16::from(frame.code);
    let fatal = |why: &str| {
        SessionEnd::Fatal(ChannelError::Config {
            channel: CHANNEL_NAME.into(),
            message: format!("Discord closed the gateway with {code} ({why}): {}", frame.reason),
        })
    };
    match code {
        4004 => fatal("authentication failed: check the bot token"),
        4010..=4013 => fatal("invalid shard, API version or intents"),
        4014 => fatal(
            "disallowed intents: enable MESSAGE CONTENT INTENT under Bot in the Discord developer portal",
        ),
        4007 | 4009 => {
            state.forget();
            SessionEnd::Reconnect
        }
        _ => {
            tracing::info!(
                channel = CHANNEL_NAME,
                code,
                "gateway closed the connection; reconnecting"
            );
            SessionEnd::Reconnect
        }
    }
}

async fn send(ws: &mut Socket, payload: &Value) -> Result<(), ()> {
    ws.send(Message::text(payload.to_string())).await.map_err(|e| {
        tracing::info!(channel = CHANNEL_NAME, "send on the gateway failed: {e}");
    })
}

/// Closes the connection with `code`, waiting at most [`CLOSE_TIMEOUT`].
async fn close(mut ws: Socket, code: CloseCode) {
    let frame = CloseFrame { code, reason: "".into() };
    let _ = tokio::time::timeout(CLOSE_TIMEOUT, ws.close(Some(frame))).await;
}
