//! `ferroclaw gateway`: the always-on assistant (web chat, OpenAI API,
//! Telegram, cron, heartbeat), and `ferroclaw gateway install` (a systemd
//! user unit). Agents are opened from the same runtime as the terminal's, one session per chat.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use clap::Subcommand;
use ferroclaw_core::{Config, Overrides};
use ferroclaw_gateway::config::{ChannelSettings, GatewaySettings};
use ferroclaw_gateway::home_lock::{HomeLock, HomeUse};
use ferroclaw_gateway::telegram::{self, TelegramChannel};
use ferroclaw_gateway::web::{OWNER, WebChannel, WebOptions};
use ferroclaw_gateway::{Channel, Gateway};
use ferroclaw_gateway::{discord, slack};
use ferroclaw_runtime::Runtime;
use tokio_util::sync::CancellationToken;

use crate::args::Cli;
use crate::exit;
use crate::setup::SetupError;
use ferroclaw_tools::repo_file::{MAX_REPO_FILE_BYTES, read_repo_text};

/// Bytes of random token generated when none is configured.
const TOKEN_BYTES: usize = 24;

/// The model name the API lists and answers as (what the docs' examples use).
const API_MODEL_NAME: &str = "ferroclaw";
/// The open-files limit the systemd unit asks for: one descriptor per live
/// chat's session file plus sockets, with room to spare.
const UNIT_NOFILE: u64 = 65_536;

/// Flags of `ferroclaw gateway` itself (they win over `[gateway]`).
#[derive(Debug, Clone, Default, clap::Args)]
pub(crate) struct ServeFlags {
    /// The web channel's port (default `[gateway] port`, else 18790).
    #[arg(long, value_name = "N")]
    pub port: Option<u16>,
    /// The address to listen on (default `[gateway] bind`, else 127.0.0.1).
    #[arg(long, value_name = "ADDR")]
    pub bind: Option<std::net::IpAddr>,
}

#[derive(Debug, Subcommand)]
pub(crate) enum GatewayAction {
    /// Run the gateway in the foreground (the default).
    Run,
    /// Create or upgrade the shared database's schema (`[gateway] store` or
    /// FERROCLAW_DATABASE_URL); the gateway also does this at start unless
    /// `store_migrate = false`.
    Migrate,
    /// List the gateway processes alive on the shared database (its
    /// registry), what each runs and holds, and the model config it serves.
    Status,
    /// Move this box's chat sessions, pairing allow-lists and cron jobs into
    /// the shared database (what is there already is left alone).
    Import,
    /// Write the shared database's chat sessions, allow-lists and cron jobs
    /// into this box's files (what is there already is left alone).
    Export,
    /// Write a systemd user unit that runs the gateway, and say how to enable it.
    Install {
        /// Overwrite an existing unit.
        #[arg(long)]
        force: bool,
    },
}

/// True when this command runs the gateway itself (it sets up its own logging and runtime).
pub(crate) fn is_server(action: &Option<GatewayAction>) -> bool {
    matches!(action, None | Some(GatewayAction::Run))
}

/// Runs `ferroclaw gateway [ACTION]`.
pub(crate) async fn run(
    cli: &Cli,
    flags: &ServeFlags,
    action: &Option<GatewayAction>,
) -> Result<i32, SetupError> {
    match action {
        Some(GatewayAction::Install { force }) => install(*force),
        Some(GatewayAction::Migrate) => migrate(cli).await,
        Some(GatewayAction::Status) => crate::gateway_status::run(cli).await,
        Some(GatewayAction::Import) => {
            crate::gateway_transfer::run(cli, crate::gateway_transfer::Direction::Import).await
        }
        Some(GatewayAction::Export) => {
            crate::gateway_transfer::run(cli, crate::gateway_transfer::Direction::Export).await
        }
        None | Some(GatewayAction::Run) => serve(cli, flags).await,
    }
}

