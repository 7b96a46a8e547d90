//! The web chat's WebSocket: JSON frames both ways.
//!
//! Client to server: `{"type": "message", "content": "...", "images":
//! [{"media_type": "image/png", "data": BASE64}], "model": NAME}` (images
//! optional; `model` one of the `ready` frame's `models`, the chat's agent
//! answering with it from then on);
//! `{"type": "stop"}` cancels the turns the chat's pages asked for (the one
//! running and any waiting, from this page or one open before it);
//! `{"type": "approve", "id", "choice": "once"|"chat"|"project"|"deny",
//! "reason"}` answers an approval request.
//! Server to client: `{"type": "ready", "chat": ID, "session": ID,
//! "history": BOOL, "running": BOOL, "models": [{"id", "spec"}]}` (the
//! conversation the page continues, its history at `/api/sessions/ID` when
//! `history` says it has one; whether a message sent from a page of this
//! chat is still being answered; the models a message may name), then an `approval` frame for every request
//! waiting in the chat (a reload or a second tab shows them again);
//! `{"type": "event",
//! "event": AgentEvent}` while the answer is written (text deltas, tool
//! calls; to every page open on the chat, so a page opened meanwhile sees
//! the turn go on); `{"type": "reply", "content", "reply_to"}` with the
//! final answer;
//! `{"type": "message", "content"}` for messages the agent sends on its own;
//! `{"type": "error", "message"}` when a message was not taken;
//! `{"type": "approval", "id", "tool", "input", "summary"}` when a tool call
//! waits for approval, and `{"type": "approval_resolved", "id", "outcome"}`
//! once it is answered, timed out or cancelled.

use std::net::SocketAddr;
use std::sync::PoisonError;
use std::sync::atomic::Ordering;

