//! The `ferroclaw` binary: the REPL (`repl.rs`), one-shot `-p`
//! (`oneshot.rs`), and every subcommand (`*_cmd.rs`), over the agents that
//! `ferroclaw-runtime` opens. It parses flags (`args.rs`), renders the
//! agent's events for a terminal (`render.rs`, `markdown.rs`) or as JSON
//! lines (Claude Code's in `claude_stream.rs`), asks for approvals
//! (`approver.rs`), and turns the outcome into an exit code (`exit.rs`).
//! The engine itself is not here: see `docs/architecture.md`.

mod acp_cmd;
mod approver;
mod archive;
mod args;
mod attach;
mod claude_flags;
mod claude_stream;
mod code_cmd;
mod context_cmd;
mod cron_cmd;
mod database;
mod diff;
mod doctor;
mod eval_cmd;
mod eval_learning;
mod exit;
mod gateway_cmd;
mod gateway_status;
mod gateway_transfer;
mod highlight;
mod interrupt;
mod keys;
mod line_editor;
mod markdown;
mod mcp_cmd;
mod model_alias;
mod model_cmd;
mod oneshot;
mod pairing_cmd;
mod piped;
mod printable;
mod render;
mod repl;
mod rewind_cmd;
mod sessions;
mod setup;
mod skills_cmd;
mod skills_learn;
mod status_cmd;
mod stream_control;
mod stream_input;
mod style;
mod tasks_cmd;
mod team;
mod tool_log;
mod trust_cmd;
mod worktrees_cmd;

use clap::ValueEnum as _;

use crate::args::{Cli, Command};
use crate::setup::SetupError;

fn main() {
    quiet_on_broken_pipe();
    let cli = Cli::parse_args();
    // Known secrets never reach session files or logs; the home is private.
    ferroclaw_core::redact::register_from_env();
    let home = ferroclaw_core::Config::default_home();
    if home.exists()
        && let Err(e) = ferroclaw_core::private_files::secure_home(&home)
    {
        eprintln!("ferroclaw: cannot make {} private (mode 0700): {e}", home.display());
    }
    // The gateway logs to its own file and serves many chats on all cores.
    let gateway = matches!(&cli.command, Some(Command::Gateway { action, .. }) if gateway_cmd::is_server(action));
    if !gateway {
        init_logging(cli.verbose);
    }
    let mut builder = match gateway {
        true => tokio::runtime::Builder::new_multi_thread(),
        false => tokio::runtime::Builder::new_current_thread(),
    };
    let runtime = match builder.enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("ferroclaw: cannot start the async runtime: {e}");
            std::process::exit(exit::FAILED);
        }
    };
    let code = match runtime.block_on(run(&cli)) {
        Ok(code) => code,
        Err(e) => {
            let message = model_alias::explain(&e);
            eprintln!("ferroclaw: {message}");
            // A program reading `-p --output-format json` still gets its JSON.
            let one_shot = cli.print || cli.input_format == args::InputFormat::StreamJson;
            if one_shot && cli.command.is_none() {
                oneshot::print_setup_error(&cli, &message);
            }
            exit::USAGE
        }
    };
    // Do not wait for lingering tasks (a blocked stdin read, a spinner).
    runtime.shutdown_background();
    std::process::exit(code);
}

async fn run(cli: &Cli) -> Result<i32, SetupError> {
    if !matches!(&cli.command, Some(Command::Gateway { .. })) {
        interrupt::install_termination_handler();
    }
    let code = run_command(cli).await?;
    // A request stopped by SIGTERM/SIGHUP ends with that signal's code.
    Ok(interrupt::terminated().unwrap_or(code))
}

