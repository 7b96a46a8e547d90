//! The Discord channel against a fake Discord on 127.0.0.1: REST
//! (`/api/gateway/bot`, `/api/channels/{id}/messages`) and the Gateway
//! WebSocket (`/gw/`, and `/resume/` as the resume URL), driven step by step
//! by each test.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use ferroclaw_core::Approval;
use ferroclaw_gateway::SessionKey;
use ferroclaw_gateway::approval::{ApprovalBroker, Decided};
use ferroclaw_gateway::connection::State as Connection;
use ferroclaw_gateway::discord::{DiscordChannel, DiscordConfig};
use ferroclaw_gateway::outbox::Outbox;
use ferroclaw_gateway::{
    ANY_CHANNEL, Channel, ChannelError, ChannelSettings, InboundMessage, MessageBus,
    OutboundMessage,
};
use ferroclaw_protocol::ToolCall;
use serde_json::{Value, json};

#[path = "support/fake_ws.rs"]
mod fake_ws;
#[path = "support/hostile_files.rs"]
mod hostile_files;
use fake_ws::{auth, recv, send};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

const TOKEN: &str = "bot-token";
/// How long a test waits for something the channel should do at once.
const WAIT: Duration = Duration::from_secs(5);
/// A heartbeat interval long enough that no beat interrupts a test.
const QUIET_INTERVAL_MS: u64 = 60_000;

/// What the fake saw and what it should answer.
#[derive(Default)]
struct Seen {
    /// (channel id, body, Authorization header, when) of each message POST.
    posts: Mutex<Vec<(String, Value, String, Instant)>>,
    /// Authorization headers of `GET /gateway/bot`.
    gateway_lookups: Mutex<Vec<String>>,
    /// Query strings of WebSocket connections.
    queries: Mutex<Vec<String>>,
    /// (interaction id, token, body) of each interaction callback.
    callbacks: Mutex<Vec<(String, String, Value)>>,
    /// How many message POSTs to refuse with 429 before accepting.
    rate_limits: AtomicU32,
}

struct FakeDiscord {
    addr: String,
    seen: Arc<Seen>,
    /// Each WebSocket connection, with the path it came in on.
    sockets: mpsc::UnboundedReceiver<(&'static str, WebSocket)>,
}

#[derive(Clone)]
struct App {
    seen: Arc<Seen>,
    addr: String,
    sockets: mpsc::UnboundedSender<(&'static str, WebSocket)>,
}

impl FakeDiscord {
    async fn start() -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let (tx, sockets) = mpsc::unbounded_channel();
        let seen = Arc::new(Seen::default());
        let app = App { seen: seen.clone(), addr: addr.clone(), sockets: tx };
        let router = Router::new()
            .route("/api/gateway/bot", get(gateway_bot))
            .route("/api/channels/{id}/messages", post(create_message))
            .route("/api/interactions/{id}/{token}/callback", post(interaction_callback))
            .route("/cdn/pic.png", get(|| async { PNG.to_vec() }))
            .route("/cdn/endless.bin", get(|| async { hostile_files::endless() }))
            .route("/cdn/huge.bin", get(|| async { hostile_files::declared_huge() }))
            .route("/gw/", get(|s, q, u| upgrade("gw", s, q, u)))
            .route("/resume/", get(|s, q, u| upgrade("resume", s, q, u)))
            .with_state(app);
        tokio::spawn(async move { axum::serve(listener, router).await });
        FakeDiscord { addr, seen, sockets }
    }

    fn config(&self) -> DiscordConfig {
        let mut config = DiscordConfig::new(TOKEN);
        config.api_base = format!("http://{}/api", self.addr);
        config
    }

    /// The next connection: sends HELLO and returns the path, the socket and
    /// the client's IDENTIFY or RESUME.
    async fn accept(&mut self, heartbeat_ms: u64) -> (&'static str, WebSocket, Value) {
        let (path, mut ws) =
            tokio::time::timeout(WAIT, self.sockets.recv()).await.expect("no connection").unwrap();
        send(&mut ws, json!({ "op": 10, "d": { "heartbeat_interval": heartbeat_ms } })).await;
        let greeting = recv(&mut ws).await;
        (path, ws, greeting)
    }