/// Loads the config with the gateway's workspace and permission mode.
pub(crate) fn gateway_config(cli: &Cli) -> Result<(Config, GatewaySettings), SetupError> {
    let home = Config::default_home();
    let plain = Config::load(home.clone(), home.join("workspace"), &Overrides::default())?;
    // Unknown keys in [gateway] and [channels.*] name their line, as the top level's do.
    for path in &plain.sources {
        let max = MAX_REPO_FILE_BYTES;
        if let Ok(text) = read_repo_text(path, max) {
            ferroclaw_gateway::config::check_file(path, &text).map_err(other)?;
        }
    }
    let settings = GatewaySettings::parse(plain.file.gateway.as_ref()).map_err(other)?;
    let workspace = settings.workspace(&home);
    std::fs::create_dir_all(&workspace)
        .map_err(|e| SetupError::Other(format!("cannot create {}: {e}", workspace.display())))?;
    let overrides = Overrides {
        model: cli.model.clone(),
        max_turns: cli.max_turns,
        permission_mode: cli.permission_mode.or(settings.permission_mode),
    };
    let workspace = workspace.canonicalize().unwrap_or(workspace);
    let config = Config::load(home, workspace, &overrides)?;
    crate::trust_cmd::warn_ignored(&config);
    Ok((config, settings))
}

/// The shared database's URL, when one is configured (the environment first).
pub(crate) fn database_url(settings: &GatewaySettings) -> Result<Option<String>, SetupError> {
    let env = std::env::var(ferroclaw_store::DATABASE_URL_ENV).ok();
    ferroclaw_store::Backend::choose(settings.store.as_deref(), env.as_deref()).map_err(other)
}

/// `ferroclaw gateway migrate`.
async fn migrate(cli: &Cli) -> Result<i32, SetupError> {
    let (_, settings) = gateway_config(cli)?;
    let Some(url) = database_url(&settings)? else {
        return Err(SetupError::Other(format!(
            "no database to migrate: set [gateway] store = \"postgres://...\" or {}",
            ferroclaw_store::DATABASE_URL_ENV
        )));
    };
    let applied = ferroclaw_store::PgStore::migrate(&url).await.map_err(other)?;
    let shown = ferroclaw_store::redact_url(&url);
    let version = ferroclaw_store::SCHEMA_VERSION;
    let mut out = std::io::stdout().lock();
    let _ = match applied.as_slice() {
        [] => writeln!(out, "{shown}: schema is up to date (version {version})"),
        done => {
            writeln!(out, "{shown}: applied migrations {done:?}; schema is at version {version}")
        }
    };
    Ok(exit::OK)
}

fn other(e: impl std::fmt::Display) -> SetupError {
    SetupError::Other(e.to_string())
}

