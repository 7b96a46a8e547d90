//! Stopping the gateway and sharing its home: SIGHUP drains as SIGTERM does
//! (turns in flight finish, exit 0); while it drains, new requests to the
//! web app, `/api/` and `/v1/` get 503 with `Retry-After` instead of a
//! reset connection; a second gateway on a home another one runs on is
//! refused (exit 2) with the first one's pid and port, and a gateway killed
//! with SIGKILL leaves no lock behind.

use crate::common;
use crate::gateway_support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use common::{Env, Wire, run};
use ferroclaw_testkit::Turn;
use gateway_support::{Gateway, TOKEN, chat, wait_for};
use serde_json::{Value, json};

/// A model whose first answer runs bash until the test creates `release` in
/// the gateway's workspace (the turn stays in flight as long as the test
/// needs), then says "Finished anyway.".
fn held_turn_env() -> Env {
    let wait = "while [ ! -e release ]; do sleep 0.05; done; echo released";
    Env::new(
        Wire::OpenAi,
        vec![
            Turn::tool("bash", json!({ "command": wait })).into(),
            Turn::text("Finished anyway.").into(),
        ],
    )
}

const HELD_CONFIG: &str = "heartbeat_minutes = 0\npermission_mode = \"bypass\"\n";

/// Starts a chat whose turn stays in flight until [`release`].
fn start_held_turn(env: &Env, gw: &Gateway) -> std::thread::JoinHandle<(u16, String)> {
    let port = gw.port;
    let asker = std::thread::spawn(move || chat(port, "held", "take your time"));
    wait_for(30, "the turn to run its bash call", || env.server.requests().len() == 1);
    asker
}

fn release(env: &Env) {
    std::fs::write(env.home.path().join("workspace/release"), "").unwrap();
}

fn signal(gw: &Gateway, sig: &str) {
    let pid = gw.child.id().to_string();
    assert!(std::process::Command::new("kill").args([sig, &pid]).status().unwrap().success());
}

/// One request with `connection: close`; the raw response, or what the
/// connection ended with.
fn raw(port: u16, method: &str, path: &str, body: Option<&Value>) -> String {
    let mut tcp = TcpStream::connect(("127.0.0.1", port)).expect("the gateway still listens");
    tcp.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let body = body.map(Value::to_string).unwrap_or_default();
    let head = format!(
        "{method} {path} HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\nconnection: close\r\n\
         authorization: Bearer {TOKEN}\r\ncontent-type: application/json\r\n\
         content-length: {}\r\n\r\n{body}",
        body.len()
    );
    if let Err(e) = tcp.write_all(head.as_bytes()) {
        return format!("write failed: {e}");
    }
    let mut out = String::new();
    match tcp.read_to_string(&mut out) {
        Ok(_) => out,
        Err(e) => format!("{out}read failed: {e}"),
    }
}

/// Waits until the gateway answers `/health` with 503: it is draining.
fn wait_until_draining(port: u16) {
    wait_for(30, "the drain to begin", || {
        raw(port, "GET", "/health", None).starts_with("HTTP/1.1 503")
    });
}

#[test]
fn sighup_drains_like_sigterm_the_turn_in_flight_finishes_and_the_gateway_exits_0() {
    let env = held_turn_env();
    let mut gw = Gateway::start(&env, HELD_CONFIG);
    let asker = start_held_turn(&env, &gw);
    signal(&gw, "-HUP");
    wait_until_draining(gw.port);
    release(&env);
    let (status, answer) = asker.join().unwrap();
    let code = gw.child.wait().unwrap().code();
    let stderr = std::fs::read_to_string(&gw.stderr_path).unwrap_or_default();
    assert_eq!((status, answer.as_str()), (200, "Finished anyway."), "{stderr}");
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stderr.contains("SIGHUP: stopping"), "{stderr}");
    let session = env
        .session_files()
        .into_iter()
        .find(|p| p.file_name().is_some_and(|n| n == "gw-web-api-held.jsonl"))
        .expect("the chat's session file");
    let text = std::fs::read_to_string(session).unwrap();
    assert!(text.contains("Finished anyway."), "the answer is kept: {text}");
}

#[test]
fn while_draining_new_requests_get_503_with_retry_after_instead_of_a_reset() {
    let env = held_turn_env();
    let mut gw = Gateway::start(&env, HELD_CONFIG);
    let port = gw.port;
    let asker = start_held_turn(&env, &gw);
    signal(&gw, "-TERM");
    wait_until_draining(port);
    let ask = json!({"model": "ferroclaw", "user": "late", "messages": [{"role": "user", "content": "hi"}]});
    for (method, path, body) in [
        ("POST", "/v1/chat/completions", Some(&ask)),
        ("GET", "/v1/models", None),
        ("GET", "/api/sessions", None),
        ("GET", "/", None),
    ] {
        let response = raw(port, method, path, body);
        assert!(response.starts_with("HTTP/1.1 503"), "{method} {path}: {response}");
        assert!(
            response.to_ascii_lowercase().contains("\r\nretry-after: "),
            "{method} {path}: {response}"
        );
        let body = response.split_once("\r\n\r\n").map(|(_, b)| b).unwrap_or_default();
        if path.starts_with("/v1/") {
            let error: Value = serde_json::from_str(body).unwrap_or(Value::Null);
            assert_eq!(error["error"]["type"], "server_error", "{body}");
            assert!(error["error"]["message"].as_str().is_some_and(|m| m.contains("stopping")));
        }
    }
    // The turn that was running finishes and is answered; then the gateway ends.
    release(&env);
    assert_eq!(asker.join().unwrap(), (200, "Finished anyway.".to_string()));
    let code = gw.child.wait().unwrap().code();
    let stderr = std::fs::read_to_string(&gw.stderr_path).unwrap_or_default();
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(env.server.requests().len(), 2, "the late request never reached the model");
}

#[test]
fn a_second_gateway_on_the_same_home_exits_2_naming_the_first_ones_pid_and_port() {
    let env = gateway_support::echo_env();
    let first = Gateway::start(&env, "heartbeat_minutes = 0\n");
    let other_port = gateway_support::free_port();
    let (code, _, stderr) = run(env.cmd().args(["gateway", "--port", &other_port.to_string()]));
    assert_eq!(code, 2, "{stderr}");
    let pid = first.child.id();
    assert!(
        stderr.contains(&format!("another ferroclaw gateway (pid {pid}, port {})", first.port)),
        "{stderr}"
    );
    assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
    assert_eq!(chat(first.port, "u", "still here?"), (200, "echo: still here?".to_string()));
}

#[test]
fn a_gateway_killed_with_sigkill_leaves_no_lock_behind() {
    let env = gateway_support::echo_env();
    let mut first = Gateway::start(&env, "heartbeat_minutes = 0\n");
    first.child.kill().unwrap();
    first.child.wait().unwrap();
    let again = Gateway::spawn(&env, gateway_support::free_port());
    assert_eq!(chat(again.port, "u", "back"), (200, "echo: back".to_string()));
}