    /// Accepts a connection, checks it identifies, and answers READY (seq 1).
    async fn accept_ready(&mut self, heartbeat_ms: u64) -> WebSocket {
        let (_, mut ws, identify) = self.accept(heartbeat_ms).await;
        assert_eq!(identify["op"], 2, "{identify}");
        let resume_url = format!("ws://{}/resume", self.addr);
        let ready = json!({ "session_id": "S1", "resume_gateway_url": resume_url, "user": { "id": "BOT" } });
        send(&mut ws, json!({ "op": 0, "t": "READY", "s": 1, "d": ready })).await;
        ws
    }

    fn posts(&self) -> Vec<(String, Value, String, Instant)> {
        self.seen.posts.lock().unwrap().clone()
    }
}

async fn gateway_bot(State(app): State<App>, headers: HeaderMap) -> Json<Value> {
    app.seen.gateway_lookups.lock().unwrap().push(auth(&headers));
    Json(json!({ "url": format!("ws://{}/gw", app.addr), "shards": 1 }))
}

async fn create_message(
    State(app): State<App>,
    Path(id): Path<String>,
    headers: HeaderMap,
    raw: axum::body::Bytes,
) -> Response {
    // JSON, or a file upload kept as text.
    let body = serde_json::from_slice(&raw)
        .unwrap_or_else(|_| json!({ "multipart": String::from_utf8_lossy(&raw) }));
    app.seen.posts.lock().unwrap().push((id, body, auth(&headers), Instant::now()));
    let limited =
        app.seen.rate_limits.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1));
    if limited.is_ok() {
        let body = json!({ "message": "You are being rate limited.", "retry_after": 0.3, "global": false });
        return (StatusCode::TOO_MANY_REQUESTS, Json(body)).into_response();
    }
    Json(json!({ "id": "reply" })).into_response()
}

async fn interaction_callback(
    State(app): State<App>,
    Path((id, token)): Path<(String, String)>,
    Json(body): Json<Value>,
) -> StatusCode {
    app.seen.callbacks.lock().unwrap().push((id, token, body));
    StatusCode::NO_CONTENT
}

async fn upgrade(
    path: &'static str,
    State(app): State<App>,
    RawQuery(query): RawQuery,
    ws: WebSocketUpgrade,
) -> Response {
    app.seen.queries.lock().unwrap().push(query.unwrap_or_default());
    ws.on_upgrade(move |socket| async move {
        let _ = app.sockets.send((path, socket));
    })
}

/// Runs the channel's receiving side; the bus's messages arrive on the receiver.
fn start(
    channel: DiscordChannel,
) -> (mpsc::Receiver<InboundMessage>, CancellationToken, JoinHandle<Result<(), ChannelError>>) {
    let bus = MessageBus::new(16);
    let inbound = bus.subscribe(ANY_CHANNEL);
    let shutdown = CancellationToken::new();
    let stop = shutdown.clone();
    let task = tokio::spawn(async move { channel.start(bus, stop).await });
    (inbound, shutdown, task)
}

async fn next_message(inbound: &mut mpsc::Receiver<InboundMessage>) -> InboundMessage {
    tokio::time::timeout(WAIT, inbound.recv()).await.expect("nothing on the bus").unwrap()
}

fn message_create(seq: u64, author: &str, guild: Option<&str>, content: &str) -> Value {
    let d = json!({
        "id": format!("msg{seq}"), "channel_id": "C9", "guild_id": guild, "type": 0, "content": content,
        "author": { "id": author, "username": "ann", "bot": author == "BOT" },
        "mentions": if content.contains("<@BOT>") { json!([{ "id": "BOT" }]) } else { json!([]) },
    });
    json!({ "op": 0, "t": "MESSAGE_CREATE", "s": seq, "d": d })
}

