//! A tiny blocking HTTP/1.1 client over `std::net::TcpStream`, enough to see frames and cuts.
#![allow(dead_code)] // each test binary uses a different part of it

use std::{
    io::{ErrorKind, Read, Write},
    net::TcpStream,
    time::Duration,
};

use serde_json::Value;

/// What came back, byte for byte, decoded from chunked encoding when needed.
#[derive(Debug)]
pub(crate) struct RawResponse {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
    /// The body ended properly (terminal chunk or full content-length).
    pub complete: bool,
    /// The read timed out with the connection still open.
    pub timed_out: bool,
}

impl RawResponse {
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }

    pub(crate) fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.body))
    }

    /// SSE frames as (event name, data line).
    pub(crate) fn events(&self) -> Vec<(Option<String>, String)> {
        let frames = self.body.split("\n\n").filter(|frame| !frame.is_empty());
        frames
            .map(|frame| {
                let field = |name: &str| {
                    frame.lines().find_map(|l| l.strip_prefix(name)).map(str::to_string)
                };
                (field("event: "), field("data: ").unwrap_or_default())
            })
            .collect()
    }

    /// The data lines parsed as JSON (skipping `[DONE]`).
    pub(crate) fn data(&self) -> Vec<Value> {
        let events = self.events().into_iter().filter(|(_, data)| data != "[DONE]");
        events.map(|(_, data)| serde_json::from_str(&data).expect("data line is JSON")).collect()
    }
}

/// POSTs a JSON body to `base` (an `http://host:port` URL) + `path`.
pub(crate) fn post(base: &str, path: &str, body: &str) -> RawResponse {
    request(base, "POST", path, &[], body, Duration::from_secs(10))
}

/// Sends one request with `connection: close` and reads until EOF or `timeout`.
pub(crate) fn request(
    base: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
    timeout: Duration,
) -> RawResponse {
    let mut tcp = TcpStream::connect(base.trim_start_matches("http://")).expect("connect");
    tcp.set_read_timeout(Some(timeout)).expect("timeout");
    let mut head = format!("{method} {path} HTTP/1.1\r\nhost: localhost\r\nconnection: close\r\n");
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str(&format!(
        "content-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    ));
    tcp.write_all(head.as_bytes()).expect("write");
    let (mut raw, mut buf, mut timed_out) = (Vec::new(), [0u8; 8192], false);
    loop {
        match tcp.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => raw.extend_from_slice(&buf[..n]),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                timed_out = true;
                break;
            }
            Err(_) => break, // reset by peer: treat like EOF
        }
    }
    parse(&raw, timed_out)
}

fn parse(raw: &[u8], timed_out: bool) -> RawResponse {
    let text = String::from_utf8_lossy(raw);
    let (head, rest) = text.split_once("\r\n\r\n").expect("response head");
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|s| s.parse().ok())
        .expect("status");
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(": "))
        .map(|(k, v)| (k.to_ascii_lowercase(), v.to_string()))
        .collect();
    let chunked = headers.iter().any(|(k, v)| k == "transfer-encoding" && v == "chunked");
    let (body, complete) = if chunked { dechunk(rest) } else { (rest.to_string(), !timed_out) };
    RawResponse { status, headers, body, complete, timed_out }
}

fn dechunk(mut rest: &str) -> (String, bool) {
    let mut body = String::new();
    while let Some((size, after)) = rest.split_once("\r\n") {
        let Ok(size) = usize::from_str_radix(size.trim(), 16) else {
            break;
        };
        if size == 0 {
            return (body, true);
        }
        if after.len() < size {
            body.push_str(after);
            break;
        }
        body.push_str(&after[..size]);
        rest = after[size..].trim_start_matches("\r\n");
    }
    (body, false)
}
