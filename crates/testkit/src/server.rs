//! The server: its own thread and runtime, the routes, and the script cursor.

use std::{
    fs::OpenOptions,
    future::IntoFuture,
    io,
    net::{Ipv4Addr, SocketAddr, TcpListener as StdListener},
    path::PathBuf,
    sync::{Arc, Mutex, PoisonError},
    thread::JoinHandle,
    time::{Duration, Instant},
};

use axum::{
    Router,
    extract::{DefaultBodyLimit, State},
    http::{HeaderMap, Method, StatusCode, Uri},
    response::Response,
};
use bytes::Bytes;
use serde_json::{Value, json};
use tokio::sync::watch;

use crate::{
    openai,
    recording::{RecordedRequest, Recorder},
    render::{Exchange, Wire},
    reply::Reply,
    script::Step,
};

/// How long open connections may finish after the server is dropped before they are cut.
const SHUTDOWN_GRACE: Duration = Duration::from_millis(200);

/// Per-server behaviour switches.
#[derive(Clone, Debug, Default)]
pub struct ServerOptions {
    /// Cycle through the script instead of failing once it is exhausted (benchmarks).
    pub repeat: bool,
    /// OpenAI streams repeat the tool call id and function name in every chunk.
    pub openai_repeat_id_and_name: bool,
    /// OpenAI streams end with a usage chunk even without `stream_options.include_usage`.
    pub openai_usage_always: bool,
    /// Port to listen on; 0 picks a free one.
    pub port: u16,
    /// Append one JSON line per request to this file once its response ends.
    pub record_path: Option<PathBuf>,
    /// Answer 400, as the real APIs do, to a request with a tool call not
    /// answered in the next message (or a result without its call); such a
    /// request consumes no step.
    pub strict: bool,
    /// Do not keep requests in memory: [`ScriptedServer::requests`] stays
    /// empty, `record_path` still gets them (the `scripted-llm` binary, which
    /// serves benchmarks of any length).
    pub forget_requests: bool,
    /// Scripts of other agents (a team's teammates): a request whose system
    /// prompt contains a route's marker plays that route's script instead of
    /// the main one. An exhausted route answers plain text
    /// ([`ROUTE_DONE`]), so an agent woken more often than scripted just
    /// ends its turn.
    pub routes: Vec<(String, Vec<Step>)>,
}

/// What an exhausted route answers.
pub const ROUTE_DONE: &str = "(nothing more to do)";

/// A scripted LLM HTTP server running on its own thread; dropping it shuts it down.
pub struct ScriptedServer {
    addr: SocketAddr,
    recorder: Arc<Recorder>,
    shutdown: watch::Sender<bool>,
    thread: Option<JoinHandle<()>>,
}

/// State shared by all requests.
struct Shared {
    script: Mutex<Cursor>,
    /// Marker and script of each route.
    routes: Mutex<Vec<(String, Cursor)>>,
    options: ServerOptions,
    recorder: Arc<Recorder>,
}

/// The script and how many model requests consumed it so far.
struct Cursor {
    steps: Vec<Step>,
    served: usize,
}

impl Cursor {
    /// The next step and its 1-based request number, or `None` once exhausted (and not repeating).
    fn next(&mut self, repeat: bool) -> Option<(usize, Step)> {
        let len = self.steps.len();
        if len == 0 || (self.served >= len && !repeat) {
            return None;
        }
        self.served += 1;
        Some((self.served, self.steps[(self.served - 1) % len].clone()))
    }
}

impl ScriptedServer {
    /// Starts a server on a free local port; returns once it is listening.
    pub fn start(script: Vec<Step>) -> ScriptedServer {
        ScriptedServer::start_with(script, ServerOptions::default())
    }

    /// Like [`start`](Self::start), with options; panics if the server cannot start.
    pub fn start_with(script: Vec<Step>, options: ServerOptions) -> ScriptedServer {
        ScriptedServer::try_start_with(script, options)
            .unwrap_or_else(|error| panic!("scripted-llm: cannot start: {error}"))
    }

