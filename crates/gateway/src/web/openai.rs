//! The OpenAI-compatible API: `POST /v1/chat/completions` (streamed and
//! not), `GET /v1/models` and `GET /v1/models/{id}`, so any OpenAI client or
//! chat front-end can talk to the agent.
//!
//! A request with `user` (or the `X-Ferroclaw-User` header) continues that
//! user's session (chat `api-USER` of the web channel): the session keeps the
//! history, so only the last user message is taken as the input. A request
//! without one is stateless: its own one-off chat whose conversation is the
//! messages it carries, and nothing of it reaches other requests. Either
//! way the client's `system` message is a layer of the system prompt
//! ([`crate::api_turn`]). `Idempotency-Key` makes a retry return the first
//! answer without a second turn ([`crate::idempotency`]). Every error,
//! unknown paths included, has OpenAI's shape ([`ApiError`]).

use std::convert::Infallible;
use std::time::Duration;

use axum::Json;
use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, Request, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use ferroclaw_protocol::{AgentEvent, StopReason, Usage};
use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};

use super::WebContext;
use super::limits::{BODY_READ_TIMEOUT, MAX_BODY_BYTES};
use super::openai_media;
use super::openai_request::{self, ApiError, ChatRequest};
use super::queue::{OutQueue, out_queue};
use super::{App, OWNER, failure_response};
use crate::api_turn::{ApiTurn, STATELESS_PREFIX};
use crate::bus::{EventTap, Failure, InboundMessage, OutboundMessage};
use crate::files::now_ms;
use crate::idempotency::{self, Begun, FirstRequest, RecordedAnswer, Requests, Waited};

/// The header that picks the session when the body has no `user`.
pub(super) const USER_HEADER: &str = "x-ferroclaw-user";
/// The header naming a request, so that a retry returns its answer.
pub(super) const IDEMPOTENCY_HEADER: &str = "idempotency-key";
/// How long a retry waits for the answer of the request it repeats.
const RETRY_WAIT: Duration = Duration::from_secs(600);
/// How often a retry looks for that answer.
const RETRY_POLL: Duration = Duration::from_millis(200);

/// `GET /v1/models`: the gateway's model, `ferroclaw`, and the aliases of
/// `[channels.web] models` (the token was checked by the router).
pub(super) async fn models(State(app): State<App>) -> Response {
    let created = now_ms() / 1000;
    let data: Vec<Value> = model_ids(&app).iter().map(|id| model_json(id, created)).collect();
    Json(json!({"object": "list", "data": data})).into_response()
}

/// `GET /v1/models/{id}`.
pub(super) async fn model(State(app): State<App>, Path(id): Path<String>) -> Response {
    if model_ids(&app).contains(&id) {
        return Json(model_json(&id, now_ms() / 1000)).into_response();
    }
    model_not_found(&id, "model").into_response()
}

fn model_json(id: &str, created: u64) -> Value {
    json!({"id": id, "object": "model", "created": created, "owned_by": "ferroclaw"})
}

fn model_ids(app: &App) -> Vec<String> {
    let options = &app.web.options;
    let mut ids = vec![options.model_name.clone()];
    ids.extend(options.models.keys().filter(|k| **k != options.model_name).cloned());
    ids
}

fn model_not_found(name: &str, param: &str) -> ApiError {
    ApiError {
        status: StatusCode::NOT_FOUND,
        message: format!(
            "The model `{name}` does not exist here: this gateway serves `ferroclaw` and the \
             aliases of [channels.web] models (see GET /v1/models)"
        ),
        kind: "invalid_request_error",
        param: Some(param.into()),
        code: "model_not_found",
    }
}

/// The `PROVIDER/MODEL` a request's `model` names: `None` for the gateway's
/// own (`ferroclaw`, its configured spec, or no model given), the alias's
/// target for an alias; anything else is 404 `model_not_found`.
fn resolve_model(
    app: &App,
    gateway: &WebContext,
    asked: Option<&str>,
) -> Result<Option<String>, ApiError> {
    let Some(name) = asked.map(str::trim).filter(|n| !n.is_empty()) else { return Ok(None) };
    if let Some(spec) = app.web.options.models.get(name) {
        return Ok(Some(spec.clone()));
    }
    let own = gateway.runtime.config().model_spec().ok();
    if name == app.web.options.model_name || own.as_deref() == Some(name) {
        return Ok(None);
    }
    Err(model_not_found(name, "model"))
}

