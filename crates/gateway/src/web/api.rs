//! The web app's JSON API under `/api/`: conversations (list, search, read,
//! rename) and a chat's live state. The operate views' endpoints are in
//! [`super::operate`].
//!
//! Every endpoint needs `Authorization: Bearer TOKEN` (checked before the
//! body is read, as for `/v1/`): a header a page of another origin cannot
//! send without a CORS preflight the gateway never grants, so a cookie-less
//! token is also the CSRF defence. Bad input gets `400` with one sentence
//! and changes nothing.

use std::collections::HashMap;
use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use ferroclaw_core::session::Entry;
use ferroclaw_protocol::{ContentBlock, ResultPart, Role};
use serde::Deserialize;
use serde_json::{Value, json};

use super::App;
use super::WebContext;
use crate::history::{Conversation, HistoryError};
use crate::sessions::{MAX_TITLE_CHARS, SessionKey};

/// The largest file the page fetches (`/api/files`).
const MAX_FILE_BYTES: u64 = 50 * 1024 * 1024;

/// Conversations listed at most.
const MAX_LISTED: usize = 200;
/// Items of a transcript sent at most (the latest ones).
const MAX_TRANSCRIPT_ITEMS: usize = 400;
/// Characters of a tool result shown in its card.
const MAX_PREVIEW_CHARS: usize = 2_000;
/// Recall hits asked for by a search.
const SEARCH_HITS: usize = 20;

/// An API error: status and one sentence, as `{"error": "..."}`.
pub(super) struct ApiError(pub StatusCode, pub String);

/// How long a client is told to wait when the gateway cannot answer now
/// (starting, or its database away).
const RETRY_AFTER_SECS: u32 = 5;

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut response = (self.0, Json(json!({"error": self.1}))).into_response();
        if self.0 == StatusCode::SERVICE_UNAVAILABLE {
            response.headers_mut().insert(header::RETRY_AFTER, RETRY_AFTER_SECS.into());
        }
        response
    }
}

/// `400` with `message`.
pub(super) fn bad(message: impl Into<String>) -> ApiError {
    ApiError(StatusCode::BAD_REQUEST, message.into())
}

/// `500` with `message` (a file the gateway could not read or write).
pub(super) fn failed(message: impl std::fmt::Display) -> ApiError {
    ApiError(StatusCode::INTERNAL_SERVER_ERROR, message.to_string())
}

pub(super) type ApiResult = Result<Json<Value>, ApiError>;

impl App {
    /// The running gateway's state (attached before the channel starts).
    pub(super) fn gateway(&self) -> Result<Arc<WebContext>, ApiError> {
        self.web.gateway.get().cloned().ok_or_else(|| {
            ApiError(StatusCode::SERVICE_UNAVAILABLE, "the gateway is starting".into())
        })
    }
}

/// True for an id that names a file in one folder: letters, digits, `-_.`, no `..`.
pub(super) fn plain_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 200
        && !id.contains("..")
        && id.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

/// A conversation as the sidebar shows it.
fn listed(c: &Conversation) -> Value {
    let s = &c.summary;
    let chat = c.chat.as_ref();
    let mut channel = chat.map(|k| k.channel.clone()).or_else(|| {
        s.id.strip_prefix("gw-").and_then(|r| r.split_once('-')).map(|(c, _)| c.to_string())
    });
    // The OpenAI API's chats are web chats named `api-USER`.
    let api = chat.is_some_and(|k| k.channel == "web" && k.chat_id.starts_with("api-"))
        || s.id.starts_with("gw-web-api-");
    if api {
        channel = Some("api".into());
    }
    json!({
        "id": s.id,
        "title": c.title.clone().unwrap_or_else(|| s.title.clone()),
        "channel": channel,
        // The web chat a page may continue this conversation in; others
        // (other channels, API clients' chats, older sessions) are read-only.
        "chat": chat.filter(|k| k.channel == "web" && !api).map(|k| k.chat_id.clone()),
        "modified": s.modified,
        "created": s.created,
        "model": s.model,
    })
}

/// A read of the history that failed: `503` while the database is away
/// (the history is kept there; asking again once it is back works), else
/// `500` with the reason.
fn unread(e: HistoryError) -> ApiError {
    match e {
        HistoryError::Store(e) if e.is_unavailable() => ApiError(
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "the conversations are kept in the database, which cannot be reached right now \
                 ({e}); nothing is lost: try again in a few seconds"
            ),
        ),
        e => failed(e),
    }
}