    /// Starts a server, reporting bind, record-file and runtime errors.
    pub fn try_start_with(script: Vec<Step>, options: ServerOptions) -> io::Result<ScriptedServer> {
        let listener = StdListener::bind((Ipv4Addr::LOCALHOST, options.port))?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let sink = match &options.record_path {
            Some(path) => Some(OpenOptions::new().create(true).append(true).open(path)?),
            None => None,
        };
        let recorder = Arc::new(Recorder::new(sink, !options.forget_requests));
        let routes = options
            .routes
            .iter()
            .map(|(marker, steps)| (marker.clone(), Cursor { steps: steps.clone(), served: 0 }))
            .collect();
        let shared = Arc::new(Shared {
            script: Mutex::new(Cursor { steps: script, served: 0 }),
            routes: Mutex::new(routes),
            options,
            recorder: Arc::clone(&recorder),
        });
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        let (shutdown, signal) = watch::channel(false);
        let thread = std::thread::Builder::new()
            .name(format!("scripted-llm-{}", addr.port()))
            .spawn(move || runtime.block_on(serve(listener, shared, signal)))?;
        Ok(ScriptedServer { addr, recorder, shutdown, thread: Some(thread) })
    }

    /// The root URL, `http://127.0.0.1:PORT` (the Anthropic base URL).
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The OpenAI base URL, `http://127.0.0.1:PORT/v1`.
    pub fn openai_base_url(&self) -> String {
        format!("{}/v1", self.url())
    }

    /// Every request received so far, in arrival order.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.recorder.snapshot()
    }
}