use axum::extract::ws::{Message as Frame, WebSocket, WebSocketUpgrade};
use axum::extract::{ConnectInfo, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures_util::{SinkExt, StreamExt};
use serde::Deserialize;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::frames::{ClientFrame, PastedImage, ServerFrame};
use super::limits::{MAX_WS_FRAME_BYTES, MAX_WS_MESSAGE_BYTES, Rate, WS_IDLE_TIMEOUT};
use super::queue::{OutQueue, out_queue};
use super::{App, OWNER, WebContext, WebState};
use crate::approval::button_command;
use crate::bus::{EventTap, InboundMessage};
use crate::sessions::SessionKey;

/// Longest chat id a page may ask for.
const MAX_CHAT_CHARS: usize = 64;

#[derive(Deserialize)]
pub(super) struct SocketQuery {
    token: Option<String>,
    chat: Option<String>,
}

/// Counts an open chat page; the count drops with it.
struct OpenSocket(std::sync::Arc<WebState>);

impl Drop for OpenSocket {
    fn drop(&mut self) {
        self.0.open_sockets.fetch_sub(1, Ordering::Relaxed);
    }
}

/// `GET /ws?token=TOKEN&chat=CHAT_ID`, from a page of the gateway's own
/// origin (or one in `allowed_origins`); clients that send no `Origin`
/// (not browsers) need only the token.
pub(super) async fn upgrade(
    ws: WebSocketUpgrade,
    Query(query): Query<SocketQuery>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    State(app): State<App>,
) -> Response {
    if let Some(origin) = headers.get(header::ORIGIN) {
        let origin = origin.to_str().unwrap_or_default();
        if !app.web.origin_allowed(origin) {
            tracing::warn!(%origin, "web: chat socket from a foreign origin refused");
            let why =
                "this page's origin may not open the chat; add it to [gateway] allowed_origins";
            return (StatusCode::FORBIDDEN, why).into_response();
        }
    }
    if !app.web.authorized(query.token.as_deref()) {
        return (StatusCode::UNAUTHORIZED, "bad or missing token").into_response();
    }
    let max = app.web.options.max_websockets;
    if app.web.open_sockets.fetch_add(1, Ordering::Relaxed) >= max {
        app.web.open_sockets.fetch_sub(1, Ordering::Relaxed);
        let why = format!("{max} chat pages are open already; close one and retry");
        return (StatusCode::SERVICE_UNAVAILABLE, why).into_response();
    }
    let open = OpenSocket(app.web.clone());
    let chat = query.chat.filter(|c| valid_chat(c)).unwrap_or_else(|| "default".into());
    let address = peer.ip().to_string();
    ws.max_message_size(MAX_WS_MESSAGE_BYTES).max_frame_size(MAX_WS_FRAME_BYTES).on_upgrade(
        move |socket| async move {
            talk(socket, chat, address, app).await;
            drop(open);
        },
    )
}

/// True for a chat id a page may use: 1-64 letters, digits, `-` or `_`.
pub(super) fn valid_chat(chat: &str) -> bool {
    !chat.is_empty()
        && chat.len() <= MAX_CHAT_CHARS
        && chat.chars().all(|ch| ch.is_ascii_alphanumeric() || ch == '-' || ch == '_')
}

async fn talk(socket: WebSocket, chat: String, address: String, app: App) {
    let (sink, mut stream) = socket.split();
    let (out, writer) = open_queue(&app, &chat, sink);
    greet(&app, &chat, &out).await;
    loop {
        // A page that says nothing for WS_IDLE_TIMEOUT is dropped (it
        // reconnects when used), and so is one that stopped reading.
        let next = tokio::select! {
            () = out.overflowed() => {
                tracing::warn!(%chat, "web: a chat page stopped reading; disconnected");
                break;
            }
            next = tokio::time::timeout(WS_IDLE_TIMEOUT, stream.next()) => next,
        };
        let Ok(Some(Ok(frame))) = next else { break };
        let text = match frame {
            Frame::Text(t) => t.to_string(),
            Frame::Close(_) => break,
            _ => continue,
        };
        let Some(said) = read_frame(&app, &chat, &out, &text) else { continue };
        if said.content.trim().is_empty() && said.images.is_empty() {
            continue;
        }
        if let Rate::Limited { retry_after_secs, .. } = app.web.per_address.check(&address) {
            let message = format!("too many messages; try again in {retry_after_secs} s");
            send(&out, &ServerFrame::error(&message));
            continue;
        }
        publish(&app, &chat, &out, said);
    }
    writer.abort();
    close_queue(&app, &chat, &out);
}

/// This page's outgoing queue, listed under its chat, and the task that
/// writes it to the socket.
fn open_queue(
    app: &App,
    chat: &str,
    mut sink: futures_util::stream::SplitSink<WebSocket, Frame>,
) -> (OutQueue<String>, tokio::task::JoinHandle<()>) {
    let (out, mut out_rx) = out_queue::<String>(app.web.options.max_queued_bytes);
    app.web
        .sockets
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .entry(chat.to_string())
        .or_default()
        .push(out.clone());
    let writer = tokio::spawn(async move {
        while let Some(text) = out_rx.recv().await {
            tokio::select! {
                biased;
                // A page that stopped reading: give up the write it blocks.
                () = out_rx.overflowed() => break,
                sent = sink.send(Frame::Text(text.into())) => if sent.is_err() { break },
            }
        }
    });
    (out, writer)
}

/// Takes this page's queue off its chat's list.
fn close_queue(app: &App, chat: &str, out: &OutQueue<String>) {
    let mut sockets = app.web.sockets.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(list) = sockets.get_mut(chat) {
        list.retain(|queue| !queue.same_queue(out));
        if list.is_empty() {
            sockets.remove(chat);
        }
    }
}

/// The first frames a page gets: `ready` (the chat's session as the store
/// every gateway writes has it, whether turns run, the models), then the
/// approval requests waiting in the chat (a reload, another tab).
async fn greet(app: &App, chat: &str, out: &OutQueue<String>) {
    let gateway = app.web.gateway.get().cloned();
    let (session, history) = match &gateway {
        Some(gw) => {
            let history = gw.history();
            let session = history
                .current_session(&SessionKey::new("web", chat))
                .await
                .inspect_err(|e| tracing::warn!(%chat, "web: {e}"))
                .ok();
            // A new chat has nothing to read: the page does not ask (no 404).
            let kept = match &session {
                Some(id) => history.exists(id).await.unwrap_or(true),
                None => false,
            };
            (session, kept)
        }
        None => (None, false),
    };
    let running = turns(&app.web, chat, |t| !t.unanswered.is_empty());
    let models = page_models(&app.web.options, gateway.as_deref());
    let ready =
        ServerFrame::Ready { chat, session: session.as_deref(), history, running, models: &models };
    send(out, &ready);
    if let Some(gw) = &gateway {
        for prompt in gw.approvals.waiting_in("web", chat).await {
            send(out, &ServerFrame::approval(&prompt));
        }
    }
}

/// What a page said that becomes a message.
struct Said {
    content: String,
    images: Vec<crate::media::Attachment>,
    model: Option<crate::api_turn::ApiTurn>,
}

/// Reads one frame: a message (with its pictures and model), an approval
/// answer (as the command it stands for), or a stop (done here: `None`).
/// A frame that is refused is answered with an error frame, and is `None`.
fn read_frame(app: &App, chat: &str, out: &OutQueue<String>, text: &str) -> Option<Said> {
    let refused = |why: &str| {
        send(out, &ServerFrame::error(why));
        None
    };
    match ClientFrame::parse(text) {
        Ok(ClientFrame::Message(frame)) => {
            let images = match pasted_images(&frame.images) {
                Ok(found) => found,
                Err(why) => return refused(&why),
            };
            let model = match chosen_model(&app.web.options, frame.model.as_deref()) {
                Ok(turn) => turn,
                Err(why) => return refused(&why),
            };
            Some(Said { content: frame.content.unwrap_or_default(), images, model })
        }
        // Stop: cancel the turns the chat's pages asked for (running or waiting).
        Ok(ClientFrame::Stop) => {
            turns(&app.web, chat, |t| {
                t.stop.cancel();
                t.stop = CancellationToken::new();
            });
            None
        }
        // An answer travels as the command it stands for, so it is
        // checked like one typed in any chat (this chat, its owner).
        Ok(ClientFrame::Approve(answer)) => {
            let id = &answer.id;
            if id.is_empty() || !id.chars().all(|c| c.is_ascii_alphanumeric()) {
                return refused("id: expected an approval id (letters and digits)");
            }
            let reason = answer.reason.unwrap_or_default().replace('\n', " ");
            let content =
                format!("{} {reason}", button_command(id, answer.choice.word())).trim().to_string();
            Some(Said { content, images: Vec::new(), model: None })
        }
        Err(why) => refused(&why),
    }
}

/// Publishes what the page said as the chat owner's message. Events go to
/// the queues of the chat's pages, the answer after them (the worker calls
/// the tap for every event before it delivers the answer); a page opened
/// meanwhile gets the rest.
fn publish(app: &App, chat: &str, out: &OutQueue<String>, said: Said) {
    let decision = is_decision(&said.content);
    let mut message = InboundMessage::new("web", OWNER, chat.to_string(), said.content);
    let id = message.id.clone();
    // Answers to approval requests get no reply of their own.
    let stop = turns(&app.web, chat, |t| {
        if !decision {
            t.unanswered.insert(id.clone());
        }
        t.stop.child_token()
    });
    let (web, to) = (app.web.clone(), chat.to_string());
    let tap = EventTap::new(move |event| {
        if matches!(event, ferroclaw_protocol::AgentEvent::Finished { .. }) {
            turns(&web, &to, |t| t.unanswered.remove(&id));
        }
        send_to_chat(&web, &to, &ServerFrame::Event { event });
    });
    message = message.with_tap(tap).with_cancel(stop);
    for image in &said.images {
        crate::media::attach(&mut message, image);
    }
    if let Some(turn) = &said.model {
        turn.attach(&mut message);
    }
    let id = message.id.clone();
    if let Err(e) = app.bus.publish(message) {
        turns(&app.web, chat, |t| t.unanswered.remove(&id));
        send(out, &ServerFrame::error(&e.to_string()));
    }
}

/// The models a page may pick for its messages: the gateway's own (first)
/// and the aliases of `[channels.web] models`, each with what it stands for.
fn page_models(options: &super::WebOptions, gateway: Option<&WebContext>) -> Value {
    let own = gateway.and_then(|gw| gw.runtime.config().model_spec().ok()).unwrap_or_default();
    let mut list = vec![json!({"id": options.model_name, "spec": own})];
    for (alias, spec) in options.models.iter().filter(|(a, _)| **a != options.model_name) {
        list.push(json!({"id": alias, "spec": spec}));
    }
    Value::Array(list)
}

/// What a message frame's `model` asks of its turn: `None` (no `model`:
/// the chat's agent keeps the model it has), the gateway's own model, or
/// the `PROVIDER/MODEL` of an alias; an unknown name is refused.
fn chosen_model(
    options: &super::WebOptions,
    name: Option<&str>,
) -> Result<Option<crate::api_turn::ApiTurn>, String> {
    let Some(name) = name.map(str::trim).filter(|n| !n.is_empty()) else { return Ok(None) };
    let spec = match options.models.get(name) {
        Some(spec) => Some(spec.clone()),
        None if name == options.model_name => None,
        None => {
            return Err(format!(
                "no model {name:?} here: pick {} or an alias of [channels.web] models",
                options.model_name
            ));
        }
    };
    Ok(Some(crate::api_turn::ApiTurn { model: spec, ..Default::default() }))
}

/// True for a message that answers an approval request (`/approve`, `/deny`).
fn is_decision(content: &str) -> bool {
    matches!(
        crate::commands::ChatCommand::parse(content),
        Some(crate::commands::ChatCommand::Decide { .. })
    )
}

/// Runs `f` on the turns of web chat `chat` (created when it has none).
pub(super) fn turns<T>(web: &WebState, chat: &str, f: impl FnOnce(&mut ChatTurns) -> T) -> T {
    let mut all = web.chats.lock().unwrap_or_else(PoisonError::into_inner);
    let entry = all.entry(chat.to_string()).or_default();
    let out = f(entry);
    // A chat with nothing going on keeps nothing.
    if entry.unanswered.is_empty() {
        all.remove(chat);
    }
    out
}

/// The messages a web chat's pages sent that are not answered yet, and how
/// to stop them (any page of the chat may: the one that sent them may have
/// been reloaded).
#[derive(Default)]
pub(super) struct ChatTurns {
    /// Cancels the chat's turns asked from its pages; replaced after each stop.
    pub stop: CancellationToken,
    /// Ids of messages sent from a page and not yet answered.
    pub unanswered: std::collections::HashSet<String>,
}

/// The images of a message frame: only PNG, JPEG, GIF and WebP, checked by
/// their bytes.
fn pasted_images(list: &[PastedImage]) -> Result<Vec<crate::media::Attachment>, String> {
    use base64::Engine;
    list.iter()
        .enumerate()
        .map(|(i, image)| {
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(&image.data)
                .map_err(|_| format!("image {}: data is not base64", i + 1))?;
            let file = crate::media::Attachment {
                name: format!("pasted-{}", i + 1),
                media_type: image.media_type.clone(),
                bytes,
            };
            match file.image_type() {
                Some(t) => Ok(crate::media::Attachment { media_type: t.to_string(), ..file }),
                None => Err(format!("image {}: not a PNG, JPEG, GIF or WebP image", i + 1)),
            }
        })
        .collect()
}

/// Queues a frame for every page open on `chat`; false when none is.
pub(super) fn send_to_chat(app: &WebState, chat: &str, frame: &ServerFrame<'_>) -> bool {
    let mut sockets = app.sockets.lock().unwrap_or_else(PoisonError::into_inner);
    let text = frame.text();
    sockets.get_mut(chat).is_some_and(|list| {
        list.retain(|queue| queue.push(text.clone(), text.len()));
        !list.is_empty()
    })
}

/// Queues a frame for the page; a page too far behind is being disconnected.
fn send(out: &OutQueue<String>, frame: &ServerFrame<'_>) {
    let text = frame.text();
    let bytes = text.len();
    out.push(text, bytes);
}
