//! Shared set-up for gateway end-to-end tests: a running `ferroclaw gateway`
//! on a free port, a tiny blocking HTTP client, and a fake Telegram Bot API.
#![allow(dead_code)]

pub(crate) mod browser;
pub(crate) mod fake_telegram;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use ferroclaw_testkit::components::{self, Component};
use ferroclaw_testkit::{LAST_USER, ServerOptions, Turn};

use crate::common::{Env, Wire};

/// The web token of test gateways.
pub(crate) const TOKEN: &str = "test-token";

/// A test home whose model answers every message with `echo: ` and the
/// message's text (OpenAI wire), as often as it is asked.
pub(crate) fn echo_env() -> Env {
    let options = ServerOptions { repeat: true, ..Default::default() };
    Env::with_options(Wire::OpenAi, vec![Turn::text(format!("echo: {LAST_USER}")).into()], options)
}

/// A free local port.
pub(crate) fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// A gateway process; killed when dropped.
pub(crate) struct Gateway {
    pub child: Child,
    pub port: u16,
    /// Where its stderr goes (a pipe nobody reads would fill and block it).
    pub stderr_path: std::path::PathBuf,
}

impl Gateway {
    /// Writes the home config (`extra` appended) and starts the gateway; returns once `/health` answers.
    pub(crate) fn start(env: &Env, extra: &str) -> Gateway {
        let port = free_port();
        env.write_home_config(&format!(
            "[retry]\nmax_attempts = 2\nbase_delay_ms = 10\nmax_delay_ms = 50\n\n[gateway]\nport = {port}\ntoken = \"{TOKEN}\"\n{extra}"
        ));
        Self::spawn(env, port)
    }

    /// Starts `ferroclaw gateway --port PORT` with the config already
    /// written; returns once `/health` answers.
    pub(crate) fn spawn(env: &Env, port: u16) -> Gateway {
        Gateway::spawn_in(env, env.home.path(), port)
    }

    /// The same with `home` as its `FERROCLAW_HOME` (another machine's, say).
    pub(crate) fn spawn_in(env: &Env, home: &std::path::Path, port: u16) -> Gateway {
        Gateway::spawn_with(env, home, port, &[])
    }

    /// The same with more environment variables (`vars`) set.
    pub(crate) fn spawn_with(
        env: &Env,
        home: &std::path::Path,
        port: u16,
        vars: &[(&str, &str)],
    ) -> Gateway {
        let stderr_path = home.join(format!("gateway-{port}.stderr"));
        let child = env
            .std_cmd()
            .env("FERROCLAW_HOME", home)
            .envs(vars.iter().copied())
            .args(["gateway", "--port", &port.to_string()])
            .env("FERROCLAW_LOG", "info")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&stderr_path).unwrap())
            .spawn()
            .unwrap();
        let mut gw = Gateway { child, port, stderr_path };
        // A hang guard, not a timing check: several gateways starting at
        // once on a loaded machine can take a while.
        let deadline = Instant::now() + Duration::from_secs(60);
        while get(port, "/health").is_none_or(|(s, _)| s != 200) {
            if let Ok(Some(status)) = gw.child.try_wait() {
                let err = std::fs::read_to_string(&gw.stderr_path).unwrap_or_default();
                panic!("gateway exited with {status}: {err}");
            }
            assert!(Instant::now() < deadline, "gateway did not come up");
            std::thread::sleep(Duration::from_millis(50));
        }
        gw
    }

    /// `http://127.0.0.1:PORT`.
    pub(crate) fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Sends SIGTERM and waits for the exit code; returns (code, stderr).
    pub(crate) fn terminate(mut self) -> (i32, String) {
        let pid = self.child.id().to_string();
        std::process::Command::new("kill").args(["-TERM", &pid]).status().unwrap();
        let status = self.child.wait().unwrap();
        let err = std::fs::read_to_string(&self.stderr_path).unwrap_or_default();
        (status.code().unwrap_or(-1), err)
    }

    /// The gateway's resident memory in KiB.
    pub(crate) fn rss_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or(0)
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A blocking HTTP/1.1 request; (status, body) or `None` when nothing answers.
pub(crate) fn request(
    port: u16,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: Option<&Value>,
) -> Option<(u16, String)> {
    let mut tcp = TcpStream::connect(("127.0.0.1", port)).ok()?;
    tcp.set_read_timeout(Some(Duration::from_secs(60))).ok()?;
    let body = body.map(ToString::to_string).unwrap_or_default();
    let auth = token.map(|t| format!("authorization: Bearer {t}\r\n")).unwrap_or_default();
    write!(
        tcp,
        "{method} {path} HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\nconnection: close\r\n{auth}content-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
    .ok()?;
    // Read to the end, or to Content-Length (some servers keep the connection).
    let mut raw = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        let n = tcp.read(&mut buf).ok()?;
        if n == 0 {
            break;
        }
        raw.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&raw);
        if let Some((head, body)) = text.split_once("\r\n\r\n") {
            let length = head.lines().find_map(|l| {
                let (k, v) = l.split_once(':')?;
                k.trim()
                    .eq_ignore_ascii_case("content-length")
                    .then(|| v.trim().parse::<usize>().ok())?
            });
            if length.is_some_and(|len| body.len() >= len) {
                break;
            }
        }
    }
    let text = String::from_utf8_lossy(&raw).into_owned();
    let status = text.split_whitespace().nth(1)?.parse().ok()?;
    let (head, body) = text.split_once("\r\n\r\n")?;
    let body = if head.to_ascii_lowercase().contains("transfer-encoding: chunked") {
        dechunk(body)
    } else {
        body.to_string()
    };
    Some((status, body))
}

