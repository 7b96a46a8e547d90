//! Approvals from a chat, against the fake Telegram Bot API: a tool call that
//! needs approval pauses the turn and asks the chat's owner with inline
//! buttons; a stranger's press changes nothing, the owner's runs the call, a
//! denial's reason and an unanswered request's timeout reach the model.

use crate::common;
use crate::gateway_support;

use common::{Env, Wire};
use ferroclaw_testkit::Turn;
use gateway_support::fake_telegram::FakeTelegram;
use gateway_support::{Gateway, wait_for};
use serde_json::json;

fn config(fake: &FakeTelegram, extra: &str) -> String {
    format!(
        "heartbeat_minutes = 0\n{extra}\n[channels.telegram]\nenabled = true\ntoken = \"TEST:TOKEN\"\napi_base = \"{}\"\npoll_timeout_secs = 1\nallow_from = [\"42\", \"666\"]\n",
        fake.base
    )
}

/// The script: the model asks to run bash, then answers `answer`.
fn env(answer: &str) -> Env {
    let call = Turn::tool("bash", json!({"command": "echo approved > made-by-bash.txt"}));
    Env::new(Wire::OpenAi, vec![call.into(), Turn::text(answer).into()])
}

/// The callback data of the button labelled `label` on the first approval request.
fn button(fake: &FakeTelegram, label: &str) -> String {
    wait_for(30, "the approval request", || !fake.keyboards().is_empty());
    let request = &fake.keyboards()[0];
    let rows = request["reply_markup"]["inline_keyboard"].as_array().unwrap().clone();
    rows.iter()
        .flat_map(|r| r.as_array().unwrap().clone())
        .find(|b| b["text"] == label)
        .map(|b| b["callback_data"].as_str().unwrap().to_string())
        .unwrap_or_else(|| panic!("no {label:?} button in {request}"))
}

#[test]
fn a_call_waits_for_the_owners_button_and_a_strangers_press_changes_nothing() {
    let fake = FakeTelegram::start();
    let env = env("Done, the file is there.");
    let _gw = Gateway::start(&env, &config(&fake, ""));
    fake.user_says(42, "Ann", "make the file");
    let once = button(&fake, "Approve once");
    let request = &fake.keyboards()[0];
    assert_eq!(request["chat_id"], 42, "asked in the chat the message came from");
    assert!(request["text"].as_str().unwrap().contains("bash: echo approved"), "{request}");
    let made = env.home.path().join("workspace/made-by-bash.txt");

    fake.user_presses(666, 42, &once);
    wait_for(30, "the stranger told", || !fake.answered().is_empty());
    let told = &fake.answered()[0];
    assert!(told["text"].as_str().unwrap().contains("Only the person"), "{told}");
    assert_eq!(told["show_alert"], true);
    assert!(!made.exists(), "a stranger's press runs nothing");
    assert_eq!(env.server.requests().len(), 1, "the turn still waits");

    fake.user_presses(42, 42, &once);
    wait_for(30, "the answer", || fake.sent_to(42).iter().any(|t| t.contains("Done")));
    assert!(made.exists(), "the owner's press let the call run");
    assert!(fake.answered()[1]["text"].as_str().unwrap().contains("approved once"));
    let edited = &fake.edited()[0];
    assert!(edited["text"].as_str().unwrap().ends_with("→ approved once"), "{edited}");
    assert!(edited.get("reply_markup").is_none(), "the buttons are taken off");
    assert!(!env.request_body(1).to_string().contains("denied"));

    fake.user_presses(42, 42, &once);
    wait_for(30, "the second press answered", || fake.answered().len() >= 3);
    assert!(
        fake.answered()[2]["text"].as_str().unwrap().contains("No approval request"),
        "an id works once"
    );
}

#[test]
fn a_denial_with_a_reason_reaches_the_model_and_runs_nothing() {
    let fake = FakeTelegram::start();
    let env = env("All right, I left it.");
    let _gw = Gateway::start(&env, &config(&fake, ""));
    fake.user_says(42, "Ann", "make the file");
    let deny = button(&fake, "Deny");
    let id = deny.split_whitespace().nth(1).unwrap().to_string();
    fake.user_says(42, "Ann", &format!("/deny {id} not on a Friday"));
    wait_for(30, "the answer", || fake.sent_to(42).iter().any(|t| t.contains("I left it")));
    let result = env.request_body(1).to_string();
    assert!(result.contains("denied this call: not on a Friday"), "{result}");
    assert!(!env.home.path().join("workspace/made-by-bash.txt").exists());
}

