//! Drives headless Chromium over the DevTools protocol: open the web chat,
//! type a message, read the streamed answer.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;

/// What the page showed.
#[derive(Debug)]
pub struct Seen {
    pub answer: String,
    pub deltas: u64,
    pub user_shown: bool,
}

/// Opens `url`, types `text` into the chat and waits for the final answer.
pub fn type_and_read_answer(chromium: &str, url: &str, text: &str) -> Seen {
    let profile = tempfile::tempdir().unwrap();
    let mut child = Command::new(chromium)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
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
        if let Some(p) =
            std::fs::read_to_string(&port_file).ok().and_then(|t| t.lines().next()?.parse().ok())
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
    let seen = rt.block_on(drive(&ws_url, url, text));
    let _ = child.kill();
    let _ = child.wait();
    seen
}

async fn drive(ws_url: &str, url: &str, text: &str) -> Seen {
    let (mut ws, _) = tokio_tungstenite::connect_async(ws_url).await.expect("DevTools socket");
    let mut next_id = 0;
    let mut call = async |method: &str, params: Value| -> Value {
        next_id += 1;
        let id = next_id;
        let frame = json!({"id": id, "method": method, "params": params}).to_string();
        ws.send(Message::Text(frame.into())).await.unwrap();
        loop {
            let Some(Ok(Message::Text(reply))) = ws.next().await else {
                panic!("DevTools socket closed")
            };
            let v: Value = serde_json::from_str(&reply).unwrap();
            if v["id"] == id {
                return v;
            }
        }
    };
    let eval = |expr: &str| json!({"expression": expr, "returnByValue": true});
    call("Page.navigate", json!({"url": url})).await;
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let v = call(
            "Runtime.evaluate",
            eval(
                "document.getElementById('state') && document.getElementById('state').textContent",
            ),
        )
        .await;
        if v["result"]["result"]["value"] == "connected" {
            break;
        }
        assert!(Instant::now() < deadline, "the page did not connect: {v}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    call("Runtime.evaluate", eval("document.getElementById('input').focus()")).await;
    call("Input.insertText", json!({"text": text})).await;
    call("Runtime.evaluate", eval("document.getElementById('send').click()")).await;
    let probe = "JSON.stringify({answer: (document.querySelector('.assistant.done') || {}).textContent || '', \
                 deltas: window.ferroclaw.deltas, user: !!document.querySelector('.msg.user')})";
    loop {
        let v = call("Runtime.evaluate", eval(probe)).await;
        let seen: Value =
            serde_json::from_str(v["result"]["result"]["value"].as_str().unwrap_or("{}")).unwrap();
        let answer = seen["answer"].as_str().unwrap_or_default().to_string();
        if !answer.is_empty() || Instant::now() > deadline + Duration::from_secs(10) {
            return Seen {
                answer,
                deltas: seen["deltas"].as_u64().unwrap_or(0),
                user_shown: seen["user"].as_bool().unwrap_or(false),
            };
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