fn dechunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let Ok(n) = usize::from_str_radix(size.trim(), 16) else { break };
        if n == 0 || rest.len() < n {
            break;
        }
        out.push_str(&rest[..n]);
        body = rest[n..].trim_start_matches("\r\n");
    }
    out
}

/// `GET path` without a token.
pub(crate) fn get(port: u16, path: &str) -> Option<(u16, String)> {
    request(port, "GET", path, None, None)
}

/// A non-streamed chat completion as `user`; returns (status, answer text or error body).
pub(crate) fn chat(port: u16, user: &str, text: &str) -> (u16, String) {
    let body = serde_json::json!({"model": "ferroclaw", "user": user, "messages": [{"role": "user", "content": text}]});
    let (status, body) =
        request(port, "POST", "/v1/chat/completions", Some(TOKEN), Some(&body)).expect("no answer");
    let v: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
    match v["choices"][0]["message"]["content"].as_str() {
        Some(answer) => (status, answer.to_string()),
        None => (status, body),
    }
}

/// Waits until `f` holds, up to `secs`.
pub(crate) fn wait_for(secs: u64, what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// True when `python3` with the official `openai` package is here (scripts/test
/// installs it): without it the test fails; false only when the developer
/// opted out (`FERROCLAW_TEST_SKIP=python-openai`), and the test returns.
#[track_caller]
pub(crate) fn python_openai() -> bool {
    components::require(Component::PythonOpenAi, components::python_openai()).is_some()
}

/// Headless Chromium (scripts/test installs it): without it the test fails;
/// `None` only when the developer opted out (`FERROCLAW_TEST_SKIP=chromium`).
#[track_caller]
pub(crate) fn chromium() -> Option<std::path::PathBuf> {
    components::require(Component::Chromium, components::chromium())
}

/// A POST with the bearer token; the raw response (status line, headers, body).
pub(crate) fn request_raw(port: u16, path: &str, token: &str, body: &Value) -> String {
    let mut tcp = TcpStream::connect(("127.0.0.1", port)).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let body = body.to_string();
    write!(
        tcp,
        "POST {path} HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\nconnection: close\r\nauthorization: Bearer {token}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut raw = String::new();
    let _ = tcp.read_to_string(&mut raw);
    raw
}

/// Sends `head` (and no more) and returns what comes back before the server
/// closes or `wait` passes.
pub(crate) fn send_head(port: u16, head: &str, wait: Duration) -> String {
    let Ok(mut tcp) = TcpStream::connect(("127.0.0.1", port)) else { return String::new() };
    let _ = tcp.set_read_timeout(Some(wait));
    if tcp.write_all(head.as_bytes()).is_err() {
        return String::new();
    }
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