/// Answers a `/v1/` path the API does not have, in OpenAI's error shape.
pub(super) async fn unknown_path(request: Request<Body>) -> Response {
    let message = format!(
        "Unknown request URL: {} {}. The gateway serves POST /v1/chat/completions, GET /v1/models \
         and GET /v1/models/{{id}}",
        request.method(),
        request.uri().path()
    );
    ApiError::status(StatusCode::NOT_FOUND, message).into_response()
}

/// Answers a known path asked with the wrong method.
pub(super) async fn wrong_method(request: Request<Body>) -> Response {
    let message = format!("{} is not allowed on {}", request.method(), request.uri().path());
    ApiError::status(StatusCode::METHOD_NOT_ALLOWED, message).into_response()
}

/// Answers every `/v1/` path while `[channels.web] openai_api = false`.
pub(super) async fn api_off() -> Response {
    let message = "the OpenAI-compatible API is turned off ([channels.web] openai_api = false)";
    ApiError::status(StatusCode::NOT_FOUND, message).into_response()
}

/// Reads a request body of at most [`MAX_BODY_BYTES`] within [`BODY_READ_TIMEOUT`].
async fn read_json(body: Body) -> Result<Value, ApiError> {
    let read = axum::body::to_bytes(body, MAX_BODY_BYTES);
    let bytes = match tokio::time::timeout(BODY_READ_TIMEOUT, read).await {
        Err(_) => {
            return Err(ApiError::status(
                StatusCode::REQUEST_TIMEOUT,
                "the body took too long to arrive",
            ));
        }
        Ok(Err(_)) => {
            return Err(ApiError::status(
                StatusCode::PAYLOAD_TOO_LARGE,
                format!("the body is larger than {MAX_BODY_BYTES} bytes"),
            ));
        }
        Ok(Ok(b)) => b,
    };
    serde_json::from_slice(&bytes)
        .map_err(|e| ApiError::invalid("", "invalid_json", format!("the body is not JSON: {e}")))
}

/// The request's `Idempotency-Key`, if it has one.
fn idempotency_key(headers: &HeaderMap) -> Result<Option<String>, ApiError> {
    let Some(value) = headers.get(IDEMPOTENCY_HEADER) else { return Ok(None) };
    let key = value.to_str().map(str::trim).unwrap_or_default();
    if key.is_empty() || key.chars().count() > idempotency::MAX_KEY_CHARS {
        return Err(ApiError::invalid(
            "Idempotency-Key",
            "invalid_idempotency_key",
            format!("Idempotency-Key must be 1 to {} characters", idempotency::MAX_KEY_CHARS),
        ));
    }
    Ok(Some(key.to_string()))
}

/// How the client wants its answer.
#[derive(Debug, Clone, Copy)]
struct Shape {
    stream: bool,
    include_usage: bool,
}

/// `POST /v1/chat/completions` (the token was checked before the body is read).
pub(super) async fn completions(State(app): State<App>, request: Request<Body>) -> Response {
    match answer(app, request).await {
        Ok(response) => response,
        Err(e) => e.into_response(),
    }
}

async fn answer(app: App, request: Request<Body>) -> Result<Response, ApiError> {
    let (parts, body) = request.into_parts();
    let body = read_json(body).await?;
    let header_user = parts.headers.get(USER_HEADER).and_then(|v| v.to_str().ok());
    let chat = openai_request::parse(&body, header_user)?;
    let key = idempotency_key(&parts.headers)?;
    let Some(gateway) = app.web.gateway.get().cloned() else {
        return Err(ApiError::status(StatusCode::SERVICE_UNAVAILABLE, "the gateway is starting"));
    };
    let model = resolve_model(&app, &gateway, chat.model.as_deref())?;
    // Everything that can refuse the request does before a key is taken.
    let fetcher = app.web.image_fetcher(&gateway);
    let images = openai_media::input_images(&chat.input, fetcher).await?;
    let turn = turn_of(&chat, model, key, fetcher).await?;
    let shape = Shape { stream: chat.stream, include_usage: chat.include_usage };
    let first = FirstRequest {
        completion_id: format!("chatcmpl-{}", fresh_id()?),
        model: chat.model.clone().unwrap_or_else(|| app.web.options.model_name.clone()),
        created: now_ms() / 1000,
    };
    let message = |first: &FirstRequest| inbound(&chat, &images, turn.clone(), first);
    let Some(key) = turn.idempotency_key.clone() else {
        return Ok(run(&app, message(&first), first, shape, None).await);
    };
    let requests = gateway.requests();
    match requests.begin(&key, &idempotency::fingerprint(&body), &first).await {
        Err(e) => Err(unreadable(e)),
        Ok(Begun::New) => {
            let message = message(&first);
            Ok(run(&app, message, first, shape, Some((requests, key))).await)
        }
        Ok(Begun::Answered { first, answer }) => Ok(replay(&first, &answer, shape)),
        Ok(Begun::Reused) => Err(ApiError::invalid(
            "Idempotency-Key",
            "idempotency_key_reused",
            "this Idempotency-Key was used with another request body; use a new key",
        )),
        Ok(Begun::Running { first, orphaned }) => {
            // Sent again where it may have been lost: the same message
            // (named by the first request), which is taken once.
            if orphaned && let Err(e) = app.bus.publish(message(&first)) {
                return Err(ApiError::status(failure_status(Failure::from(&e)), e.to_string()));
            }
            wait_for_first(&requests, &key, &first, shape).await
        }
    }
}

