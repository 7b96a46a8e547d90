//! The gateway against strangers on the network (red-team cases, named
//! `redteam_gateway_*`): bodies are not read before the token is checked;
//! half-open connections are dropped; connections, chat pages, addresses and
//! senders are capped; `/ws` takes only the gateway's own origin; the token
//! is never printed; what the gateway writes under the home is private.

mod common;
mod gateway_support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

use common::{Env, Wire};
use ferroclaw_testkit::Turn;
use gateway_support::fake_telegram::FakeTelegram;
use gateway_support::{Gateway, TOKEN, request, wait_for};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

/// Sends `head` (and no more) and returns what comes back before the server
/// closes or `wait` passes.
fn send_head(port: u16, head: &str, wait: Duration) -> String {
    let mut tcp = TcpStream::connect(("127.0.0.1", port)).unwrap();
    tcp.set_read_timeout(Some(wait)).unwrap();
    tcp.write_all(head.as_bytes()).unwrap();
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    while let Ok(n) = tcp.read(&mut buf) {
        if n == 0 {
            break;
        }
        out.extend_from_slice(&buf[..n]);
        if String::from_utf8_lossy(&out).contains("\r\n\r\n") {
            break;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// True when the server closes the connection (EOF or reset) within `wait`.
fn closed_within(tcp: &mut TcpStream, wait: Duration) -> bool {
    tcp.set_read_timeout(Some(wait)).unwrap();
    let mut buf = [0u8; 64];
    match tcp.read(&mut buf) {
        Ok(0) => true,
        Ok(_) => false,
        Err(e) => {
            !matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut)
        }
    }
}

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
fn redteam_gateway_half_open_connections_are_dropped_and_connections_are_capped() {
    let env = Env::new(Wire::OpenAi, vec![]);
    let gw = Gateway::start(
        &env,
        "heartbeat_minutes = 0\nheader_timeout_secs = 3\nmax_connections = 4\n",
    );
    // A request that never finishes its headers is cut off.
    let mut half = TcpStream::connect(("127.0.0.1", gw.port)).unwrap();
    half.write_all(b"GET /health HTTP/1.1\r\nhost: x\r\n").unwrap();
    assert!(closed_within(&mut half, Duration::from_secs(20)), "a half-open connection stayed");
    // Four silent connections fill the cap: a fifth is closed at once...
    let held: Vec<TcpStream> =
        (0..4).map(|_| TcpStream::connect(("127.0.0.1", gw.port)).unwrap()).collect();
    std::thread::sleep(Duration::from_millis(200));
    let mut fifth = TcpStream::connect(("127.0.0.1", gw.port)).unwrap();
    let _ = fifth.write_all(b"GET /health HTTP/1.1\r\nhost: x\r\n\r\n");
    assert!(closed_within(&mut fifth, Duration::from_secs(5)), "the cap let a fifth in");
    // ...and once the silent ones are dropped, the gateway answers again.
    wait_for(20, "the gateway to answer again", || {
        request(gw.port, "GET", "/health", None, None).is_some_and(|(s, _)| s == 200)
    });
    drop(held);
}

#[test]
fn redteam_gateway_one_address_is_rate_limited_with_429_and_retry_after() {
    let env = Env::new(Wire::OpenAi, vec![]);
    let gw = Gateway::start(&env, "heartbeat_minutes = 0\nrequests_per_minute = 5\n");
    // Gateway::start used some of the budget polling /health.
    let mut last = String::new();
    for _ in 0..10 {
        last = send_head(
            gw.port,
            "GET /v1/models HTTP/1.1\r\nhost: x\r\nauthorization: Bearer wrong\r\n\r\n",
            Duration::from_secs(10),
        );
        if last.starts_with("HTTP/1.1 429") {
            break;
        }
    }
    assert!(last.starts_with("HTTP/1.1 429"), "{last}");
    assert!(last.to_ascii_lowercase().contains("retry-after:"), "{last}");
}

#[test]
fn redteam_gateway_sockets_need_the_own_origin_and_are_capped() {
    let env = Env::new(Wire::OpenAi, vec![]);
    let gw = Gateway::start(&env, "heartbeat_minutes = 0\nmax_websockets = 2\n");
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let url = format!("ws://127.0.0.1:{}/ws?token={TOKEN}&chat=c", gw.port);
    let open = |origin: Option<&str>| {
        let mut req = url.clone().into_client_request().unwrap();
        if let Some(o) = origin {
            req.headers_mut().insert("origin", o.parse().unwrap());
        }
        runtime.block_on(tokio_tungstenite::connect_async(req))
    };
    let status = |r: Result<_, tokio_tungstenite::tungstenite::Error>| match r {
        Err(tokio_tungstenite::tungstenite::Error::Http(response)) => response.status().as_u16(),
        Err(e) => panic!("{e}"),
        Ok(_) => 101,
    };
    assert_eq!(status(open(Some("http://evil.example"))), 403, "a foreign page opened the chat");
    let own = format!("http://127.0.0.1:{}", gw.port);
    let first = open(Some(&own)).expect("the gateway's own page");
    let second = open(None).expect("a client without Origin, with the token");
    assert_eq!(status(open(None)), 503, "the cap of 2 let a third socket in");
    drop((first, second));
    wait_for(10, "a socket slot to free", || open(None).is_ok());
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
    wait_for(15, "Ann's answer", || !fake.sent_to(8).is_empty());
    wait_for(15, "the flood's answers", || fake.sent_to(7).len() >= 3);
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
    let port = gateway_support::free_port();
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
fn redteam_gateway_oversized_headers_bodies_and_socket_messages_are_refused() {
    let env = Env::new(Wire::OpenAi, vec![]);
    let gw = Gateway::start(&env, "heartbeat_minutes = 0\n");
    // 100 KB of headers.
    let head = format!("GET /health HTTP/1.1\r\nhost: x\r\nx-pad: {}\r\n\r\n", "a".repeat(100_000));
    let answer = send_head(gw.port, &head, Duration::from_secs(10));
    assert!(answer.is_empty() || answer.starts_with("HTTP/1.1 431"), "{answer:?}");
    // A body over 4 MB, with the token.
    let big =
        serde_json::json!({"messages": [{"role": "user", "content": "x".repeat(5 * 1024 * 1024)}]});
    let status =
        request(gw.port, "POST", "/v1/chat/completions", Some(TOKEN), Some(&big)).map(|r| r.0);
    assert!(matches!(status, Some(413) | None), "{status:?}");
    // A 2 MB chat-page message closes that socket; the gateway goes on.
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        use futures_util::{SinkExt, StreamExt};
        let url = format!("ws://127.0.0.1:{}/ws?token={TOKEN}&chat=big", gw.port);
        let (mut socket, _) = tokio_tungstenite::connect_async(url).await.unwrap();
        let _ready = socket.next().await;
        let frame = serde_json::json!({"type": "message", "content": "x".repeat(2 * 1024 * 1024)});
        let _ = socket
            .send(tokio_tungstenite::tungstenite::Message::Text(frame.to_string().into()))
            .await;
        let end = tokio::time::timeout(Duration::from_secs(20), async {
            loop {
                match socket.next().await {
                    None
                    | Some(Err(_))
                    | Some(Ok(tokio_tungstenite::tungstenite::Message::Close(_))) => break,
                    Some(Ok(_)) => {}
                }
            }
        })
        .await;
        assert!(end.is_ok(), "the socket stayed open after a 2 MB message");
    });
    assert_eq!(request(gw.port, "GET", "/health", None, None).map(|r| r.0), Some(200));
    assert!(env.server.requests().is_empty());
}

#[test]
fn redteam_gateway_a_chat_page_that_stops_reading_is_disconnected() {
    // A 12 MB answer in 64 KB deltas: far more than the 4 MB that may wait
    // for one page, plus what the kernel's socket buffers hold.
    let answer = format!("{} ", "x".repeat(64 * 1024 - 1)).repeat(192);
    let env = Env::new(Wire::OpenAi, vec![Turn::text(answer).into()]);
    let gw = Gateway::start(&env, "heartbeat_minutes = 0\n");
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
        let hello = serde_json::json!({"type": "message", "content": "write a lot"});
        socket.send(Message::Text(hello.to_string().into())).await.unwrap();
        // The page reads nothing until the gateway gives up on it...
        let gave_up = || {
            std::fs::read_to_string(&gw.stderr_path)
                .unwrap_or_default()
                .contains("a chat page stopped reading; disconnected")
        };
        wait_for(90, "the gateway to give up on a page that does not read", gave_up);
        // ...then finds its stream cut off before the reply.
        let mut replied = false;
        while let Some(Ok(frame)) = socket.next().await {
            if let Message::Text(text) = frame {
                replied |= text.contains("\"type\":\"reply\"");
            }
        }
        assert!(!replied, "the whole answer waited for a page that did not read");
    });
    assert_eq!(request(gw.port, "GET", "/health", None, None).map(|r| r.0), Some(200));
}