#[tokio::test]
async fn it_says_hello_identifies_with_token_and_intents_and_heartbeats_the_last_seq() {
    let mut fake = FakeDiscord::start().await;
    let (_inbound, shutdown, task) = start(DiscordChannel::new(fake.config()).unwrap());
    let (path, mut ws, identify) = fake.accept(100).await;
    assert_eq!(path, "gw", "the URL comes from GET /gateway/bot");
    assert_eq!(fake.seen.gateway_lookups.lock().unwrap().as_slice(), [format!("Bot {TOKEN}")]);
    assert_eq!(fake.seen.queries.lock().unwrap()[0], "v=10&encoding=json");
    assert_eq!(identify["op"], 2);
    assert_eq!(identify["d"]["token"], TOKEN);
    assert_eq!(identify["d"]["intents"], (1 << 9) | (1 << 12) | (1 << 15));
    send(&mut ws, json!({ "op": 0, "t": "READY", "s": 1, "d": { "session_id": "S1", "user": { "id": "BOT" } } }))
        .await;
    let beat = recv(&mut ws).await;
    assert_eq!(beat, json!({ "op": 1, "d": 1 }));
    send(&mut ws, json!({ "op": 11 })).await;
    send(&mut ws, json!({ "op": 0, "t": "GUILD_CREATE", "s": 2, "d": {} })).await;
    let beat = recv(&mut ws).await;
    assert_eq!(beat, json!({ "op": 1, "d": 2 }), "the heartbeat carries the last sequence number");
    send(&mut ws, json!({ "op": 1 })).await;
    assert_eq!(recv(&mut ws).await["op"], 1, "a heartbeat request is answered at once");
    shutdown.cancel();
    assert!(task.await.unwrap().is_ok());
}

#[tokio::test]
async fn a_persons_message_reaches_the_bus_with_author_channel_and_content() {
    let mut fake = FakeDiscord::start().await;
    let (mut inbound, shutdown, _task) = start(DiscordChannel::new(fake.config()).unwrap());
    let mut ws = fake.accept_ready(QUIET_INTERVAL_MS).await;
    send(&mut ws, message_create(2, "U1", None, "hello there")).await;
    let m = next_message(&mut inbound).await;
    assert_eq!(
        (m.channel.as_str(), m.sender.as_str(), m.chat_id.as_str()),
        ("discord", "U1", "C9")
    );
    assert_eq!(m.content, "hello there");
    assert_eq!(m.metadata["message_id"], "msg2");
    send(&mut ws, message_create(3, "U1", Some("G1"), "<@BOT> what time is it?")).await;
    let m = next_message(&mut inbound).await;
    assert_eq!(m.content, "what time is it?", "the mention is taken out");
    assert_eq!(m.metadata["guild_id"], "G1");
    shutdown.cancel();
}

#[tokio::test]
async fn the_bots_own_messages_and_unmentioned_server_chatter_are_ignored() {
    let mut fake = FakeDiscord::start().await;
    let (mut inbound, shutdown, _task) = start(DiscordChannel::new(fake.config()).unwrap());
    let mut ws = fake.accept_ready(QUIET_INTERVAL_MS).await;
    send(&mut ws, message_create(2, "BOT", None, "my own answer")).await;
    send(&mut ws, message_create(3, "U1", Some("G1"), "people talking")).await;
    send(&mut ws, message_create(4, "U1", None, "for the agent")).await;
    assert_eq!(next_message(&mut inbound).await.content, "for the agent");
    assert!(inbound.try_recv().is_err());
    shutdown.cancel();
}

#[tokio::test]
async fn a_dropped_connection_resumes_on_the_resume_url_with_session_and_last_seq() {
    let mut fake = FakeDiscord::start().await;
    let (mut inbound, shutdown, _task) = start(DiscordChannel::new(fake.config()).unwrap());
    let mut ws = fake.accept_ready(QUIET_INTERVAL_MS).await;
    send(&mut ws, message_create(5, "U1", None, "before the drop")).await;
    next_message(&mut inbound).await;
    drop(ws);
    let (path, mut ws, resume) = fake.accept(QUIET_INTERVAL_MS).await;
    assert_eq!(path, "resume");
    assert_eq!(resume, json!({ "op": 6, "d": { "token": TOKEN, "session_id": "S1", "seq": 5 } }));
    send(&mut ws, json!({ "op": 0, "t": "RESUMED", "s": 6, "d": {} })).await;
    send(&mut ws, message_create(7, "U1", None, "after the drop")).await;
    assert_eq!(next_message(&mut inbound).await.content, "after the drop");
    shutdown.cancel();
}

#[tokio::test]
async fn a_missed_heartbeat_ack_drops_the_connection_and_resumes() {
    let mut fake = FakeDiscord::start().await;
    let (_inbound, shutdown, _task) = start(DiscordChannel::new(fake.config()).unwrap());
    let mut ws = fake.accept_ready(50).await;
    assert_eq!(recv(&mut ws).await["op"], 1);
    // No ACK: at the next beat the client gives up on this connection.
    let (path, _ws, resume) = fake.accept(QUIET_INTERVAL_MS).await;
    assert_eq!((path, resume["op"].as_u64()), ("resume", Some(6)));
    assert_eq!(resume["d"]["seq"], 1);
    shutdown.cancel();
}