/// What the request asks of its turn. Stateless: the conversation, pictures
/// and all. With `user`: the client's copy, which the session follows where
/// the two part ([`crate::api_turn::branch`]).
async fn turn_of(
    chat: &ChatRequest,
    model: Option<String>,
    idempotency_key: Option<String>,
    fetcher: &ferroclaw_tools::WebFetchTool,
) -> Result<ApiTurn, ApiError> {
    let (conversation, sent_history) = match chat.user {
        Some(_) => (None, Some(openai_media::noted(&chat.history)).filter(|h| !h.is_empty())),
        None => (Some(openai_media::conversation(&chat.history, fetcher).await?), None),
    };
    Ok(ApiTurn {
        system: chat.system.clone(),
        conversation,
        model,
        idempotency_key,
        sent_history,
        sampling: chat.sampling.clone(),
        max_tokens: chat.max_tokens,
    })
}

/// A retry of a request still running: its answer once there (at most
/// [`RETRY_WAIT`] later).
async fn wait_for_first(
    requests: &Requests,
    key: &str,
    first: &FirstRequest,
    shape: Shape,
) -> Result<Response, ApiError> {
    let deadline = tokio::time::Instant::now() + RETRY_WAIT;
    loop {
        match requests.answer(key).await.map_err(unreadable)? {
            Waited::Answered(answer) => return Ok(replay(first, &answer, shape)),
            Waited::Gone => {
                return Err(ApiError::status(
                    StatusCode::CONFLICT,
                    "the first request with this Idempotency-Key failed; send it again",
                ));
            }
            Waited::Running if tokio::time::Instant::now() >= deadline => {
                return Err(ApiError::status(
                    StatusCode::CONFLICT,
                    "the request with this Idempotency-Key is still running; retry later",
                ));
            }
            Waited::Running => tokio::time::sleep(RETRY_POLL).await,
        }
    }
}

/// 503: the Idempotency-Key record cannot be read (the store is away).
fn unreadable(e: idempotency::IdempotencyError) -> ApiError {
    ApiError::status(
        StatusCode::SERVICE_UNAVAILABLE,
        format!("the Idempotency-Key record cannot be read: {e}"),
    )
}

/// A random id, unique across gateways.
fn fresh_id() -> Result<String, ApiError> {
    crate::files::random_hex(12).map_err(|e| {
        ApiError::status(StatusCode::INTERNAL_SERVER_ERROR, format!("no random id: {e}"))
    })
}

/// The bus message for `chat`: its text and pictures, and what its turn is
/// to honour ([`ApiTurn`]). A stateless request gets a chat of its own,
/// named by the completion it makes, as is the message when it has a key:
/// a retry is then the same message in the same chat, which a database's
/// queue and the turn journal take once.
fn inbound(
    chat: &ChatRequest,
    images: &[crate::media::Attachment],
    turn: ApiTurn,
    first: &FirstRequest,
) -> InboundMessage {
    let chat_id = match &chat.user {
        Some(user) => format!("api-{user}"),
        None => {
            let id = first.completion_id.trim_start_matches("chatcmpl-");
            format!("{STATELESS_PREFIX}{id}")
        }
    };
    let mut message = InboundMessage::new("web", OWNER, chat_id, chat.input_text());
    for image in images {
        crate::media::attach(&mut message, image);
    }
    if turn.idempotency_key.is_some() {
        message.metadata.insert("message_id".into(), json!(first.completion_id));
    }
    turn.attach(&mut message);
    message
}

