//! A fake Telegram Bot API: `getUpdates` (long polling with offset) serves
//! updates the test pushes; `sendMessage` records what the bot sends.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::{Path, State};
use axum::routing::post;
use axum::{Json, Router};
use serde_json::{Value, json};

#[derive(Default)]
struct Shared {
    updates: Vec<Value>,
    sent: Vec<Value>,
    /// answerCallbackQuery bodies.
    answered: Vec<Value>,
    /// editMessageText bodies.
    edited: Vec<Value>,
    /// Files users sent, by file_id: (file_path, bytes).
    files: std::collections::HashMap<String, (String, Vec<u8>)>,
    /// (method, raw multipart body) of each sendPhoto and sendDocument.
    uploads: Vec<(String, String)>,
    next_update: i64,
    /// Forget updates once a poll asks past them, as Telegram does (off by
    /// default: a new poller then sees old updates again, as duplicates).
    forgetting: bool,
}

/// The fake; its thread runs for the life of the test.
#[derive(Clone)]
pub(crate) struct FakeTelegram {
    shared: Arc<Mutex<Shared>>,
    pub base: String,
}

impl FakeTelegram {
    pub(crate) fn start() -> FakeTelegram {
        let shared = Arc::new(Mutex::new(Shared { next_update: 1, ..Default::default() }));
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let state = shared.clone();
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            rt.block_on(async move {
                let app = Router::new()
                    .route("/{bot}/{method}", post(handle))
                    .route("/file/{bot}/documents/endless.bin", axum::routing::get(endless))
                    .route("/file/{bot}/{*path}", axum::routing::get(download))
                    .with_state(state);
                let listener = tokio::net::TcpListener::from_std(listener).unwrap();
                axum::serve(listener, app).await.unwrap();
            });
        });
        FakeTelegram { shared, base }
    }

    /// From now on, an update is gone once a `getUpdates` asks past it
    /// (its offset is higher), as on the real Bot API.
    pub(crate) fn forget_confirmed(&self) {
        self.shared.lock().unwrap().forgetting = true;
    }

    /// A user writes `text` in a private chat.
    pub(crate) fn user_says(&self, user_id: i64, name: &str, text: &str) {
        let mut s = self.shared.lock().unwrap();
        let id = s.next_update;
        s.next_update += 1;
        s.updates.push(json!({
            "update_id": id,
            "message": {
                "message_id": id,
                "from": {"id": user_id, "is_bot": false, "first_name": name, "username": name.to_lowercase()},
                "chat": {"id": user_id, "type": "private"},
                "date": 0,
                "text": text
            }
        }));
    }

    /// `user_id` presses the inline button carrying `data` under a message in `chat_id`.
    pub(crate) fn user_presses(&self, user_id: i64, chat_id: i64, data: &str) {
        let mut s = self.shared.lock().unwrap();
        let id = s.next_update;
        s.next_update += 1;
        s.updates.push(json!({
            "update_id": id,
            "callback_query": {
                "id": format!("cb{id}"),
                "from": {"id": user_id, "is_bot": false, "first_name": "Someone"},
                "message": {"message_id": 1, "chat": {"id": chat_id, "type": "private"}, "date": 0, "text": "..."},
                "chat_instance": "1",
                "data": data
            }
        }));
    }

    /// A user sends a photo (`bytes`) with `caption` in a private chat.
    pub(crate) fn user_sends_photo(&self, user_id: i64, caption: &str, bytes: &[u8]) {
        let mut s = self.shared.lock().unwrap();
        let id = s.next_update;
        s.next_update += 1;
        s.files.insert("PHOTO-BIG".into(), ("photos/file_1.jpg".into(), bytes.to_vec()));
        s.updates.push(json!({
            "update_id": id,
            "message": {
                "message_id": id,
                "from": {"id": user_id, "is_bot": false, "first_name": "Ann"},
                "chat": {"id": user_id, "type": "private"},
                "date": 0,
                "caption": caption,
                "photo": [
                    {"file_id": "PHOTO-SMALL", "file_unique_id": "s", "width": 90, "height": 90, "file_size": 10},
                    {"file_id": "PHOTO-BIG", "file_unique_id": "b", "width": 800, "height": 800, "file_size": bytes.len()}
                ]
            }
        }));
    }

    /// A user sends a document that claims no size and never ends.
    pub(crate) fn user_sends_endless_document(&self, user_id: i64) {
        let mut s = self.shared.lock().unwrap();
        let id = s.next_update;
        s.next_update += 1;
        s.files.insert("ENDLESS".into(), ("documents/endless.bin".into(), Vec::new()));
        s.updates.push(json!({
            "update_id": id,
            "message": {
                "message_id": id,
                "from": {"id": user_id, "is_bot": false, "first_name": "Ann"},
                "chat": {"id": user_id, "type": "private"},
                "date": 0,
                "caption": "here it is",
                "document": {"file_id": "ENDLESS", "file_unique_id": "e", "file_name": "endless.bin"}
            }
        }));
    }

    /// A user sends a voice note (`bytes`, Ogg) in a private chat.
    pub(crate) fn user_sends_voice(&self, user_id: i64, bytes: &[u8]) {
        let mut s = self.shared.lock().unwrap();
        let id = s.next_update;
        s.next_update += 1;
        s.files.insert("VOICE".into(), ("voice/file_2.oga".into(), bytes.to_vec()));
        s.updates.push(json!({
            "update_id": id,
            "message": {
                "message_id": id,
                "from": {"id": user_id, "is_bot": false, "first_name": "Ann"},
                "chat": {"id": user_id, "type": "private"},
                "date": 0,
                "voice": {"file_id": "VOICE", "file_unique_id": "v", "duration": 2, "mime_type": "audio/ogg", "file_size": bytes.len()}
            }
        }));
    }

    /// (method, raw multipart body) of each photo or document the bot sent.
    pub(crate) fn uploads(&self) -> Vec<(String, String)> {
        self.shared.lock().unwrap().uploads.clone()
    }

    /// The sendMessage bodies that carried an inline keyboard.
    pub(crate) fn keyboards(&self) -> Vec<Value> {
        self.sent().into_iter().filter(|m| m.get("reply_markup").is_some()).collect()
    }

    /// Every editMessageText body.
    pub(crate) fn edited(&self) -> Vec<Value> {
        self.shared.lock().unwrap().edited.clone()
    }

    /// Every answerCallbackQuery body.
    pub(crate) fn answered(&self) -> Vec<Value> {
        self.shared.lock().unwrap().answered.clone()
    }

    /// Texts the bot sent to `chat_id`, in order.
    pub(crate) fn sent_to(&self, chat_id: i64) -> Vec<String> {
        self.shared
            .lock()
            .unwrap()
            .sent
            .iter()
            .filter(|m| m["chat_id"].as_i64() == Some(chat_id))
            .map(|m| m["text"].as_str().unwrap_or_default().to_string())
            .collect()
    }

    /// Every sendMessage body.
    pub(crate) fn sent(&self) -> Vec<Value> {
        self.shared.lock().unwrap().sent.clone()
    }
}

