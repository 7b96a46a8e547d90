//! `ferroclaw acp`: ferroclaw as an ACP agent for editors, on stdin/stdout.
//! The protocol is `ferroclaw-acp`'s; this applies the command-line flags
//! (model, rules, permission mode) to every session's config.

use std::sync::Arc;

use crate::args::Cli;
use crate::exit;
use crate::setup::{self, SetupError};

/// Serves until the editor closes stdin.
pub async fn run(cli: &Cli) -> Result<i32, SetupError> {
    let cwd = setup::workspace(cli)?;
    // An owned copy of the flags for the loader (parsed already, so this
    // parse succeeds the same way).
    let flags = Arc::new(Cli::parse_args());
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
