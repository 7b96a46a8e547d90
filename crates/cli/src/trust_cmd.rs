//! `ferroclaw trust [--list | --revoke]`, the REPL's trust question, and the
//! note one-shot runs and the gateway print about ignored project settings.

use std::io::{BufRead, IsTerminal, Write};

use ferroclaw_core::Config;
use ferroclaw_core::trust::{TrustState, TrustStore};

use crate::args::Cli;
use crate::exit;
use crate::setup::{self, SetupError};

/// `ferroclaw trust`: trusts this project's files as they are now, or lists
/// or revokes trusted projects.
pub(crate) fn run(cli: &Cli, list: bool, revoke: bool) -> Result<i32, SetupError> {
    let home = Config::default_home();
    let store = TrustStore::new(&home);
    let fail = |e: ferroclaw_core::trust::TrustError| SetupError::Other(e.to_string());
    if list {
        let projects = store.list().map_err(fail)?;
        if projects.is_empty() {
            println!("no trusted projects");
        }
        for (path, _) in projects {
            let now = std::path::Path::new(&path);
            let state = match store.state(now) {
                TrustState::Trusted => "trusted",
                TrustState::NothingToTrust => "trusted (no files to trust now)",
                _ => "changed since trusted",
            };
            println!("{path}  {state}");
        }
        return Ok(exit::OK);
    }
    let workspace = setup::workspace(cli)?;
    if revoke {
        let removed = store.revoke(&workspace).map_err(fail)?;
        match removed {
            true => println!("{} is no longer trusted", workspace.display()),
            false => println!("{} was not trusted", workspace.display()),
        }
        return Ok(exit::OK);
    }
    let config = setup::load_config(cli)?;
    store.trust(&workspace).map_err(fail)?;
    if config.ignored.is_empty() {
        println!("trusted {}", workspace.display());
    } else {
        println!("trusted {}; its files now set:", workspace.display());
        for line in &config.ignored {
            println!("  {line}");
        }
    }
    let covered = ferroclaw_core::trust::covered_files(&workspace);
    if !covered.is_empty() {
        let names: Vec<String> = covered.iter().map(|p| p.display().to_string()).collect();
        println!("trust covers {} (a change asks again)", names.join(", "));
    }
    if !config.claude_settings.is_empty() {
        println!("read from Claude Code's settings:");
        for settings in &config.claude_settings {
            println!("  {}", settings.describe(&workspace));
        }
    }
    Ok(exit::OK)
}

/// What an untrusted project's files would change, and how to allow it.
fn ignored_note(config: &Config) -> String {
    let mut note = format!(
        "this project's files ask for settings that are ignored until you trust {}:\n",
        config.workspace.display()
    );
    for line in &config.ignored {
        note.push_str(&format!("  {line}\n"));
    }
    note
}

/// For one-shot runs and the gateway: says on stderr what was ignored and
/// how to trust the project.
pub(crate) fn warn_ignored(config: &Config) {
    if !config.ignored.is_empty() {
        eprint!("ferroclaw: {}", ignored_note(config));
        eprintln!("ferroclaw: run `ferroclaw trust` in this folder to apply them");
    }
}

/// For the REPL: asks once (at a terminal) whether to trust the project's
/// files; a yes is remembered and the config reloaded with them.
pub(crate) fn ask_if_untrusted(cli: &Cli, config: Config) -> Result<Config, SetupError> {
    if config.ignored.is_empty() {
        return Ok(config);
    }
    if !std::io::stdin().is_terminal() {
        warn_ignored(&config);
        return Ok(config);
    }
    let store = TrustStore::new(&config.home);
    let again = if store.changed_since_trusted(&config.workspace) {
        " (its files changed since you trusted it)"
    } else {
        ""
    };
    eprint!("{}", ignored_note(&config));
    eprint!("Trust this project{again} and apply them? [y/N] ");
    let _ = std::io::stderr().flush();
    let mut answer = String::new();
    let _ = std::io::stdin().lock().read_line(&mut answer);
    if !matches!(answer.trim().to_lowercase().as_str(), "y" | "yes") {
        eprintln!("not trusted; running without them (`ferroclaw trust` applies them later)");
        return Ok(config);
    }
    store.trust(&config.workspace).map_err(|e| SetupError::Other(e.to_string()))?;
    setup::load_config(cli)
}
