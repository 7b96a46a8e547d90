//! The agent side of ACP: reads the client's lines, answers its requests,
//! runs prompts and streams their events as `session/update`s.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use ferroclaw_core::{Agent, Config, ConfigError, Outcome, PermissionMode, Permissions};
use ferroclaw_protocol::{AgentEvent, ContentBlock};
use ferroclaw_runtime::{InputRules, Resume, Runtime, RuntimeError, SessionOptions, Turn};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::approver::ClientApprover;
use crate::client_fs::{self, ClientFs};
use crate::commands;
use crate::rpc::{self, Incoming, Peer, RpcError, code};
use crate::updates::Translator;
use crate::wire::{self, ClientCan};

/// Loads the config for a session's folder (the CLI's flags applied).
pub type ConfigLoader = Box<dyn Fn(&Path) -> Result<Config, String> + Send + Sync>;

/// How `ferroclaw acp` was started.
pub struct Options {
    /// The config of a folder.
    pub load_config: ConfigLoader,
    /// `$FERROCLAW_HOME`: sessions, skills.
    pub home: PathBuf,
    /// The folder `ferroclaw acp` started in (the default of `session/list`).
    pub cwd: PathBuf,
}

/// Serves ACP on stdin/stdout until the client closes stdin.
pub async fn serve(options: Options) -> std::io::Result<()> {
    let (tx, rx) = mpsc::unbounded_channel::<String>();
    let (done, finish) = tokio::sync::oneshot::channel();
    let writer = tokio::spawn(write_lines(rx, finish));
    let server = Arc::new(Server::new(Peer::new(tx), options));
    let mut requests = tokio::task::JoinSet::new();
    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    while let Some(line) = lines.next_line().await? {
        if line.trim().is_empty() {
            continue;
        }
        match rpc::parse(&line) {
            Ok(Incoming::Response { id, result }) => server.peer.answer(&id, result),
            Ok(Incoming::Notification { method, params }) => server.notification(&method, params),
            Ok(Incoming::Request { id, method, params }) => {
                let server = server.clone();
                requests.spawn(async move {
                    let opened = params["sessionId"].as_str().map(str::to_string);
                    let result = server.request(&method, params).await;
                    // A session's commands follow the answer that opened it
                    // (the client knows the session by then).
                    let opened = match (&result, method.as_str()) {
                        (Ok(r), "session/new") => r["sessionId"].as_str().map(str::to_string),
                        (Ok(_), "session/load" | "session/resume") => opened,
                        _ => None,
                    };
                    server.peer.respond(id, result);
                    if let Some(id) = opened {
                        server.announce_commands(&id);
                    }
                });
            }
            Err(e) => server.peer.respond(Value::Null, Err(e)),
        }
        // Forget the requests already answered.
        while requests.try_join_next().is_some() {}
    }
    // The client is gone: nothing it was asked will be answered, running
    // prompts end cancelled; the requests still running are answered (the
    // reader may still be there), then the sessions are closed.
    server.peer.close();
    server.cancel_all();
    while requests.join_next().await.is_some() {}
    server.shutdown().await;
    drop(server);
    let _ = done.send(());
    let _ = writer.await;
    Ok(())
}

/// Writes each message as one line on stdout, until `finish` (then what is
/// already queued).
async fn write_lines(
    mut rx: mpsc::UnboundedReceiver<String>,
    mut finish: tokio::sync::oneshot::Receiver<()>,
) {
    let mut out = tokio::io::stdout();
    let mut finished = false;
    loop {
        let line = match finished {
            true => rx.try_recv().ok(),
            false => tokio::select! {
                biased;
                line = rx.recv() => line,
                _ = &mut finish => {
                    finished = true;
                    rx.try_recv().ok()
                }
            },
        };
        let Some(line) = line else { break };
        let written = async {
            out.write_all(line.as_bytes()).await?;
            out.write_all(b"\n").await?;
            out.flush().await
        };
        if let Err(e) = written.await {
            tracing::warn!("acp: cannot write to stdout: {e}");
            break;
        }
    }
}

/// One open session.
struct Session {
    agent: tokio::sync::Mutex<Agent>,
    permissions: Arc<Permissions>,
    /// The running prompt's token (a fresh one per prompt).
    cancel: Arc<Mutex<CancellationToken>>,
    /// Tool calls already shown (by a permission request).
    announced: Arc<Mutex<HashSet<String>>>,
    translator: Translator,
    runtime: Arc<Runtime>,
    home: PathBuf,
}

