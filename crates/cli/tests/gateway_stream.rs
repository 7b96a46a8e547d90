//! Streamed answers arrive whole and in order, under load: 200 through the
//! official OpenAI Python client and 200 through the web chat's socket, many
//! at once, each joining to exactly the final answer (regression: the final
//! answer used to overtake the last deltas and be sent again as a delta).

use crate::common;
use crate::gateway_support;

use common::{Env, Wire};
use ferroclaw_testkit::{ServerOptions, Turn};
use futures_util::{SinkExt, StreamExt};
use gateway_support::{Gateway, TOKEN};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;

/// The scripted answer: many words, so many deltas.
const ANSWER: &str =
    "The quick brown fox jumps over the lazy dog, then naps in the warm afternoon sun.";
/// Streamed answers per route.
const ANSWERS: usize = 200;
/// Chat pages open at once.
const SOCKETS: usize = 10;

fn busy_gateway() -> (Env, Gateway) {
    let options = ServerOptions { repeat: true, ..Default::default() };
    let env = Env::with_options(Wire::OpenAi, vec![Turn::text(ANSWER).into()], options);
    let gw = Gateway::start(
        &env,
        "heartbeat_minutes = 0\nmax_concurrent_turns = 8\nrequests_per_minute = 0\n",
    );
    (env, gw)
}

#[test]
fn streamed_answers_through_the_python_client_join_exactly_to_the_answer_under_load() {
    if !gateway_support::python_openai() {
        return;
    }
    let (_env, gw) = busy_gateway();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../gateway/tests/openai_stream.py");
    let out = std::process::Command::new("timeout")
        .args(["120", "python3", script, &gw.url(), TOKEN, &ANSWERS.to_string(), ANSWER])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains(&format!("{ANSWERS} of {ANSWERS}")), "{stdout}");
}

/// One chat page: sends its share of messages one after another and checks
/// each answer: the deltas before the reply join to it, none come after.
async fn chat_page(port: u16, page: usize, messages: usize) -> Vec<String> {
    let url = format!("ws://127.0.0.1:{port}/ws?token={TOKEN}&chat=page{page}");
    let (mut socket, _) = tokio_tungstenite::connect_async(url).await.expect("socket");
    let mut problems = Vec::new();
    let next_frame = async |socket: &mut tokio_tungstenite::WebSocketStream<_>| -> Value {
        loop {
            match socket.next().await {
                Some(Ok(Message::Text(t))) => return serde_json::from_str(&t).unwrap(),
                Some(Ok(_)) => continue,
                other => panic!("socket ended: {other:?}"),
            }
        }
    };
    assert_eq!(next_frame(&mut socket).await["type"], "ready");
    // The last question is a chat command: its reply shows that no stray
    // delta of the answer before it came late.
    for i in 0..=messages {
        let content = if i == messages { "/help".to_string() } else { format!("question {i}") };
        let frame = json!({"type": "message", "content": content}).to_string();
        socket.send(Message::Text(frame.into())).await.unwrap();
        let (mut joined, mut events) = (String::new(), Vec::new());
        let reply = loop {
            let frame = next_frame(&mut socket).await;
            match frame["type"].as_str() {
                Some("event") => {
                    let event = &frame["event"];
                    events.push(event["type"].as_str().unwrap_or_default().to_string());
                    if event["type"] == "text_delta" {
                        joined.push_str(event["text"].as_str().unwrap_or_default());
                    }
                }
                Some("reply") => break frame["content"].as_str().unwrap_or_default().to_string(),
                other => panic!("unexpected frame {other:?}: {frame}"),
            }
        };
        if i == messages {
            if !events.is_empty() {
                problems.push(format!("page {page}: events after the last reply: {events:?}"));
            }
        } else if joined != reply || reply != ANSWER {
            problems.push(format!("page {page} answer {i}: deltas {joined:?}, reply {reply:?}"));
        } else if events.iter().filter(|e| *e == "finished").count() != 1
            || events.last().map(String::as_str) != Some("finished")
        {
            // Every event of the turn, its last included, comes before the reply.
            problems.push(format!("page {page} answer {i}: events out of order: {events:?}"));
        }
    }
    problems
}

#[test]
fn streamed_answers_through_the_web_socket_join_exactly_to_the_reply_under_load() {
    let (_env, gw) = busy_gateway();
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    let problems: Vec<String> = runtime.block_on(async {
        let pages: Vec<_> = (0..SOCKETS)
            .map(|page| tokio::spawn(chat_page(gw.port, page, ANSWERS / SOCKETS)))
            .collect();
        let mut all = Vec::new();
        for page in pages {
            all.extend(page.await.unwrap());
        }
        all
    });
    assert!(
        problems.is_empty(),
        "{} problems, first: {:#?}",
        problems.len(),
        &problems[..problems.len().min(5)]
    );
}
