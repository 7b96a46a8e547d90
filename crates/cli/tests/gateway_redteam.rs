//! The gateway against strangers on the network, where a case needs a
//! gateway of its own (red-team cases, named `redteam_gateway_*`): 24
//! unauthenticated 4 MB uploads take no memory; a flooding sender is rate
//! limited; the token is never printed and what the gateway writes under the
//! home is private; a chat page that stops reading is disconnected. The cases
//! one shared gateway can answer (headers, bodies, caps, origins, rate limits)
//! are data in `tests/redteam/gateway.toml`.

use crate::common;
use crate::gateway_support;

use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

use common::{Env, Wire};
use ferroclaw_testkit::Turn;
use gateway_support::fake_telegram::FakeTelegram;
use gateway_support::{Gateway, TOKEN, free_port, request, send_head, wait_for};

#[test]
fn redteam_gateway_unauthenticated_bodies_are_refused_before_they_are_read() {
    let env = Env::new(Wire::OpenAi, vec![]);
    let gw = Gateway::start(&env, "heartbeat_minutes = 0\n");
    // Headers announcing 4 MB, and no body: the answer comes without it.
    let head = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
        4 * 1024 * 1024
    );
    let answer = send_head(gw.port, &head, Duration::from_secs(20));
    assert!(answer.starts_with("HTTP/1.1 401"), "{answer:?}");
    // 24 strangers uploading 4 MB each at once take no memory to speak of.
    let before = gw.rss_kib();
    let port = gw.port;
    let uploads: Vec<_> = (0..24)
        .map(|_| {
            std::thread::spawn(move || {
                let body = serde_json::json!({"messages": [{"role": "user", "content": "x".repeat(4 * 1024 * 1024 - 64)}]});
                request(port, "POST", "/v1/chat/completions", None, Some(&body)).map(|(s, _)| s)
            })
        })
        .collect();
    for upload in uploads {
        // The server may answer and close before the whole body is sent.
        assert!(matches!(upload.join().unwrap(), Some(401) | None));
    }
    let grown_mib = gw.rss_kib().saturating_sub(before) / 1024;
    assert!(grown_mib < 40, "memory grew by {grown_mib} MiB");
    assert!(env.server.requests().is_empty());
}

#[test]
fn redteam_gateway_a_flooding_sender_is_rate_limited_and_told_once() {
    let fake = FakeTelegram::start();
    let options = ferroclaw_testkit::ServerOptions { repeat: true, ..Default::default() };
    let env = Env::with_options(Wire::OpenAi, vec![Turn::text("ok").into()], options);
    let config = format!(
        "heartbeat_minutes = 0\nmessages_per_minute = 2\n[channels.telegram]\nenabled = true\ndm_policy = \"open\"\ntoken = \"TEST:TOKEN\"\napi_base = \"{}\"\npoll_timeout_secs = 1\n",
        fake.base
    );
    let _gw = Gateway::start(&env, &config);
    for i in 0..8 {
        fake.user_says(7, "Mallory", &format!("spam {i}"));
    }
    fake.user_says(8, "Ann", "hello");
    wait_for(30, "Ann's answer", || !fake.sent_to(8).is_empty());
    wait_for(30, "the flood's answers", || fake.sent_to(7).len() >= 3);
    std::thread::sleep(Duration::from_millis(500));
    let to_flooder = fake.sent_to(7);
    assert_eq!(to_flooder.iter().filter(|t| t.as_str() == "ok").count(), 2, "{to_flooder:?}");
    assert_eq!(
        to_flooder.iter().filter(|t| t.contains("try again in")).count(),
        1,
        "{to_flooder:?}"
    );
    assert_eq!(env.server.requests().len(), 3, "only 2 of the flood reached the model");
}

#[test]
fn redteam_gateway_prints_where_the_token_is_never_the_token_and_writes_private_files() {
    let env = Env::new(Wire::OpenAi, vec![]);
    let port = free_port();
    // No token in config: the gateway makes one.
    env.write_home_config(&format!("[gateway]\nport = {port}\nheartbeat_minutes = 0\n"));
    let gw = Gateway::spawn(&env, port);
    let home = env.home.path();
    let token_file = home.join("gateway/token");
    let token = std::fs::read_to_string(&token_file).unwrap().trim().to_string();
    assert_eq!(token.len(), 48);
    let (_, stderr) = gw.terminate();
    let log = std::fs::read_to_string(home.join("logs/gateway.log")).unwrap();
    assert!(!stderr.contains(&token) && !log.contains(&token), "the token was printed: {stderr}");
    assert!(stderr.contains(&token_file.display().to_string()), "{stderr}");
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    for file in ["gateway/token", "gateway/state.json", "logs/gateway.log"] {
        assert_eq!(mode(&home.join(file)), 0o600, "{file}");
    }
    for dir in ["gateway", "logs"] {
        assert_eq!(mode(&home.join(dir)), 0o700, "{dir}");
    }
}

#[test]
fn redteam_gateway_a_chat_page_that_stops_reading_is_disconnected() {
    // Four answers of 1.9 MB in 64 KB deltas (each under the answer's bound
    // at the max_tokens ceiling), 15 MB in all with their events: far more
    // than the 4 MB that may wait for one page, plus what the kernel's socket
    // buffers hold.
    const TURNS: usize = 4;
    let answer =
        |n: usize| format!("{} end-{n}", format!("{} ", "x".repeat(64 * 1024 - 1)).repeat(30));
    let env = Env::new(Wire::OpenAi, (1..=TURNS).map(|n| Turn::text(answer(n)).into()).collect());
    let port = free_port();
    env.write_home_config(&format!(
        "max_tokens = 128000\n\n[gateway]\nport = {port}\ntoken = \"{TOKEN}\"\nheartbeat_minutes = 0\n"
    ));
    let gw = Gateway::spawn(&env, port);
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        use futures_util::{SinkExt, StreamExt};
        use tokio_tungstenite::tungstenite::Message;
        let tcp = tokio::net::TcpSocket::new_v4().unwrap();
        tcp.set_recv_buffer_size(16 * 1024).unwrap();
        let tcp = tcp.connect(([127, 0, 0, 1], gw.port).into()).await.unwrap();
        let url = format!("ws://127.0.0.1:{}/ws?token={TOKEN}&chat=slow", gw.port);
        let (mut socket, _) = tokio_tungstenite::client_async(url, tcp).await.unwrap();
        let _ready = socket.next().await;
        for n in 1..=TURNS {
            let hello =
                serde_json::json!({"type": "message", "content": format!("write a lot ({n})")});
            socket.send(Message::Text(hello.to_string().into())).await.unwrap();
        }
        // The page reads nothing until the gateway gives up on it...
        let gave_up = || {
            std::fs::read_to_string(&gw.stderr_path)
                .unwrap_or_default()
                .contains("a chat page stopped reading; disconnected")
        };
        wait_for(90, "the gateway to give up on a page that does not read", gave_up);
        // ...then finds its stream cut off before the last reply.
        let mut replies = 0;
        while let Some(Ok(frame)) = socket.next().await {
            if let Message::Text(text) = frame {
                replies += usize::from(text.contains("\"type\":\"reply\""));
            }
        }
        assert!(replies < TURNS, "every answer waited for a page that did not read");
    });
    assert_eq!(request(gw.port, "GET", "/health", None, None).map(|r| r.0), Some(200));
}
