//! Pictures and files through the gateway, against the fake Telegram Bot
//! API: a photo reaches the model as an image; the `message` tool sends a
//! workspace file as a document and refuses a path outside the workspace.

use crate::common;
use crate::gateway_support;

use common::{Env, Wire};
use ferroclaw_testkit::{ScriptedToolCall, Turn};
use gateway_support::fake_telegram::FakeTelegram;
use gateway_support::{Gateway, wait_for};
use serde_json::json;

fn config(fake: &FakeTelegram) -> String {
    format!(
        "heartbeat_minutes = 0\npermission_mode = \"bypass\"\n[channels.telegram]\nenabled = true\ntoken = \"TEST:TOKEN\"\napi_base = \"{}\"\npoll_timeout_secs = 1\nallow_from = [\"42\"]\n",
        fake.base
    )
}

/// The bytes of a (tiny, not decodable) PNG: what matters is the signature.
const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDRpicture";

#[test]
fn a_photo_reaches_the_model_as_an_image_and_a_workspace_file_goes_out_as_a_document() {
    let fake = FakeTelegram::start();
    let send = Turn::tools(vec![
        ScriptedToolCall::new(
            "message",
            json!({"content": "Here is the report.", "media": ["report.txt"]}),
        ),
        ScriptedToolCall::new(
            "message",
            json!({"content": "and this", "media": ["../../etc/passwd"]}),
        ),
    ]);
    let env = Env::new(Wire::OpenAi, vec![send.into(), Turn::text("Sent it.").into()]);
    let workspace = env.home.path().join("workspace");
    std::fs::create_dir_all(&workspace).unwrap();
    std::fs::write(workspace.join("report.txt"), "quarterly numbers").unwrap();
    let _gw = Gateway::start(&env, &config(&fake));
    fake.user_sends_photo(42, "what is in this picture?", PNG);
    wait_for(30, "the answer", || fake.sent_to(42).iter().any(|t| t == "Sent it."));

    let first = env.request_body(0).to_string();
    let data = base64_of(PNG);
    assert!(first.contains(&format!("data:image/png;base64,{data}")), "{first}");
    assert!(first.contains("what is in this picture?"));

    let uploads = fake.uploads();
    assert_eq!(uploads.len(), 1, "{uploads:?}");
    let (method, body) = &uploads[0];
    assert_eq!(method, "sendDocument");
    assert!(
        body.contains("filename=\"report.txt\"") && body.contains("quarterly numbers"),
        "{body}"
    );
    assert!(body.contains("name=\"chat_id\"\r\n\r\n42\r\n"));
    assert!(fake.sent_to(42).iter().any(|t| t == "Here is the report."));
    let results = env.request_body(1).to_string();
    assert!(results.contains("not inside the workspace"), "{results}");
    assert!(fake.keyboards().is_empty(), "permission_mode = \"bypass\" asks nobody");
}

#[test]
fn a_file_that_never_ends_is_refused_at_the_cap_and_nothing_lands_in_the_inbox() {
    let fake = FakeTelegram::start();
    let env = Env::new(Wire::OpenAi, vec![Turn::text("It did not arrive.").into()]);
    let config = config(&fake)
        .replace("poll_timeout_secs = 1\n", "poll_timeout_secs = 1\nmax_file_mb = 0.01\n");
    let config = format!("{config}[channels.discord]\nenabled = false\n");
    let gw = Gateway::start(&env, &config);
    fake.user_sends_endless_document(42);
    wait_for(30, "the answer", || fake.sent_to(42).iter().any(|t| t == "It did not arrive."));
    let asked = env.request_body(0).to_string();
    assert!(
        asked.contains(
            "[The user sent endless.bin, which could not be received: it is over the 10 KB limit]"
        ),
        "{asked}"
    );
    let inbox = env.home.path().join("workspace/inbox");
    assert!(!inbox.exists() || std::fs::read_dir(&inbox).unwrap().next().is_none());

    // The operate view's channels: each with its connection.
    let (status, body) =
        gateway_support::request(gw.port, "GET", "/api/status", Some(gateway_support::TOKEN), None)
            .unwrap();
    assert_eq!(status, 200, "{body}");
    let channels: serde_json::Value = serde_json::from_str(&body).unwrap();
    let state = |name: &str| {
        let list = channels["channels"].as_array().unwrap();
        list.iter().find(|c| c["name"] == name).map(|c| c["connection"]["state"].clone())
    };
    assert_eq!(state("telegram"), Some(json!("connected")), "{body}");
    assert_eq!(state("discord"), Some(json!("disabled")), "{body}");
    assert_eq!(state("web"), Some(json!("connected")), "{body}");
}