struct Server {
    peer: Arc<Peer>,
    options: Options,
    client: Mutex<ClientCan>,
    sessions: Mutex<HashMap<String, Arc<Session>>>,
    /// Runtimes by folder (sessions with the client's own MCP servers get
    /// their own).
    runtimes: tokio::sync::Mutex<HashMap<PathBuf, Arc<Runtime>>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Server {
    fn new(peer: Peer, options: Options) -> Server {
        Server {
            peer: Arc::new(peer),
            options,
            client: Default::default(),
            sessions: Default::default(),
            runtimes: Default::default(),
        }
    }

    async fn request(&self, method: &str, params: Value) -> Result<Value, RpcError> {
        match method {
            "initialize" => self.initialize(wire::params(method, params)?),
            "authenticate" => self.authenticate(wire::params(method, params)?),
            "session/new" => {
                let p: wire::NewSessionRequest = wire::params(method, params)?;
                let (id, session) = self.open(Resume::New, &p.cwd, &p.mcp_servers).await?;
                Ok(json!({"sessionId": id, "modes": wire::modes(session.permissions.mode())}))
            }
            "session/load" => {
                let p: wire::LoadSessionRequest = wire::params(method, params)?;
                let id = p.session_id.0.to_string();
                let session = self.reopen(&id, &p.cwd, &p.mcp_servers).await?;
                let history = {
                    let agent = session.agent.lock().await;
                    session.translator.history(agent.messages())
                };
                for update in history {
                    self.peer.notify("session/update", wire::update(&id, update));
                }
                Ok(json!({"modes": wire::modes(session.permissions.mode())}))
            }
            "session/resume" => {
                let p: wire::ResumeSessionRequest = wire::params(method, params)?;
                let id = p.session_id.0.to_string();
                let session = self.reopen(&id, &p.cwd, &p.mcp_servers).await?;
                Ok(json!({"modes": wire::modes(session.permissions.mode())}))
            }
            "session/list" => self.list(wire::params(method, params)?),
            "session/prompt" => self.prompt(wire::params(method, params)?).await,
            "session/set_mode" => {
                let p: wire::SetSessionModeRequest = wire::params(method, params)?;
                let id = p.session_id.0.to_string();
                let session = self.session(&id)?;
                let mode: PermissionMode =
                    p.mode_id.0.parse().map_err(|e: String| RpcError::invalid_params(method, e))?;
                session.permissions.set_mode(mode);
                self.peer.notify(
                    "session/update",
                    wire::update(
                        &id,
                        json!({"sessionUpdate": "current_mode_update",
                        "currentModeId": wire::mode_id(mode)}),
                    ),
                );
                Ok(json!({}))
            }
            other => Err(RpcError::new(code::METHOD_NOT_FOUND, format!("no method {other:?}"))),
        }
    }

    fn notification(&self, method: &str, params: Value) {
        match method {
            "session/cancel" => match wire::params::<wire::CancelNotification>(method, params) {
                Ok(p) => match lock(&self.sessions).get(p.session_id.0.as_ref()) {
                    Some(session) => lock(&session.cancel).cancel(),
                    None => {
                        tracing::warn!("acp: session/cancel of unknown session {}", p.session_id);
                    }
                },
                Err(e) => tracing::warn!("acp: {e}"),
            },
            other => tracing::debug!("acp: notification {other} ignored"),
        }
    }

    fn initialize(&self, request: wire::InitializeRequest) -> Result<Value, RpcError> {
        *lock(&self.client) = ClientCan::from(&request.client_capabilities);
        let auth_methods = match self.needs_key(&self.options.cwd) {
            Some(why) => vec![json!({
                "id": "provider-key",
                "name": "Provider API key",
                "description": format!("{why}; then choose this to check again"),
            })],
            None => Vec::new(),
        };
        Ok(json!({
            "protocolVersion": wire::PROTOCOL_VERSION,
            "agentCapabilities": {
                "loadSession": true,
                "promptCapabilities": {"image": true, "audio": false, "embeddedContext": true},
                "mcpCapabilities": {"http": true, "sse": false},
                "sessionCapabilities": {"list": {}, "resume": {}},
            },
            "authMethods": auth_methods,
            "agentInfo": {"name": "ferroclaw", "title": "ferroclaw", "version": env!("CARGO_PKG_VERSION")},
        }))
    }

    /// Why no model can be reached from `cwd` (no key, no model), if so.
    fn needs_key(&self, cwd: &Path) -> Option<String> {
        let config = (self.options.load_config)(cwd).ok()?;
        match config.model_spec().and_then(|spec| config.resolve_model(&spec)) {
            Err(e @ (ConfigError::MissingKey { .. } | ConfigError::NoModel { .. })) => {
                Some(e.to_string())
            }
            _ => None,
        }
    }

    /// There is nothing to log in to: a key comes from the environment or
    /// the config; this checks again that there is one now.
    fn authenticate(&self, _request: wire::AuthenticateRequest) -> Result<Value, RpcError> {
        match self.needs_key(&self.options.cwd) {
            None => Ok(json!({})),
            Some(why) => Err(RpcError::new(code::AUTH_REQUIRED, why)),
        }
    }

    fn list(&self, request: wire::ListSessions) -> Result<Value, RpcError> {
        let cwd = request.cwd.unwrap_or_else(|| self.options.cwd.clone());
        let store = ferroclaw_core::SessionStore::new(&self.options.home);
        let sessions: Vec<Value> = store
            .list(&cwd)
            .into_iter()
            .filter(|s| s.parent.is_none())
            .map(|s| {
                let mut info = json!({"sessionId": s.id, "cwd": cwd, "title": s.title});
                if let Some(t) = chrono::DateTime::from_timestamp(s.modified as i64, 0) {
                    info["updatedAt"] = json!(t.to_rfc3339());
                }
                info
            })
            .collect();
        Ok(json!({"sessions": sessions}))
    }

    fn session(&self, id: &str) -> Result<Arc<Session>, RpcError> {
        lock(&self.sessions)
            .get(id)
            .cloned()
            .ok_or_else(|| RpcError::new(code::NOT_FOUND, format!("no open session {id:?}")))
    }

    /// A session open in this process, or the stored one opened again.
    async fn reopen(
        &self,
        id: &str,
        cwd: &Path,
        mcp: &[wire::McpServer],
    ) -> Result<Arc<Session>, RpcError> {
        if let Ok(session) = self.session(id) {
            return Ok(session);
        }
        Ok(self.open(Resume::Id(id.to_string()), cwd, mcp).await?.1)
    }

    /// Opens an agent for `cwd` through the runtime, with an approver that
    /// asks the client, and the file tools through the client where it can.
    async fn open(
        &self,
        resume: Resume,
        cwd: &Path,
        mcp: &[wire::McpServer],
    ) -> Result<(String, Arc<Session>), RpcError> {
        let runtime = self.runtime(cwd, mcp).await?;
        let workspace = runtime.config().workspace.clone();
        let cancel = Arc::new(Mutex::new(CancellationToken::new()));
        let announced: Arc<Mutex<HashSet<String>>> = Default::default();
        let approver = Arc::new(ClientApprover::new(
            self.peer.clone(),
            workspace.clone(),
            cancel.clone(),
            announced.clone(),
        ));
        let opened = runtime
            .open(resume, approver.clone(), SessionOptions::default())
            .map_err(open_error)?;
        let mut agent = opened.agent;
        let id = agent.session().meta().id.clone();
        approver.set_session(&id);
        let fs = ClientFs { peer: self.peer.clone(), session_id: Arc::new(Mutex::new(id.clone())) };
        let can = *lock(&self.client);
        agent.map_tools(|tools| client_fs::through_client(tools, can, &fs));
        let session = Arc::new(Session {
            permissions: agent.permissions().clone(),
            translator: Translator {
                workspace: workspace.clone(),
                context_window: agent.context_window(),
                model: agent.model_spec().to_string(),
                running: Default::default(),
            },
            agent: tokio::sync::Mutex::new(agent),
            cancel,
            announced,
            runtime,
            home: self.options.home.clone(),
        });
        lock(&self.sessions).insert(id.clone(), session.clone());
        Ok((id, session))
    }

    /// Tells the client the slash commands of session `id`.
    fn announce_commands(&self, id: &str) {
        let Ok(session) = self.session(id) else { return };
        let custom = session.runtime.custom_commands();
        let available = commands::available(&session.translator.workspace, &session.home, &custom);
        self.peer.notify(
            "session/update",
            wire::update(
                id,
                json!({"sessionUpdate": "available_commands_update",
                "availableCommands": available}),
            ),
        );
    }

    /// The runtime for `cwd`: shared by the sessions of a folder, or a new
    /// one when the client brings MCP servers (merged with ours).
    async fn runtime(&self, cwd: &Path, mcp: &[wire::McpServer]) -> Result<Arc<Runtime>, RpcError> {
        let cwd = cwd.canonicalize().map_err(|e| {
            RpcError::invalid_params("session", format!("cwd {}: {e}", cwd.display()))
        })?;
        let mut runtimes = self.runtimes.lock().await;
        if mcp.is_empty()
            && let Some(runtime) = runtimes.get(&cwd)
        {
            return Ok(runtime.clone());
        }
        let mut config =
            (self.options.load_config)(&cwd).map_err(|e| RpcError::invalid_params("session", e))?;
        for server in mcp {
            if let Some((name, table)) = wire::mcp_server_table(server) {
                config.file.mcp_servers.insert(name, table);
            }
        }
        let runtime = Runtime::load(config, Default::default()).await.map_err(open_error)?;
        if mcp.is_empty() {
            runtimes.insert(cwd, runtime.clone());
        }
        Ok(runtime)
    }

    async fn prompt(&self, request: wire::PromptRequest) -> Result<Value, RpcError> {
        let id = request.session_id.0.to_string();
        let session = self.session(&id)?;
        let (text, images) = wire::prompt_parts(&request.prompt);
        let mut agent = session.agent.lock().await;
        let cancel = CancellationToken::new();
        *lock(&session.cancel) = cancel.clone();
        let (tx, mut rx) = mpsc::unbounded_channel::<AgentEvent>();
        let forward = {
            let peer = self.peer.clone();
            let session = session.clone();
            let id = id.clone();
            tokio::spawn(async move {
                while let Some(event) = rx.recv().await {
                    for update in session.updates(&event) {
                        peer.notify("session/update", wire::update(&id, update));
                    }
                }
            })
        };
        let workspace = agent.workspace().to_path_buf();
        let stop = match text.trim() {
            "/usage" => {
                let usage = agent.total_usage();
                let line = format!(
                    "{} tokens in, {} out this session (context window {})",
                    usage.input_tokens,
                    usage.output_tokens,
                    agent.context_window()
                );
                let _ = tx.send(AgentEvent::TextDelta { text: line });
                "end_turn"
            }
            "/todos" => {
                let _ = tx.send(AgentEvent::Todos { items: agent.todos().items() });
                "end_turn"
            }
            t if t.starts_with("/compact") => {
                let focus = t.trim_start_matches("/compact").trim();
                match agent.compact((!focus.is_empty()).then_some(focus), &tx, &cancel).await {
                    Ok(()) => "end_turn",
                    Err(e) => {
                        let _ = tx.send(AgentEvent::TextDelta { text: e.clone() });
                        "end_turn"
                    }
                }
            }
            _ => {
                let report = match session.runtime.turn(&text, InputRules::PROMPT) {
                    // A custom command: its model and allowed tools for this
                    // request only, as in the REPL.
                    Turn::Command { command, args } => {
                        let message = |text: &str, workspace: &Path| {
                            let mut message =
                                ferroclaw_core::mentions::user_message(text, workspace);
                            for (media_type, data) in images {
                                message.content.push(ContentBlock::Image { media_type, data });
                            }
                            message
                        };
                        session
                            .runtime
                            .run_command(&mut agent, &command, args, message, &tx, &cancel)
                            .await
                    }
                    Turn::Shell(_) | Turn::Message { .. } => {
                        let text = commands::skill_request(&workspace, &session.home, text.trim())
                            .unwrap_or(text);
                        let mut message = ferroclaw_core::mentions::user_message(&text, &workspace);
                        for (media_type, data) in images {
                            message.content.push(ContentBlock::Image { media_type, data });
                        }
                        agent.run(message, &tx, &cancel).await
                    }
                };
                match report.outcome {
                    Outcome::Answered => "end_turn",
                    Outcome::Cancelled => "cancelled",
                    Outcome::MaxTurns => "max_turn_requests",
                    Outcome::Blocked => "refusal",
                    Outcome::Failed(e) => {
                        drop(tx);
                        let _ = forward.await;
                        return Err(RpcError::internal(e));
                    }
                }
            }
        };
        drop(tx);
        let _ = forward.await;
        // A cancel that came as the answer ended still ends as cancelled.
        let stop = if cancel.is_cancelled() { "cancelled" } else { stop };
        Ok(json!({"stopReason": stop}))
    }

    /// Cancels every running prompt.
    fn cancel_all(&self) {
        for session in lock(&self.sessions).values() {
            lock(&session.cancel).cancel();
        }
    }

    /// Closes every session's file and stops the MCP servers.
    async fn shutdown(&self) {
        let sessions: Vec<Arc<Session>> = lock(&self.sessions).drain().map(|(_, s)| s).collect();
        for session in sessions {
            session.agent.lock().await.finish().await;
            session.runtime.shutdown().await;
        }
    }
}

impl Session {
    /// The updates for one event; a call already shown by its permission
    /// request is updated instead of shown again.
    fn updates(&self, event: &AgentEvent) -> Vec<Value> {
        let updates = self.translator.updates(event);
        if let AgentEvent::ToolCallStarted { id, .. } = event
            && lock(&self.announced).remove(id)
        {
            return vec![json!({"sessionUpdate": "tool_call_update", "toolCallId": id,
                "status": "in_progress"})];
        }
        updates
    }
}

/// An error opening a session: a missing key asks the client to
/// authenticate; the rest are the user's to fix.
fn open_error(e: RuntimeError) -> RpcError {
    match e {
        RuntimeError::Config(
            e @ (ConfigError::MissingKey { .. } | ConfigError::NoModel { .. }),
        ) => RpcError::new(code::AUTH_REQUIRED, e.to_string()),
        RuntimeError::Session(e) => RpcError::new(code::NOT_FOUND, e.to_string()),
        e => RpcError::internal(e.to_string()),
    }
}
