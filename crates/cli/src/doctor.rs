//! `ferroclaw doctor`: what this installation will do, and what is missing.

use ferroclaw_core::Config;
use ferroclaw_tools::landlock;

use crate::args::Cli;
use crate::setup::{self, SetupError};

/// Prints one line per check: `ok`, `--` (informational) or `!!` (a problem).
pub fn run(cli: &Cli) -> Result<(), SetupError> {
    println!("ferroclaw {}", env!("CARGO_PKG_VERSION"));
    let config = match setup::load_config(cli) {
        Ok(c) => c,
        Err(e) => {
            println!("!! config: {e}");
            return Ok(());
        }
    };
    println!("ok home: {}", config.home.display());
    println!("ok workspace: {}", config.workspace.display());
    if config.sources.is_empty() {
        println!("-- config: no config file (run `ferroclaw init` to write one)");
    }
    for source in &config.sources {
        println!("ok config: {}", source.display());
    }
    model(&config);
    sandbox(&config);
    Ok(())
}

fn model(config: &Config) {
    match config.model_spec() {
        Err(e) => println!("!! model: {e}"),
        Ok(spec) if let Some(local) = crate::model_cmd::local_model_path(config, &spec) => {
            match local {
                Ok(path) => println!("ok model: {spec} in process from {}", path.display()),
                Err(e) => println!("!! model {spec}: {e}"),
            }
        }
        Ok(spec) => match config.resolve_model(&spec) {
            Ok((p, _)) => println!(
                "ok model: {spec} via {} ({}, key {})",
                p.base_url,
                if p.stream { "streaming" } else { "not streaming" },
                if p.api_key.is_some() { "set" } else { "not needed" }
            ),
            Err(e) => println!("!! model {spec}: {e}"),
        },
    }
}

fn sandbox(config: &Config) {
    let enabled = config.file.sandbox.as_ref().and_then(|s| s.enabled).unwrap_or(true);
    match (enabled, landlock::abi_version()) {
        (false, _) => println!(
            "-- sandbox: disabled in config ([sandbox] enabled = false); bash relies on the deny list"
        ),
        (true, Some(abi)) => println!(
            "ok sandbox: Landlock ABI {abi}; bash and MCP servers may write only in the workspace, /tmp, /var/tmp, harmless devices (/dev/null, ...){}",
            config
                .file
                .sandbox
                .as_ref()
                .filter(|s| !s.writable.is_empty())
                .map(|s| format!(
                    " and {}",
                    s.writable
                        .iter()
                        .map(|p| p.display().to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                ))
                .unwrap_or_default()
        ),
        (true, None) => println!(
            "!! sandbox: this kernel has no Landlock; bash runs unconfined and only the deny list of catastrophic commands applies"
        ),
    }
    println!(
        "ok file tools: confined to the workspace{}",
        match &config.file.allowed_dirs {
            Some(dirs) if !dirs.is_empty() => format!(
                " and {}",
                dirs.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
            ),
            _ => String::new(),
        }
    );
}
