//! `ferroclaw mcp ...` (list, get, add, remove, login, logout, serve), and the
//! REPL's `/mcp` and `/mcp__SERVER__PROMPT` commands with their terminal hooks
//! (the hub itself is the runtime's: `ferroclaw_runtime::start_hub`).

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;
use clap::{Subcommand, ValueEnum};
use ferroclaw_core::{Config, PermissionMode};
use ferroclaw_llm::{ChatRequest, Provider};
use ferroclaw_mcp::{
    ClientHooks, Consent, Elicitation, Elicitor, McpHub, NewServer, Sampler, SamplingRequest,
    ServerConfig, ServerState, Transport,
};
use ferroclaw_protocol::{Message, ProviderEvent};
use futures_util::StreamExt;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::exit;
use crate::setup::SetupError;

/// `ferroclaw mcp` subcommands.
#[derive(Debug, Subcommand)]
pub(crate) enum McpAction {
    /// Every configured server: connects to each and shows its status.
    List,
    /// Connects to one server and lists its tools.
    Get { name: String },
    /// Adds a server: `add NAME -- CMD ARGS...` or `add NAME --url URL`.
    Add {
        name: String,
        /// A streamable HTTP server's URL.
        #[arg(long)]
        url: Option<String>,
        /// An HTTP header, `K=V` (repeatable); `${VAR}` expands at start.
        #[arg(long = "header", value_name = "K=V")]
        headers: Vec<String>,
        /// An environment variable of a stdio server, `K=V` (repeatable).
        #[arg(short = 'e', long = "env", value_name = "K=V")]
        env: Vec<String>,
        /// project: ./.mcp.json (shared with Claude Code); user: $FERROCLAW_HOME/config.toml.
        #[arg(long, value_enum, default_value_t = Scope::Project)]
        scope: Scope,
        /// The command and its arguments, after `--`.
        #[arg(last = true, value_name = "CMD")]
        command: Vec<String>,
    },
    /// Removes a server from .mcp.json (or, with --scope user, config.toml).
    Remove {
        name: String,
        #[arg(long, value_enum, default_value_t = Scope::Project)]
        scope: Scope,
    },
    /// Logs in to an HTTP server that asks for OAuth: prints the address to
    /// open in a browser and waits for the redirect on a loopback port.
    Login {
        name: String,
        /// The OAuth scopes to ask for, space-separated (default: those the
        /// server names), e.g. the ones a server refused a call without.
        #[arg(long, value_name = "SCOPES")]
        scopes: Option<String>,
    },
    /// Forgets the OAuth tokens `login` saved for a server.
    Logout { name: String },
    /// Serves ferroclaw's built-in tools over MCP (stdio, or HTTP on 127.0.0.1).
    Serve {
        /// Serve streamable HTTP at http://127.0.0.1:PORT/mcp instead of stdio.
        #[arg(long, value_name = "PORT")]
        http: Option<u16>,
        /// Offer every tool (default: read-only tools only). Deny rules still apply.
        #[arg(short = 'y', long)]
        yes: bool,
        /// default | accept-edits | bypass | plan.
        #[arg(long, value_name = "MODE")]
        permission_mode: Option<PermissionMode>,
        /// With --http: serve without a bearer token (any local user or
        /// container that reaches 127.0.0.1 may call the tools).
        #[arg(long, requires = "http")]
        no_auth: bool,
    },
}

/// Which file `add` and `remove` edit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum Scope {
    Project,
    User,
}