#[test]
fn an_unanswered_request_is_denied_after_the_approval_timeout_and_the_model_told() {
    let fake = FakeTelegram::start();
    let env = env("Nobody answered, so I did nothing.");
    let _gw = Gateway::start(&env, &config(&fake, "approval_timeout = 1"));
    fake.user_says(42, "Ann", "make the file");
    wait_for(30, "the answer", || fake.sent_to(42).iter().any(|t| t.contains("did nothing")));
    let result = env.request_body(1).to_string();
    assert!(result.contains("nobody answered the approval request"), "{result}");
    wait_for(30, "the request marked", || !fake.edited().is_empty());
    assert!(fake.edited()[0]["text"].as_str().unwrap().ends_with("→ timed out (denied)"));
    assert!(!env.home.path().join("workspace/made-by-bash.txt").exists());
}

/// The next JSON frame of a raw chat socket.
async fn frame(socket: &mut Socket) -> serde_json::Value {
    use futures_util::StreamExt;
    loop {
        let next = tokio::time::timeout(std::time::Duration::from_secs(30), socket.next()).await;
        match next.expect("no frame in 30 s") {
            Some(Ok(Message::Text(t))) => return serde_json::from_str(&t).unwrap(),
            Some(Ok(_)) => continue,
            other => panic!("socket ended: {other:?}"),
        }
    }
}

/// The next frame of `kind`, skipping streamed events.
async fn frame_of(socket: &mut Socket, kind: &str) -> serde_json::Value {
    loop {
        let f = frame(socket).await;
        if f["type"] == kind {
            return f;
        }
        assert!(f["type"] == "event", "expected {kind}, got {f}");
    }
}

async fn say(socket: &mut Socket, frame: serde_json::Value) {
    use futures_util::SinkExt;
    socket.send(Message::Text(frame.to_string().into())).await.unwrap();
}

type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;
use tokio_tungstenite::tungstenite::Message;

async fn open(port: u16, chat: &str) -> Socket {
    let url = format!("ws://127.0.0.1:{port}/ws?token={}&chat={chat}", gateway_support::TOKEN);
    let (mut socket, _) = tokio_tungstenite::connect_async(url).await.expect("socket");
    assert_eq!(frame(&mut socket).await["type"], "ready");
    socket
}

#[tokio::test(flavor = "multi_thread")]
async fn the_web_chat_gets_an_approval_card_and_answers_it_for_the_project() {
    let env = env("Done from the web.");
    let gw = Gateway::start(&env, "heartbeat_minutes = 0\n");
    let mut page = open(gw.port, "mine").await;
    let mut other = open(gw.port, "theirs").await;
    say(&mut page, json!({"type": "message", "content": "make the file"})).await;
    let card = frame_of(&mut page, "approval").await;
    assert_eq!(card["tool"], "bash");
    assert_eq!(card["input"]["command"], "echo approved > made-by-bash.txt");
    assert!(card["summary"].as_str().unwrap().starts_with("bash: echo approved"), "{card}");
    let id = card["id"].as_str().unwrap().to_string();

    say(&mut other, json!({"type": "approve", "id": id, "choice": "once"})).await;
    let refused = frame_of(&mut other, "error").await;
    assert!(refused["message"].as_str().unwrap().contains("No approval request"), "{refused}");
    say(&mut page, json!({"type": "approve", "id": id, "choice": "sometimes"})).await;
    assert!(frame_of(&mut page, "error").await["message"].as_str().unwrap().contains("expected"));

    say(&mut page, json!({"type": "approve", "id": id, "choice": "project"})).await;
    let resolved = frame_of(&mut page, "approval_resolved").await;
    assert_eq!(
        resolved,
        json!({"type": "approval_resolved", "id": id, "outcome": "approved for this project"})
    );
    let reply = frame_of(&mut page, "reply").await;
    assert_eq!(reply["content"], "Done from the web.");
    assert!(env.home.path().join("workspace/made-by-bash.txt").exists());
    let project = std::fs::read_to_string(env.home.path().join("workspace/.agent/config.toml"))
        .expect("the rule is written to the project's config");
    assert!(project.contains("bash(echo:*)"), "{project}");
}

#[test]
fn an_api_turn_with_no_chat_page_to_ask_is_denied_at_once_with_the_reason() {
    let env = env("I could not run it.");
    let gw = Gateway::start(&env, "heartbeat_minutes = 0\n");
    let (status, answer) = gateway_support::chat(gw.port, "me", "make the file");
    assert_eq!((status, answer.as_str()), (200, "I could not run it."));
    let result = env.request_body(1).to_string();
    assert!(result.contains("nobody can be asked in this chat now"), "{result}");
    assert!(!env.home.path().join("workspace/made-by-bash.txt").exists());
}