/// A body that never ends, without a `Content-Length`.
async fn endless() -> axum::response::Response {
    let chunk = axum::body::Bytes::from(vec![b'x'; 1024]);
    let stream = futures_util::stream::repeat_with(move || Ok::<_, std::io::Error>(chunk.clone()));
    axum::response::Response::new(axum::body::Body::from_stream(stream))
}

async fn download(
    State(shared): State<Arc<Mutex<Shared>>>,
    Path((bot, path)): Path<(String, String)>,
) -> Result<Vec<u8>, axum::http::StatusCode> {
    let s = shared.lock().unwrap();
    let found = s.files.values().find(|(p, _)| *p == path).map(|(_, b)| b.clone());
    match found {
        Some(bytes) if bot == "botTEST:TOKEN" => Ok(bytes),
        _ => Err(axum::http::StatusCode::NOT_FOUND),
    }
}

async fn handle(
    State(shared): State<Arc<Mutex<Shared>>>,
    Path((bot, method)): Path<(String, String)>,
    raw: axum::body::Bytes,
) -> Json<Value> {
    if bot != "botTEST:TOKEN" {
        return Json(json!({"ok": false, "error_code": 401, "description": "Unauthorized"}));
    }
    if method == "sendPhoto" || method == "sendDocument" {
        let text = String::from_utf8_lossy(&raw).into_owned();
        shared.lock().unwrap().uploads.push((method, text));
        return Json(json!({"ok": true, "result": {"message_id": 2}}));
    }
    let body: Value = serde_json::from_slice(&raw).unwrap_or(Value::Null);
    match method.as_str() {
        "getFile" => {
            let id = body["file_id"].as_str().unwrap_or_default();
            match shared.lock().unwrap().files.get(id) {
                Some((path, _)) => {
                    Json(json!({"ok": true, "result": {"file_id": id, "file_path": path}}))
                }
                None => Json(json!({"ok": false, "description": "Bad Request: invalid file_id"})),
            }
        }
        "getUpdates" => {
            let offset = body["offset"].as_i64().unwrap_or(0);
            {
                let mut s = shared.lock().unwrap();
                if s.forgetting {
                    s.updates.retain(|u| u["update_id"].as_i64().unwrap_or(0) >= offset);
                }
            }
            let timeout = body["timeout"].as_u64().unwrap_or(0).min(2);
            let deadline = tokio::time::Instant::now() + Duration::from_secs(timeout);
            loop {
                let ready: Vec<Value> = shared
                    .lock()
                    .unwrap()
                    .updates
                    .iter()
                    .filter(|u| u["update_id"].as_i64().unwrap_or(0) >= offset)
                    .cloned()
                    .collect();
                if !ready.is_empty() || tokio::time::Instant::now() >= deadline {
                    return Json(json!({"ok": true, "result": ready}));
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
        "editMessageText" => {
            shared.lock().unwrap().edited.push(body);
            Json(json!({"ok": true, "result": true}))
        }
        "answerCallbackQuery" => {
            shared.lock().unwrap().answered.push(body);
            Json(json!({"ok": true, "result": true}))
        }
        "sendMessage" => {
            shared.lock().unwrap().sent.push(body);
            Json(json!({"ok": true, "result": {"message_id": 1}}))
        }
        _ => Json(json!({"ok": false, "description": "Not Found"})),
    }
}