/// Forgets a request's key when its turn got no answer, so a retry runs again.
type Forget = Option<(Requests, String)>;

async fn forget(forget: Forget) {
    if let Some((requests, key)) = forget
        && let Err(e) = requests.forget(&key).await
    {
        tracing::warn!("Idempotency-Key not released after a failure: {e}");
    }
}

/// Runs `message` as a turn and answers with it.
async fn run(
    app: &App,
    message: InboundMessage,
    first: FirstRequest,
    shape: Shape,
    keyed: Forget,
) -> Response {
    let (tap, events) = mpsc::unbounded_channel();
    let message = message.with_tap(EventTap::channel(tap));
    let id = message.id.clone();
    let reply = app.web.wait_for_reply(&id);
    if let Err(e) = app.bus.publish(message) {
        app.web.forget_reply(&id);
        forget(keyed).await;
        return failure_response(Failure::from(&e), &e.to_string());
    }
    let chunks = Chunks { id: first.completion_id, model: first.model, created: first.created };
    if shape.stream {
        let limit = app.web.options.max_queued_bytes;
        return streamed(chunks, shape.include_usage, events, reply, limit, keyed).into_response();
    }
    let mut events = events;
    let Ok(answer) = reply.await else {
        forget(keyed).await;
        return failure_response(Failure::Closed, "the gateway stopped before answering");
    };
    if let Some(failure) = answer.failure {
        forget(keyed).await;
        return failure_response(failure, &answer.content);
    }
    let mut progress = Progress::default();
    while let Ok(event) = events.try_recv() {
        progress.note(&event);
    }
    Json(chunks.completion(&answer.content, &progress.usage, progress.finish_reason()))
        .into_response()
}

/// The answer recorded under an `Idempotency-Key`, sent again as the first
/// request got it (a stream in one delta); no tokens were used this time.
fn replay(first: &FirstRequest, answer: &RecordedAnswer, shape: Shape) -> Response {
    let chunks = Chunks {
        id: first.completion_id.clone(),
        model: first.model.clone(),
        created: first.created,
    };
    let usage = Usage::default();
    if !shape.stream {
        return Json(chunks.completion(&answer.content, &usage, "stop")).into_response();
    }
    let mut events = vec![
        chunks.delta(json!({"role": "assistant", "content": ""}), None),
        chunks.delta(json!({"content": answer.content}), None),
        chunks.delta(json!({}), Some("stop")),
    ];
    if shape.include_usage {
        events.push(chunks.usage(&usage));
    }
    events.push(Event::default().data("[DONE]"));
    let stream = futures_util::stream::iter(events.into_iter().map(Ok::<_, Infallible>));
    Sse::new(stream).into_response()
}

fn usage_json(u: &Usage) -> Value {
    let prompt = u.input_tokens + u.cache_read_tokens + u.cache_write_tokens;
    json!({"prompt_tokens": prompt, "completion_tokens": u.output_tokens, "total_tokens": prompt + u.output_tokens})
}

/// Builds the `chat.completion.chunk`s of one streamed answer.
struct Chunks {
    id: String,
    model: String,
    created: u64,
}

impl Chunks {
    fn object(&self, choices: Value) -> Value {
        json!({
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "choices": choices,
        })
    }

    /// The whole answer, not streamed.
    fn completion(&self, content: &str, usage: &Usage, finish: &str) -> Value {
        json!({
            "id": self.id,
            "object": "chat.completion",
            "created": self.created,
            "model": self.model,
            "choices": [{
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": finish
            }],
            "usage": usage_json(usage),
        })
    }

    fn delta(&self, delta: Value, finish: Option<&str>) -> Event {
        let choice = json!([{"index": 0, "delta": delta, "finish_reason": finish}]);
        Event::default().data(self.object(choice).to_string())
    }

    /// The last chunk when `stream_options.include_usage` asks for it: no choices, the usage.
    fn usage(&self, usage: &Usage) -> Event {
        let mut chunk = self.object(json!([]));
        chunk["usage"] = usage_json(usage);
        Event::default().data(chunk.to_string())
    }
}

/// What an answer's events told so far.
#[derive(Default)]
struct Progress {
    streamed: String,
    usage: Usage,
    /// Why the last model answer ended.
    stop: Option<StopReason>,
}

impl Progress {
    /// Remembers the usage and why the model stopped.
    fn note(&mut self, event: &AgentEvent) {
        match event {
            AgentEvent::Finished { usage, .. } => self.usage = *usage,
            AgentEvent::TurnFinished { stop_reason, .. } => self.stop = Some(stop_reason.clone()),
            _ => {}
        }
    }

