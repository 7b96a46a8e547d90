//! `ferroclaw gateway`'s web channel end to end: the OpenAI-compatible API
//! (with the official Python client), the web chat in headless Chromium,
//! chat commands, and a SIGTERM in the middle of a turn.

use crate::common;
use crate::gateway_support;

use std::time::Duration;

use common::{Env, Wire};
use ferroclaw_testkit::{Fault, ScriptedToolCall, Turn};
use gateway_support::{Gateway, TOKEN, chat, request, wait_for};

#[test]
fn the_openai_python_client_gets_plain_and_streamed_answers() {
    if !gateway_support::python_openai() {
        return;
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

/// The answer the scripted model streams in the browser test: Markdown with
/// a code block, and HTML that must not run.
const MARKDOWN_ANSWER: &str = "Found **one** file. Here is the code:\n\n```rust\nfn main() {\n    println!(\"hi\");\n}\n```\n\n<img src=x onerror=\"window.pwned = 1\"><script>window.pwned = 2</script>\n\n- done";

/// Where a browser test saves its screenshots for review.
pub(crate) fn screenshots_dir() -> std::path::PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target"));
    target.join("screenshots")
}

#[test]
fn the_web_app_chats_keeps_history_switches_sessions_and_operates_in_headless_chromium() {
    let Some(chromium) = gateway_support::chromium() else { return };
    let env = Env::new(
        Wire::OpenAi,
        vec![
            Turn::text("Hello, API caller.").into(),
            Turn::tools(vec![
                ScriptedToolCall::new(
                    "todo_write",
                    serde_json::json!({"items": [
                    {"content": "Find the files", "status": "completed"},
                    {"content": "Show the code", "status": "in_progress"}]}),
                ),
                ScriptedToolCall::new("glob", serde_json::json!({"pattern": "*.txt"})),
            ])
            .into(),
            Turn::text(MARKDOWN_ANSWER).into(),
            Turn::text("Second answer.").into(),
            Turn::tool("bash", serde_json::json!({"command": "echo approved > made-by-bash.txt"}))
                .into(),
            Turn::text("Done from the web.").into(),
        ],
    );
    // The gateway's agents work in `$FERROCLAW_HOME/workspace`.
    std::fs::create_dir_all(env.home.path().join("workspace")).unwrap();
    std::fs::write(env.home.path().join("workspace/notes.txt"), "a note").unwrap();
    // A stranger waiting on Telegram for the owner's approval.
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap();
    let now_ms = now.as_millis() as u64;
    let pending = serde_json::json!({"approved": [], "pending": [{"code": "K7PX3QMA", "sender": "4242",
        "chat_id": "4242", "name": "Alice", "created_at_ms": now_ms, "expires_at_ms": now_ms + 3_600_000}]});
    std::fs::create_dir_all(env.home.path().join("pairing")).unwrap();
    std::fs::write(env.home.path().join("pairing/telegram.json"), pending.to_string()).unwrap();
    let gw = Gateway::start(&env, "");
    // A conversation on another channel, for the sidebar.
    assert_eq!(chat(gw.port, "alice", "hello from the api"), (200, "Hello, API caller.".into()));
    let shots = screenshots_dir();
    let mut b = gateway_support::browser::Browser::launch(&chromium);
    b.viewport(1280, 800, false);
    b.navigate(&format!("{}/#token={TOKEN}", gw.url()));
    b.wait_for("the socket", "document.getElementById('state').textContent === 'connected'");
    // The sidebar lists every conversation, the API callers' too.
    b.click("#filter [data-filter=all]");
    let weight = b.eval(
        "performance.getEntriesByType('navigation').concat(performance.getEntriesByType('resource'))\
         .reduce((n, e) => n + e.decodedBodySize, 0)",
    );
    let paint = b.eval(
        "(performance.getEntriesByName('first-contentful-paint')[0] || {}).startTime || null",
    );
    eprintln!("web app: {weight} bytes loaded, first contentful paint at {paint} ms");

    // Streamed Markdown with a highlighted code block, its copy button, a tool card.
    b.fill("#input", "show me the code");
    b.click("#send");
    b.wait_for("the answer", "document.querySelector('.msg.assistant.done pre code')");
    assert!(b.eval("window.ferroclaw.deltas").as_u64().unwrap() > 1, "the answer was streamed");
    assert_eq!(b.eval("!!document.querySelector('.msg.assistant.done strong')"), true);
    assert_eq!(b.eval("!!document.querySelector('code.language-rust .token.keyword')"), true);
    assert_eq!(
        b.eval(
            "window.pwned === undefined && !document.querySelector('#log script, #log [onerror]')"
        ),
        true,
        "model HTML ran"
    );
    b.click(".msg.assistant.done pre .copy");
    b.wait_for("the copy", "(window.ferroclaw.copied || '').includes('fn main()')");
    let glob = "[...document.querySelectorAll('.tool')].find(c => c.querySelector('.tool-name').textContent === 'glob')";
    b.wait_for("the tool card's result", &format!("{glob}.querySelector('.tool-result')"));
    assert_eq!(b.eval(&format!("{glob}.classList.contains('ok')")), true);
    let result = b.eval(&format!("{glob}.querySelector('.tool-result').textContent"));
    assert!(result.as_str().unwrap().contains("notes.txt"), "{result}");
    // The todo list shows live.
    assert_eq!(
        b.eval("[...document.querySelectorAll('#todos .todo')].map(t => t.className).join()"),
        "todo completed,todo in_progress"
    );
    b.eval(&format!("{glob}.open = true"));
    b.screenshot(&shots.join("chat-desktop.png"));

    // A reload shows the conversation again, from the session file.
    // (The old page must not pass for the new one.)
    b.eval("window.ferroclaw.historyLoaded = -1000; location.reload()");
    b.wait_for("the history", "window.ferroclaw && window.ferroclaw.historyLoaded > 0");
    let paint = b.eval(
        "(performance.getEntriesByName('first-contentful-paint')[0] || {}).startTime || null",
    );
    eprintln!("web app: reloaded in a warm browser, first contentful paint at {paint} ms");
    b.wait_for("the question again", "document.querySelector('#log .msg.user') && document.querySelector('#log .msg.user').textContent === 'show me the code'");
    b.wait_for(
        "the tool cards again",
        "document.querySelectorAll('#log .tool .tool-result').length === 2",
    );
    b.wait_for(
        "the answer again",
        "document.querySelector('#log .msg.assistant code.language-rust .token')",
    );

    // A second conversation, then back to the first from the sidebar.
    b.click("#new-chat");
    b.wait_for("a new chat", "document.getElementById('state').textContent === 'connected' && !document.querySelector('#log .msg')");
    b.fill("#input", "second conversation");
    b.click("#send");
    b.wait_for("the second answer", "document.querySelector('.msg.assistant.done') && document.querySelector('.msg.assistant.done').textContent.includes('Second answer')");
    assert_eq!(
        b.eval("[...document.querySelectorAll('#log .msg.user')].map(m => m.textContent).join()"),
        "second conversation",
        "the question stays shown"
    );
    b.wait_for(
        "all three in the sidebar",
        "document.querySelectorAll('#sessions .session').length === 3",
    );
    let first = "[...document.querySelectorAll('#sessions .session .open')].find(e => e.textContent.includes('show me the code'))";
    b.eval(&format!("{first}.click()"));
    b.wait_for("the first conversation", "document.querySelector('#log .msg.user') && document.querySelector('#log .msg.user').textContent === 'show me the code'");
    assert_eq!(
        b.eval("document.querySelector('#sessions .session.current .title').textContent"),
        "show me the code"
    );
    // One from another channel opens to read.
    let api = "[...document.querySelectorAll('#sessions .session')].find(e => e.textContent.includes('api'))";
    b.eval(&format!("{api}.querySelector('.open').click()"));
    b.wait_for("the API conversation", "!document.getElementById('readonly').hidden && document.querySelector('#log .msg.user').textContent === 'hello from the api'");
    assert_eq!(b.eval("document.getElementById('form').hidden"), true, "read-only");
    b.click("#back-to-chat");
    b.wait_for("my chat again", "document.getElementById('readonly').hidden && document.querySelector('#log .msg.user') && document.querySelector('#log .msg.user').textContent === 'show me the code'");

    // Search finds a conversation by what was said in it (the recall index).
    b.fill("#search", "second");
    b.wait_for("the search", "document.querySelectorAll('#sessions .session').length === 1 && document.querySelector('#sessions .session .snippet')");
    b.fill("#search", "");
    b.wait_for("the list", "document.querySelectorAll('#sessions .session').length === 3");

    // A conversation renamed keeps its name, and is found by it.
    let id = b.eval("window.ferroclaw.session");
    let id = id.as_str().unwrap();
    let title = serde_json::json!({"title": "Rust snippet"});
    let path = format!("/api/sessions/{id}/title");
    let (status, body) = request(gw.port, "PUT", &path, Some(TOKEN), Some(&title)).unwrap();
    assert_eq!(status, 200, "{body}");
    b.fill("#search", "snippet");
    b.wait_for("the renamed conversation", "document.querySelectorAll('#sessions .session').length === 1 && document.querySelector('#sessions .title').textContent === 'Rust snippet'");
    b.fill("#search", "");

    // Cron: a job added with its schedule explained in words.
    b.click("#tab-operate");
    b.click("#operate-nav [data-pane=cron]");
    b.fill("#cron-name", "Morning briefing");
    b.fill("#cron-value", "0 9 * * 1-5");
    b.fill("#cron-tz", "Europe/Paris");
    b.wait_for(
        "the explanation",
        "document.getElementById('cron-explained').textContent.includes('09:00')",
    );
    b.fill("#cron-message", "Summarise my day ahead");
    b.click("#cron-add");
    b.wait_for("the job", "document.querySelector('.job-card h3') && document.querySelector('.job-card h3').textContent === 'Morning briefing'");
    let jobs: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(env.home.path().join("cron/jobs.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(jobs["jobs"][0]["schedule"]["expr"], "0 9 * * 1-5", "{jobs}");
    b.screenshot(&shots.join("cron-desktop.png"));

    // Pairing: the owner approves the stranger.
    b.click("#operate-nav [data-pane=pairing]");
    b.wait_for(
        "the request",
        "document.querySelector('.pairing-request[data-code=K7PX3QMA] .approve')",
    );
    b.click(".pairing-request[data-code=K7PX3QMA] .approve");
    b.wait_for("the approval", "document.querySelector('#pane-pairing .approved') && !document.querySelector('.pairing-request')");
    let pairing: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(env.home.path().join("pairing/telegram.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(pairing["approved"][0]["sender"], "4242", "{pairing}");
    assert_eq!(pairing["pending"], serde_json::json!([]), "{pairing}");

    // Channels: each with its connection as the channel reports it.
    b.click("#operate-nav [data-pane=channels]");
    b.wait_for("the channels", "[...document.querySelectorAll('#pane-channels td')].some(td => td.textContent.startsWith('connected; 1 chat page(s) open'))");

    // The same app on a phone.
    b.viewport(390, 844, true);
    b.eval("document.getElementById('toast').hidden = true");
    b.click("#operate-nav [data-pane=cron]");
    b.screenshot(&shots.join("cron-phone.png"));
    b.click("#tab-chat");
    b.screenshot(&shots.join("chat-phone.png"));
    b.click("#menu");
    b.screenshot(&shots.join("sessions-phone.png"));
    b.click("#menu");

    // From here on the page's frames are recorded instead of sent.
    b.eval("window.realSend = WebSocket.prototype.send; window.sent = []; WebSocket.prototype.send = function (d) { window.sent.push(d); }");

    // A pasted image goes out with the message, as base64.
    const PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII=";
    b.eval(&format!(
        "const dt = new DataTransfer(); \
         dt.items.add(new File([Uint8Array.from(atob('{PNG}'), c => c.charCodeAt(0))], 'dot.png', {{type: 'image/png'}})); \
         document.getElementById('input').dispatchEvent(new ClipboardEvent('paste', {{clipboardData: dt, bubbles: true}}))"
    ));
    b.wait_for("the thumbnail", "document.querySelector('#attachments img')");
    b.fill("#input", "what is in this picture?");
    b.click("#send");
    let sent = b.eval("JSON.parse(window.sent[window.sent.length - 1])");
    assert_eq!(sent["content"], "what is in this picture?");
    assert_eq!(sent["images"], serde_json::json!([{"media_type": "image/png", "data": PNG}]));
    assert_eq!(b.eval("!!document.querySelector('#log .msg.user img.thumb')"), true);

    // Background jobs as the gateway pushes them (`jobs` frames).
    b.eval("window.ferroclaw.frame({type: 'jobs', jobs: [{id: 'ab12cd34', command: 'cargo build', status: 'running', exit_code: null, elapsed_secs: 3}]})");
    let job = b.eval("document.querySelector('#jobs .job.running').textContent");
    let job = job.as_str().unwrap();
    assert!(job.starts_with("running · ") && job.ends_with("s · cargo build"), "{job}");

    // An approval card (frames of the `approvals` contract): the choice goes
    // back over the socket, and the resolution closes the card.
    b.eval("window.ferroclaw.frame({type: 'approval', id: 'a1', tool: 'bash', input: {command: 'rm -rf build'}, summary: 'Run rm -rf build'})");
    assert_eq!(b.eval("document.querySelectorAll('#approval-a1 .buttons button').length"), 4);
    b.fill("#approval-a1 .reason", "not now");
    b.click("#approval-a1 .choice-deny");
    let sent = b.eval("JSON.parse(window.sent[window.sent.length - 1])");
    assert_eq!(
        sent,
        serde_json::json!({"type": "approve", "id": "a1", "choice": "deny", "reason": "not now"})
    );
    b.eval("window.ferroclaw.frame({type: 'approval_resolved', id: 'a1', outcome: 'denied'})");
    assert_eq!(b.eval("document.querySelector('#approval-a1').textContent"), "Approval: denied");

    // A real approval, end to end: the model's bash call waits until the
    // owner presses "Once" on the card, then runs and the answer follows.
    b.eval("WebSocket.prototype.send = window.realSend");
    b.fill("#input", "make the file");
    b.click("#send");
    b.wait_for(
        "the approval card",
        "document.querySelector('.approval:not(.resolved) .choice-once')",
    );
    assert!(!env.home.path().join("workspace/made-by-bash.txt").exists(), "ran before approval");
    b.viewport(1280, 800, false);
    b.eval("document.querySelector('.approval:not(.resolved)').scrollIntoView()");
    b.screenshot(&shots.join("approval-desktop.png"));
    b.click(".approval:not(.resolved) .choice-once");
    b.wait_for("the answer after the approval", "[...document.querySelectorAll('.msg.assistant.done')].some(m => m.textContent.includes('Done from the web.'))");
    assert!(env.home.path().join("workspace/made-by-bash.txt").exists(), "approved call ran");
    assert_eq!(
        b.eval("document.querySelectorAll('.approval:not(.resolved)').length"),
        0,
        "the card closed"
    );

    // Files the agent sends show in the chat: a picture inline, anything
    // else as a download (fetched with the token from /api/files).
    let workspace = env.home.path().join("workspace");
    std::fs::write(workspace.join("dot.png"), b"\x89\x50\x4e\x47\x0d\x0a\x1a\x0a\x00\x00\x00\x0d\x49\x48\x44\x52\x00\x00\x00\x01\x00\x00\x00\x01\x08\x04\x00\x00\x00\xb5\x1c\x0c\x02\x00\x00\x00\x0b\x49\x44\x41\x54\x78\xda\x63\x64\x60\x00\x00\x00\x06\x00\x02\x30\x81\xd0\x2f\x00\x00\x00\x00\x49\x45\x4e\x44\xae\x42\x60\x82").unwrap();
    let media = serde_json::json!([workspace.join("dot.png"), workspace.join("notes.txt")]);
    b.eval(&format!(
        "window.ferroclaw.frame({{type: 'message', content: 'Here you are.', media: {media}}})"
    ));
    b.wait_for("the picture", "document.querySelector('.msg.media img.sent') && document.querySelector('.msg.media img.sent').naturalWidth === 1");
    b.wait_for("the download", "document.querySelector('.msg.media a.file') && document.querySelector('.msg.media a.file').download === 'notes.txt'");
}

#[test]
fn the_app_api_needs_the_token_and_refuses_bad_input_without_changing_anything() {
    let env = Env::new(Wire::OpenAi, vec![]);
    let gw = Gateway::start(&env, "");
    for path in
        ["/api/sessions", "/api/cron", "/api/pairing", "/api/memory", "/api/log", "/api/files"]
    {
        let (status, _) = request(gw.port, "GET", path, None, None).unwrap();
        assert_eq!(status, 401, "{path} without the token");
        let (status, _) = request(gw.port, "GET", path, Some("wrong"), None).unwrap();
        assert_eq!(status, 401, "{path} with a wrong token");
    }
    let (status, page) = request(gw.port, "GET", "/", None, None).unwrap();
    assert_eq!(status, 200);
    assert!(page.contains("/app.js"), "{page}");
    let bad_job = serde_json::json!({"name": "x", "message": "hi", "schedule": {"kind": "cron", "value": "every morning"}});
    let (status, body) =
        request(gw.port, "POST", "/api/cron", Some(TOKEN), Some(&bad_job)).unwrap();
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("every morning"), "the error names the bad schedule: {body}");
    let (_, list) = request(gw.port, "GET", "/api/cron", Some(TOKEN), None).unwrap();
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&list).unwrap()["jobs"],
        serde_json::json!([])
    );
    let (status, _) =
        request(gw.port, "GET", "/api/sessions/..%2F..%2Fconfig", Some(TOKEN), None).unwrap();
    assert_eq!(status, 400);
    // Files come from the workspace only: not by `..`, an absolute path
    // elsewhere, or a symbolic link out of it.
    let workspace = env.home.path().join("workspace");
    std::fs::create_dir_all(&workspace).unwrap();
    std::fs::write(workspace.join("notes.txt"), "a note").unwrap();
    std::os::unix::fs::symlink("/etc/passwd", workspace.join("passwd")).unwrap();
    let file = |p: &str| {
        let query: String = p.bytes().map(|b| format!("%{b:02X}")).collect();
        request(gw.port, "GET", &format!("/api/files?path={query}"), Some(TOKEN), None).unwrap()
    };
    assert_eq!(file("notes.txt"), (200, "a note".to_string()));
    for outside in ["../config.toml", "/etc/passwd", "passwd"] {
        let (status, body) = file(outside);
        assert_eq!(status, 400, "{outside}: {body}");
        assert!(body.contains("not inside the workspace"), "{outside}: {body}");
    }
    let too_big = serde_json::json!({"text": "x".repeat(50_000)});
    let (status, body) =
        request(gw.port, "PUT", "/api/memory/memory", Some(TOKEN), Some(&too_big)).unwrap();
    assert_eq!(status, 400, "{body}");
}

#[test]
fn stop_from_the_web_page_cancels_a_turn_that_would_never_end() {
    use futures_util::{SinkExt, StreamExt};
    use tokio_tungstenite::tungstenite::Message as Frame;
    let env = Env::new(
        Wire::OpenAi,
        vec![Fault::Stall { after_text: "Thinking about it".into() }.into()],
    );
    let gw = Gateway::start(&env, "");
    let url = format!("ws://127.0.0.1:{}/ws?token={TOKEN}&chat=stopper", gw.port);
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let last = rt.block_on(async {
        let (ws, _) = tokio_tungstenite::connect_async(&url).await.unwrap();
        let (mut sink, mut stream) = ws.split();
        let mut next = async || -> serde_json::Value {
            // A guard against a hang, not a timing claim.
            let frame = tokio::time::timeout(Duration::from_secs(60), stream.next()).await;
            let Ok(Some(Ok(Frame::Text(text)))) = frame else { panic!("no frame: {frame:?}") };
            serde_json::from_str(&text).unwrap()
        };
        assert_eq!(next().await["type"], "ready");
        let message = serde_json::json!({"type": "message", "content": "think forever"});
        sink.send(Frame::Text(message.to_string().into())).await.unwrap();
        while next().await["event"]["type"] != "text_delta" {}
        sink.send(Frame::Text(r#"{"type":"stop"}"#.into())).await.unwrap();
        loop {
            let frame = next().await;
            if frame["type"] == "reply" || frame["type"] == "error" {
                return frame;
            }
        }
    });
    assert!(last["content"].as_str().unwrap_or_default().contains("cancelled"), "{last}");
    // The shown part stays in the conversation, marked as interrupted.
    wait_for(30, "the session file", || {
        env.session_files().iter().any(|f| {
            std::fs::read_to_string(f).unwrap_or_default().contains("interrupted by the user")
        })
    });
}

/// A 1×1 PNG, for pictures the browser must decode.
const TINY_PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==";

#[test]
fn a_reload_during_an_approval_shows_the_card_again_and_history_keeps_pictures_on_a_phone() {
    let Some(chromium) = gateway_support::chromium() else { return };
    // A long command: its JSON must wrap inside the card on a phone.
    let command = format!("echo approved > made-by-bash.txt && echo {}", "0123456789".repeat(20));
    let env = Env::new(
        Wire::OpenAi,
        vec![
            Turn::tool("bash", serde_json::json!({"command": command})).into(),
            Turn::text("Done after the reload.").into(),
            Turn::tool(
                "message",
                serde_json::json!({"content": "Here is the chart.", "media": ["chart.png"]}),
            )
            .into(),
            Turn::text("That is a picture.").into(),
        ],
    );
    let workspace = env.home.path().join("workspace");
    std::fs::create_dir_all(&workspace).unwrap();
    let png = gateway_support::browser::decode_base64(TINY_PNG);
    std::fs::write(workspace.join("chart.png"), &png).unwrap();
    let gw = Gateway::start(&env, "heartbeat_minutes = 0\n");
    let shots = screenshots_dir();
    let mut b = gateway_support::browser::Browser::launch(&chromium);
    b.viewport(390, 844, true);
    b.navigate(&format!("{}/#token={TOKEN}", gw.url()));
    b.wait_for("the socket", "document.getElementById('state').textContent === 'connected'");
    b.fill("#input", "make the file");
    b.click("#send");
    b.wait_for("the approval card", "document.querySelector('.approval .choice-once')");

    // Reloaded while the call waits: the card comes back with its buttons,
    // and the page knows the turn still runs (its Stop button).
    b.eval("window.oldPage = true; location.reload()");
    b.wait_for(
        "the card again",
        "!window.oldPage && window.ferroclaw && window.ferroclaw.historyLoaded > 0 && document.querySelector('.approval .choice-once')",
    );
    assert_eq!(b.eval("document.querySelectorAll('.approval').length"), 1);
    assert_eq!(b.eval("document.getElementById('stop').hidden"), false, "the turn runs");
    // On a phone the card and its JSON stay within the screen.
    let fits = b.eval(
        "(() => { const card = document.querySelector('.approval').getBoundingClientRect(); \
         const pre = document.querySelector('.approval pre'); \
         return [document.documentElement.scrollWidth <= innerWidth, card.right <= innerWidth, \
         pre.scrollWidth <= pre.clientWidth]; })()",
    );
    assert_eq!(fits, serde_json::json!([true, true, true]), "the card overflows");
    b.screenshot(&shots.join("approval-phone.png"));
    b.click(".approval .choice-once");
    b.wait_for(
        "the answer",
        "[...document.querySelectorAll('.msg.assistant.done')].some(m => m.textContent.includes('Done after the reload.'))",
    );
    b.wait_for("the call's card finished", "document.querySelector('.tool.ok .tool-name')");
    assert!(env.home.path().join("workspace/made-by-bash.txt").exists());

    // A picture sent, a file received: both still there after a reload.
    // (A picture drawn in the page, attached as a person would pick a file.)
    b.eval(
        "new Promise(done => { const c = document.createElement('canvas'); c.width = 160; c.height = 100; \
         const g = c.getContext('2d'); g.fillStyle = '#3b7dd8'; g.fillRect(0, 0, 160, 100); \
         g.fillStyle = '#f5c400'; g.fillRect(40, 25, 80, 50); \
         c.toBlob(blob => { const files = new DataTransfer(); \
         files.items.add(new File([blob], 'drawing.png', {type: 'image/png'})); \
         const input = document.getElementById('attach'); input.files = files.files; \
         input.dispatchEvent(new Event('change')); done(true); }, 'image/png'); })",
    );
    b.wait_for("the picture attached", "document.querySelector('#attachments img')");
    b.fill("#input", "what is this?");
    b.click("#send");
    // (Sending a workspace file may ask for approval: it is given.)
    b.wait_for(
        "the answer",
        "(() => { const once = document.querySelector('.approval:not(.resolved) .choice-once'); if (once) once.click(); \
         return [...document.querySelectorAll('.msg.assistant.done')].some(m => m.textContent.includes('That is a picture.')); })()",
    );
    b.eval("window.oldPage = true; location.reload()");
    b.wait_for(
        "the pictures in the history",
        "!window.oldPage && window.ferroclaw.historyLoaded > 0 && window.ferroclaw.historyImages >= 1 && document.querySelector('.msg.media img.sent')",
    );
    assert_eq!(
        b.eval("[...document.querySelectorAll('#log .msg')].some(m => m.textContent.includes('[image]'))"),
        false
    );
    b.wait_for(
        "the user's picture decoded",
        "[...document.querySelectorAll('.msg.user img.thumb')].some(i => i.naturalWidth === 160)",
    );
    b.screenshot(&shots.join("history-pictures-phone.png"));
}
