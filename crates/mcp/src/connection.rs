//! One server connection: start it (child process or streamable HTTP),
//! send requests with a timeout, notice when it died, restart it on the next
//! request, and give up after repeated crashes.

use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ferroclaw_tools::SandboxPolicy;
use futures_util::FutureExt;
use rmcp::service::{
    ClientInitializeError, Peer, RoleClient, RunningService, ServiceError, ServiceExt,
};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{
    AuthClient, AuthorizationManager, StreamableHttpClientTransport, TokioChildProcess,
};
use tokio::io::AsyncBufReadExt;

use crate::config::{ServerConfig, Transport};
use crate::error::McpError;
use crate::hooks::{ClientHooks, Handler};
use crate::oauth::{self, TokenStore};
use crate::step_up::{ScopeChallenge, StepUps, Target};

/// Restarts allowed after crashes before a server is marked failed. One, as
/// the issue asks: a server that dies twice is broken, not unlucky.
pub const MAX_RESTARTS: u32 = 1;

/// How long shutdown waits for servers to exit after stdin is closed before
/// their process groups are killed.
pub const SHUTDOWN_GRACE: Duration = Duration::from_millis(1500);

/// Lines of a stdio server's stderr kept to explain a failure.
const STDERR_TAIL_LINES: usize = 20;
/// Lines of stderr quoted when a server dies while starting.
const STARTUP_STDERR_LINES: usize = 5;
/// How long to wait for a dead server's last stderr lines to be read.
const STDERR_SETTLE: Duration = Duration::from_millis(500);

type Client = RunningService<RoleClient, Handler>;

/// A started server.
struct Live {
    client: Client,
    /// Process group of a stdio server (its pid: it leads the group).
    pgid: Option<u32>,
    /// The OAuth manager an HTTP server's requests get their tokens from.
    auth: Option<Arc<tokio::sync::Mutex<AuthorizationManager>>>,
}

/// Where a connection stands.
enum Life {
    Up(Live),
    /// It died; the next request restarts it (if restarts are left).
    Down,
    /// Given up on.
    Failed(String),
}

/// A connection to one configured server.
pub(crate) struct Connection {
    pub config: ServerConfig,
    workspace: PathBuf,
    /// How a stdio server is confined and which environment it gets.
    sandbox: SandboxPolicy,
    hooks: ClientHooks,
    /// Saved OAuth tokens of HTTP servers.
    tokens: Option<TokenStore>,
    pub tools_changed: Arc<AtomicBool>,
    stderr_tail: Arc<Mutex<VecDeque<String>>>,
    /// Signalled once the stdio server's stderr reaches its end (it exited).
    stderr_closed: Arc<tokio::sync::Notify>,
    life: tokio::sync::Mutex<Life>,
    restarts: Mutex<u32>,
    /// OAuth scope step-ups after 403 `insufficient_scope` answers.
    step_ups: StepUps,
}

/// Why one attempt at a request failed.
enum Failure {
    Mcp(McpError),
    /// 403 `insufficient_scope`: a token with more scopes may get through.
    Scope(ScopeChallenge),
}

impl Connection {
    /// Starts the server; the error says why it could not.
    pub(crate) async fn start(
        config: ServerConfig,
        workspace: &Path,
        sandbox: SandboxPolicy,
        hooks: ClientHooks,
        tokens: Option<TokenStore>,
    ) -> Result<Connection, (Connection, McpError)> {
        let conn = Connection {
            config,
            workspace: workspace.to_path_buf(),
            sandbox,
            hooks,
            tokens,
            tools_changed: Arc::new(AtomicBool::new(false)),
            stderr_tail: Arc::new(Mutex::new(VecDeque::new())),
            stderr_closed: Arc::new(tokio::sync::Notify::new()),
            life: tokio::sync::Mutex::new(Life::Down),
            restarts: Mutex::new(0),
            step_ups: StepUps::default(),
        };
        match conn.connect().await {
            Ok(live) => {
                *conn.life.lock().await = Life::Up(live);
                Ok(conn)
            }
            Err(e) => {
                *conn.life.lock().await = Life::Failed(e.to_string());
                Err((conn, e))
            }
        }
    }

    pub(crate) fn name(&self) -> &str {
        &self.config.name
    }

    /// Why the server is unusable, when it is.
    pub(crate) async fn failure(&self) -> Option<String> {
        match &*self.life.lock().await {
            Life::Failed(reason) => Some(reason.clone()),
            _ => None,
        }
    }

