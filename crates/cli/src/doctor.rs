//! `ferroclaw doctor`: checks everything it can about this installation, one
//! line each (`ok`, `--` for information, `!!` for a problem), keeps going
//! after a failure, and exits non-zero when anything is broken.

use std::time::{Duration, Instant};

use ferroclaw_core::Config;
use ferroclaw_gateway::config::GatewaySettings;
use ferroclaw_llm::{ChatRequest, ProviderConfig};
use ferroclaw_mcp::ServerState;
use ferroclaw_protocol::{Message, ProviderEvent};
use ferroclaw_tools::landlock;
use futures_util::StreamExt;

use crate::args::Cli;
use crate::exit;
use crate::setup::{self, SetupError};

/// How long the test request to the provider may take in all: enough for a
/// slow first token, short enough that a dead endpoint does not hang doctor.
const PROVIDER_CHECK_TIMEOUT: Duration = Duration::from_secs(20);

/// The lines printed and whether any was a problem.
#[derive(Default)]
struct Checks {
    broken: usize,
}

impl Checks {
    fn ok(&mut self, what: &str, detail: impl std::fmt::Display) {
        println!("ok {what}: {detail}");
    }

    fn info(&mut self, what: &str, detail: impl std::fmt::Display) {
        println!("-- {what}: {detail}");
    }

    fn broken(&mut self, what: &str, detail: impl std::fmt::Display) {
        self.broken += 1;
        println!("!! {what}: {detail}");
    }
}

/// Runs every check; exit code 1 when something is broken.
pub(crate) async fn run(cli: &Cli) -> Result<i32, SetupError> {
    println!("ferroclaw {}", env!("CARGO_PKG_VERSION"));
    let mut checks = Checks::default();
    match setup::load_config(cli) {
        Ok(config) => with_config(&mut checks, &config).await,
        Err(e) => {
            checks.broken("config", e);
            // What does not need the config is still checked.
            sandbox_kernel(&mut checks);
        }
    }
    if checks.broken > 0 {
        println!("{} problem{} found", checks.broken, if checks.broken == 1 { "" } else { "s" });
        return Ok(exit::FAILED);
    }
    Ok(exit::OK)
}

async fn with_config(checks: &mut Checks, config: &Config) {
    checks.ok("home", config.home.display());
    checks.ok("workspace", config.workspace.display());
    if config.sources.is_empty() {
        checks.info("config", "no config file (run `ferroclaw init` to write one)");
    }
    for source in &config.sources {
        checks.ok("config", source.display());
    }
    model(checks, config).await;
    skills(checks, config);
    mcp(checks, config).await;
    sandbox(checks, config);
    gateway(checks, config);
}

async fn model(checks: &mut Checks, config: &Config) {
    let spec = match config.model_spec() {
        Ok(spec) => spec,
        Err(e) => return checks.broken("model", e),
    };
    if let Some(local) = ferroclaw_runtime::local_model_path(config, &spec) {
        return match local {
            Ok(path) => checks.ok("model", format!("{spec} in process from {}", path.display())),
            Err(e) => checks.broken(&format!("model {spec}"), e),
        };
    }
    let (provider, model) = match config.resolve_model(&spec) {
        Ok(resolved) => resolved,
        Err(e) => return checks.broken(&format!("model {spec}"), e),
    };
    checks.ok(
        "model",
        format!(
            "{spec} via {} ({}, key {})",
            provider.base_url,
            if provider.stream { "streaming" } else { "not streaming" },
            if provider.api_key.is_some() { "set" } else { "not needed" }
        ),
    );
    match try_provider(provider, model).await {
        Ok(took) => {
            checks.ok("provider", format!("answered a test request in {} ms", took.as_millis()));
        }
        Err(e) => checks.broken("provider", e),
    }
}

/// Sends a one-word request (one token of answer), without retries.
async fn try_provider(mut provider: ProviderConfig, model: String) -> Result<Duration, String> {
    provider.retry.max_attempts = 1;
    provider.idle_timeout = provider.idle_timeout.min(PROVIDER_CHECK_TIMEOUT);
    let mut request = ChatRequest::new(model, vec![Message::user("Say ok.")]);
    request.max_tokens = 1;
    let began = Instant::now();
    let mut stream = ferroclaw_llm::connect(provider).stream(request);
    let first = tokio::time::timeout(PROVIDER_CHECK_TIMEOUT, async {
        while let Some(event) = stream.next().await {
            match event {
                Err(e) => return Err(e.to_string()),
                Ok(ProviderEvent::Retrying { .. }) => {}
                Ok(_) => return Ok(()),
            }
        }
        Err("the provider closed the answer without any content".to_string())
    })
    .await;
    match first {
        Err(_) => Err(format!("no answer within {} s", PROVIDER_CHECK_TIMEOUT.as_secs())),
        Ok(result) => result.map(|()| began.elapsed()),
    }
}

fn skills(checks: &mut Checks, config: &Config) {
    let set = ferroclaw_core::skills::SkillSet::discover(&config.workspace, &config.home);
    for problem in set.problems() {
        match problem.fatal {
            true => {
                checks.broken("skill", format!("{}: {}", problem.path.display(), problem.message));
            }
            false => {
                checks.info("skill", format!("{}: {}", problem.path.display(), problem.message));
            }
        }
    }
    checks.ok("skills", format!("{} loaded", set.skills().len()));
}

