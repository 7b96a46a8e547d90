//! The Slack channel against a fake Slack on 127.0.0.1: the Web API
//! (`apps.connections.open`, `auth.test`, `chat.postMessage`) and Socket Mode
//! WebSockets (`/link/`), driven step by step by each test.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::ws::{WebSocket, WebSocketUpgrade};
use axum::extract::{RawQuery, State};
use axum::http::HeaderMap;
use axum::response::Response;
use axum::routing::{get, post};
use axum::{Json, Router};
use ferroclaw_core::Approval;
use ferroclaw_gateway::SessionKey;
use ferroclaw_gateway::approval::{ApprovalBroker, Decided};
use ferroclaw_gateway::commands::ChatCommand;
use ferroclaw_gateway::outbox::Outbox;
use ferroclaw_gateway::slack::{SlackChannel, SlackConfig};
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

const APP_TOKEN: &str = "xapp-1-test";
const BOT_TOKEN: &str = "xoxb-test";
/// How long a test waits for something the channel should do at once.
const WAIT: Duration = Duration::from_secs(5);

/// What the fake saw and what it should answer.
#[derive(Default)]
struct Seen {
    /// Authorization headers of `apps.connections.open`.
    opens: Mutex<Vec<String>>,
    /// (Authorization header, body) of each `chat.postMessage`.
    posts: Mutex<Vec<(String, Value)>>,
    /// Raw bodies POSTed to the upload URL, and `files.completeUploadExternal` bodies.
    uploads: Mutex<Vec<String>>,
    completed: Mutex<Vec<Value>>,
    /// Bodies of `chat.postEphemeral`.
    ephemeral: Mutex<Vec<Value>>,
    /// Query strings of WebSocket connections.
    queries: Mutex<Vec<String>>,
    /// When set, `apps.connections.open` fails with this error code.
    open_error: Mutex<Option<String>>,
}

struct FakeSlack {
    addr: String,
    seen: Arc<Seen>,
    sockets: mpsc::UnboundedReceiver<WebSocket>,
}

#[derive(Clone)]
struct App {
    seen: Arc<Seen>,
    addr: String,
    sockets: mpsc::UnboundedSender<WebSocket>,
}

impl FakeSlack {
    async fn start() -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let (tx, sockets) = mpsc::unbounded_channel();
        let seen = Arc::new(Seen::default());
        let app = App { seen: seen.clone(), addr: addr.clone(), sockets: tx };
        let router = Router::new()
            .route("/api/apps.connections.open", post(connections_open))
            .route(
                "/api/auth.test",
                post(|| async { Json(json!({ "ok": true, "user_id": "UBOT" })) }),
            )
            .route("/api/chat.postMessage", post(post_message))
            .route(
                "/api/chat.postEphemeral",
                post(|State(app): State<App>, Json(body): Json<Value>| async move {
                    app.seen.ephemeral.lock().unwrap().push(body);
                    Json(json!({ "ok": true }))
                }),
            )
            .route(
                "/api/files.getUploadURLExternal",
                post(|State(app): State<App>, RawQuery(q): RawQuery| async move {
                    assert!(q.unwrap_or_default().contains("filename=notes.txt"));
                    let url = format!("http://{}/upload/F1", app.addr);
                    Json(json!({ "ok": true, "upload_url": url, "file_id": "F1" }))
                }),
            )
            .route(
                "/upload/F1",
                post(|State(app): State<App>, raw: axum::body::Bytes| async move {
                    app.seen
                        .uploads
                        .lock()
                        .unwrap()
                        .push(String::from_utf8_lossy(&raw).into_owned());
                    "OK"
                }),
            )
            .route(
                "/api/files.completeUploadExternal",
                post(|State(app): State<App>, Json(body): Json<Value>| async move {
                    app.seen.completed.lock().unwrap().push(body);
                    Json(json!({ "ok": true }))
                }),
            )
            .route(
                "/files/pic.png",
                get(|headers: HeaderMap| async move {
                    let authorized = auth(&headers) == format!("Bearer {BOT_TOKEN}");
                    if authorized {
                        Ok(PNG.to_vec())
                    } else {
                        Err(axum::http::StatusCode::FORBIDDEN)
                    }
                }),
            )
            .route("/files/endless.bin", get(|| async { hostile_files::endless() }))
            .route("/files/huge.bin", get(|| async { hostile_files::declared_huge() }))
            .route("/link/", get(upgrade))
            .with_state(app);
        tokio::spawn(async move { axum::serve(listener, router).await });
        FakeSlack { addr, seen, sockets }
    }

    fn config(&self) -> SlackConfig {
        let mut config = SlackConfig::new(APP_TOKEN, BOT_TOKEN);
        config.api_base = format!("http://{}/api", self.addr);
        config
    }

    /// The next Socket Mode connection, greeted with `hello`.
    async fn accept(&mut self) -> WebSocket {
        let mut ws =
            tokio::time::timeout(WAIT, self.sockets.recv()).await.expect("no connection").unwrap();
        send(&mut ws, json!({ "type": "hello", "num_connections": 1 })).await;
        ws
    }

    fn posts(&self) -> Vec<(String, Value)> {
        self.seen.posts.lock().unwrap().clone()
    }
}