async fn serve(cli: &Cli, flags: &ServeFlags) -> Result<i32, SetupError> {
    // From here on SIGTERM, SIGHUP and Ctrl-C drain (at once if the gateway is not up yet).
    let shutdown = CancellationToken::new();
    crate::interrupt::drain_on_signals(shutdown.clone());
    let (config, mut settings) = gateway_config(cli)?;
    settings.port = flags.port.unwrap_or(settings.port);
    settings.bind = flags.bind.unwrap_or(settings.bind);
    private_dir(&config.home)?;
    let log_path = config.home.join("logs").join("gateway.log");
    init_logging(cli.verbose, &log_path)?;
    raise_open_files_limit();
    // Fail early, with the reason, when no model can be used.
    config.model_spec()?;
    let tables = &config.file.channels;
    let mut channels = ChannelSettings::parse_all(tables).map_err(other)?;
    if !tables.contains_key("web") {
        // The web chat is on by default: loopback only, behind the token.
        channels.push(ChannelSettings { name: "web".into(), enabled: true, ..Default::default() });
    }
    if !channels.iter().any(|c| c.enabled) {
        let off: Vec<String> = channels.iter().map(|c| format!("[channels.{}]", c.name)).collect();
        return Err(SetupError::Other(format!(
            "no channel is enabled ({} without enabled = true), so the gateway would serve \
             nobody; add enabled = true to the channel you want",
            off.join(", ")
        )));
    }
    // One gateway per home on files (several may share one with a database):
    // taken before anything reads or resumes the home's chats.
    let database = database_url(&settings)?;
    let web = channels.iter().any(|c| c.enabled && c.name == "web").then_some(settings.port);
    let how = if database.is_some() { HomeUse::SharedDatabase } else { HomeUse::Files };
    let _home_lock = HomeLock::acquire(&config.home, how, web).map_err(other)?;
    // One runtime for every chat: one MCP hub, one connection per model.
    // Several gateways share a database: connect (and migrate) before
    // anything starts, so a bad URL or a newer schema stops us with the reason.
    let store = match database {
        Some(url) => {
            let options = ferroclaw_store::PgOptions {
                migrate: settings.store_migrate,
                ..Default::default()
            };
            Some(ferroclaw_store::PgStore::connect(&url, options).await.map_err(other)?)
        }
        None => None,
    };
    let runtime = Runtime::load(config.clone(), Default::default()).await?;
    let mut gateway = Gateway::new(config.home.clone(), settings.clone(), runtime.clone());
    if let Some(store) = store {
        eprintln!(
            "ferroclaw gateway: sharing the work through {} as {}",
            store.url(),
            store.holder()
        );
        gateway.set_store(store);
    }
    let mut enabled = Vec::new();
    for disabled in channels.iter().filter(|c| !c.enabled) {
        gateway.add_disabled_channel(&disabled.name);
    }
    for mut channel_settings in channels.into_iter().filter(|c| c.enabled) {
        channel_settings.check_allow_from().map_err(other)?;
        let channel: Arc<dyn Channel> = match channel_settings.name.as_str() {
            "web" => {
                channel_settings.check_options(&["openai_api", "models"]).map_err(other)?;
                let (token, source) = web_token(&config.home, &settings)?;
                ferroclaw_core::redact::register("FERROCLAW_GATEWAY_TOKEN", &token);
                let addr = std::net::SocketAddr::new(settings.bind, settings.port);
                port_is_free(addr)?;
                // Where the token is, never the token itself (stderr ends up in journals).
                eprintln!("ferroclaw gateway: web chat at http://{addr}/; the token is {source}");
                eprintln!(
                    "  open http://{addr}/#token=TOKEN with it, or send it as Authorization: Bearer TOKEN"
                );
                gateway.set_web_url(format!("http://{addr}/"));
                if channel_settings.allow_from.is_empty() {
                    channel_settings.allow_from = vec![OWNER.into()];
                }
                let mut options = WebOptions::new(addr, token, API_MODEL_NAME.to_string());
                options.openai_api =
                    channel_settings.option("openai_api").map_err(other)?.unwrap_or(true);
                options.models =
                    channel_settings.option("models").map_err(other)?.unwrap_or_default();
                // An alias whose model cannot be used is refused now, not at its first request.
                for (alias, spec) in &options.models {
                    runtime.provider(spec).map_err(|e| {
                        SetupError::Other(format!("[channels.web] models: {alias} = {spec:?}: {e}"))
                    })?;
                }
                options.max_connections = settings.max_connections;
                options.max_websockets = settings.max_websockets;
                options.requests_per_minute = settings.requests_per_minute;
                options.allowed_origins = settings.allowed_origins.clone();
                options.header_timeout =
                    std::time::Duration::from_secs(settings.header_timeout_secs);
                let web = Arc::new(WebChannel::new(options));
                gateway.set_web(web.clone());
                web
            }
            "telegram" => {
                channel_settings.check_options(&["poll_timeout_secs"]).map_err(other)?;
                let token =
                    channel_settings.secret(telegram::DEFAULT_TOKEN_ENV).ok_or_else(|| {
                        SetupError::Other(format!(
                            "[channels.telegram] needs the bot token: set {} (or token_env)",
                            channel_settings
                                .token_env
                                .as_deref()
                                .unwrap_or(telegram::DEFAULT_TOKEN_ENV)
                        ))
                    })?;
                let poll = channel_settings
                    .option("poll_timeout_secs")
                    .map_err(other)?
                    .unwrap_or(telegram::DEFAULT_POLL_TIMEOUT_SECS);
                Arc::new(
                    TelegramChannel::new(&token, channel_settings.api_base.as_deref(), poll)
                        .map_err(other)?
                        .with_max_file_bytes(channel_settings.max_file_bytes()),
                )
            }
            "discord" => {
                let config =
                    discord::DiscordConfig::from_settings(&channel_settings).map_err(other)?;
                Arc::new(discord::DiscordChannel::new(config).map_err(other)?)
            }
            "slack" => {
                let config = slack::SlackConfig::from_settings(&channel_settings).map_err(other)?;
                Arc::new(slack::SlackChannel::new(config).map_err(other)?)
            }
            name => {
                return Err(SetupError::Other(format!(
                    "[channels.{name}]: unknown channel; available: web, telegram, discord, slack"
                )));
            }
        };
        enabled.push(channel_settings.name.clone());
        gateway.add_channel(channel, channel_settings);
    }
    tracing::info!(
        channels = %enabled.join(", "),
        workspace = %config.workspace.display(),
        model = %config.model_spec().unwrap_or_default(),
        "gateway starting"
    );
    gateway.run(shutdown).await;
    runtime.shutdown().await;
    Ok(exit::OK)
}