#[tokio::test]
async fn a_reconnect_request_resumes_and_a_lost_session_identifies_anew() {
    let mut fake = FakeDiscord::start().await;
    let mut config = fake.config();
    config.gateway_url = Some(format!("ws://{}/gw/?v=10&encoding=json", fake.addr));
    let (_inbound, shutdown, _task) = start(DiscordChannel::new(config).unwrap());
    let mut ws = fake.accept_ready(QUIET_INTERVAL_MS).await;
    assert!(
        fake.seen.gateway_lookups.lock().unwrap().is_empty(),
        "a configured gateway_url is used as is"
    );
    send(&mut ws, json!({ "op": 7, "d": null })).await;
    let (path, mut ws, resume) = fake.accept(QUIET_INTERVAL_MS).await;
    assert_eq!((path, resume["op"].as_u64()), ("resume", Some(6)));
    ws.send(Message::Close(Some(axum::extract::ws::CloseFrame {
        code: 4009,
        reason: "timed out".into(),
    })))
    .await
    .unwrap();
    let (path, _ws, identify) = fake.accept(QUIET_INTERVAL_MS).await;
    assert_eq!((path, identify["op"].as_u64()), ("gw", Some(2)));
    shutdown.cancel();
}

#[tokio::test]
async fn an_authentication_failure_stops_the_channel_with_a_config_error() {
    let mut fake = FakeDiscord::start().await;
    let (_inbound, _shutdown, task) = start(DiscordChannel::new(fake.config()).unwrap());
    let (_, mut ws, _) = fake.accept(QUIET_INTERVAL_MS).await;
    let frame =
        axum::extract::ws::CloseFrame { code: 4004, reason: "Authentication failed.".into() };
    ws.send(Message::Close(Some(frame))).await.unwrap();
    let result = tokio::time::timeout(WAIT, task).await.expect("the channel kept going").unwrap();
    let err = result.unwrap_err().to_string();
    assert!(err.contains("4004") && err.contains("token"), "{err}");
}

#[tokio::test]
async fn a_4500_char_answer_is_sent_as_three_messages_with_balanced_code_fences() {
    let fake = FakeDiscord::start().await;
    let channel = DiscordChannel::new(fake.config()).unwrap();
    let code: Vec<String> =
        (0..88).map(|i| format!("    let value_{i:03} = compute({i});")).collect();
    let text = format!(
        "{}\n\n```rust\n{}\n```\n\n{}",
        "Intro sentence here. ".repeat(40).trim_end(),
        code.join("\n"),
        "Closing thoughts go here. ".repeat(30).trim_end(),
    );
    assert!((4400..4700).contains(&text.chars().count()), "{}", text.chars().count());
    channel.send(outbound("C9", &text)).await.unwrap();
    let posts = fake.posts();
    assert_eq!(posts.len(), 3);
    for (chat, body, auth, _) in &posts {
        let content = body["content"].as_str().unwrap();
        assert_eq!((chat.as_str(), auth.as_str()), ("C9", "Bot bot-token"));
        assert!(content.chars().count() <= 2000, "{}", content.chars().count());
        let fences = content.lines().filter(|l| l.starts_with("```")).count();
        assert_eq!(fences % 2, 0, "unbalanced fences in: {content}");
    }
    let all: String = posts.iter().map(|p| p.1["content"].as_str().unwrap().to_string()).collect();
    assert!(code.iter().all(|line| all.contains(line.as_str())), "every line of code arrives");
    assert!(
        posts[1].1["content"].as_str().unwrap().starts_with("```rust\n"),
        "the fence is reopened"
    );
}

#[tokio::test]
async fn a_429_is_retried_after_retry_after() {
    let fake = FakeDiscord::start().await;
    fake.seen.rate_limits.store(1, Ordering::SeqCst);
    let channel = DiscordChannel::new(fake.config()).unwrap();
    channel.send(outbound("C9", "hi")).await.unwrap();
    let posts = fake.posts();
    assert_eq!(posts.len(), 2, "refused once, then accepted");
    let waited = posts[1].3.duration_since(posts[0].3);
    assert!(waited >= Duration::from_millis(300), "waited only {waited:?}");
}