/// Runs `ferroclaw mcp ACTION`.
pub(crate) async fn run(action: &McpAction, config: &Config) -> Result<i32, SetupError> {
    match action {
        McpAction::List => list(config).await,
        McpAction::Get { name } => get(config, name).await,
        McpAction::Add { name, url, headers, env, scope, command } => {
            check_server_name(name)?;
            let server = match (url, command.split_first()) {
                (Some(_), Some(_)) => {
                    return Err(other("give either --url URL or -- CMD ARGS, not both"));
                }
                (None, None) => {
                    return Err(other(
                        "nothing to run: `ferroclaw mcp add NAME -- CMD ARGS...` or `ferroclaw mcp add NAME --url URL`",
                    ));
                }
                (Some(url), None) => {
                    NewServer::Http { url: url.clone(), headers: pairs(headers, "--header")? }
                }
                (None, Some((cmd, args))) => NewServer::Stdio {
                    command: cmd.clone(),
                    args: args.to_vec(),
                    env: pairs(env, "--env")?,
                },
            };
            let path = scope_file(config, *scope);
            ferroclaw_mcp::add_server(&path, name, &server).map_err(|e| other(e.to_string()))?;
            keep_trust(config);
            println!("added mcp server {name} to {}", path.display());
            Ok(exit::OK)
        }
        McpAction::Remove { name, scope } => {
            let path = scope_file(config, *scope);
            if ferroclaw_mcp::remove_server(&path, name).map_err(|e| other(e.to_string()))? {
                keep_trust(config);
                println!("removed mcp server {name} from {}", path.display());
                Ok(exit::OK)
            } else {
                Err(other(format!("{} has no mcp server named {name:?}", path.display())))
            }
        }
        McpAction::Serve { http, yes, permission_mode, no_auth } => {
            serve(config, *http, *yes, *permission_mode, *no_auth).await
        }
        McpAction::Login { name, scopes } => {
            let (url, client) = http_url(config, name)?;
            let scopes: Vec<String> =
                scopes.iter().flat_map(|s| s.split_whitespace()).map(str::to_string).collect();
            ferroclaw_mcp::login(
                name,
                &url,
                &ferroclaw_runtime::token_store(config),
                Consent::Browser,
                None,
                &client,
                &scopes,
            )
            .await
            .map_err(|e| other(e.to_string()))?;
            println!(
                "logged in to mcp server {name}; tokens saved in {}",
                ferroclaw_runtime::token_store(config).path(name).display()
            );
            Ok(exit::OK)
        }
        McpAction::Logout { name } => {
            let store = ferroclaw_runtime::token_store(config);
            if store.remove(name).map_err(|e| other(e.to_string()))? {
                println!("removed the OAuth tokens of mcp server {name}");
                Ok(exit::OK)
            } else {
                Err(other(format!("mcp server {name} has no saved OAuth tokens")))
            }
        }
    }
}

/// A server's name becomes part of its tools' names (`mcp__NAME__TOOL`),
/// which the APIs allow only letters, digits, `_` and `-` in.
fn check_server_name(name: &str) -> Result<(), SetupError> {
    let valid = !name.is_empty()
        && name.len() <= 40
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if valid {
        return Ok(());
    }
    Err(other(format!(
        "invalid mcp server name {name:?}: use 1 to 40 letters, digits, `_` or `-` \
         (it becomes part of tool names such as mcp__{}__TOOL)",
        name.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '_' }).collect::<String>()
    )))
}

fn other(message: impl Into<String>) -> SetupError {
    SetupError::Other(message.into())
}

/// `K=V` arguments as a map.
fn pairs(items: &[String], flag: &str) -> Result<BTreeMap<String, String>, SetupError> {
    items
        .iter()
        .map(|item| {
            item.split_once('=')
                .map(|(k, v)| (k.trim().to_string(), v.to_string()))
                .ok_or_else(|| other(format!("{flag} {item:?} is not K=V")))
        })
        .collect()
}

/// The user's own `mcp add`/`remove` changed the project's files: a project
/// that was trusted (or had nothing to trust) stays trusted with them.
fn keep_trust(config: &Config) {
    use ferroclaw_core::trust::TrustState;
    if matches!(config.trust, TrustState::Trusted | TrustState::NothingToTrust)
        && let Err(e) =
            ferroclaw_core::trust::TrustStore::new(&config.home).trust(&config.workspace)
    {
        eprintln!("ferroclaw: warning: {e}");
    }
}

fn scope_file(config: &Config, scope: Scope) -> PathBuf {
    match scope {
        Scope::Project => config.workspace.join(".mcp.json"),
        Scope::User => config.home.join("config.toml"),
    }
}