async fn mcp(checks: &mut Checks, config: &Config) {
    let servers = ferroclaw_runtime::load_servers(config);
    if servers.servers.is_empty() && servers.problems.is_empty() {
        return checks.info("mcp", "no servers configured");
    }
    for problem in &servers.problems {
        checks.broken("mcp", problem);
    }
    // Not `start_hub`: it warns on stderr about what is reported here already.
    let hub = ferroclaw_runtime::connect_mcp(config, servers.clone(), Default::default()).await;
    for status in hub.statuses().await {
        match status.state {
            ServerState::Ready { tools } => {
                checks.ok(&format!("mcp {}", status.name), format!("started, {tools} tools"));
            }
            ServerState::Disabled => checks.info(&format!("mcp {}", status.name), "disabled"),
            ServerState::Failed(reason)
                if servers.problems.iter().any(|p| p.server == status.name) =>
            {
                let _ = reason; // already reported above
            }
            ServerState::Failed(reason) => checks.broken(&format!("mcp {}", status.name), reason),
        }
    }
    hub.shutdown().await;
}

fn sandbox(checks: &mut Checks, config: &Config) {
    let enabled = config.file.sandbox.as_ref().and_then(|s| s.enabled).unwrap_or(true);
    if enabled {
        sandbox_kernel(checks);
    } else {
        checks.info(
            "sandbox",
            "disabled in config ([sandbox] enabled = false); bash relies on the deny list",
        );
    }
    let extra = |dirs: &[std::path::PathBuf]| {
        dirs.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
    };
    if let Some(writable) =
        config.file.sandbox.as_ref().filter(|s| enabled && !s.writable.is_empty())
    {
        checks.info("sandbox", format!("bash may also write in {}", extra(&writable.writable)));
    }
    checks.ok(
        "file tools",
        match &config.file.allowed_dirs {
            Some(dirs) if !dirs.is_empty() => {
                format!("confined to the workspace and {}", extra(dirs))
            }
            _ => "confined to the workspace".to_string(),
        },
    );
}

fn sandbox_kernel(checks: &mut Checks) {
    match landlock::abi_version() {
        Some(abi) => checks.ok(
            "sandbox",
            format!(
                "Landlock ABI {abi}; bash and MCP servers may write only in the workspace, /tmp, /var/tmp and harmless devices (/dev/null, ...)"
            ),
        ),
        None => checks.broken(
            "sandbox",
            "this kernel has no Landlock; bash runs unconfined and only the deny list of catastrophic commands applies",
        ),
    }
    match ferroclaw_tools::protected_mounts::available() {
        Ok(()) if landlock::abi_version().is_some() => checks.ok(
            "protected files",
            "bash and MCP servers see .git/config, .git/hooks, .mcp.json and .agent/config.toml read-only (user namespace + read-only bind mounts)",
        ),
        Ok(()) => checks.info(
            "protected files",
            "user namespaces work, but without Landlock commands may write .git/config, .git/hooks, .mcp.json and .agent/config.toml",
        ),
        Err(why) => checks.info(
            "protected files",
            format!(
                "{why}: bash may write .git/config, .git/hooks, .mcp.json and .agent/config.toml when the permission gate does not see it; only the gate guards them"
            ),
        ),
    }
    own_git(checks);
}

/// How ferroclaw's own git (worktrees, status, checkpoints) is confined.
fn own_git(checks: &mut Checks) {
    let abi = landlock::abi_version();
    let netns = ferroclaw_tools::protected_mounts::available().is_ok();
    let network = match (netns, abi.is_some_and(|a| a >= 4)) {
        (true, true) => "a network namespace of its own and Landlock TCP deny",
        (true, false) => "a network namespace of its own",
        (false, true) => "Landlock TCP deny (UDP and Unix sockets stay open)",
        (false, false) => "",
    };
    match (abi, network) {
        (Some(_), "") => checks.info(
            "own git",
            "program-running config off; writes and reads confined to the repository (Landlock), but the network is open (no user namespaces, Landlock ABI < 4)",
        ),
        (Some(_), network) => checks.ok(
            "own git",
            format!(
                "program-running config off; writes and reads confined to the repository and system folders (Landlock); no network ({network})"
            ),
        ),
        (None, _) => checks.info(
            "own git",
            "program-running config off, but git runs unconfined (no Landlock)",
        ),
    }
}

/// The gateway's settings parse and its port is free (or held by a running gateway).
fn gateway(checks: &mut Checks, config: &Config) {
    let settings = match GatewaySettings::parse(config.file.gateway.as_ref()) {
        Ok(s) => s,
        Err(e) => return checks.broken("gateway", e),
    };
    let addr = std::net::SocketAddr::new(settings.bind, settings.port);
    match std::net::TcpListener::bind(addr) {
        Ok(_) => checks.ok("gateway", format!("port {addr} is free for `ferroclaw gateway`")),
        Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => checks.info(
            "gateway",
            format!("port {addr} is in use (a gateway already running, or another program)"),
        ),
        Err(e) => checks.broken("gateway", format!("cannot listen on {addr}: {e}")),
    }
}