#[derive(Deserialize)]
pub(super) struct ListQuery {
    q: Option<String>,
}

/// `GET /api/sessions[?q=words]`: this owner's conversations across channels,
/// newest first; with `q`, those the recall index finds, best first.
pub(super) async fn list_sessions(
    State(app): State<App>,
    Query(query): Query<ListQuery>,
) -> ApiResult {
    let gw = app.gateway()?;
    let q = query.q.unwrap_or_default();
    if q.chars().count() > 200 {
        return Err(bad("a search is at most 200 characters"));
    }
    let history = gw.history();
    if q.trim().is_empty() {
        let all = history.conversations(MAX_LISTED).await.map_err(unread)?;
        let list: Vec<Value> = all.iter().map(listed).collect();
        return Ok(Json(json!({"sessions": list})));
    }
    let all = history.conversations(usize::MAX).await.map_err(unread)?;
    // Several gateways: the database every gateway writes is searched, not
    // this machine's index of the turns it ran.
    if let Some(hits) = history.search(q.trim(), SEARCH_HITS).await.map_err(unread)? {
        return Ok(Json(json!({"sessions": found_or_titled(&all, hits, &q)})));
    }
    let home = gw.home.clone();
    let hits = tokio::task::spawn_blocking(move || {
        let recall = ferroclaw_core::recall::Recall::shared(&home).map_err(failed)?;
        recall.search(&q, SEARCH_HITS).map_err(failed).map(|hits| (q, hits))
    })
    .await
    .map_err(failed)?;
    let (q, hits) = hits?;
    let hits = hits.into_iter().map(|h| (h.session_id, h.snippet)).collect();
    Ok(Json(json!({"sessions": found_or_titled(&all, hits, &q)})))
}

/// The conversations of `hits` (session, snippet), best first, then those
/// whose given title holds `q`.
fn found_or_titled(all: &[Conversation], hits: Vec<(String, String)>, q: &str) -> Vec<Value> {
    let by_id: HashMap<&str, &Conversation> =
        all.iter().map(|c| (c.summary.id.as_str(), c)).collect();
    let mut seen = Vec::new();
    let mut list = Vec::new();
    for (session, snippet) in hits {
        let Some(c) = by_id.get(session.as_str()) else { continue };
        if seen.contains(&session) {
            continue;
        }
        seen.push(session.clone());
        let mut item = listed(c);
        let parts = crate::web::search_snippet::parts(&snippet, q);
        item["snippet"] = json!(parts.iter().map(|p| p.text.as_str()).collect::<String>());
        item["snippet_parts"] = json!(parts);
        list.push(item);
    }
    // Titles given in the web app are searched too.
    let needle = q.to_lowercase();
    for c in all {
        let titled = c.title.as_ref().is_some_and(|t| t.to_lowercase().contains(&needle));
        if titled && !seen.contains(&c.summary.id) {
            list.push(listed(c));
        }
    }
    list
}

/// `GET /api/sessions/{id}`: the conversation to read: user and assistant
/// text, and each tool call with its result.
pub(super) async fn read_session(State(app): State<App>, Path(id): Path<String>) -> ApiResult {
    let gw = app.gateway()?;
    if !plain_id(&id) || !id.starts_with("gw-") {
        return Err(bad("not a conversation id"));
    }
    let history = gw.history();
    let Some(entries) = history.entries(&id).await.map_err(unread)? else {
        return Err(ApiError(StatusCode::NOT_FOUND, format!("no conversation {id}")));
    };
    let items = transcript(&id, entries);
    let summary = history.conversation(&id).await.map_err(unread)?;
    let mut out = summary.as_ref().map(listed).unwrap_or_else(|| json!({"id": id}));
    out["items"] = Value::Array(items);
    Ok(Json(out))
}