async fn connections_open(State(app): State<App>, headers: HeaderMap) -> Json<Value> {
    let mut opens = app.seen.opens.lock().unwrap();
    opens.push(auth(&headers));
    if let Some(error) = app.seen.open_error.lock().unwrap().clone() {
        return Json(json!({ "ok": false, "error": error }));
    }
    Json(json!({ "ok": true, "url": format!("ws://{}/link/?ticket={}", app.addr, opens.len()) }))
}

async fn post_message(
    State(app): State<App>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Json<Value> {
    app.seen.posts.lock().unwrap().push((auth(&headers), body));
    Json(json!({ "ok": true, "ts": "999.000" }))
}

async fn upgrade(
    State(app): State<App>,
    RawQuery(query): RawQuery,
    ws: WebSocketUpgrade,
) -> Response {
    app.seen.queries.lock().unwrap().push(query.unwrap_or_default());
    ws.on_upgrade(move |socket| async move {
        let _ = app.sockets.send(socket);
    })
}

/// Runs the channel's receiving side; the bus's messages arrive on the receiver.
fn start(
    channel: Arc<SlackChannel>,
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

/// An `events_api` envelope around `event`.
fn envelope(id: &str, event: Value) -> Value {
    json!({
        "envelope_id": id, "type": "events_api", "accepts_response_payload": false,
        "payload": { "type": "event_callback", "event": event },
    })
}

fn message(text: &str, channel: &str, channel_type: &str, ts: &str) -> Value {
    json!({ "type": "message", "user": "U1", "channel": channel, "channel_type": channel_type, "text": text, "ts": ts })
}

#[tokio::test]
async fn it_opens_a_connection_with_the_app_token_and_connects_to_the_url_given() {
    let mut fake = FakeSlack::start().await;
    let (_inbound, shutdown, task) = start(Arc::new(SlackChannel::new(fake.config()).unwrap()));
    let _ws = fake.accept().await;
    assert_eq!(fake.seen.opens.lock().unwrap().as_slice(), [format!("Bearer {APP_TOKEN}")]);
    assert_eq!(fake.seen.queries.lock().unwrap().as_slice(), ["ticket=1"]);
    shutdown.cancel();
    assert!(tokio::time::timeout(WAIT, task).await.unwrap().unwrap().is_ok());
}

#[tokio::test]
async fn every_envelope_is_acknowledged_by_its_id_at_once() {
    let mut fake = FakeSlack::start().await;
    let (_inbound, shutdown, _task) = start(Arc::new(SlackChannel::new(fake.config()).unwrap()));
    let mut ws = fake.accept().await;
    send(&mut ws, envelope("E1", message("hi", "D1", "im", "1.0"))).await;
    assert_eq!(recv(&mut ws).await, json!({ "envelope_id": "E1" }));
    send(&mut ws, json!({ "envelope_id": "E2", "type": "slash_commands", "payload": {} })).await;
    assert_eq!(recv(&mut ws).await, json!({ "envelope_id": "E2" }));
    shutdown.cancel();
}

#[tokio::test]
async fn a_message_event_reaches_the_bus_with_user_channel_and_thread() {
    let mut fake = FakeSlack::start().await;
    let (mut inbound, shutdown, _task) = start(Arc::new(SlackChannel::new(fake.config()).unwrap()));
    let mut ws = fake.accept().await;
    send(&mut ws, envelope("E1", message("hello &amp; welcome", "D1", "im", "1.0"))).await;
    let m = next_message(&mut inbound).await;
    assert_eq!((m.channel.as_str(), m.sender.as_str(), m.chat_id.as_str()), ("slack", "U1", "D1"));
    assert_eq!(m.content, "hello & welcome");
    assert!(
        !m.metadata.contains_key("thread_ts"),
        "a direct message is answered in the conversation"
    );
    let mut in_thread = message("<@UBOT> and this?", "C1", "channel", "2.0");
    in_thread["thread_ts"] = json!("1.5");
    send(&mut ws, envelope("E2", in_thread)).await;
    let m = next_message(&mut inbound).await;
    assert_eq!((m.chat_id.as_str(), m.content.as_str()), ("C1", "and this?"));
    assert_eq!(m.metadata["thread_ts"], "1.5");
    shutdown.cancel();
}

#[tokio::test]
async fn bot_messages_and_edits_are_ignored() {
    let mut fake = FakeSlack::start().await;
    let (mut inbound, shutdown, _task) = start(Arc::new(SlackChannel::new(fake.config()).unwrap()));
    let mut ws = fake.accept().await;
    let mut from_bot = message("I am a bot", "D1", "im", "1.0");
    from_bot["bot_id"] = json!("B1");
    let mut edit = message("edited", "D1", "im", "2.0");
    edit["subtype"] = json!("message_changed");
    let mut own = message("my own", "D1", "im", "3.0");
    own["user"] = json!("UBOT");
    for (i, event) in
        [from_bot, edit, own, message("real", "D1", "im", "4.0")].into_iter().enumerate()
    {
        send(&mut ws, envelope(&format!("E{i}"), event)).await;
    }
    assert_eq!(next_message(&mut inbound).await.content, "real");
    assert!(inbound.try_recv().is_err());
    shutdown.cancel();
}

#[tokio::test]
async fn a_mention_delivered_as_message_and_app_mention_counts_once() {
    let mut fake = FakeSlack::start().await;
    let (mut inbound, shutdown, _task) = start(Arc::new(SlackChannel::new(fake.config()).unwrap()));
    let mut ws = fake.accept().await;
    let mut mention = message("<@UBOT> once", "C1", "channel", "7.0");
    send(&mut ws, envelope("E1", mention.clone())).await;
    mention["type"] = json!("app_mention");
    mention.as_object_mut().unwrap().remove("channel_type");
    send(&mut ws, envelope("E2", mention)).await;
    send(&mut ws, envelope("E3", message("next", "D1", "im", "8.0"))).await;
    assert_eq!(next_message(&mut inbound).await.content, "once");
    assert_eq!(next_message(&mut inbound).await.content, "next");
    shutdown.cancel();
}

#[tokio::test]
async fn the_answer_is_posted_to_the_thread_in_mrkdwn_with_the_bot_token() {
    let mut fake = FakeSlack::start().await;
    let channel = Arc::new(SlackChannel::new(fake.config()).unwrap());
    let (mut inbound, shutdown, _task) = start(channel.clone());
    let mut ws = fake.accept().await;
    send(&mut ws, envelope("E1", message("<@UBOT> status?", "C1", "channel", "111.222"))).await;
    let question = next_message(&mut inbound).await;
    let answer =
        "# Status\n**All good**: see [the board](https://x.io/b?a=1&b=2)\n```sh\nls *.rs\n```";
    channel.send(OutboundMessage::reply(&question, answer)).await.unwrap();
    let posts = fake.posts();
    assert_eq!(posts.len(), 1);
    let (auth, body) = &posts[0];
    assert_eq!(auth, &format!("Bearer {BOT_TOKEN}"));
    assert_eq!(body["channel"], "C1");
    assert_eq!(body["thread_ts"], "111.222", "the answer goes under the question");
    assert_eq!(
        body["text"],
        "*Status*\n*All good*: see <https://x.io/b?a=1&amp;b=2|the board>\n```\nls *.rs\n```"
    );
    shutdown.cancel();
}

#[tokio::test]
async fn a_message_of_its_own_goes_to_the_channel_split_under_the_limit() {
    let fake = FakeSlack::start().await;
    let channel = SlackChannel::new(fake.config()).unwrap();
    let text = vec!["A paragraph of words. ".repeat(20); 20].join("\n\n");
    let message = OutboundMessage {
        channel: "slack".into(),
        chat_id: "C7".into(),
        content: text,
        media: Vec::new(),
        reply_to: None,
        failure: None,
    };
    channel.send(message).await.unwrap();
    let posts = fake.posts();
    assert_eq!(posts.len(), 3);
    for (_, body) in &posts {
        assert!(body["text"].as_str().unwrap().chars().count() <= 3900);
        assert!(body.get("thread_ts").is_none());
    }
}

#[tokio::test]
async fn a_disconnect_envelope_opens_a_new_connection() {
    let mut fake = FakeSlack::start().await;
    let (mut inbound, shutdown, _task) = start(Arc::new(SlackChannel::new(fake.config()).unwrap()));
    let mut ws = fake.accept().await;
    send(&mut ws, json!({ "type": "disconnect", "reason": "refresh_requested" })).await;
    let mut ws = fake.accept().await;
    assert_eq!(fake.seen.opens.lock().unwrap().len(), 2, "each connection has its own URL");
    assert_eq!(fake.seen.queries.lock().unwrap()[1], "ticket=2");
    send(&mut ws, envelope("E9", message("still there?", "D1", "im", "5.0"))).await;
    assert_eq!(next_message(&mut inbound).await.content, "still there?");
    shutdown.cancel();
}

#[tokio::test]
async fn a_refused_app_token_stops_the_channel_with_a_config_error() {
    let fake = FakeSlack::start().await;
    *fake.seen.open_error.lock().unwrap() = Some("invalid_auth".into());
    let (_inbound, _shutdown, task) = start(Arc::new(SlackChannel::new(fake.config()).unwrap()));
    let result = tokio::time::timeout(WAIT, task).await.expect("the channel kept going").unwrap();
    let err = result.unwrap_err().to_string();
    assert!(err.contains("invalid_auth") && err.contains("xapp"), "{err}");
}

#[test]
fn config_reads_both_tokens_and_names_the_missing_one() {
    let table: toml::Table =
        "app_token = \"xapp-a\"\ntoken = \"xoxb-b\"\nchannels = [\"C1\"]".parse().unwrap();
    let config =
        SlackConfig::from_settings(&ChannelSettings::parse("slack", &table).unwrap()).unwrap();
    assert_eq!((config.app_token.as_str(), config.bot_token.as_str()), ("xapp-a", "xoxb-b"));
    assert_eq!(config.channels, ["C1"]);
    let table: toml::Table =
        "app_token = \"xapp-a\"\nbot_token_env = \"FERROCLAW_TEST_UNSET_SLACK\"".parse().unwrap();
    let err =
        SlackConfig::from_settings(&ChannelSettings::parse("slack", &table).unwrap()).unwrap_err();
    assert!(err.to_string().contains("FERROCLAW_TEST_UNSET_SLACK"), "{err}");
    let table: toml::Table = "app_tokn = \"x\"".parse().unwrap();
    let err =
        SlackConfig::from_settings(&ChannelSettings::parse("slack", &table).unwrap()).unwrap_err();
    assert!(err.to_string().contains("app_tokn"), "{err}");
}

// Approvals: Block Kit buttons out, `interactive` envelopes (block_actions) in.

/// The envelope of `user` pressing the button worth `value` at `action_ts`.
fn press(envelope_id: &str, user: &str, value: &str, action_ts: &str) -> Value {
    json!({
        "envelope_id": envelope_id, "type": "interactive", "accepts_response_payload": false,
        "payload": {
            "type": "block_actions", "user": { "id": user }, "channel": { "id": "C1" },
            "container": { "type": "message", "channel_id": "C1", "message_ts": "999.000" },
            "response_url": "http://127.0.0.1:1/hook",
            "actions": [{ "action_id": "approval", "type": "button", "value": value,
                "action_ts": action_ts }],
        },
    })
}

/// Asks in C1 for owner U1 to run bash through `broker`; returns the waiting task.
fn ask(broker: &Arc<ApprovalBroker>) -> JoinHandle<Approval> {
    let broker = broker.clone();
    tokio::spawn(async move {
        let call = ToolCall {
            id: "c1".into(),
            name: "bash".into(),
            input: json!({"command": "make deploy"}),
        };
        broker.ask(&SessionKey::new("slack", "C1"), "U1", &call, &CancellationToken::new()).await
    })
}

/// The value of the button labelled `label` on the first request posted.
async fn button(fake: &FakeSlack, label: &str) -> String {
    let deadline = std::time::Instant::now() + WAIT;
    while fake.posts().is_empty() {
        assert!(std::time::Instant::now() < deadline, "no approval request posted");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let body = fake.posts()[0].1.clone();
    assert_eq!(body["channel"], "C1");
    assert!(body["text"].as_str().unwrap().contains("make deploy"), "{body}");
    let buttons = body["blocks"][1]["elements"].as_array().unwrap().clone();
    buttons.iter().find(|b| b["text"]["text"] == label).unwrap()["value"]
        .as_str()
        .unwrap()
        .to_string()
}

/// A press off the bus, answered as the gateway answers it.
async fn answer(broker: &ApprovalBroker, inbound: &mut mpsc::Receiver<InboundMessage>) -> Decided {
    let m = next_message(inbound).await;
    let Some(ChatCommand::Decide { id, choice }) = ChatCommand::parse(&m.content) else {
        panic!("not a decision: {:?}", m.content)
    };
    broker.answer(&m, &id, choice).await
}

#[tokio::test]
async fn approval_buttons_a_strangers_press_is_refused_ephemerally_and_the_owners_approves() {
    let mut fake = FakeSlack::start().await;
    let channel = Arc::new(SlackChannel::new(fake.config()).unwrap());
    let outbox = Outbox::new([channel.clone() as Arc<dyn Channel>]);
    let broker = Arc::new(ApprovalBroker::new(outbox, Duration::from_secs(600), Vec::new()));
    let (mut inbound, shutdown, _task) = start(channel);
    let mut ws = fake.accept().await;
    let waiting = ask(&broker);
    let chat = button(&fake, "Always in this chat").await;
    send(&mut ws, press("E1", "U2", &chat, "1000.000001")).await;
    assert_eq!(recv(&mut ws).await, json!({ "envelope_id": "E1" }), "acknowledged at once");
    assert_eq!(answer(&broker, &mut inbound).await, Decided::NotAllowed);
    let told = fake.seen.ephemeral.lock().unwrap()[0].clone();
    assert_eq!((told["user"].as_str(), told["channel"].as_str()), (Some("U2"), Some("C1")));
    assert!(told["text"].as_str().unwrap().contains("Only the person"), "{told}");
    assert!(!waiting.is_finished(), "a stranger's press changes nothing");
    send(&mut ws, press("E2", "U1", &chat, "1000.000002")).await;
    assert!(matches!(answer(&broker, &mut inbound).await, Decided::Done { .. }));
    assert_eq!(waiting.await.unwrap(), Approval::AlwaysForSession);
    assert!(
        fake.posts().last().unwrap().1["text"].as_str().unwrap().contains("approved for this chat")
    );

    let waiting = ask(&broker);
    while fake.posts().len() < 3 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let deny = fake.posts()[2].1["blocks"][1]["elements"][3]["value"].as_str().unwrap().to_string();
    // Socket Mode sends the approving press again (its acknowledgement
    // came late): it is not a second press, so the next one off the bus is
    // the deny that follows it.
    send(&mut ws, press("E2-again", "U1", &chat, "1000.000002")).await;
    send(&mut ws, press("E3", "U1", &deny, "1000.000003")).await;
    assert!(matches!(answer(&broker, &mut inbound).await, Decided::Done { .. }));
    assert_eq!(waiting.await.unwrap(), Approval::No("the user denied this call".into()));
    shutdown.cancel();
}

#[tokio::test]
async fn approval_an_unanswered_slack_request_is_denied_after_the_timeout() {
    let fake = FakeSlack::start().await;
    let channel = Arc::new(SlackChannel::new(fake.config()).unwrap());
    let outbox = Outbox::new([channel as Arc<dyn Channel>]);
    let broker = Arc::new(ApprovalBroker::new(outbox, Duration::from_secs(1), Vec::new()));
    let Approval::No(reason) = ask(&broker).await.unwrap() else { panic!("not denied") };
    assert!(reason.contains("nobody answered"), "{reason}");
    assert_eq!(fake.posts().len(), 1, "asked once");
}

// Pictures and files.

/// The bytes of a (tiny, not decodable) PNG: what matters is the signature.
const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDRpicture";

#[tokio::test]
async fn a_shared_image_arrives_downloaded_with_the_bot_token_and_a_workspace_file_is_uploaded() {
    let mut fake = FakeSlack::start().await;
    let channel = Arc::new(SlackChannel::new(fake.config()).unwrap());
    let (mut inbound, shutdown, _task) = start(channel.clone());
    let mut ws = fake.accept().await;
    let mut shared = message("", "D1", "im", "5.0");
    shared["subtype"] = json!("file_share");
    shared["files"] = json!([{
        "id": "F9", "name": "pic.png", "mimetype": "image/png", "size": PNG.len(),
        "url_private_download": format!("http://{}/files/pic.png", fake.addr),
    }]);
    send(&mut ws, envelope("E1", shared)).await;
    let m = next_message(&mut inbound).await;
    let files = ferroclaw_gateway::media::attachments(&m);
    assert_eq!(files.len(), 1, "{:?}", m.content);
    assert_eq!((files[0].bytes.as_slice(), files[0].image_type()), (PNG, Some("image/png")));

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("notes.txt");
    std::fs::write(&path, "meeting notes").unwrap();
    let out = OutboundMessage {
        channel: "slack".into(),
        chat_id: "D1".into(),
        content: String::new(),
        media: vec![path.display().to_string()],
        reply_to: None,
        failure: None,
    };
    channel.send(out).await.unwrap();
    let upload = fake.seen.uploads.lock().unwrap()[0].clone();
    assert!(
        upload.contains("filename=\"notes.txt\"") && upload.contains("meeting notes"),
        "{upload}"
    );
    let done = fake.seen.completed.lock().unwrap()[0].clone();
    assert_eq!(
        done,
        json!({ "files": [{ "id": "F1", "title": "notes.txt" }], "channel_id": "D1" })
    );
    assert!(fake.posts().is_empty(), "no empty text message");
    shutdown.cancel();
}

#[tokio::test]
async fn a_file_over_the_cap_is_refused_while_downloading_and_the_model_is_told() {
    let mut fake = FakeSlack::start().await;
    let mut config = fake.config();
    config.max_file_bytes = hostile_files::SMALL_CAP;
    let (mut inbound, shutdown, _task) = start(Arc::new(SlackChannel::new(config).unwrap()));
    let mut ws = fake.accept().await;
    let mut shared = message("two files", "D1", "im", "6.0");
    shared["subtype"] = json!("file_share");
    // Both claim to be small; one never ends, the other declares a gigabyte.
    shared["files"] = json!([
        {"id": "F1", "name": "endless.bin", "size": 10, "url_private_download": format!("http://{}/files/endless.bin", fake.addr)},
        {"id": "F2", "name": "huge.bin", "size": 10, "url_private_download": format!("http://{}/files/huge.bin", fake.addr)},
    ]);
    send(&mut ws, envelope("E1", shared)).await;
    let m = next_message(&mut inbound).await;
    assert!(ferroclaw_gateway::media::attachments(&m).is_empty());
    for name in ["endless.bin", "huge.bin"] {
        let note = format!(
            "[The user sent {name}, which could not be received: it is over the 4 KB limit]"
        );
        assert!(m.content.contains(&note), "{}", m.content);
    }
    shutdown.cancel();
}