/// The URL of the configured HTTP server `name`.
fn http_url(
    config: &Config,
    name: &str,
) -> Result<(String, ferroclaw_mcp::OAuthClient), SetupError> {
    let servers = ferroclaw_runtime::load_servers(config);
    if let Some(p) = servers.problems.iter().find(|p| p.server == name) {
        return Err(other(p.to_string()));
    }
    match servers.servers.iter().find(|s| s.name == name) {
        Some(ServerConfig { transport: Transport::Http { url, .. }, oauth, .. }) => {
            Ok((url.clone(), oauth.clone()))
        }
        Some(_) => Err(other(format!(
            "mcp server {name} is a stdio server; OAuth login is for HTTP servers"
        ))),
        None => Err(other(format!(
            "no mcp server named {name:?}; configured: {}",
            servers.servers.iter().map(|s| s.name.as_str()).collect::<Vec<_>>().join(", ")
        ))),
    }
}

async fn list(config: &Config) -> Result<i32, SetupError> {
    let servers = ferroclaw_runtime::load_servers(config);
    let describe: BTreeMap<String, String> =
        servers.servers.iter().map(|s| (s.name.clone(), describe(&s.transport))).collect();
    if servers.servers.is_empty() && servers.problems.is_empty() && servers.disabled.is_empty() {
        println!(
            "no mcp servers configured; add one with `ferroclaw mcp add NAME -- CMD ARGS` or `ferroclaw mcp add NAME --url URL`"
        );
        return Ok(exit::OK);
    }
    let hub = ferroclaw_runtime::connect_mcp(config, servers, ClientHooks::default()).await;
    for status in hub.statuses().await {
        let line = format!("{}: {}", status.name, state_text(&status.state));
        match describe.get(&status.name) {
            Some(what) => println!("{line} {what}"),
            None => println!("{line}"),
        }
    }
    hub.shutdown().await;
    Ok(exit::OK)
}

async fn get(config: &Config, name: &str) -> Result<i32, SetupError> {
    let mut servers = ferroclaw_runtime::load_servers(config);
    let known: Vec<String> = servers
        .servers
        .iter()
        .map(|s| s.name.clone())
        .chain(servers.problems.iter().map(|p| p.server.clone()))
        .chain(servers.disabled.iter().cloned())
        .collect();
    if let Some(p) = servers.problems.iter().find(|p| p.server == name) {
        return Err(other(p.to_string()));
    }
    if servers.disabled.iter().any(|d| d == name) {
        return Err(other(format!("mcp server {name} is disabled")));
    }
    servers.servers.retain(|s| s.name == name);
    let Some(server) = servers.servers.first() else {
        return Err(other(format!(
            "no mcp server named {name:?}; configured: {}",
            if known.is_empty() { "(none)".to_string() } else { known.join(", ") }
        )));
    };
    println!("{name}: {} (from {})", describe(&server.transport), server.source.display());
    servers.problems.clear();
    servers.disabled.clear();
    let hub = ferroclaw_runtime::connect_mcp(config, servers, ClientHooks::default()).await;
    let code = match hub.problems().first() {
        Some(problem) => {
            eprintln!("ferroclaw: {problem}");
            exit::FAILED
        }
        None => {
            for (tool, description) in hub.tools_of(name) {
                let first_line = description.lines().next().unwrap_or_default();
                println!("  {tool}  {first_line}");
            }
            exit::OK
        }
    };
    hub.shutdown().await;
    Ok(code)
}

fn describe(transport: &Transport) -> String {
    match transport {
        Transport::Stdio { command, args, .. } => format!("(stdio: {command} {})", args.join(" ")),
        Transport::Http { url, .. } => format!("(http: {url})"),
    }
}

fn state_text(state: &ServerState) -> String {
    match state {
        ServerState::Ready { tools } => format!("ready, {tools} tools"),
        ServerState::Failed(reason) => format!("failed: {reason}"),
        ServerState::Disabled => "disabled".to_string(),
    }
}