    /// Sends one request with the configured timeout. A dead server is
    /// restarted first (once); a server that dies during the request makes
    /// it fail with [`McpError::Crashed`]. An HTTP server that refuses it
    /// with 403 `insufficient_scope` gets a scope step-up and the request
    /// once more (see [`crate::step_up`]).
    pub(crate) async fn request<T, F, Fut>(&self, what: &str, send: F) -> Result<T, McpError>
    where
        F: FnOnce(Peer<RoleClient>) -> Fut + Clone,
        Fut: Future<Output = Result<T, ServiceError>>,
    {
        let retry = send.clone();
        let challenge = match self.request_once(what, send).await {
            Ok(value) => return Ok(value),
            Err(Failure::Mcp(e)) => return Err(e),
            Err(Failure::Scope(challenge)) => challenge,
        };
        let target = Target {
            server: self.name(),
            url: self.http_url().unwrap_or_default(),
            tokens: self.tokens.as_ref(),
            consent: self.hooks.scope_consent,
            client: &self.config.oauth,
        };
        self.step_ups.run(&target, what, &challenge).await?;
        self.reload_tokens().await;
        match self.request_once(what, retry).await {
            Ok(value) => Ok(value),
            Err(Failure::Mcp(e)) => Err(e),
            Err(Failure::Scope(again)) => Err(self.step_ups.refused_again(&target, what, &again)),
        }
    }

    /// Points the live connection's OAuth manager at the token store's
    /// current client (a step-up may have registered a new one), so the
    /// new token's refreshes name the client it was issued to.
    async fn reload_tokens(&self) {
        let auth = match &*self.life.lock().await {
            Life::Up(live) => live.auth.clone(),
            _ => None,
        };
        if let Some(auth) = auth
            && let Err(e) = auth.lock().await.initialize_from_store().await
        {
            tracing::warn!("mcp server {}: cannot reload the OAuth tokens: {e}", self.name());
        }
    }

    /// The URL of a streamable HTTP server.
    pub(crate) fn http_url(&self) -> Option<&str> {
        match &self.config.transport {
            Transport::Http { url, .. } => Some(url),
            Transport::Stdio { .. } => None,
        }
    }

