//! `ferroclaw acp`: ferroclaw as an ACP agent for editors, on stdin/stdout.
//! The protocol is `ferroclaw-acp`'s; this applies the command-line flags
//! (model, rules, permission mode), given before or after `acp`, to every
//! session's config.

use std::sync::Arc;

use clap::Parser;

use crate::args::Cli;
use crate::exit;
use crate::setup::{self, SetupError};

/// Serves until the editor closes stdin; `after` are the flags given after
/// `acp`.
pub(crate) async fn run(after: &[String]) -> Result<i32, SetupError> {
    // An owned copy of the flags for the loader (parsed already, so this
    // parse succeeds the same way), with those after `acp` over them.
    let mut flags = Cli::parse_args();
    merge_session_flags(&mut flags, after)?;
    let cwd = setup::workspace(&flags)?;
    let flags = Arc::new(flags);
    let options = ferroclaw_acp::Options {
        load_config: Box::new(move |dir| {
            setup::load_config_in(&flags, dir.to_path_buf()).map_err(|e| e.to_string())
        }),
        home: ferroclaw_core::Config::default_home(),
        cwd,
    };
    match ferroclaw_acp::serve(options).await {
        Ok(()) => Ok(exit::OK),
        Err(e) => Err(SetupError::Other(format!("acp: reading stdin: {e}"))),
    }
}

/// Applies the session flags given after `acp` over `cli`'s; refuses
/// anything else (a prompt, `-p`, a resume: each editor session picks its own).
fn merge_session_flags(cli: &mut Cli, after: &[String]) -> Result<(), SetupError> {
    if after.is_empty() {
        return Ok(());
    }
    let args = std::iter::once("ferroclaw".to_string()).chain(after.iter().cloned());
    let given = Cli::try_parse_from(args)
        .map_err(|e| SetupError::Other(format!("acp: {}", e.to_string().trim_end())))?;
    if given.prompt.is_some() || given.print || given.continue_ || given.resume.is_some() {
        return Err(SetupError::Other(format!(
            "acp takes session flags only (--model, --allowedTools, --permission-mode, ...), not {}",
            after.join(" ")
        )));
    }
    cli.model = given.model.or(cli.model.take());
    cli.allowed_tools.extend(given.allowed_tools);
    cli.disallowed_tools.extend(given.disallowed_tools);
    cli.append_system_prompt = given.append_system_prompt.or(cli.append_system_prompt.take());
    cli.add_dir.extend(given.add_dir);
    cli.plugin_dir.extend(given.plugin_dir);
    cli.max_turns = given.max_turns.or(cli.max_turns);
    cli.cwd = given.cwd.or(cli.cwd.take());
    cli.permission_mode = given.permission_mode.or(cli.permission_mode);
    cli.yes |= given.yes;
    Ok(())
}
