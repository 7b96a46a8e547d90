//! From command-line flags to what the runtime needs: the config (layers,
//! `--model`, rules, folders), which session to open and its options. The
//! agent itself comes from [`ferroclaw_runtime::Runtime::open`].

use std::path::PathBuf;

use ferroclaw_core::{Config, Overrides, PermissionMode};
use ferroclaw_runtime::{Resume, SessionOptions};

use crate::args::Cli;

/// Errors before the agent exists: all are the user's to fix (exit code 2).
pub(crate) use ferroclaw_runtime::RuntimeError as SetupError;

/// Which conversation to open, from `--continue` / `--resume ID`.
pub(crate) fn resume_from_cli(cli: &Cli) -> Resume {
    match (&cli.resume, cli.continue_) {
        (Some(id), _) if id.is_empty() => Resume::Pick,
        (Some(id), _) => Resume::Id(id.clone()),
        (None, true) => Resume::Latest,
        (None, false) => Resume::New,
    }
}

/// The workspace: `--cwd`, else the current directory, made absolute.
pub(crate) fn workspace(cli: &Cli) -> Result<PathBuf, SetupError> {
    let dir = match &cli.cwd {
        Some(d) => d.clone(),
        None => std::env::current_dir()
            .map_err(|e| SetupError::Other(format!("cannot read the current directory: {e}")))?,
    };
    dir.canonicalize().map_err(|e| SetupError::Other(format!("workspace {}: {e}", dir.display())))
}

/// Loads the config for the flags given.
pub(crate) fn load_config(cli: &Cli) -> Result<Config, SetupError> {
    load_config_in(cli, workspace(cli)?)
}

/// Loads the config for the flags given, for the project in `workspace`
/// (an ACP session's folder).
pub(crate) fn load_config_in(cli: &Cli, workspace: PathBuf) -> Result<Config, SetupError> {
    let mut mode = cli.permission_mode;
    if cli.yes {
        mode = Some(PermissionMode::Bypass);
    }
    if cli.max_turns == Some(0) {
        return Err(SetupError::Other(
            "--max-turns must be at least 1 (it caps the model round-trips of a request)".into(),
        ));
    }
    let overrides =
        Overrides { model: cli.model.clone(), max_turns: cli.max_turns, permission_mode: mode };
    let mut config = Config::load(Config::default_home(), workspace, &overrides)?;
    if let Some(alias) = &cli.model {
        config.file.model = Some(crate::model_alias::resolve(alias, &config));
    }
    let (allow, deny) = cli.rules();
    config.file.permissions.allow.extend(allow);
    config.file.permissions.deny.extend(deny);
    if !cli.add_dir.is_empty() {
        let dirs = config.file.allowed_dirs.get_or_insert_with(Vec::new);
        for dir in &cli.add_dir {
            let dir = config.workspace.join(dir);
            let dir = dir
                .canonicalize()
                .map_err(|e| SetupError::Other(format!("--add-dir {}: {e}", dir.display())))?;
            dirs.push(dir);
        }
    }
    for dir in &cli.plugin_dir {
        let dir = config.workspace.join(dir);
        let dir = dir
            .canonicalize()
            .map_err(|e| SetupError::Other(format!("--plugin-dir {}: {e}", dir.display())))?;
        config.plugin_dirs.push(dir);
    }
    // A file named relative to where ferroclaw was started, as Claude Code reads it.
    config.mcp_given = cli
        .mcp_config
        .iter()
        .map(|given| match given.trim_start().starts_with('{') {
            true => given.clone(),
            false => config.workspace.join(given).to_string_lossy().into_owned(),
        })
        .collect();
    config.mcp_strict = cli.strict_mcp_config;
    Ok(config)
}

/// Stops with the reason when no model can be used (none configured, an
/// unknown provider, a missing key), before anything starts: MCP servers,
/// the recall index, a trust question.
pub(crate) fn check_model(config: &Config) -> Result<(), SetupError> {
    let spec = config.model_spec()?;
    if ferroclaw_local::LocalTarget::parse(&spec).is_none() {
        config.resolve_model(&spec)?;
    }
    Ok(())
}

/// The options of a session opened for these flags: `--append-system-prompt`;
/// checkpoints on (see `ferroclaw rewind`).
pub(crate) fn session_options(cli: &Cli) -> SessionOptions {
    SessionOptions {
        append_system_prompt: cli.append_system_prompt.clone(),
        checkpoints: true,
        ..Default::default()
    }
}
