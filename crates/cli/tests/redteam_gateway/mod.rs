//! The `gateway` kind of red-team case: one real `ferroclaw gateway`, started
//! on the first such case and shared by all (strangers on the network do not
//! need a fresh gateway each). Its limits are set low so that caps are cheap
//! to reach; cases that exhaust a shared budget (the per-address rate limit)
//! come last in `gateway.toml`.
//!
//! Scenarios:
//! - `head`: send `head` (`{port}` filled in) and no more; the answer must
//!   start with `expect_prefix` (or the connection close, when `or_closed`)
//! - `body`: a POST of `bytes` to `path`, with the token when `token = true`;
//!   the status must be one of `expect_status` (or none, when `or_closed`)
//! - `half_open`: a request whose headers never end is cut off
//! - `connection_cap`: `MAX_CONNECTIONS` silent connections; the next is closed
//! - `ws`: a `/ws` upgrade with `origin` and `token`; the status must be `expect_status`
//! - `ws_cap`: `MAX_WEBSOCKETS` sockets held; the next gets 503
//! - `ws_big_message`: a socket sent `bytes` in one message is closed
//! - `rate_limit`: requests from one address end in 429 with `retry-after`

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use serde_json::Value;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

use crate::common::{Env, Wire};
use crate::gateway_support::{Gateway, TOKEN, request, send_head, wait_for};

/// Connections the shared gateway takes at once.
const MAX_CONNECTIONS: usize = 8;
/// Chat sockets the shared gateway takes at once.
const MAX_WEBSOCKETS: usize = 2;
/// Requests a minute per address.
const REQUESTS_PER_MINUTE: usize = 120;

/// The shared gateway, started on first use.
pub(crate) struct SharedGateway {
    started: std::sync::OnceLock<(Env, Gateway)>,
}

impl SharedGateway {
    pub(crate) fn new() -> Self {
        SharedGateway { started: std::sync::OnceLock::new() }
    }

    fn get(&self) -> &Gateway {
        &self
            .started
            .get_or_init(|| {
                let env = Env::new(Wire::OpenAi, vec![]);
                let limits = format!(
                    "header_timeout_secs = 3\nmax_connections = {MAX_CONNECTIONS}\nmax_websockets = {MAX_WEBSOCKETS}\nrequests_per_minute = {REQUESTS_PER_MINUTE}\n"
                );
                // An older build (FERROCLAW_BIN) may not know these keys: run it as it ships.
                let older = std::env::var_os("FERROCLAW_BIN").is_some();
                let config =
                    format!("heartbeat_minutes = 0\n{}", if older { "" } else { limits.as_str() });
                let gw = Gateway::start(&env, &config);
                (env, gw)
            })
            .1
    }
}