#[tokio::test]
async fn a_missing_channel_is_an_unknown_chat() {
    let fake = FakeDiscord::start().await;
    let mut config = fake.config();
    config.api_base = format!("http://{}/nowhere", fake.addr);
    let channel = DiscordChannel::new(config).unwrap();
    let err = channel.send(outbound("C404", "hi")).await.unwrap_err();
    assert!(
        matches!(err, ChannelError::UnknownChat { ref chat_id, .. } if chat_id == "C404"),
        "{err}"
    );
}

#[test]
fn config_reads_the_token_env_and_channels_and_refuses_unknown_keys() {
    let table: toml::Table =
        "enabled = true\ntoken = \"t\"\nchannels = [\"C1\"]\ngateway_url = \"ws://x\""
            .parse()
            .unwrap();
    let config =
        DiscordConfig::from_settings(&ChannelSettings::parse("discord", &table).unwrap()).unwrap();
    assert_eq!(
        (config.token.as_str(), config.channels.as_slice()),
        ("t", ["C1".to_string()].as_slice())
    );
    assert_eq!(config.gateway_url.as_deref(), Some("ws://x"));
    let table: toml::Table = "token = \"t\"\nchanels = []".parse().unwrap();
    let err = DiscordConfig::from_settings(&ChannelSettings::parse("discord", &table).unwrap())
        .unwrap_err();
    assert!(err.to_string().contains("chanels"), "{err}");
    let table: toml::Table = "token_env = \"FERROCLAW_TEST_UNSET_DISCORD\"".parse().unwrap();
    let err = DiscordConfig::from_settings(&ChannelSettings::parse("discord", &table).unwrap())
        .unwrap_err();
    assert!(err.to_string().contains("FERROCLAW_TEST_UNSET_DISCORD"), "{err}");
}

fn outbound(chat_id: &str, content: &str) -> OutboundMessage {
    OutboundMessage {
        channel: "discord".into(),
        chat_id: chat_id.into(),
        content: content.into(),
        media: Vec::new(),
        reply_to: None,
        failure: None,
    }
}

// Approvals: the request carries buttons; presses come back as interactions.

fn press(seq: u64, user: &str, custom_id: &str) -> Value {
    let d = json!({
        "id": format!("int{seq}"), "token": format!("tok{seq}"), "type": 3, "channel_id": "C9",
        "guild_id": "G1", "member": { "user": { "id": user } },
        "data": { "custom_id": custom_id, "component_type": 2 },
    });
    json!({ "op": 0, "t": "INTERACTION_CREATE", "s": seq, "d": d })
}

/// A broker asking through a started channel; the channel's bus messages on the receiver.
struct Asking {
    broker: Arc<ApprovalBroker>,
    inbound: mpsc::Receiver<InboundMessage>,
    _shutdown: tokio_util::sync::DropGuard,
}

fn asking(fake: &FakeDiscord, timeout: Duration) -> Asking {
    let channel = Arc::new(DiscordChannel::new(fake.config()).unwrap());
    let outbox = Outbox::new([channel.clone() as Arc<dyn Channel>]);
    let broker = Arc::new(ApprovalBroker::new(outbox, timeout, Vec::new()));
    let bus = MessageBus::new(16);
    let inbound = bus.subscribe(ANY_CHANNEL);
    let shutdown = CancellationToken::new();
    let stop = shutdown.clone();
    tokio::spawn(async move { channel.start(bus, stop).await });
    Asking { broker, inbound, _shutdown: shutdown.drop_guard() }
}

/// Asks in C9 for owner U1 to run bash; returns the waiting task.
fn ask(broker: &Arc<ApprovalBroker>) -> JoinHandle<Approval> {
    let broker = broker.clone();
    tokio::spawn(async move {
        let call = ToolCall {
            id: "c1".into(),
            name: "bash".into(),
            input: json!({"command": "make deploy"}),
        };
        broker.ask(&SessionKey::new("discord", "C9"), "U1", &call, &CancellationToken::new()).await
    })
}

