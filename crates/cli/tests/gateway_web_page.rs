//! The web page as a person sees it, in headless Chromium at desktop
//! (1280×900) and phone (390×844) size: a whole session (answers with task
//! lists, quotes and code; an approval; a message sent while an answer is
//! still coming; a file the agent sends; another model; a new chat; a job)
//! with no error in the browser's console, and the app's files compressed
//! and revalidated. Screenshots go to `target/screenshots/page-*.png`.

use crate::common;
use crate::gateway_support;

use std::io::{Read, Write};

use common::{Env, Wire};
use ferroclaw_testkit::Turn;
use gateway_support::{Gateway, TOKEN, chat};

/// An answer with what chat apps render: a task list, a quote, code.
const RICH_ANSWER: &str = "Here is the plan:\n\n- [x] Find the files\n- [ ] Show the code\n\n> Quoted from the docs: keep it short.\n\n```rust\nfn main() { println!(\"a line long enough to run under the corner of the block\"); }\n```";

/// The page's log in reading order: who said what, tool cards by name.
const ORDER: &str = "[...document.querySelectorAll('#log .msg.user .text, #log .msg.assistant:not(.media) .body, #log .tool .tool-name')]\
     .map(e => e.classList.contains('tool-name') ? 'tool ' + e.textContent : (e.closest('.user') ? 'user: ' : 'assistant: ') + e.textContent.trim().split('\\n')[0])";

