//! Drives headless Chromium over the DevTools protocol: one browser for a
//! whole test, pages driven by evaluating JavaScript, screenshots saved.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;

type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// A headless Chromium with one page; killed when dropped.
pub(crate) struct Browser {
    child: Child,
    _profile: tempfile::TempDir,
    rt: tokio::runtime::Runtime,
    ws: Socket,
    next_id: u64,
    /// DevTools events received so far (console messages, log entries),
    /// once [`Browser::watch_console`] asked for them.
    events: Vec<Value>,
}

/// How long `wait_for` waits for the page.
const PAGE_WAIT: Duration = Duration::from_secs(30);

impl Browser {
    /// Starts `chromium` (headless) and attaches to its first page.
    pub(crate) fn launch(chromium: &std::path::Path) -> Browser {
        let profile = tempfile::tempdir().unwrap();
        let child = Command::new(chromium)
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--hide-scrollbars",
                "--remote-debugging-port=0",
            ])
            .arg(format!("--user-data-dir={}", profile.path().display()))
            .arg("about:blank")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start chromium");
        let port_file = profile.path().join("DevToolsActivePort");
        let deadline = Instant::now() + Duration::from_secs(30);
        let port: u16 = loop {
            if let Some(p) = std::fs::read_to_string(&port_file)
                .ok()
                .and_then(|t| t.lines().next()?.parse().ok())
            {
                break p;
            }
            assert!(Instant::now() < deadline, "chromium did not open its DevTools port");
            std::thread::sleep(Duration::from_millis(100));
        };
        let (_, list) =
            super::request(port, "GET", "/json/list", None, None).expect("DevTools /json/list");
        let targets: Value = serde_json::from_str(&list).unwrap();
        let ws_url = targets
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["type"] == "page")
            .and_then(|t| t["webSocketDebuggerUrl"].as_str())
            .expect("a page target")
            .to_string();
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let (ws, _) =
            rt.block_on(tokio_tungstenite::connect_async(&ws_url)).expect("DevTools socket");
        Browser { child, _profile: profile, rt, ws, next_id: 0, events: Vec::new() }
    }

    /// Calls a DevTools method; its result.
    pub(crate) fn call(&mut self, method: &str, params: Value) -> Value {
        match self.try_call(method, params) {
            Ok(result) => result,
            Err(error) => panic!("{method}: {error}"),
        }
    }

    /// Calls a DevTools method; its result, or the error frame it got.
    fn try_call(&mut self, method: &str, params: Value) -> Result<Value, Value> {
        self.next_id += 1;
        let id = self.next_id;
        let frame = json!({"id": id, "method": method, "params": params}).to_string();
        let (ws, events) = (&mut self.ws, &mut self.events);
        self.rt.block_on(async {
            ws.send(Message::Text(frame.into())).await.unwrap();
            loop {
                let Some(Ok(Message::Text(reply))) = ws.next().await else {
                    panic!("DevTools socket closed")
                };
                let v: Value = serde_json::from_str(&reply).unwrap();
                if v.get("method").is_some() {
                    events.push(v);
                    continue;
                }
                if v["id"] == id {
                    return match v.get("error") {
                        Some(error) => Err(error.clone()),
                        None => Ok(v["result"].clone()),
                    };
                }
            }
        })
    }

    /// Records from now on what the page writes to its console, its
    /// uncaught exceptions and the browser's own errors (a resource that
    /// answered 404, a socket refused): see [`Browser::console_errors`].
    pub(crate) fn watch_console(&mut self) {
        self.call("Runtime.enable", json!({}));
        self.call("Log.enable", json!({}));
    }

    /// The errors the console showed since [`Browser::watch_console`], as
    /// a person would read them in the browser's developer tools.
    pub(crate) fn console_errors(&mut self) -> Vec<String> {
        self.eval("0"); // takes in the events sent before this answer
        self.events
            .iter()
            .filter_map(|e| {
                let p = &e["params"];
                match e["method"].as_str()? {
                    "Runtime.consoleAPICalled" if p["type"] == "error" => {
                        Some(format!("console.error: {}", p["args"]))
                    }
                    "Runtime.exceptionThrown" => {
                        Some(format!("exception: {}", p["exceptionDetails"]))
                    }
                    "Log.entryAdded" if p["entry"]["level"] == "error" => Some(format!(
                        "{}: {} {}",
                        p["entry"]["source"],
                        p["entry"]["text"],
                        p["entry"]["url"].as_str().unwrap_or_default()
                    )),
                    _ => None,
                }
            })
            .collect()
    }

    /// Opens `url` in the page.
    pub(crate) fn navigate(&mut self, url: &str) {
        self.call("Page.navigate", json!({"url": url}));
    }

    /// The value of a JavaScript expression (awaited when a promise).
    pub(crate) fn eval(&mut self, expr: &str) -> Value {
        let r = self.call(
            "Runtime.evaluate",
            json!({"expression": expr, "returnByValue": true, "awaitPromise": true}),
        );
        assert!(r.get("exceptionDetails").is_none(), "{expr}: {r}");
        r["result"]["value"].clone()
    }

    /// Waits until `expr` is truthy in the page.
    pub(crate) fn wait_for(&mut self, what: &str, expr: &str) {
        let deadline = Instant::now() + PAGE_WAIT;
        loop {
            // While the page reloads there is no page to ask: Chromium says
            // "navigated or closed" or has no context yet. Ask again.
            let r = self
                .try_call(
                    "Runtime.evaluate",
                    json!({"expression": format!("!!({expr})"), "returnByValue": true}),
                )
                .unwrap_or_else(|error| json!({ "navigating": error }));
            if r["result"]["value"] == true {
                return;
            }
            assert!(Instant::now() < deadline, "timed out waiting for {what} ({expr}): {r}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Clicks the element `selector` finds.
    pub(crate) fn click(&mut self, selector: &str) {
        let found = self.eval(&format!(
            "(() => {{ const e = document.querySelector({selector:?}); if (e) e.click(); return !!e; }})()"
        ));
        assert_eq!(found, true, "nothing to click at {selector}");
    }

    /// Sets the value of the input `selector` finds and tells the page.
    pub(crate) fn fill(&mut self, selector: &str, text: &str) {
        let text = serde_json::to_string(text).unwrap();
        let found = self.eval(&format!(
            "(() => {{ const e = document.querySelector({selector:?}); if (!e) return false; e.value = {text}; \
             e.dispatchEvent(new Event('input', {{bubbles: true}})); e.dispatchEvent(new Event('change', {{bubbles: true}})); return true; }})()"
        ));
        assert_eq!(found, true, "no input at {selector}");
    }

    /// Sizes the page as a desktop window or a phone (`mobile`).
    pub(crate) fn viewport(&mut self, width: u32, height: u32, mobile: bool) {
        let scale = if mobile { 2 } else { 1 };
        self.call(
            "Emulation.setDeviceMetricsOverride",
            json!({"width": width, "height": height, "deviceScaleFactor": scale, "mobile": mobile}),
        );
    }

    /// Saves a PNG of the page at `path`.
    pub(crate) fn screenshot(&mut self, path: &std::path::Path) {
        let r = self.call("Page.captureScreenshot", json!({"format": "png"}));
        let png = decode_base64(r["data"].as_str().unwrap());
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, png).unwrap();
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Standard base64, as DevTools sends screenshots.
pub(crate) fn decode_base64(text: &str) -> Vec<u8> {
    let value = |c: u8| -> u32 {
        match c {
            b'A'..=b'Z' => (c - b'A') as u32,
            b'a'..=b'z' => (c - b'a' + 26) as u32,
            b'0'..=b'9' => (c - b'0' + 52) as u32,
            b'+' => 62,
            b'/' => 63,
            _ => panic!("not base64: {c}"),
        }
    };
    let clean: Vec<u8> = text.bytes().filter(|b| !b.is_ascii_whitespace() && *b != b'=').collect();
    let mut out = Vec::with_capacity(clean.len() * 3 / 4);
    for chunk in clean.chunks(4) {
        let mut n = 0u32;
        for (i, &c) in chunk.iter().enumerate() {
            n |= value(c) << (18 - 6 * i);
        }
        let bytes = n.to_be_bytes();
        out.extend_from_slice(&bytes[1..chunk.len()]);
    }
    out
}