/// The custom id of the button labelled `label` on the first request posted.
async fn button(fake: &FakeDiscord, label: &str) -> String {
    let deadline = Instant::now() + WAIT;
    while fake.posts().is_empty() {
        assert!(Instant::now() < deadline, "no approval request posted");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let (channel, body, _, _) = fake.posts()[0].clone();
    assert_eq!(channel, "C9");
    assert!(body["content"].as_str().unwrap().contains("bash: make deploy"), "{body}");
    let buttons = body["components"][0]["components"].as_array().unwrap().clone();
    buttons.iter().find(|b| b["label"] == label).unwrap()["custom_id"].as_str().unwrap().to_string()
}

/// A press (or command) off the bus, answered as the gateway answers it.
async fn answer(asking: &mut Asking) -> Decided {
    let m = next_message(&mut asking.inbound).await;
    let command = ferroclaw_gateway::commands::ChatCommand::parse(&m.content);
    let Some(ferroclaw_gateway::commands::ChatCommand::Decide { id, choice }) = command else {
        panic!("not a decision: {:?}", m.content)
    };
    asking.broker.answer(&m, &id, choice).await
}

#[tokio::test]
async fn approval_buttons_a_strangers_press_is_refused_privately_and_the_owners_approves() {
    let mut fake = FakeDiscord::start().await;
    let mut asking = asking(&fake, Duration::from_secs(600));
    let mut ws = fake.accept_ready(QUIET_INTERVAL_MS).await;
    let waiting = ask(&asking.broker);
    let once = button(&fake, "Approve once").await;
    send(&mut ws, press(2, "U2", &once)).await;
    assert_eq!(answer(&mut asking).await, Decided::NotAllowed);
    let (id, token, body) = fake.seen.callbacks.lock().unwrap()[0].clone();
    assert_eq!((id.as_str(), token.as_str()), ("int2", "tok2"));
    assert_eq!(body["data"]["flags"], 64, "told privately: {body}");
    assert!(body["data"]["content"].as_str().unwrap().contains("Only the person"));
    assert!(!waiting.is_finished(), "a stranger's press changes nothing");
    send(&mut ws, press(3, "U1", &once)).await;
    assert!(matches!(answer(&mut asking).await, Decided::Done { .. }));
    assert_eq!(waiting.await.unwrap(), Approval::Yes);
    let (_, _, body) = fake.seen.callbacks.lock().unwrap()[1].clone();
    assert_eq!(body["data"]["flags"], 0);
    assert!(body["data"]["content"].as_str().unwrap().contains("approved once"), "{body}");
}

#[tokio::test]
async fn approval_buttons_deny_reaches_the_model_and_an_unanswered_request_times_out() {
    let mut fake = FakeDiscord::start().await;
    let mut asking = asking(&fake, Duration::from_secs(600));
    let mut ws = fake.accept_ready(QUIET_INTERVAL_MS).await;
    let waiting = ask(&asking.broker);
    let deny = button(&fake, "Deny").await;
    send(&mut ws, press(2, "U1", &deny)).await;
    assert!(matches!(answer(&mut asking).await, Decided::Done { .. }));
    assert_eq!(waiting.await.unwrap(), Approval::No("the user denied this call".into()));

    let quick = asking_with_timeout(&fake);
    let Approval::No(reason) = ask(&quick).await.unwrap() else { panic!("not denied") };
    assert!(reason.contains("nobody answered"), "{reason}");
}

/// A broker with a one-second timeout, asking through an unstarted channel.
fn asking_with_timeout(fake: &FakeDiscord) -> Arc<ApprovalBroker> {
    let channel = Arc::new(DiscordChannel::new(fake.config()).unwrap());
    let outbox = Outbox::new([channel as Arc<dyn Channel>]);
    Arc::new(ApprovalBroker::new(outbox, Duration::from_secs(1), Vec::new()))
}

// Pictures and files.

/// The bytes of a (tiny, not decodable) PNG: what matters is the signature.
const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDRpicture";

#[tokio::test]
async fn an_image_attachment_arrives_downloaded_and_a_workspace_file_goes_out_as_an_upload() {
    let mut fake = FakeDiscord::start().await;
    let channel = Arc::new(DiscordChannel::new(fake.config()).unwrap());
    let bus = MessageBus::new(16);
    let mut inbound = bus.subscribe(ANY_CHANNEL);
    let (stop, sender) = (CancellationToken::new(), channel.clone());
    let run = stop.clone();
    tokio::spawn(async move { channel.start(bus, run).await });
    let mut ws = fake.accept_ready(QUIET_INTERVAL_MS).await;
    let mut create = message_create(2, "U1", None, "what is this?");
    create["d"]["attachments"] = json!([{
        "id": "A1", "filename": "pic.png", "content_type": "image/png", "size": PNG.len(),
        "url": format!("http://{}/cdn/pic.png", fake.addr),
    }]);
    send(&mut ws, create).await;
    let m = next_message(&mut inbound).await;
    assert_eq!(m.content, "what is this?");
    let files = ferroclaw_gateway::media::attachments(&m);
    assert_eq!(files.len(), 1);
    assert_eq!((files[0].bytes.as_slice(), files[0].image_type()), (PNG, Some("image/png")));

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("notes.txt");
    std::fs::write(&path, "meeting notes").unwrap();
    let out = OutboundMessage {
        channel: "discord".into(),
        chat_id: "C9".into(),
        content: "Here you go".into(),
        media: vec![path.display().to_string()],
        reply_to: None,
        failure: None,
    };
    sender.send(out).await.unwrap();
    let posts = fake.posts();
    assert_eq!(posts[0].1["content"], "Here you go");
    let upload = posts[1].1["multipart"].as_str().unwrap().to_string();
    assert!(upload.contains("name=\"files[0]\"; filename=\"notes.txt\""), "{upload}");
    assert!(upload.contains("meeting notes") && upload.contains("payload_json"), "{upload}");
    stop.cancel();
}

#[tokio::test]
async fn a_file_over_the_cap_is_refused_while_downloading_and_the_model_is_told() {
    let mut fake = FakeDiscord::start().await;
    let mut config = fake.config();
    config.max_file_bytes = hostile_files::SMALL_CAP;
    let channel = Arc::new(DiscordChannel::new(config).unwrap());
    let bus = MessageBus::new(16);
    let mut inbound = bus.subscribe(ANY_CHANNEL);
    let stop = CancellationToken::new();
    let run = stop.clone();
    tokio::spawn(async move { channel.start(bus, run).await });
    let mut ws = fake.accept_ready(QUIET_INTERVAL_MS).await;
    let mut create = message_create(2, "U1", None, "two files");
    // Both claim to be small; one never ends, the other declares a gigabyte.
    create["d"]["attachments"] = json!([
        {"id": "A1", "filename": "endless.bin", "size": 10, "url": format!("http://{}/cdn/endless.bin", fake.addr)},
        {"id": "A2", "filename": "huge.bin", "size": 10, "url": format!("http://{}/cdn/huge.bin", fake.addr)},
    ]);
    send(&mut ws, create).await;
    let m = next_message(&mut inbound).await;
    assert!(ferroclaw_gateway::media::attachments(&m).is_empty());
    for name in ["endless.bin", "huge.bin"] {
        let note = format!(
            "[The user sent {name}, which could not be received: it is over the 4 KB limit]"
        );
        assert!(m.content.contains(&note), "{}", m.content);
    }
    stop.cancel();
}

/// Waits until the bus says `discord` is in `state`.
async fn wait_state(bus: &MessageBus, state: Connection) {
    let deadline = Instant::now() + WAIT;
    while bus.connections().get("discord").as_ref() != Some(&state) {
        assert!(Instant::now() < deadline, "{:?}, not {state:?}", bus.connections().get("discord"));
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn the_connection_state_is_connected_when_ready_and_reconnecting_after_a_drop() {
    let mut fake = FakeDiscord::start().await;
    let channel = DiscordChannel::new(fake.config()).unwrap();
    let bus = MessageBus::new(16);
    let (shutdown, run) = (CancellationToken::new(), bus.clone());
    let stop = shutdown.clone();
    tokio::spawn(async move { channel.start(run, stop).await });
    let ws = fake.accept_ready(QUIET_INTERVAL_MS).await;
    wait_state(&bus, Connection::Connected).await;
    drop(ws);
    let (_, mut ws, _) = fake.accept(QUIET_INTERVAL_MS).await;
    wait_state(&bus, Connection::Reconnecting { error: "the connection closed".into() }).await;
    send(&mut ws, json!({ "op": 0, "t": "RESUMED", "s": 6, "d": {} })).await;
    wait_state(&bus, Connection::Connected).await;
    shutdown.cancel();
}