async fn run_command(cli: &Cli) -> Result<i32, SetupError> {
    match &cli.command {
        Some(Command::Init { force }) => init(*force),
        Some(Command::Doctor) => doctor::run(cli).await,
        Some(Command::Acp { flags }) => acp_cmd::run(flags).await,
        Some(Command::Tasks) => tasks_cmd::run(cli),
        Some(Command::Worktrees) => worktrees_cmd::run(cli),
        Some(Command::Team) => tasks_cmd::team(cli),
        Some(Command::Mcp { action }) => mcp_cmd::run(action, &setup::load_config(cli)?).await,
        Some(Command::Context { raw }) => context_cmd::run(&setup::load_config(cli)?, *raw).await,
        Some(Command::Skills { action }) => skills_cmd::run(action, &setup::load_config(cli)?),
        Some(Command::Model { action }) => model_cmd::run(action, &setup::load_config(cli)?).await,
        Some(Command::Gateway { serve, action }) => gateway_cmd::run(cli, serve, action).await,
        Some(Command::Pairing { action }) => pairing_cmd::run(action).await,
        Some(Command::Cron { action }) => cron_cmd::run(action).await,
        Some(Command::Status) => status_cmd::run(cli).await,
        Some(Command::Eval { action }) => eval_cmd::run(action, &setup::load_config(cli)?).await,
        Some(Command::Index) => code_cmd::index(cli),
        Some(Command::Code { action }) => code_cmd::code(cli, action),
        Some(Command::Sessions { action }) => {
            let config = setup::load_config(cli)?;
            sessions::run(action, &config).await?;
            Ok(exit::OK)
        }
        Some(Command::Rewind(args)) => rewind_cmd::run(cli, args).await,
        Some(Command::Trust { list, revoke }) => trust_cmd::run(cli, *list, *revoke),
        // The Agent SDK starts Claude Code without -p: stream-json on stdin is one-shot mode.
        None if cli.print || cli.input_format == args::InputFormat::StreamJson => {
            let config = setup::load_config(cli)?;
            setup::check_model(&config)?;
            trust_cmd::warn_ignored(&config);
            oneshot::run(cli, config).await
        }
        // The REPL has no machine-readable output: without -p the flag
        // would be ignored silently.
        None if cli.output_format != args::OutputFormat::Text => Err(SetupError::Other(format!(
            "--output-format {} works with -p (one request, then exit): ferroclaw -p \"...\" --output-format {0}",
            cli.output_format
                .to_possible_value()
                .map_or("json".into(), |v| v.get_name().to_string())
        ))),
        None => {
            let config = setup::load_config(cli)?;
            setup::check_model(&config)?;
            repl::run(cli, trust_cmd::ask_if_untrusted(cli, config)?).await
        }
    }
}

/// `ferroclaw init`: writes the agent workspace's missing templates, and the
/// commented config unless one exists.
fn init(force: bool) -> Result<i32, SetupError> {
    let home = ferroclaw_core::Config::default_home();
    ferroclaw_core::private_files::secure_home(&home)
        .map_err(|e| SetupError::Other(format!("cannot create {}: {e}", home.display())))?;
    let templates = ferroclaw_core::context::write_workspace_templates(&home).map_err(|e| {
        SetupError::Other(format!("cannot write {}/workspace: {e}", home.display()))
    })?;
    for path in templates {
        println!("wrote {}", path.display());
    }
    let path = home.join("config.toml");
    if path.exists() && !force {
        println!("{} exists; use --force to overwrite it", path.display());
        return Ok(exit::OK);
    }
    std::fs::create_dir_all(&home)
        .and_then(|()| std::fs::write(&path, ferroclaw_core::config::CONFIG_TEMPLATE))
        .map_err(|e| SetupError::Other(format!("cannot write {}: {e}", path.display())))?;
    println!("wrote {}", path.display());
    Ok(exit::OK)
}

/// `ferroclaw status | head`: once the reader of stdout (or stderr) is gone,
/// printing fails with EPIPE and `println!` panics; end quietly instead, with
/// the code a shell gives a process killed by SIGPIPE. (SIGPIPE itself stays
/// ignored, so a closed socket or a dead MCP server's pipe is an error, not death.)
fn quiet_on_broken_pipe() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let message = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| info.payload().downcast_ref::<&str>().copied())
            .unwrap_or_default();
        if message.starts_with("failed printing to std") && message.contains("Broken pipe") {
            std::process::exit(exit::BROKEN_PIPE);
        }
        default(info);
    }));
}

/// Logs go to stderr, never stdout (stdout is for answers and MCP stdio):
/// without timestamps (a terminal session is not a server log), and with
/// colours only when stderr is a terminal.
fn init_logging(verbose: u8) {
    let filter = std::env::var("FERROCLAW_LOG").unwrap_or_else(|_| {
        match verbose {
            // rmcp warns about every transport it closes, even a clean shutdown.
            0 => "warn,rmcp=error",
            1 => "info",
            _ => "debug",
        }
        .to_string()
    });
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
        .with_writer(|| ferroclaw_core::redact::RedactingWriter(std::io::stderr()))
        .with_target(false)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .without_time()
        .try_init();
}