fn base64_of(bytes: &[u8]) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk.iter().enumerate().fold(0u32, |n, (i, b)| n | (*b as u32) << (16 - 8 * i));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// A fake OpenAI-compatible `/v1/audio/transcriptions`: answers `text` and
/// keeps each request body. Returns its URL.
fn fake_transcriber(text: &'static str) -> (String, std::sync::Arc<std::sync::Mutex<Vec<String>>>) {
    use axum::Router;
    use axum::routing::post;
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let keep = seen.clone();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let url = format!("http://{}/v1/audio/transcriptions", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async move {
            let app = Router::new().route(
                "/v1/audio/transcriptions",
                post(move |raw: axum::body::Bytes| async move {
                    keep.lock().unwrap().push(String::from_utf8_lossy(&raw).into_owned());
                    axum::Json(json!({"text": text}))
                }),
            );
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            axum::serve(listener, app).await.unwrap();
        });
    });
    (url, seen)
}

#[test]
fn a_voice_note_is_saved_in_the_inbox_and_transcribed_for_the_model() {
    let fake = FakeTelegram::start();
    let (url, seen) = fake_transcriber("remind me to buy milk");
    let env = Env::new(Wire::OpenAi, vec![Turn::text("Noted: milk.").into()]);
    let extra = format!("transcription = {{ url = \"{url}\", model = \"whisper-test\" }}\n");
    let _gw = Gateway::start(&env, &format!("{extra}{}", config(&fake)));
    fake.user_sends_voice(42, b"OggS voice bytes");
    wait_for(30, "the answer", || fake.sent_to(42).iter().any(|t| t == "Noted: milk."));
    let asked = env.request_body(0).to_string();
    assert!(asked.contains("transcript: remind me to buy milk"), "{asked}");
    assert!(asked.contains("saved as inbox/voice.ogg"), "{asked}");
    let saved = std::fs::read(env.home.path().join("workspace/inbox/voice.ogg")).unwrap();
    assert_eq!(saved, b"OggS voice bytes");
    let request = seen.lock().unwrap()[0].clone();
    assert!(request.contains("whisper-test") && request.contains("OggS voice bytes"), "{request}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_pasted_image_in_the_web_chat_reaches_the_model_and_a_non_image_is_refused() {
    use futures_util::{SinkExt, StreamExt};
    use tokio_tungstenite::tungstenite::Message;
    let env = Env::new(Wire::OpenAi, vec![Turn::text("A tiny picture.").into()]);
    let gw = Gateway::start(&env, "heartbeat_minutes = 0\n");
    let url = format!("ws://127.0.0.1:{}/ws?token={}&chat=pics", gw.port, gateway_support::TOKEN);
    let (socket, _) = tokio_tungstenite::connect_async(url).await.expect("socket");
    let (mut sink, mut stream) = socket.split();
    let bad = json!({"type": "message", "content": "x", "images": [{"media_type": "image/png", "data": base64_of(b"not a picture")}]});
    let good = json!({"type": "message", "content": "what is this?", "images": [{"media_type": "image/png", "data": base64_of(PNG)}]});
    sink.send(Message::Text(bad.to_string().into())).await.unwrap();
    sink.send(Message::Text(good.to_string().into())).await.unwrap();
    // ready, the refusal, the reply (streamed events skipped).
    let mut frames = Vec::new();
    while frames.len() < 3 {
        match stream.next().await {
            Some(Ok(Message::Text(t))) => {
                let v: serde_json::Value = serde_json::from_str(&t).unwrap();
                if v["type"] != "event" {
                    frames.push(v);
                }
            }
            Some(Ok(_)) => {}
            other => panic!("socket ended: {other:?}"),
        }
    }
    let frames = &frames[1..];
    assert_eq!(frames[0]["type"], "error");
    assert!(frames[0]["message"].as_str().unwrap().contains("not a PNG"), "{}", frames[0]);
    assert_eq!(frames[1]["content"], "A tiny picture.");
    let asked = env.request_body(0).to_string();
    assert!(asked.contains(&format!("data:image/png;base64,{}", base64_of(PNG))), "{asked}");
    assert_eq!(env.server.requests().len(), 1, "the refused frame reached no model");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_web_chats_history_keeps_the_users_picture_and_the_files_the_agent_sent() {
    use futures_util::{SinkExt, StreamExt};
    use tokio_tungstenite::tungstenite::Message;
    let send =
        Turn::tool("message", json!({"content": "Here is the chart.", "media": ["chart.png"]}));
    let env = Env::new(Wire::OpenAi, vec![send.into(), Turn::text("Sent it.").into()]);
    let workspace = env.home.path().join("workspace");
    std::fs::create_dir_all(&workspace).unwrap();
    std::fs::write(workspace.join("chart.png"), PNG).unwrap();
    let gw = Gateway::start(&env, "heartbeat_minutes = 0\npermission_mode = \"bypass\"\n");
    let url = format!("ws://127.0.0.1:{}/ws?token={}&chat=pics", gw.port, gateway_support::TOKEN);
    let (mut page, _) = tokio_tungstenite::connect_async(&url).await.expect("socket");
    let image = json!({"media_type": "image/png", "data": base64_of(PNG)});
    let frame = json!({"type": "message", "content": "what is this?", "images": [image]});
    page.send(Message::Text(frame.to_string().into())).await.unwrap();
    loop {
        let next = tokio::time::timeout(std::time::Duration::from_secs(30), page.next()).await;
        let Ok(Some(Ok(Message::Text(t)))) = next else { panic!("no frame: {next:?}") };
        if serde_json::from_str::<serde_json::Value>(&t).unwrap()["type"] == "reply" {
            break;
        }
    }
    // What a page that opens (a reload) loads: the picture and the file stay.
    let get = |path: &str| {
        gateway_support::request(gw.port, "GET", path, Some(gateway_support::TOKEN), None).unwrap()
    };
    let (status, body) = get("/api/sessions/gw-web-pics");
    assert_eq!(status, 200, "{body}");
    let items = serde_json::from_str::<serde_json::Value>(&body).unwrap()["items"].clone();
    let asked = &items[0];
    assert_eq!(
        (asked["kind"].as_str(), asked["text"].as_str()),
        (Some("user"), Some("what is this?"))
    );
    let src = asked["images"][0]["src"].as_str().expect("the picture is referenced").to_string();
    let (status, bytes) = get(&src);
    assert_eq!((status, bytes.ends_with("PNG\r\n\x1a\n\0\0\0\rIHDRpicture")), (200, true), "{src}");
    let sent = items.as_array().unwrap().iter().find(|i| i["kind"] == "media").expect("{items}");
    assert_eq!(sent["text"], "Here is the chart.");
    assert_eq!(sent["paths"], json!(["chart.png"]));
    let (status, _) = get("/api/files?path=chart.png");
    assert_eq!(status, 200);
    assert!(!body.contains("[image]"), "{body}");
}