/// `GET /api/sessions/{id}/images/{n}`: picture `n` (from 0) of a
/// conversation (one a person sent), as the history links it: any gateway
/// serves it, from where the conversation is kept. Only pictures, typed by
/// their bytes.
pub(super) async fn read_image(
    State(app): State<App>,
    Path((id, n)): Path<(String, usize)>,
) -> Result<Response, ApiError> {
    let gw = app.gateway()?;
    if !plain_id(&id) || !id.starts_with("gw-") {
        return Err(bad("not a conversation id"));
    }
    let missing = || ApiError(StatusCode::NOT_FOUND, format!("no picture {n} in {id}"));
    let (_, bytes) = gw.history().picture(&id, n).await.map_err(unread)?.ok_or_else(missing)?;
    let media_type =
        ferroclaw_tools::image_media_type(&bytes[..bytes.len().min(16)]).ok_or_else(missing)?;
    let headers = [
        (header::CONTENT_TYPE, media_type.to_string()),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff".to_string()),
        (header::CONTENT_SECURITY_POLICY, "sandbox".to_string()),
    ];
    Ok((headers, bytes).into_response())
}

/// Conversation `id`'s entries as display items, oldest first, the latest
/// [`MAX_TRANSCRIPT_ITEMS`] of them, each with `at` (when it was said, Unix
/// seconds). Pictures come as references the page
/// fetches: a user's as `images` of their message (`/api/sessions/ID/images/N`,
/// the Nth picture of session `id`), the files the agent sent to the chat
/// with the `message` tool as a `media` item after its card (`paths`, read
/// through `/api/files`). The messages a branch left (an API client's
/// regenerate or edit) are not shown: the transcript is the conversation
/// the client has.
fn transcript(id: &str, entries: Vec<Entry>) -> Vec<Value> {
    let mut shown = Transcript::default();
    for entry in entries {
        match entry {
            Entry::Message { ts, message } => shown.message(id, ts, message),
            Entry::Branch { dropped, .. } => shown.drop_last(dropped),
            // The history starts afresh: a later branch drops only what follows.
            Entry::Compaction { .. } => shown.starts.clear(),
            _ => {}
        }
    }
    let mut items = shown.items;
    items.retain(|i| i["kind"] != "unsent");
    let skip = items.len().saturating_sub(MAX_TRANSCRIPT_ITEMS);
    items.split_off(skip)
}

/// A transcript as its entries are read.
#[derive(Default)]
struct Transcript {
    items: Vec<Value>,
    /// Where each tool call's card is, to put its result in.
    cards: HashMap<String, usize>,
    /// Pictures are numbered as [`History::picture`] finds them.
    pictures: usize,
    /// Where each message of the history since the last compaction begins.
    starts: Vec<usize>,
}

impl Transcript {
    fn message(&mut self, id: &str, ts: u64, message: ferroclaw_protocol::Message) {
        self.starts.push(self.items.len());
        let role = if message.role == Role::User { "user" } else { "assistant" };
        // The item of this message's text, which its pictures join.
        let mut said: Option<usize> = None;
        for block in message.content {
            match block {
                ContentBlock::Text { text } if !text.trim().is_empty() => {
                    said = Some(self.items.len());
                    self.items.push(json!({"kind": role, "text": text, "at": ts}));
                }
                ContentBlock::Image { media_type, .. } => {
                    let src = format!("/api/sessions/{id}/images/{}", self.pictures);
                    self.pictures += 1;
                    let image = json!({"src": src, "media_type": media_type});
                    let items = &mut self.items;
                    let i = *said.get_or_insert_with(|| {
                        items.push(json!({"kind": role, "text": "", "at": ts}));
                        items.len() - 1
                    });
                    match items[i]["images"].as_array_mut() {
                        Some(list) => list.push(image),
                        None => items[i]["images"] = json!([image]),
                    }
                }
                ContentBlock::ToolCall(call) => {
                    self.cards.insert(call.id.clone(), self.items.len());
                    let sent = sent_here(&call.name, &call.input);
                    self.items.push(json!({"kind": "tool", "id": call.id, "name": call.name, "input": call.input, "at": ts}));
                    if let Some(media) = sent {
                        self.items.push(media);
                    }
                }
                ContentBlock::ToolResult { tool_call_id, content, is_error } => {
                    self.result(&tool_call_id, &content, is_error);
                }
                _ => {}
            }
        }
    }

    /// Puts a tool result's preview in its call's card.
    fn result(&mut self, call: &str, content: &[ResultPart], is_error: bool) {
        let Some(&i) = self.cards.get(call) else { return };
        let text: Vec<&str> = content
            .iter()
            .map(|p| match p {
                ResultPart::Text { text } => text.as_str(),
                ResultPart::Image { .. } => "[image]",
            })
            .collect();
        let text = text.join("\n");
        let items = &mut self.items;
        items[i]["preview"] = json!(text.chars().take(MAX_PREVIEW_CHARS).collect::<String>());
        items[i]["is_error"] = json!(is_error);
        // A message that was not sent shows only as its card.
        if is_error && items.get(i + 1).is_some_and(|m| m["kind"] == "media") {
            items[i + 1]["kind"] = json!("unsent");
        }
    }