    /// Sends a text delta on; notes the rest.
    fn take(&mut self, event: AgentEvent, chunks: &Chunks, tx: &OutQueue<Event>) {
        match event {
            AgentEvent::TextDelta { text } => {
                self.streamed.push_str(&text);
                let bytes = text.len() + CHUNK_OVERHEAD_BYTES;
                tx.push(chunks.delta(json!({"content": text}), None), bytes);
            }
            // A new model round-trip after tools: what was streamed so far
            // was a preamble; keep streaming after it.
            other => self.note(&other),
        }
    }

    /// OpenAI's `finish_reason`: `length` when the last answer hit
    /// `max_tokens`, else `stop`.
    fn finish_reason(&self) -> &'static str {
        match self.stop {
            Some(StopReason::MaxTokens) => "length",
            _ => "stop",
        }
    }
}

/// What a chunk's JSON adds to its text, counted against the queue's bytes.
const CHUNK_OVERHEAD_BYTES: usize = 256;

/// The answer as server-sent `chat.completion.chunk`s, ending with `[DONE]`.
/// A client that stops reading is cut off once `limit` bytes wait for it
/// (the stream ends without `[DONE]`).
///
/// Every event of the turn is queued on `events` before the answer arrives
/// on `reply` (the worker delivers the answer only after its last event), so
/// once the answer is here, what is still queued is taken first: the deltas
/// always join to the answer, and the answer is never sent twice.
fn streamed(
    chunks: Chunks,
    include_usage: bool,
    mut events: mpsc::UnboundedReceiver<AgentEvent>,
    reply: oneshot::Receiver<OutboundMessage>,
    limit: usize,
    keyed: Forget,
) -> Sse<impl futures_util::Stream<Item = Result<Event, Infallible>>> {
    let (tx, rx) = out_queue::<Event>(limit);
    tokio::spawn(async move {
        let send = |event: Event| tx.push(event, CHUNK_OVERHEAD_BYTES);
        send(chunks.delta(json!({"role": "assistant", "content": ""}), None));
        let mut progress = Progress::default();
        tokio::pin!(reply);
        let answer = loop {
            tokio::select! {
                biased;
                event = events.recv() => match event {
                    Some(event) => progress.take(event, &chunks, &tx),
                    None => break reply.await.ok(),
                },
                answer = &mut reply => break answer.ok(),
            }
        };
        while let Ok(event) = events.try_recv() {
            progress.take(event, &chunks, &tx);
        }
        match answer {
            Some(OutboundMessage { failure: Some(failure), content, .. }) => {
                forget(keyed).await;
                let error = ApiError::status(failure_status(failure), content).body();
                send(Event::default().data(error.to_string()));
            }
            Some(answer) => {
                // Text not streamed (a command's reply): send it whole.
                if !progress.streamed.ends_with(answer.content.as_str()) {
                    let bytes = answer.content.len() + CHUNK_OVERHEAD_BYTES;
                    tx.push(chunks.delta(json!({"content": answer.content}), None), bytes);
                }
                send(chunks.delta(json!({}), Some(progress.finish_reason())));
                if include_usage {
                    send(chunks.usage(&progress.usage));
                }
            }
            None => {
                forget(keyed).await;
                let message = "the gateway stopped before answering";
                let error = ApiError::status(StatusCode::SERVICE_UNAVAILABLE, message).body();
                send(Event::default().data(error.to_string()));
            }
        }
        send(Event::default().data("[DONE]"));
    });
    let stream = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|event| (Ok(event), rx))
    });
    Sse::new(stream).keep_alive(KeepAlive::default())
}

/// The status code of a failed answer.
pub(super) fn failure_status(failure: Failure) -> StatusCode {
    match failure {
        Failure::Busy => StatusCode::TOO_MANY_REQUESTS,
        Failure::Closed => StatusCode::SERVICE_UNAVAILABLE,
        Failure::Failed => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_cut_by_max_tokens_finishes_with_length() {
        let mut progress = Progress::default();
        let finished = |stop_reason| AgentEvent::TurnFinished { turn: 1, stop_reason };
        progress.note(&finished(StopReason::ToolUse));
        progress.note(&finished(StopReason::EndTurn));
        assert_eq!(progress.finish_reason(), "stop");
        progress.note(&finished(StopReason::MaxTokens));
        assert_eq!(progress.finish_reason(), "length");
    }
}