impl Drop for ScriptedServer {
    fn drop(&mut self) {
        let _ = self.shutdown.send(true);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Serves until shutdown is signalled, then lets connections finish for [`SHUTDOWN_GRACE`].
async fn serve(listener: StdListener, shared: Arc<Shared>, signal: watch::Receiver<bool>) {
    let listener = match tokio::net::TcpListener::from_std(listener) {
        Ok(listener) => listener,
        Err(error) => return eprintln!("scripted-llm: cannot listen: {error}"),
    };
    let app = Router::new().fallback(handle).layer(DefaultBodyLimit::disable()).with_state(shared);
    let (mut graceful, mut deadline) = (signal.clone(), signal);
    let server = axum::serve(listener, app).with_graceful_shutdown(async move {
        let _ = graceful.wait_for(|stop| *stop).await;
    });
    tokio::select! {
        _ = server.into_future() => {}
        _ = async move {
            let _ = deadline.wait_for(|stop| *stop).await;
            tokio::time::sleep(SHUTDOWN_GRACE).await;
        } => {}
    }
}

/// Records every request, then answers it.
async fn handle(
    State(shared): State<Arc<Shared>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let received_at = Instant::now();
    let lossy = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
    let parsed = if body.is_empty() {
        Ok(Value::Null)
    } else {
        serde_json::from_slice::<Value>(&body).map_err(|error| error.to_string())
    };
    let completion = shared.recorder.push(RecordedRequest {
        method: method.to_string(),
        path: uri.path().to_string(),
        headers: headers
            .iter()
            .map(|(name, value)| (name.to_string(), lossy(value.as_bytes())))
            .collect(),
        // Copied only when someone will read it (a benchmark's server with
        // neither a test nor a record file asking skips the copy).
        body: if shared.recorder.wants_bodies() {
            parsed.clone().unwrap_or_else(|_| Value::String(lossy(&body)))
        } else {
            Value::Null
        },
        received_at,
        finished_at: None,
    });
    let reply = route(&shared, &method, uri.path(), parsed);
    if !reply.delay.is_zero() {
        tokio::time::sleep(reply.delay).await;
    }
    reply.into_response(completion)
}

/// Picks the answer for one request, consuming a script step for model requests.
fn route(shared: &Shared, method: &Method, path: &str, body: Result<Value, String>) -> Reply {
    let wire = match (method.as_str(), path) {
        ("GET", "/v1/models") => return Reply::json(StatusCode::OK, &openai::models()),
        ("POST", "/v1/messages") => Wire::Anthropic,
        ("POST", "/v1/chat/completions") => Wire::OpenAi,
        _ => {
            let message = format!("scripted-llm: no route for {method} {path}");
            return Reply::json(StatusCode::NOT_FOUND, &json!({"error": {"message": message}}));
        }
    };
    let body = match body {
        Ok(body) if body.is_object() => body,
        Ok(_) => {
            return wire.error(
                StatusCode::BAD_REQUEST,
                Some("scripted-llm: request body must be a JSON object"),
            );
        }
        Err(error) => {
            let message = format!("scripted-llm: request body is not JSON: {error}");
            return wire.error(StatusCode::BAD_REQUEST, Some(&message));
        }
    };
    if shared.options.strict
        && let Some(problem) = crate::strict::tool_pairing_problem(wire, &body)
    {
        return wire.error(StatusCode::BAD_REQUEST, Some(&problem));
    }
    let system = system_text(&body);
    let mut routes = shared.routes.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some((_, cursor)) =
        routes.iter_mut().find(|(marker, _)| system.contains(marker.as_str()))
    {
        let (seq, step) = cursor
            .next(false)
            .unwrap_or((cursor.served + 1, Step::Reply(crate::Turn::text(ROUTE_DONE))));
        return wire.render(&substitute(step, &body), &Exchange::new(seq, &body, &shared.options));
    }
    drop(routes);
    let next =
        shared.script.lock().unwrap_or_else(PoisonError::into_inner).next(shared.options.repeat);
    let Some((seq, step)) = next else {
        let served = shared.script.lock().unwrap_or_else(PoisonError::into_inner).served;
        let message = format!("scripted-llm: script exhausted after {served} requests");
        return wire.error(StatusCode::INTERNAL_SERVER_ERROR, Some(&message));
    };
    wire.render(&substitute(step, &body), &Exchange::new(seq, &body, &shared.options))
}

/// Fills in [`LAST_USER`] in a reply's text (a slow reply's too) and
/// [`LAST_USER_TASK_ID`] in its tool calls' arguments.
fn substitute(step: Step, body: &Value) -> Step {
    match step {
        Step::Reply(turn) => Step::Reply(fill(turn, body)),
        // A slow answer is filled in like a prompt one.
        Step::Fault(crate::Fault::SlowFirstByte { delay_ms, then }) => {
            Step::Fault(crate::Fault::SlowFirstByte { delay_ms, then: fill(then, body) })
        }
        other => other,
    }
}

fn fill(mut turn: crate::Turn, body: &Value) -> crate::Turn {
    if turn.text.contains(LAST_USER) {
        turn.text = turn.text.replace(LAST_USER, &last_user_text(body));
    }
    for call in &mut turn.tool_calls {
        if let Value::Object(args) = &mut call.arguments {
            for value in args.values_mut() {
                if value == LAST_USER_TASK_ID {
                    *value = last_user_task_id(body).map_or(Value::Null, Value::from);
                }
            }
        }
    }
    turn
}

/// A tool call argument that is exactly this string becomes the number after
/// the last `task #` in the request's last user message (a teammate told
/// which task it claimed completes that task).
pub const LAST_USER_TASK_ID: &str = "{{last_user_task_id}}";

fn last_user_task_id(body: &Value) -> Option<u64> {
    let text = last_user_text(body);
    let at = text.rfind("task #")? + "task #".len();
    let digits: String = text[at..].chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

/// The system prompt of a request, either wire format.
fn system_text(body: &Value) -> String {
    let text = |v: &Value| match v {
        Value::String(text) => text.clone(),
        Value::Array(parts) => {
            parts.iter().filter_map(|p| p["text"].as_str()).collect::<Vec<_>>().join("\n")
        }
        _ => String::new(),
    };
    match body["messages"].as_array().and_then(|m| m.first()).filter(|m| m["role"] == "system") {
        Some(first) => text(&first["content"]),
        None => text(&body["system"]),
    }
}

/// In a reply's text, replaced by the text of the request's last user
/// message, so a load test can check that each answer belongs to its request.
pub const LAST_USER: &str = "{{last_user}}";

/// The text of the last `user` message of a request, either wire format
/// (a string, or the `text` of its content parts).
fn last_user_text(body: &Value) -> String {
    let Some(message) = body["messages"]
        .as_array()
        .and_then(|messages| messages.iter().rev().find(|m| m["role"] == "user"))
    else {
        return String::new();
    };
    match &message["content"] {
        Value::String(text) => text.clone(),
        Value::Array(parts) => {
            parts.iter().filter_map(|p| p["text"].as_str()).collect::<Vec<_>>().join("\n")
        }
        _ => String::new(),
    }
}