/// The web token and where it is, said in words: configured, else the one
/// generated earlier (kept in `$FERROCLAW_HOME/gateway/token`, mode 0600),
/// else a new one from the operating system's random source.
fn web_token(home: &Path, settings: &GatewaySettings) -> Result<(String, String), SetupError> {
    if let Some(token) = settings.configured_token() {
        let source = match (&settings.token, &settings.token_env) {
            (Some(_), _) => "set in config.toml [gateway] token".to_string(),
            (None, env) => format!(
                "from ${}",
                env.as_deref().unwrap_or(ferroclaw_gateway::config::DEFAULT_TOKEN_ENV)
            ),
        };
        return Ok((token, source));
    }
    let path = home.join("gateway").join("token");
    let source = format!("in {} (readable only by you)", path.display());
    let write_err =
        |e: std::io::Error| SetupError::Other(format!("cannot write {}: {e}", path.display()));
    let max = MAX_REPO_FILE_BYTES;
    if let Ok(token) = read_repo_text(&path, max)
        && !token.trim().is_empty()
    {
        // Narrow a token file written earlier with a wider mode.
        ferroclaw_gateway::files::open_private(&path, true).map_err(write_err)?;
        return Ok((token.trim().to_string(), source));
    }
    let token = ferroclaw_gateway::files::random_hex(TOKEN_BYTES)
        .map_err(|e| SetupError::Other(format!("no random source for the gateway token: {e}")))?;
    let write = || -> std::io::Result<()> {
        private_dir_io(&home.join("gateway"))?;
        let mut f = ferroclaw_gateway::files::open_private(&path, false)?;
        writeln!(f, "{token}")
    };
    write().map_err(write_err)?;
    Ok((token, source))
}

/// Makes `dir` (a folder of `$FERROCLAW_HOME`) private: 0700.
fn private_dir(dir: &Path) -> Result<(), SetupError> {
    private_dir_io(dir)
        .map_err(|e| SetupError::Other(format!("cannot create {}: {e}", dir.display())))
}

fn private_dir_io(dir: &Path) -> std::io::Result<()> {
    ferroclaw_gateway::files::create_private_dir(dir)
}

/// Raises the soft open-files limit to the hard one: each live chat holds
/// its session file, and the usual soft limit of 1024 runs out at a few
/// hundred chats (the hard limit is usually far higher).
fn raise_open_files_limit() {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit/setrlimit only read and write `limit`.
    let raised = unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &raw mut limit) != 0 {
            return;
        }
        let before = limit.rlim_cur;
        limit.rlim_cur = limit.rlim_max;
        (before, libc::setrlimit(libc::RLIMIT_NOFILE, &raw const limit) == 0)
    };
    match raised {
        (before, true) if before != limit.rlim_max => {
            tracing::info!("open files limit raised from {before} to {}", limit.rlim_max);
        }
        (_, true) => {}
        (before, false) => tracing::warn!(
            "cannot raise the open files limit from {before}: {}",
            std::io::Error::last_os_error()
        ),
    }
}

/// Logs to `gateway.log` and stderr.
fn init_logging(verbose: u8, path: &Path) -> Result<(), SetupError> {
    if let Some(dir) = path.parent() {
        private_dir(dir)?;
    }
    let file = ferroclaw_gateway::files::open_private(path, true)
        .map_err(|e| SetupError::Other(format!("cannot open {}: {e}", path.display())))?;
    let file = Arc::new(Mutex::new(file));
    let filter = std::env::var("FERROCLAW_LOG")
        .unwrap_or_else(|_| if verbose >= 2 { "debug" } else { "info" }.to_string());
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
        .with_writer(move || Tee(file.clone()))
        .with_ansi(false)
        .with_target(false)
        .try_init();
    Ok(())
}