#[test]
fn a_whole_session_on_the_page_reads_in_order_fits_a_phone_and_leaves_no_console_error() {
    let Some(chromium) = gateway_support::chromium() else { return };
    let long = format!("echo made > made.txt && echo {}", "0123456789".repeat(20));
    let env = Env::new(
        Wire::OpenAi,
        vec![
            Turn::text("Hello, API caller.").into(),
            Turn::text(RICH_ANSWER).into(),
            Turn::tool("bash", serde_json::json!({"command": "echo made > made.txt"}))
                .with_text("I will make the file.")
                .into(),
            Turn::text("Made it.").into(),
            Turn::text("Then nothing.").into(),
            Turn::tool(
                "message",
                serde_json::json!({"content": "Here is the chart.", "media": ["chart.png"]}),
            )
            .into(),
            Turn::text("Sent.").into(),
            Turn::text("Fast answer.").into(),
            Turn::text("Again, fast.").into(),
            Turn::tool("bash", serde_json::json!({"command": long})).into(),
            Turn::text("Done on the phone.").into(),
        ],
    );
    let workspace = env.home.path().join("workspace");
    std::fs::create_dir_all(&workspace).unwrap();
    let png = gateway_support::browser::decode_base64(TINY_PNG);
    std::fs::write(workspace.join("chart.png"), png).unwrap();
    let gw = Gateway::start(
        &env,
        "heartbeat_minutes = 0\n\n[channels.web]\nenabled = true\nmodels = { fast = \"openai/gpt-fast\" }\n",
    );
    assert_eq!(chat(gw.port, "alice", "hello from the api"), (200, "Hello, API caller.".into()));
    let shots = super::gateway_web::screenshots_dir();
    let mut b = gateway_support::browser::Browser::launch(&chromium);
    b.watch_console();
    b.viewport(1280, 900, false);
    b.navigate(&format!("{}/#token={TOKEN}", gw.url()));
    b.wait_for("the socket", "document.getElementById('state').textContent === 'connected'");

    // A task list, a quote and code, as chat apps show them.
    b.fill("#input", "show me the code");
    b.click("#send");
    b.wait_for("the answer", "document.querySelector('.msg.assistant.done pre code')");
    b.screenshot(&shots.join("page-chat-desktop.png"));
    b.viewport(390, 844, true);
    b.screenshot(&shots.join("page-answer-phone.png"));
    b.viewport(1280, 900, false);
    assert_eq!(
        b.eval("[...document.querySelectorAll('.msg.assistant input[type=checkbox]')].map(c => c.checked + '/' + c.disabled).join()"),
        "true/true,false/true",
        "the task list's boxes show, ticked as written, not clickable"
    );
    assert_ne!(
        b.eval(
            "getComputedStyle(document.querySelector('.msg.assistant blockquote')).borderLeftWidth"
        ),
        "0px",
        "a quote is marked"
    );
    let covered = "(() => { const a = document.querySelector('.msg.assistant pre .copy').getBoundingClientRect(), \
         b = document.querySelector('.msg.assistant pre code').getBoundingClientRect(); \
         return a.left < b.right && b.left < a.right && a.top < b.bottom && b.top < a.bottom; })()";
    assert_eq!(b.eval(covered), false, "the copy button covers the code");
    // The question's bubble is as wide as its words, at the right of a centred column.
    let layout = b.eval(
        "(() => { const u = document.querySelector('.msg.user').getBoundingClientRect(), \
         a = document.querySelector('.msg.assistant').getBoundingClientRect(), \
         log = document.getElementById('log').getBoundingClientRect(); \
         return {user: Math.round(u.width), offcentre: Math.round(Math.abs((a.left + a.right) / 2 - (log.left + log.right) / 2)), \
         aligned: Math.round(Math.abs(u.right - a.right))}; })()",
    );
    assert!(layout["user"].as_u64().unwrap() < 260, "{layout}");
    assert!(layout["offcentre"].as_u64().unwrap() <= 8, "{layout}");
    assert!(layout["aligned"].as_u64().unwrap() <= 2, "{layout}");
    // Each message says when, and has its actions.
    assert_eq!(
        b.eval("[...document.querySelectorAll('#log .entry time')].every(t => /^\\d\\d:\\d\\d$/.test(t.textContent))"),
        true
    );
    assert_eq!(b.eval("document.querySelectorAll('#log .entry time').length"), 2);
    b.click(".entry.assistant .actions .copy-message");
    b.wait_for(
        "the copied answer",
        "(window.ferroclaw.copied || '').startsWith('Here is the plan:')",
    );
    assert_eq!(b.eval("!!document.querySelector('.entry.user .actions .edit')"), true);
    assert_eq!(b.eval("!!document.querySelector('.entry.assistant .actions .regenerate')"), true);

    // The sidebar: web chats apart from API callers' conversations.
    b.wait_for(
        "both in the sidebar",
        "document.querySelectorAll('#sessions .session').length === 1",
    );
    b.click("#filter [data-filter=api]");
    b.wait_for("the API's", "[...document.querySelectorAll('#sessions .session .title')].map(t => t.textContent).join() === 'hello from the api'");
    b.click("#filter [data-filter=all]");
    b.wait_for("all", "document.querySelectorAll('#sessions .session').length === 2");
    b.click("#filter [data-filter=chats]");
    b.wait_for("the chats", "[...document.querySelectorAll('#sessions .session .title')].map(t => t.textContent).join() === 'show me the code'");

    // A message sent while an answer is still coming (the turn waits for
    // an approval) comes after that answer, as the history has it.
    b.fill("#input", "make the file");
    b.click("#send");
    b.wait_for(
        "the approval card",
        "document.querySelector('.approval:not(.resolved) .choice-once')",
    );
    // The call's card comes above the request to approve it.
    b.wait_for(
        "the bash card above its approval card",
        "document.querySelector('.tool + .approval:not(.resolved)')",
    );
    b.fill("#input", "and then?");
    b.click("#send");
    b.screenshot(&shots.join("page-approval-desktop.png"));
    b.click(".approval:not(.resolved) .choice-once");
    b.wait_for("both answers", "[...document.querySelectorAll('.msg.assistant.done')].some(m => m.textContent.includes('Then nothing.'))");
    let live = b.eval(ORDER);
    let expected = serde_json::json!([
        "user: show me the code",
        "assistant: Here is the plan:",
        "user: make the file",
        "assistant: I will make the file.",
        "tool bash",
        "assistant: Made it.",
        "user: and then?",
        "assistant: Then nothing."
    ]);
    assert_eq!(live, expected, "as the page showed it");
    b.eval("window.oldPage = true; location.reload()");
    b.wait_for("the history", "!window.oldPage && window.ferroclaw && window.ferroclaw.historyLoaded > 0 && document.querySelectorAll('#log .tool').length === 1");
    assert_eq!(b.eval(ORDER), expected, "as the history has it");

    // A workspace file sent to this chat needs no approval.
    b.fill("#input", "send me the chart");
    b.click("#send");
    b.wait_for("the chart and the answer", "document.querySelector('.msg.media img.sent') && [...document.querySelectorAll('.msg.assistant.done')].some(m => m.textContent.includes('Sent.'))");
    assert_eq!(b.eval("document.querySelectorAll('.approval').length"), 0, "no approval asked");

    // Another model, picked for the next message (an alias of [channels.web] models).
    assert_eq!(
        b.eval("[...document.querySelectorAll('#model option')].map(o => o.value).join()"),
        "ferroclaw,fast"
    );
    b.fill("#model", "fast");
    b.fill("#input", "which model?");
    b.click("#send");
    b.wait_for("the fast answer", "[...document.querySelectorAll('.msg.assistant.done')].some(m => m.textContent.includes('Fast answer.'))");
    let asked = env.server.requests().len();
    assert_eq!(env.request_body(asked - 1)["model"], "gpt-fast");
    // Regenerate asks the last question again; edit puts a question back in the box.
    b.eval("[...document.querySelectorAll('.entry.assistant .regenerate')].pop().click()");
    b.wait_for("the new answer", "[...document.querySelectorAll('.msg.assistant.done')].some(m => m.textContent.includes('Again, fast.'))");
    let last = env.request_body(asked);
    let said = last["messages"].as_array().unwrap().last().unwrap()["content"].to_string();
    assert!(said.contains("which model?"), "{said}");
    b.eval("document.querySelector('.entry.user .actions .edit').click()");
    assert_eq!(b.eval("document.getElementById('input').value"), "show me the code");
    b.fill("#input", "");

    // Search: the words found are marked, no index brackets show.
    b.fill("#search", "chart");
    b.wait_for("the search", "document.querySelector('#sessions .session .snippet mark')");
    let snippet = b.eval("document.querySelector('#sessions .session .snippet').textContent");
    assert!(!snippet.as_str().unwrap().contains("[chart"), "{snippet}");
    assert_eq!(
        b.eval("document.querySelector('#sessions .snippet mark').textContent.toLowerCase()"),
        "chart"
    );
    b.fill("#search", "");

    // A new chat shows in the sidebar at once, before its first answer.
    b.click("#new-chat");
    b.wait_for("the new chat listed", "document.getElementById('state').textContent === 'connected' && document.querySelector('#sessions .session.current .title') && document.querySelector('#sessions .session.current .title').textContent === 'New chat'");

    // On a phone: the connection state shows, an approval card fits.
    b.viewport(390, 844, true);
    let state = b.eval(
        "(() => { const r = document.getElementById('state').getBoundingClientRect(); \
         return r.width > 0 && r.right <= innerWidth && r.bottom <= innerHeight; })()",
    );
    assert_eq!(state, true, "the connection state is visible on a phone");
    b.fill("#input", "make another file");
    b.click("#send");
    b.wait_for("the card", "document.querySelector('.approval:not(.resolved) .choice-once')");
    let fits = b.eval(
        "(() => { const card = document.querySelector('.approval:not(.resolved)').getBoundingClientRect(); \
         const pre = document.querySelector('.approval:not(.resolved) pre'); \
         return [document.documentElement.scrollWidth <= innerWidth, card.right <= innerWidth, \
         pre.scrollWidth <= pre.clientWidth]; })()",
    );
    assert_eq!(fits, serde_json::json!([true, true, true]), "the card overflows");
    b.screenshot(&shots.join("page-approval-phone.png"));
    b.click(".approval:not(.resolved) .choice-once");
    b.wait_for("the answer", "[...document.querySelectorAll('.msg.assistant.done')].some(m => m.textContent.includes('Done on the phone.'))");
    b.screenshot(&shots.join("page-chat-phone.png"));
    b.click("#menu");
    b.screenshot(&shots.join("page-sessions-phone.png"));
    b.click("#menu");

    // A job's times in its own time zone, its schedule in plain words.
    b.viewport(1280, 900, false);
    b.click("#tab-operate");
    b.click("#operate-nav [data-pane=cron]");
    b.fill("#cron-name", "Check the build");
    b.fill("#cron-value", "*/5 * * * *");
    b.fill("#cron-tz", "Europe/Paris");
    b.wait_for("the explanation", "document.getElementById('cron-explained').textContent.startsWith('Every 5 minutes (Europe/Paris)')");
    b.fill("#cron-message", "Is the build green?");
    b.click("#cron-add");
    b.wait_for("the job", "document.querySelector('.job-card .explained')");
    assert_eq!(
        b.eval("document.querySelector('.job-card .explained').textContent"),
        "Every 5 minutes (Europe/Paris)"
    );
    let next = b.eval("document.querySelector('.job-card .when').textContent");
    assert!(regex_like_cet(next.as_str().unwrap()), "{next}");
    b.eval("document.getElementById('toast').hidden = true");
    b.screenshot(&shots.join("page-cron-desktop.png"));

    let errors = b.console_errors();
    assert!(errors.is_empty(), "the console showed errors: {errors:#?}");
    drop(b);

    // The app's files: gzipped for a browser, and not sent again unchanged.
    let (head, body) = get(gw.port, "/app.js", &["Accept-Encoding: gzip, deflate, br"]);
    assert!(head.contains("\r\ncontent-encoding: gzip\r\n"), "{head}");
    assert!(body.len() < 20_000, "app.js gzipped is {} bytes", body.len());
    let etag = header(&head, "etag").expect("an ETag");
    let (again, body) =
        get(gw.port, "/app.js", &["Accept-Encoding: gzip", &format!("If-None-Match: {etag}")]);
    assert!(again.starts_with("HTTP/1.1 304"), "{again}");
    assert!(body.is_empty());
}

/// True when `text` names Paris's time zone (CET in winter, CEST in summer).
fn regex_like_cet(text: &str) -> bool {
    text.contains(" CET") || text.contains(" CEST")
}

/// A 1×1 PNG.
const TINY_PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==";

/// `GET path` with `headers`: the response's head (names lower-cased) and body bytes.
fn get(port: u16, path: &str, headers: &[&str]) -> (String, Vec<u8>) {
    let mut tcp = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    let extra: String = headers.iter().map(|h| format!("{h}\r\n")).collect();
    write!(tcp, "GET {path} HTTP/1.1\r\nhost: 127.0.0.1\r\nconnection: close\r\n{extra}\r\n")
        .unwrap();
    let mut raw = Vec::new();
    tcp.read_to_end(&mut raw).unwrap();
    let split = raw.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
    let head =
        String::from_utf8_lossy(&raw[..split + 2]).to_lowercase().replace("http/1.1", "HTTP/1.1");
    (head, raw[split + 4..].to_vec())
}

/// The value of header `name` in `head`.
fn header(head: &str, name: &str) -> Option<String> {
    head.lines().find_map(|l| l.strip_prefix(&format!("{name}: ")).map(str::to_string))
}