    /// Leaves out the last `n` messages (those before the window, or a
    /// compaction's summary, have nothing shown to leave out).
    fn drop_last(&mut self, n: usize) {
        let kept = self.starts.len().saturating_sub(n);
        if let Some(&cut) = self.starts.get(kept) {
            self.items.truncate(cut);
            self.cards.retain(|_, i| *i < cut);
        }
        self.starts.truncate(kept);
    }
}

/// What a `message` call sent to the conversation's own chat (no other
/// channel or chat named), as the page shows it: its text and files.
fn sent_here(tool: &str, input: &Value) -> Option<Value> {
    let elsewhere =
        ["channel", "chat_id"].iter().any(|k| input[*k].as_str().is_some_and(|v| !v.is_empty()));
    if tool != "message" || elsewhere {
        return None;
    }
    let paths: Vec<&str> =
        input["media"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
    let text = input["content"].as_str().unwrap_or_default();
    Some(json!({"kind": "media", "text": text, "paths": paths}))
}

#[derive(Deserialize)]
pub(super) struct Rename {
    title: String,
}

/// `PUT /api/sessions/{id}/title` `{"title": "..."}`: names a conversation
/// (an empty title gives back its first request).
pub(super) async fn rename_session(
    State(app): State<App>,
    Path(id): Path<String>,
    Json(body): Json<Rename>,
) -> ApiResult {
    let gw = app.gateway()?;
    if !plain_id(&id) || !id.starts_with("gw-") {
        return Err(bad("not a conversation id"));
    }
    if body.title.chars().count() > MAX_TITLE_CHARS {
        return Err(bad(format!("a title is at most {MAX_TITLE_CHARS} characters")));
    }
    if body.title.chars().any(char::is_control) {
        return Err(bad("a title is one line of text"));
    }
    let history = gw.history();
    if !history.exists(&id).await.map_err(unread)? {
        return Err(ApiError(StatusCode::NOT_FOUND, format!("no conversation {id}")));
    }
    let title = history.rename(&id, &body.title).await.map_err(unread)?;
    Ok(Json(json!({"id": id, "title": title})))
}

/// One background job as the web app shows it.
pub(super) fn job_json(j: &ferroclaw_tools::JobSummary) -> Value {
    json!({
        "id": j.id,
        "command": j.command,
        "status": j.status,
        "exit_code": j.exit_code,
        "elapsed_secs": j.elapsed.as_secs(),
    })
}

/// `GET /api/chats/{chat}`: a web chat's current conversation and its
/// background jobs (asked once by the page after an answer; changes to the
/// jobs are pushed as `jobs` frames).
pub(super) async fn chat_state(State(app): State<App>, Path(chat): Path<String>) -> ApiResult {
    let gw = app.gateway()?;
    if !super::socket::valid_chat(&chat) {
        return Err(bad("a chat id is 1-64 letters, digits, - or _"));
    }
    let key = SessionKey::new("web", chat);
    let jobs: Vec<Value> = gw.jobs_of(&key).iter().map(job_json).collect();
    let session = gw.history().current_session(&key).await.map_err(unread)?;
    Ok(Json(json!({"chat": key.chat_id, "session": session, "jobs": jobs})))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_that_could_leave_the_sessions_folder_are_refused() {
        assert!(plain_id("gw-web-page-1"));
        assert!(plain_id("gw-web-page-1.explore-2"));
        for bad in ["", "../x", "gw/../../etc", "a b", "gw-web-..", "x\0"] {
            assert!(!plain_id(bad), "{bad:?}");
        }
    }

    #[test]
    fn a_transcript_pairs_each_tool_call_with_its_result() {
        use ferroclaw_protocol::{Message, ToolCall};
        let call =
            ToolCall { id: "c1".into(), name: "bash".into(), input: json!({"command": "ls"}) };
        let lines = [
            json!({"type": "message", "ts": 1, "message": Message::user("list files")}),
            json!({"type": "message", "ts": 2, "message": Message { role: Role::Assistant, content: vec![ContentBlock::ToolCall(call)] }}),
            json!({"type": "message", "ts": 3, "message": Message { role: Role::User, content: vec![ContentBlock::ToolResult { tool_call_id: "c1".into(), content: vec![ResultPart::Text { text: "a.txt".into() }], is_error: false }] }}),
            json!({"type": "message", "ts": 4, "message": Message::assistant("One file: `a.txt`.")}),
        ];
        let entries = lines.iter().map(|l| serde_json::from_value(l.clone()).unwrap()).collect();
        let items = transcript("gw-web-a", entries);
        let kinds: Vec<&str> = items.iter().map(|i| i["kind"].as_str().unwrap()).collect();
        assert_eq!(kinds, ["user", "tool", "assistant"]);
        assert_eq!(items[1]["preview"], "a.txt");
        assert_eq!(items[1]["is_error"], false);
        let said: Vec<u64> = items.iter().map(|i| i["at"].as_u64().unwrap()).collect();
        assert_eq!(said, [1, 2, 4], "each item says when");
    }

    #[test]
    fn a_transcript_leaves_out_the_messages_a_branch_left() {
        use ferroclaw_protocol::Message;
        let lines = [
            json!({"type": "message", "ts": 1, "message": Message::user("q1")}),
            json!({"type": "message", "ts": 2, "message": Message::assistant("a1")}),
            json!({"type": "message", "ts": 3, "message": Message::user("q2")}),
            json!({"type": "message", "ts": 4, "message": Message::assistant("a2")}),
            json!({"type": "branch", "ts": 5, "dropped": 2}),
            json!({"type": "message", "ts": 6, "message": Message::user("q2, edited")}),
            json!({"type": "message", "ts": 7, "message": Message::assistant("a2, again")}),
        ];
        let entries = lines.iter().map(|l| serde_json::from_value(l.clone()).unwrap()).collect();
        let texts: Vec<String> = transcript("gw-web-a", entries)
            .iter()
            .map(|i| i["text"].as_str().unwrap().to_string())
            .collect();
        assert_eq!(texts, ["q1", "a1", "q2, edited", "a2, again"]);
    }
}

#[derive(Deserialize)]
pub(super) struct FileQuery {
    path: String,
}

/// `GET /api/files?path=P`: a file the agent sent to a web chat (the
/// `message` tool's `media`), from inside the gateway's workspace only
/// (symbolic links followed before the check). A picture comes as itself
/// (its type read from its bytes); anything else as an attachment of type
/// `application/octet-stream`, so that no file from the workspace can run
/// as a page of the gateway's origin.
pub(super) async fn read_file(
    State(app): State<App>,
    Query(q): Query<FileQuery>,
) -> Result<Response, ApiError> {
    let gw = app.gateway()?;
    // Several gateways: the file as the one whose agent sent it kept it.
    if let Some(link) = &gw.store
        && let Some(kept) =
            crate::shared_media::find(&link.store, &gw.workspace, &q.path).await.map_err(failed)?
    {
        let photo =
            ferroclaw_tools::image_media_type(&kept.bytes[..kept.bytes.len().min(16)]).is_some();
        return Ok(file_response(kept.media_type, kept.name, photo, kept.bytes));
    }
    let real = crate::media::resolve(&gw.workspace, &q.path).map_err(|e| bad(e.to_string()))?;
    let real = real.display().to_string();
    let file = crate::media::Outgoing::load(&real, "the web app", MAX_FILE_BYTES, MAX_FILE_BYTES)
        .map_err(|e| bad(e.to_string()))?;
    Ok(file_response(file.media_type, file.file_name, file.photo, file.bytes))
}

/// A file the agent sent: a picture as itself, anything else as a download.
fn file_response(media_type: String, name: String, photo: bool, bytes: Vec<u8>) -> Response {
    let (media_type, disposition) = match photo {
        true => (media_type, "inline".to_string()),
        false => {
            let name = name.replace(['"', '\\'], "_");
            ("application/octet-stream".to_string(), format!("attachment; filename=\"{name}\""))
        }
    };
    let headers = [
        (header::CONTENT_TYPE, media_type),
        (header::CONTENT_DISPOSITION, disposition),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff".to_string()),
        (header::CONTENT_SECURITY_POLICY, "sandbox".to_string()),
    ];
    (headers, bytes).into_response()
}