    /// One attempt at a request.
    async fn request_once<T, F, Fut>(&self, what: &str, send: F) -> Result<T, Failure>
    where
        F: FnOnce(Peer<RoleClient>) -> Fut,
        Fut: Future<Output = Result<T, ServiceError>>,
    {
        let peer = self.peer().await.map_err(Failure::Mcp)?;
        let timeout = self.config.tool_timeout;
        match tokio::time::timeout(timeout, send(peer.clone())).await {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(e)) if e.auth_challenge().is_some() => {
                let scope = self.http_url().and_then(|url| ScopeChallenge::of(&e, url));
                Err(match scope {
                    Some(challenge) => Failure::Scope(challenge),
                    None => Failure::Mcp(McpError::NeedsLogin {
                        server: self.name().to_string(),
                        challenge: e.auth_challenge().map(str::to_string),
                    }),
                })
            }
            Ok(Err(e)) => {
                let closed = peer.is_transport_closed()
                    || matches!(e, ServiceError::TransportClosed | ServiceError::TransportSend(_));
                Err(Failure::Mcp(if closed {
                    let cause = service_error_text(&e);
                    let reason = self.died(&cause).await;
                    McpError::Crashed { server: self.name().to_string(), reason, cause }
                } else {
                    McpError::Request {
                        server: self.name().to_string(),
                        what: what.to_string(),
                        message: service_error_text(&e),
                    }
                }))
            }
            Err(_) => Err(Failure::Mcp(McpError::Timeout {
                server: self.name().to_string(),
                what: what.to_string(),
                after: timeout,
            })),
        }
    }

    /// A live peer, restarting a dead server when restarts are left.
    async fn peer(&self) -> Result<Peer<RoleClient>, McpError> {
        let mut life = self.life.lock().await;
        if let Life::Up(live) = &*life {
            if !live.client.is_closed() && !live.client.peer().is_transport_closed() {
                return Ok(live.client.peer().clone());
            }
            *life = Life::Down;
        }
        if let Life::Failed(reason) = &*life {
            return Err(McpError::Failed {
                server: self.name().to_string(),
                reason: reason.clone(),
            });
        }
        let restarts = {
            let mut n = self.restarts.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            *n += 1;
            *n
        };
        if restarts > MAX_RESTARTS {
            let reason = format!("it crashed {restarts} times; not restarted again");
            *life = Life::Failed(reason.clone());
            return Err(McpError::Failed { server: self.name().to_string(), reason });
        }
        tracing::warn!("mcp server {}: restarting after a crash", self.name());
        match self.connect().await {
            Ok(live) => {
                let peer = live.client.peer().clone();
                *life = Life::Up(live);
                Ok(peer)
            }
            Err(e) => {
                *life = Life::Failed(e.to_string());
                Err(e)
            }
        }
    }

    /// Marks the server dead after a failed request; returns the reason.
    async fn died(&self, error: &str) -> String {
        let mut life = self.life.lock().await;
        let reason = self.exit_reason(error);
        if let Life::Up(live) = std::mem::replace(&mut *life, Life::Down) {
            kill_group(live.pgid);
        }
        let restarts = *self.restarts.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if restarts >= MAX_RESTARTS {
            *life = Life::Failed(reason.clone());
            format!("{reason}; it crashed before, so it is marked failed")
        } else {
            format!("{reason}; it will be restarted on the next call")
        }
    }

    /// `what` plus the server's last stderr line, if any.
    fn exit_reason(&self, what: &str) -> String {
        let tail = self.stderr_tail.lock().map(|t| t.back().cloned()).ok().flatten();
        match tail {
            Some(line) => format!("{what} (last stderr line: {line})"),
            None => what.to_string(),
        }
    }

    /// Why a server that died while starting did: `what` and the last lines
    /// of its stderr (waiting briefly for them to arrive).
    pub(crate) async fn died_starting(&self, what: &str) -> String {
        let _ = tokio::time::timeout(STDERR_SETTLE, self.stderr_closed.notified()).await;
        let tail: Vec<String> = self
            .stderr_tail
            .lock()
            .map(|t| t.iter().rev().take(STARTUP_STDERR_LINES).rev().cloned().collect())
            .unwrap_or_default();
        match tail.is_empty() {
            true => format!("it exited {what} (it wrote nothing on stderr)"),
            false => format!("it exited {what}; its stderr ended with:\n  {}", tail.join("\n  ")),
        }
    }

    /// Stops the server: closes its input, waits briefly, kills its group.
    pub(crate) async fn shutdown(&self) {
        let mut life = self.life.lock().await;
        if let Life::Up(mut live) = std::mem::replace(&mut *life, Life::Failed("shut down".into()))
        {
            let _ = live.client.close_with_timeout(SHUTDOWN_GRACE).await;
            kill_group(live.pgid);
        }
    }

    /// Opens the transport and runs the handshake, within the startup timeout.
    async fn connect(&self) -> Result<Live, McpError> {
        let handler = Handler {
            server: self.name().to_string(),
            roots: vec![self.workspace.clone()],
            hooks: self.hooks.clone(),
            tools_changed: Arc::clone(&self.tools_changed),
        };
        let start_error =
            |message: String| McpError::Start { server: self.name().to_string(), message };
        let timeout = self.config.startup_timeout;
        let mut auth = None;
        let (handshake, pgid) = match &self.config.transport {
            Transport::Stdio { command, args, env, cwd } => {
                // Confined like `bash`: the allow-listed environment plus the
                // server's own `env`, and Landlock writes beneath the workspace.
                let confinement = self
                    .sandbox
                    .confinement(&self.workspace, &[])
                    .map_err(|e| start_error(format!("cannot set up the sandbox: {e}")))?;
                let mut launch = ferroclaw_tools::process::Launch::new(
                    command,
                    cwd.as_deref().unwrap_or(&self.workspace),
                )
                .args(args)
                .env_policy(ferroclaw_tools::process::EnvPolicy::Exact(self.sandbox.child_env()))
                .confined(confinement);
                for (name, value) in env {
                    launch = launch.env(name, value);
                }
                let mut cmd = launch.tokio_command();
                cmd.kill_on_drop(true);
                let mut wrapped = process_wrap::tokio::CommandWrap::from(cmd);
                wrapped.wrap(process_wrap::tokio::ProcessGroup::leader());
                // On the launcher thread: the server dies with ferroclaw,
                // not with the worker thread that happened to start it.
                let (transport, stderr) = ferroclaw_tools::process::spawn(move || {
                    TokioChildProcess::builder(wrapped).stderr(Stdio::piped()).spawn()
                })
                .map_err(|e| start_error(format!("cannot run {command:?}: {e}")))?;
                let pgid = transport.id();
                if let Some(stderr) = stderr {
                    self.log_stderr(stderr);
                }
                (handler.serve(transport).boxed(), pgid)
            }
            Transport::Http { url, headers } => {
                let mut custom = HashMap::new();
                for (k, v) in headers {
                    let name = reqwest::header::HeaderName::try_from(k.as_str())
                        .map_err(|e| start_error(format!("header {k:?}: {e}")))?;
                    let value = reqwest::header::HeaderValue::try_from(v.as_str())
                        .map_err(|e| start_error(format!("header {k:?}: {e}")))?;
                    custom.insert(name, value);
                }
                let config = StreamableHttpClientTransportConfig::with_uri(url.as_str())
                    .custom_headers(custom)
                    .reinit_on_expired_session(true);
                let client = http_client().map_err(start_error)?;
                let handshake =
                    match self.tokens.as_ref().filter(|t| t.has_tokens(self.name(), url)) {
                        Some(tokens) => {
                            let auth_error = |e: rmcp::transport::AuthError| {
                                start_error(format!("cannot use the saved OAuth tokens: {e}"))
                            };
                            let mut manager = oauth::manager(tokens, self.name(), url)
                                .await
                                .map_err(auth_error)?;
                            manager.initialize_from_store().await.map_err(auth_error)?;
                            let client = AuthClient::new(client, manager);
                            auth = Some(Arc::clone(&client.auth_manager));
                            handler
                                .serve(StreamableHttpClientTransport::with_client(client, config))
                                .boxed()
                        }
                        None => handler
                            .serve(StreamableHttpClientTransport::with_client(client, config))
                            .boxed(),
                    };
                (handshake, None)
            }
        };
        match tokio::time::timeout(timeout, handshake).await {
            Ok(Ok(client)) => Ok(Live { client, pgid, auth }),
            Ok(Err(e)) => {
                kill_group(pgid);
                if let Some(challenge) = auth_challenge(&e) {
                    return Err(McpError::NeedsLogin {
                        server: self.name().to_string(),
                        challenge,
                    });
                }
                if pgid.is_none() {
                    return Err(start_error(e.to_string()));
                }
                let exited = self.died_starting("during the handshake").await;
                Err(start_error(format!("{e}: {exited}")))
            }
            Err(_) => {
                kill_group(pgid);
                Err(start_error(format!(
                    "no answer to the handshake within {} s (startup_timeout_secs)",
                    timeout.as_secs()
                )))
            }
        }
    }

    /// Copies the child's stderr to the log and keeps its last lines.
    fn log_stderr(&self, stderr: tokio::process::ChildStderr) {
        let name = self.name().to_string();
        let tail = Arc::clone(&self.stderr_tail);
        let closed = Arc::clone(&self.stderr_closed);
        tokio::spawn(async move {
            let mut lines = tokio::io::BufReader::new(stderr).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                tracing::debug!("mcp server {name} stderr: {line}");
                if let Ok(mut t) = tail.lock() {
                    if t.len() == STDERR_TAIL_LINES {
                        t.pop_front();
                    }
                    t.push_back(line);
                }
            }
            closed.notify_one();
        });
    }

    /// The `capabilities` of the server's handshake, while it is up.
    pub(crate) async fn server_capabilities(&self) -> Option<serde_json::Value> {
        match &*self.life.lock().await {
            Life::Up(live) => live
                .client
                .peer()
                .peer_info()
                .and_then(|info| serde_json::to_value(&*info).ok())
                .map(|v| v["capabilities"].clone()),
            _ => None,
        }
    }

    /// Takes the "tools changed" flag.
    pub(crate) fn take_tools_changed(&self) -> bool {
        self.tools_changed.swap(false, Ordering::SeqCst)
    }
}