/// `ferroclaw mcp serve`: the built-in tools the permission mode lets run
/// without asking, over stdio or HTTP.
async fn serve(
    config: &Config,
    http: Option<u16>,
    yes: bool,
    mode: Option<PermissionMode>,
    no_auth: bool,
) -> Result<i32, SetupError> {
    let mode =
        if yes { PermissionMode::Bypass } else { mode.unwrap_or_else(|| config.permission_mode()) };
    let server = ferroclaw_runtime::tool_server(config, mode)?;
    let result = match http {
        None => server.serve_stdio().await,
        Some(port) => {
            let token = if no_auth { None } else { Some(serve_token()?) };
            let stop = CancellationToken::new();
            let on_signal = stop.clone();
            tokio::spawn(async move {
                let _ = tokio::signal::ctrl_c().await;
                on_signal.cancel();
            });
            let shown = token.clone();
            server
                .serve_http(port, token, stop, |port| {
                    eprintln!("ferroclaw mcp server listening on http://127.0.0.1:{port}/mcp");
                    match shown {
                        Some(token) => eprintln!(
                            "clients send the header \"Authorization: Bearer {token}\" (FERROCLAW_MCP_TOKEN sets the token; --no-auth serves without one)"
                        ),
                        None => eprintln!(
                            "no token asked (--no-auth): any local user or container that reaches 127.0.0.1:{port} may call the tools"
                        ),
                    }
                })
                .await
        }
    };
    result.map_err(|e| other(e.to_string()))?;
    Ok(exit::OK)
}

/// The bearer token `mcp serve --http` asks for: `FERROCLAW_MCP_TOKEN` when
/// set (so a client's config can keep one), else 32 random bytes from the
/// operating system, new for each start.
fn serve_token() -> Result<String, SetupError> {
    match std::env::var("FERROCLAW_MCP_TOKEN") {
        Ok(token) if token.trim().len() >= 16 => Ok(token.trim().to_string()),
        Ok(_) => Err(other("FERROCLAW_MCP_TOKEN is too short: use at least 16 characters")),
        Err(_) => ferroclaw_gateway::files::random_hex(32)
            .map_err(|e| other(format!("cannot make a token for mcp serve: {e}"))),
    }
}

/// The REPL's MCP commands. `None`: not one of them; `Some(Ok(Some(text)))`:
/// a prompt whose text is to be sent as the next request.
pub(crate) async fn repl_command(
    input: &str,
    hub: &McpHub,
) -> Option<Result<Option<String>, String>> {
    let (name, arg) = input.split_once(char::is_whitespace).unwrap_or((input, ""));
    if name == "/mcp" {
        let statuses = hub.statuses().await;
        if statuses.is_empty() {
            println!("no mcp servers; configure them in .mcp.json, .agent/mcp.json or config.toml");
        }
        for s in statuses {
            println!("  {:<16} {}", s.name, state_text(&s.state));
        }
        for p in hub.prompts().await {
            println!("  {:<16} {}", p.command(), p.description);
        }
        return Some(Ok(None));
    }
    let rest = name.strip_prefix("/mcp__")?;
    let (server, prompt) = rest.split_once("__")?;
    let prompts = hub.prompts().await;
    let Some(info) = prompts.iter().find(|p| p.server == server && p.name == prompt) else {
        return Some(Err(format!("no prompt {prompt} on mcp server {server}; /mcp lists them")));
    };
    // Arguments: `k=v` pairs, or plain words filling the arguments in order.
    let mut args = BTreeMap::new();
    let mut positional = info.arguments.iter().map(|(n, _)| n.clone());
    for word in arg.split_whitespace() {
        match word.split_once('=') {
            Some((k, v)) => {
                args.insert(k.to_string(), v.to_string());
            }
            None => {
                if let Some(k) = positional.next() {
                    args.insert(k, word.to_string());
                }
            }
        }
    }
    let missing: Vec<&str> = info
        .arguments
        .iter()
        .filter(|(n, required)| *required && !args.contains_key(n))
        .map(|(n, _)| n.as_str())
        .collect();
    if !missing.is_empty() {
        return Some(Err(format!(
            "{} needs {}; e.g. {} {}",
            info.command(),
            missing.join(", "),
            info.command(),
            missing.iter().map(|m| format!("{m}=...")).collect::<Vec<_>>().join(" ")
        )));
    }
    Some(hub.get_prompt(server, prompt, args).await.map(Some).map_err(|e| e.to_string()))
}