/// Runs one `gateway` case.
pub(crate) fn run(case: &Value, shared: &SharedGateway) -> Result<(), String> {
    let port = shared.get().port;
    let fill =
        |s: &str| s.replace("{port}", &port.to_string()).replace("{pad}", &"a".repeat(100_000));
    match case["scenario"].as_str().unwrap_or("") {
        "head" => {
            let head = fill(case["head"].as_str().unwrap_or(""));
            let answer = send_head(port, &head, Duration::from_secs(20));
            let want = case["expect_prefix"].as_str().unwrap_or("HTTP/1.1 ");
            let closed_ok = case["or_closed"].as_bool() == Some(true) && answer.is_empty();
            (answer.starts_with(want) || closed_ok)
                .then_some(())
                .ok_or_else(|| format!("expected {want:?}, got {:?}", first_line(&answer)))
        }
        "body" => {
            let bytes = case["bytes"].as_u64().unwrap_or(0) as usize;
            let text = "x".repeat(bytes.saturating_sub(64));
            let body = serde_json::json!({"messages": [{"role": "user", "content": text}]});
            let token = (case["token"].as_bool() == Some(true)).then_some(TOKEN);
            let path = case["path"].as_str().unwrap_or("/v1/chat/completions");
            let status = request(port, "POST", path, token, Some(&body)).map(|r| r.0);
            let allowed: Vec<u64> = case["expect_status"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_u64)
                .collect();
            let ok = match status {
                Some(s) => allowed.contains(&u64::from(s)),
                None => case["or_closed"].as_bool() == Some(true),
            };
            ok.then_some(()).ok_or_else(|| format!("expected {allowed:?}, got {status:?}"))
        }
        "half_open" => {
            let mut half = TcpStream::connect(("127.0.0.1", port)).map_err(|e| e.to_string())?;
            half.write_all(b"GET /health HTTP/1.1\r\nhost: x\r\n").map_err(|e| e.to_string())?;
            closed_within(&mut half, Duration::from_secs(20))
                .then_some(())
                .ok_or_else(|| "a half-open connection stayed".into())
        }
        "connection_cap" => {
            let held: Vec<TcpStream> = (0..MAX_CONNECTIONS)
                .filter_map(|_| TcpStream::connect(("127.0.0.1", port)).ok())
                .collect();
            std::thread::sleep(Duration::from_millis(200));
            let mut next = TcpStream::connect(("127.0.0.1", port)).map_err(|e| e.to_string())?;
            let _ = next.write_all(b"GET /health HTTP/1.1\r\nhost: x\r\n\r\n");
            let closed = closed_within(&mut next, Duration::from_secs(5));
            drop(held);
            // The silent ones are dropped after the header timeout; wait for that.
            wait_for(20, "the gateway to answer again", || {
                request(port, "GET", "/health", None, None).is_some_and(|(s, _)| s == 200)
            });
            closed.then_some(()).ok_or_else(|| "the cap let one more connection in".into())
        }
        "ws" => {
            let token = case["token"].as_str().unwrap_or(TOKEN);
            let origin = case["origin"].as_str().map(fill);
            let want = case["expect_status"].as_u64().unwrap_or(101);
            let mut got = ws_status(port, token, origin.as_deref());
            // 503 is the socket cap, not the gate under test: an earlier
            // case's socket not yet seen closed. Wait for it.
            let deadline = std::time::Instant::now() + Duration::from_secs(30);
            while got == 503 && want != 503 && std::time::Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(100));
                got = ws_status(port, token, origin.as_deref());
            }
            (u64::from(got) == want)
                .then_some(())
                .ok_or_else(|| format!("expected {want}, got {got}"))
        }
        "ws_cap" => {
            let rt = runtime();
            let url = format!("ws://127.0.0.1:{port}/ws?token={TOKEN}&chat=cap");
            // Sockets the cases before this one opened are released when the
            // gateway sees them close, which on a slow machine takes a moment:
            // keep what opens and try again until the cap's worth is held.
            let mut held = Vec::new();
            let mut refused = String::new();
            let deadline = std::time::Instant::now() + Duration::from_secs(30);
            while held.len() < MAX_WEBSOCKETS {
                match rt.block_on(tokio_tungstenite::connect_async(url.clone())) {
                    Ok(socket) => held.push(socket),
                    Err(e) if std::time::Instant::now() < deadline => {
                        refused = e.to_string();
                        std::thread::sleep(Duration::from_millis(100));
                    }
                    Err(e) => {
                        return Err(format!("the first sockets were refused: {e} ({refused})"));
                    }
                }
            }
            let got = ws_status(port, TOKEN, None);
            drop(held);
            wait_for(30, "a socket slot to free", || ws_status(port, TOKEN, None) == 101);
            (got == 503).then_some(()).ok_or_else(|| format!("expected 503, got {got}"))
        }
        "ws_big_message" => {
            let bytes = case["bytes"].as_u64().unwrap_or(0) as usize;
            runtime().block_on(async {
                use futures_util::{SinkExt, StreamExt};
                use tokio_tungstenite::tungstenite::Message;
                let url = format!("ws://127.0.0.1:{port}/ws?token={TOKEN}&chat=big");
                let (mut socket, _) =
                    tokio_tungstenite::connect_async(url).await.map_err(|e| e.to_string())?;
                let _ready = socket.next().await;
                let frame = serde_json::json!({"type": "message", "content": "x".repeat(bytes)});
                let _ = socket.send(Message::Text(frame.to_string().into())).await;
                let end = tokio::time::timeout(Duration::from_secs(20), async {
                    loop {
                        match socket.next().await {
                            None | Some(Err(_) | Ok(Message::Close(_))) => break,
                            Some(Ok(_)) => {}
                        }
                    }
                })
                .await;
                end.map_err(|_| format!("the socket stayed open after a {bytes}-byte message"))
            })
        }
        "rate_limit" => {
            let head = "GET /v1/models HTTP/1.1\r\nhost: x\r\nauthorization: Bearer wrong\r\n\r\n";
            let mut last = String::new();
            for _ in 0..REQUESTS_PER_MINUTE * 2 {
                last = send_head(port, head, Duration::from_secs(10));
                if last.starts_with("HTTP/1.1 429") {
                    break;
                }
            }
            let ok = last.starts_with("HTTP/1.1 429")
                && last.to_ascii_lowercase().contains("retry-after:");
            ok.then_some(()).ok_or_else(|| format!("never limited: {:?}", first_line(&last)))
        }
        other => Err(format!("unknown gateway scenario {other:?}")),
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime")
}

/// The status of a `/ws` upgrade (101 when it opened).
fn ws_status(port: u16, token: &str, origin: Option<&str>) -> u16 {
    let url = format!("ws://127.0.0.1:{port}/ws?token={token}&chat=c");
    let Ok(mut req) = url.into_client_request() else { return 0 };
    if let Some(o) = origin.and_then(|o| o.parse().ok()) {
        req.headers_mut().insert("origin", o);
    }
    match runtime().block_on(tokio_tungstenite::connect_async(req)) {
        Ok(_) => 101,
        Err(tokio_tungstenite::tungstenite::Error::Http(response)) => response.status().as_u16(),
        Err(_) => 0,
    }
}

fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or("(nothing)")
}

/// True when the server closes the connection (EOF or reset) within `wait`.
fn closed_within(tcp: &mut TcpStream, wait: Duration) -> bool {
    let _ = tcp.set_read_timeout(Some(wait));
    let mut buf = [0u8; 64];
    match tcp.read(&mut buf) {
        Ok(0) => true,
        Ok(_) => false,
        Err(e) => {
            !matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut)
        }
    }
}