/// Makes ring rustls's crypto provider (reqwest is built without one).
pub(crate) fn install_crypto() {
    // Ignore the error: another crate installed a provider already.
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// The HTTP client for streamable HTTP servers (rustls with ring).
pub(crate) fn http_client() -> Result<reqwest::Client, String> {
    install_crypto();
    reqwest::Client::builder()
        .user_agent(concat!("ferroclaw/", env!("CARGO_PKG_VERSION")))
        .connect_timeout(Duration::from_secs(10))
        .build()
        .map_err(|e| format!("cannot build the HTTP client: {e}"))
}

/// `Some(challenge)` when the handshake failed because the server wants
/// authorization: the `WWW-Authenticate` header, when there was one.
fn auth_challenge(e: &ClientInitializeError) -> Option<Option<String>> {
    match e.auth_challenge() {
        Some(challenge) => Some(Some(challenge.to_string())),
        None => e.is_authorization_required().then_some(None),
    }
}

/// Kills a stdio server's whole process group (`npx` spawns children).
fn kill_group(pgid: Option<u32>) {
    if let Some(pgid) = pgid.and_then(|p| i32::try_from(p).ok()) {
        // SAFETY: killpg only sends a signal; a stale group id fails with ESRCH.
        unsafe {
            libc::killpg(pgid, libc::SIGKILL);
        }
    }
}

/// A service error as a user reads it: the server's own message for MCP errors.
fn service_error_text(e: &ServiceError) -> String {
    match e {
        ServiceError::McpError(data) => data.message.to_string(),
        // The transport's own words, without rmcp's Rust type names.
        ServiceError::TransportSend(e) => e.error.to_string(),
        other => other.to_string(),
    }
}