/// A log writer that writes each line to the log file and to stderr.
struct Tee(Arc<Mutex<std::fs::File>>);

impl Write for Tee {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        // Known secrets (keys, the gateway token) are redacted from the log.
        let text = String::from_utf8_lossy(buf);
        let redacted = ferroclaw_core::redact::redact(&text);
        let _ = std::io::stderr().write_all(redacted.as_bytes());
        let mut file = self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        file.write_all(redacted.as_bytes())?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// `ferroclaw gateway install`: `~/.config/systemd/user/ferroclaw-gateway.service`.
fn install(force: bool) -> Result<i32, SetupError> {
    let exe = std::env::current_exe()
        .map_err(|e| SetupError::Other(format!("cannot find this binary: {e}")))?;
    let config_dir = std::env::var_os("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")))
        .ok_or_else(|| SetupError::Other("neither XDG_CONFIG_HOME nor HOME is set".into()))?;
    let path = config_dir.join("systemd/user/ferroclaw-gateway.service");
    if path.exists() && !force {
        println!("{} exists; use --force to overwrite it", path.display());
        return Ok(exit::OK);
    }
    let unit = systemd_unit(&exe, &Config::default_home());
    std::fs::create_dir_all(path.parent().unwrap_or(&config_dir))
        .and_then(|()| std::fs::write(&path, unit))
        .map_err(|e| SetupError::Other(format!("cannot write {}: {e}", path.display())))?;
    let home = Config::default_home();
    println!("wrote {}", path.display());
    println!(
        "provider keys and bot tokens go in {env} (one NAME=value a line, e.g. \
         ANTHROPIC_API_KEY=sk-...); make it private with:\n  chmod 600 {env}",
        env = home.join("gateway.env").display()
    );
    println!(
        "enable it with:\n  systemctl --user daemon-reload\n  systemctl --user enable --now ferroclaw-gateway"
    );
    println!("keep it running after logout with:\n  loginctl enable-linger $USER");
    Ok(exit::OK)
}

/// The unit's text. Provider keys are read from an optional environment file.
fn systemd_unit(exe: &Path, home: &Path) -> String {
    format!(
        "[Unit]\n\
         Description=ferroclaw gateway (personal AI assistant)\n\
         After=network-online.target\n\
         Wants=network-online.target\n\n\
         [Service]\n\
         ExecStart={exe} gateway\n\
         Environment=FERROCLAW_HOME={home}\n\
         # Provider keys and bot tokens, e.g. ANTHROPIC_API_KEY=... and TELEGRAM_BOT_TOKEN=...\n\
         EnvironmentFile=-{home}/gateway.env\n\
         Restart=on-failure\n\
         RestartSec=5\n\
         # SIGTERM lets turns in flight finish (up to {grace} s).\n\
         KillSignal=SIGTERM\n\
         TimeoutStopSec={stop}\n\
         # One open file per live chat: room for many chats.\n\
         LimitNOFILE={nofile}\n\n\
         [Install]\n\
         WantedBy=default.target\n",
        exe = exe.display(),
        home = home.display(),
        grace = ferroclaw_gateway::gateway::SHUTDOWN_GRACE.as_secs(),
        stop = ferroclaw_gateway::gateway::SHUTDOWN_GRACE.as_secs() + 30,
        nofile = UNIT_NOFILE,
    )
}

/// Stops the start, with the reason, when the web chat's address cannot be
/// listened on (another gateway has it, or the bind address is not this
/// machine's): a gateway whose only way in is closed would otherwise run on,
/// serving nobody, after announcing a web chat that is not its own.
fn port_is_free(addr: std::net::SocketAddr) -> Result<(), SetupError> {
    match std::net::TcpListener::bind(addr) {
        // Dropped at once; the web channel binds it again a moment later.
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => Err(SetupError::Other(format!(
            "cannot listen on {addr}: something else is listening there (another `ferroclaw \
             gateway`? `ferroclaw status` says); stop it, or pick another port with --port N"
        ))),
        Err(e) => Err(SetupError::Other(format!("cannot listen on {addr}: {e}"))),
    }
}
