//! `ferroclaw gateway`'s web channel end to end: the OpenAI-compatible API
//! (with the official Python client), the web chat in headless Chromium,
//! chat commands, and a SIGTERM in the middle of a turn.

mod common;
mod gateway_support;

use std::time::Duration;

use common::{Env, Wire};
use ferroclaw_testkit::{Fault, Turn};
use gateway_support::{Gateway, TOKEN, chat, request, skip_or_fail, wait_for};

#[test]
fn the_openai_python_client_gets_plain_and_streamed_answers() {
    if !gateway_support::python_openai_available() {
        return skip_or_fail(
            "python3 with the openai package is not installed (pip install openai)",
        );
    }
    let env = Env::new(
        Wire::OpenAi,
        vec![Turn::text("Plain answer.").into(), Turn::text("Streamed answer.").into()],
    );
    let gw = Gateway::start(&env, "");
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../gateway/tests/openai_client.py");
    let out =
        std::process::Command::new("python3").args([script, &gw.url(), TOKEN]).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    // Both requests went to one session, so the second carried the first's history.
    let second = env.request_body(1);
    let texts: Vec<String> = second["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["content"].as_str().unwrap_or_default().to_string())
        .collect();
    assert!(texts.iter().any(|t| t == "Plain answer."), "{texts:?}");
}

#[test]
fn the_api_refuses_a_wrong_token_and_health_needs_none() {
    let env = Env::new(Wire::OpenAi, vec![]);
    let gw = Gateway::start(&env, "");
    let (status, _) = request(gw.port, "GET", "/v1/models", Some("wrong"), None).unwrap();
    assert_eq!(status, 401);
    let (status, body) = request(gw.port, "GET", "/health", None, None).unwrap();
    assert_eq!((status, body.contains("ok")), (200, true));
    assert!(env.server.requests().is_empty(), "nothing reached the model");
}

#[test]
fn chat_commands_answer_without_the_model_and_new_starts_another_session() {
    let env =
        Env::new(Wire::OpenAi, vec![Turn::text("First.").into(), Turn::text("Second.").into()]);
    let gw = Gateway::start(&env, "");
    assert!(chat(gw.port, "cmd", "/help").1.contains("/compact"));
    assert_eq!(chat(gw.port, "cmd", "hello").1, "First.");
    let status = chat(gw.port, "cmd", "/status").1;
    assert!(status.contains("gw-web-api-cmd") && status.contains("Messages 2"), "{status}");
    assert!(chat(gw.port, "cmd", "/usage").1.contains("output tokens"));
    assert!(chat(gw.port, "cmd", "/new").1.contains("new conversation"));
    assert_eq!(chat(gw.port, "cmd", "again").1, "Second.");
    // After /new the model saw only the new conversation.
    assert_eq!(
        env.request_body(1)["messages"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| m["role"] != "system")
            .count(),
        1
    );
    assert_eq!(env.server.requests().len(), 2, "commands never reached the model");
}

#[test]
fn sigterm_mid_turn_finishes_the_turn_delivers_and_persists_the_answer() {
    let slow = Fault::SlowFirstByte { delay_ms: 1500, then: Turn::text("Finished anyway.") };
    let env = Env::new(Wire::OpenAi, vec![slow.into()]);
    let gw = Gateway::start(&env, "");
    let port = gw.port;
    let asker = std::thread::spawn(move || chat(port, "term", "take your time"));
    std::thread::sleep(Duration::from_millis(600));
    let (code, stderr) = gw.terminate();
    let (status, answer) = asker.join().unwrap();
    assert_eq!((status, answer.as_str()), (200, "Finished anyway."), "{stderr}");
    assert_eq!(code, 0, "{stderr}");
    let session = env
        .session_files()
        .into_iter()
        .find(|p| p.to_string_lossy().contains("gw-web-api-term"))
        .expect("session file");
    let text = std::fs::read_to_string(session).unwrap();
    assert!(text.contains("Finished anyway."), "{text}");
    assert!(stderr.contains("shutting down"), "{stderr}");
    let log = std::fs::read_to_string(env.home.path().join("logs/gateway.log")).unwrap();
    assert!(log.contains("gateway stopped"), "{log}");
}

#[test]
fn the_web_chat_page_streams_the_answer_in_headless_chromium() {
    let Some(chromium) = ["/usr/bin/chromium", "/usr/bin/chromium-browser"]
        .into_iter()
        .find(|p| std::path::Path::new(p).exists())
    else {
        return skip_or_fail("chromium is not installed (apt-get install -y chromium)");
    };
    let env = Env::new(
        Wire::OpenAi,
        vec![Turn::text("Hello from the scripted model, streamed in pieces.").into()],
    );
    let gw = Gateway::start(&env, "");
    let url = format!("{}/#token={TOKEN}", gw.url());
    let found = gateway_support::browser::type_and_read_answer(chromium, &url, "hi there");
    assert!(found.answer.contains("Hello from the scripted model"), "{found:?}");
    assert!(found.deltas > 1, "the answer was streamed: {found:?}");
    assert!(found.user_shown, "{found:?}");
    wait_for(30, "the session file", || !env.session_files().is_empty());
}