#[tokio::test(flavor = "multi_thread")]
async fn background_jobs_are_pushed_to_the_web_chat_when_they_start_and_finish() {
    let start = Turn::tool("background_run", json!({"command": "sleep 2; echo done"}));
    let script =
        vec![start.into(), Turn::text("Started it.").into(), Turn::text("It finished.").into()];
    let env = Env::new(Wire::OpenAi, script);
    let gw = Gateway::start(&env, "heartbeat_minutes = 0\npermission_mode = \"bypass\"\n");
    let mut page = open(gw.port, "jobs").await;
    say(&mut page, json!({"type": "message", "content": "run it in the background"})).await;
    // Frames in order; the page asks for nothing.
    let mut jobs = Vec::new();
    loop {
        let f = frame(&mut page).await;
        match f["type"].as_str() {
            Some("jobs") => jobs.push(f["jobs"].clone()),
            Some("message") if f["content"] == "It finished." => break,
            _ => {}
        }
    }
    assert_eq!(jobs.first().unwrap()[0]["command"], "sleep 2; echo done", "{jobs:?}");
    assert_eq!(jobs.last().unwrap()[0]["status"], "completed", "{jobs:?}");
    assert_eq!(jobs.last().unwrap()[0]["exit_code"], 0, "{jobs:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_page_that_reconnects_gets_the_waiting_request_again_and_answering_it_finishes_the_turn()
{
    let env = env("Done after the reload.");
    let gw = Gateway::start(&env, "heartbeat_minutes = 0\n");
    let mut page = open(gw.port, "reloaded").await;
    say(&mut page, json!({"type": "message", "content": "make the file"})).await;
    let card = frame_of(&mut page, "approval").await;
    let id = card["id"].as_str().unwrap().to_string();
    // The page goes away (a reload, a chat switch) and comes back.
    drop(page);
    let url =
        format!("ws://127.0.0.1:{}/ws?token={}&chat=reloaded", gw.port, gateway_support::TOKEN);
    let (mut page, _) = tokio_tungstenite::connect_async(&url).await.expect("socket");
    let ready = frame(&mut page).await;
    assert_eq!(
        (ready["type"].as_str(), ready["running"].as_bool()),
        (Some("ready"), Some(true)),
        "{ready}"
    );
    let again = frame_of(&mut page, "approval").await;
    assert_eq!(again, card, "the same request, with its buttons' id");
    // A second tab on the chat is shown it too.
    let (mut tab, _) = tokio_tungstenite::connect_async(&url).await.expect("socket");
    assert_eq!(frame(&mut tab).await["type"], "ready");
    assert_eq!(frame_of(&mut tab, "approval").await["id"], id);

    say(&mut page, json!({"type": "approve", "id": id, "choice": "once"})).await;
    assert_eq!(frame_of(&mut page, "approval_resolved").await["outcome"], "approved once");
    // The turn goes on in the new page: the call's result, then the answer.
    let mut finished = false;
    let reply = loop {
        let f = frame(&mut page).await;
        if f["event"]["type"] == "tool_call_finished" {
            finished = true;
        }
        if f["type"] == "reply" {
            break f;
        }
    };
    assert!(finished, "the page saw the call finish");
    assert_eq!(reply["content"], "Done after the reload.");
    assert!(env.home.path().join("workspace/made-by-bash.txt").exists());
    // Nothing waits any more: a page opening now is not told of a turn.
    let (mut later, _) = tokio_tungstenite::connect_async(&url).await.expect("socket");
    assert_eq!(frame(&mut later).await["running"], false);
}

#[test]
fn approve_without_an_id_answers_the_only_request_waiting_in_the_chat() {
    let fake = FakeTelegram::start();
    let env = env("Done without an id.");
    let _gw = Gateway::start(&env, &config(&fake, ""));
    fake.user_says(42, "Ann", "/approve");
    wait_for(30, "the reply", || !fake.sent_to(42).is_empty());
    assert!(
        fake.sent_to(42)[0].contains("No approval request is waiting in this chat"),
        "{:?}",
        fake.sent_to(42)
    );
    fake.user_says(42, "Ann", "make the file");
    button(&fake, "Approve once");
    fake.user_says(42, "Ann", "/approve");
    wait_for(30, "the answer", || {
        fake.sent_to(42).iter().any(|t| t.contains("Done without an id"))
    });
    assert!(env.home.path().join("workspace/made-by-bash.txt").exists());
    assert!(fake.sent_to(42).iter().any(|t| t == "bash: approved once."), "{:?}", fake.sent_to(42));
}