/// The REPL's hooks: elicitation on the terminal; sampling with the agent's
/// provider after the user agrees; more OAuth scopes (a server's 403
/// `insufficient_scope`) granted in the browser, after saying which and why. The servers start before the agent is
/// opened: set the model to sample with on the [`SamplingModel`] then.
pub(crate) fn terminal_hooks() -> (ClientHooks, SamplingModel) {
    let model = SamplingModel::default();
    let hooks = ClientHooks {
        elicitor: Some(Arc::new(TerminalElicitor)),
        sampler: Some(Arc::new(ProviderSampler { model: model.clone() })),
        scope_consent: Some(Consent::Browser),
    };
    (hooks, model)
}

/// The provider and model MCP sampling requests go to: the agent's.
#[derive(Clone, Default)]
pub(crate) struct SamplingModel(Arc<std::sync::OnceLock<(Arc<dyn Provider>, String)>>);

impl SamplingModel {
    /// Sampling uses `provider` and `model` from now on.
    pub(crate) fn set(&self, provider: Arc<dyn Provider>, model: String) {
        let _ = self.0.set((provider, model));
    }
}

/// One line from stdin, off the async runtime.
async fn read_line(question: String) -> String {
    tokio::task::spawn_blocking(move || {
        eprint!("{question}");
        let _ = std::io::stderr().flush();
        let mut line = String::new();
        let _ = std::io::stdin().read_line(&mut line);
        line.trim().to_string()
    })
    .await
    .unwrap_or_default()
}

struct TerminalElicitor;

#[async_trait]
impl Elicitor for TerminalElicitor {
    async fn elicit(&self, server: &str, message: &str, schema: &Value) -> Elicitation {
        eprintln!("\nmcp server {server} asks: {message}");
        if let Some(url) = schema["url"].as_str() {
            let answer = read_line(format!("open {url} and answer there; done? [y/N] ")).await;
            return if answer.eq_ignore_ascii_case("y") {
                Elicitation::Accept(json!({}))
            } else {
                Elicitation::Decline
            };
        }
        let mut answer = serde_json::Map::new();
        for (key, prop) in schema["properties"].as_object().into_iter().flatten() {
            let hint = prop["description"].as_str().or(prop["title"].as_str()).unwrap_or("");
            let line = read_line(format!(
                "  {key} ({}) {hint}: ",
                prop["type"].as_str().unwrap_or("string")
            ))
            .await;
            if line.is_empty() && answer.is_empty() {
                eprintln!("  (declined)");
                return Elicitation::Decline;
            }
            let value = match prop["type"].as_str() {
                Some("boolean") => json!(matches!(line.as_str(), "y" | "yes" | "true")),
                Some("number" | "integer") => line.parse::<f64>().map_or(json!(line), |n| json!(n)),
                _ => json!(line),
            };
            answer.insert(key.clone(), value);
        }
        Elicitation::Accept(Value::Object(answer))
    }
}

struct ProviderSampler {
    model: SamplingModel,
}

#[async_trait]
impl Sampler for ProviderSampler {
    async fn sample(&self, request: SamplingRequest) -> Result<(String, String), String> {
        let Some((provider, model)) = self.model.0.get() else {
            return Err("no model to sample with yet".into());
        };
        let preview = request.messages.last().map(|(_, t)| t.as_str()).unwrap_or_default();
        let answer = read_line(format!(
            "\nmcp server {} asks the model: {:.200}\nallow? [y/N] ",
            request.server, preview
        ))
        .await;
        if !answer.eq_ignore_ascii_case("y") {
            return Err("the user declined the sampling request".into());
        }
        let messages = request
            .messages
            .iter()
            .map(|(role, text)| {
                if role == "assistant" {
                    Message::assistant(text.clone())
                } else {
                    Message::user(text.clone())
                }
            })
            .collect();
        let mut chat = ChatRequest::new(model.clone(), messages);
        chat.system = request.system.unwrap_or_default().into();
        chat.max_tokens = request.max_tokens;
        let mut stream = provider.stream(chat);
        let mut text = String::new();
        while let Some(event) = stream.next().await {
            match event {
                Ok(ProviderEvent::TextDelta(t)) => text.push_str(&t),
                Ok(_) => {}
                Err(e) => return Err(e.to_string()),
            }
        }
        Ok((text, model.clone()))
    }
}
