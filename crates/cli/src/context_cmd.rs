//! `ferroclaw context`: the system prompt as the model will get it, layer by
//! layer with each layer's size, and the tools offered, so a user can see
//! what costs what. The numbers come from the very request a new session's
//! first model call would send ([`ferroclaw_core::Agent::request`]), MCP
//! servers' tools included.

use std::io::IsTerminal;
use std::sync::Arc;

use ferroclaw_core::compaction::estimate_tokens;
use ferroclaw_core::context::PromptProfile;
use ferroclaw_core::{Config, ContextBuilder, NoOneToAsk};

use crate::exit;
use crate::setup::SetupError;
use ferroclaw_runtime::{Resume, Runtime, SessionOptions};

/// A keyless provider preset standing in for "no model configured" (the
/// request is only built, never sent).
const NO_MODEL_STAND_IN: &str = "ollama/none";

/// Prints the assembled prompt (exactly, with `raw`) and a size table.
pub(crate) async fn run(config: &Config, raw: bool) -> Result<i32, SetupError> {
    // No model configured: show the full profile, which any key would get.
    let profile = config.model_spec().map_or(PromptProfile::Full, |s| config.prompt_profile(&s));
    let context = ContextBuilder::for_config(config)
        .profile(profile)
        .repo_map(ferroclaw_runtime::repo_map_layer(config))
        .build();
    if raw {
        for w in &context.warnings {
            eprintln!("{w}");
        }
        for note in &context.notes {
            eprintln!("note: {note}");
        }
        println!("{}", context.system_prompt());
        return Ok(exit::OK);
    }
    // The agent a new session gets (it warns about skipped skills); its
    // session file is not kept. With no model configured, the request any
    // remote model would get (a keyless preset stands in; nothing is sent).
    let stand_in;
    let config = if config.model_spec().is_ok() {
        config
    } else {
        eprintln!("no model configured: showing the full prompt any remote model would get");
        stand_in = Config {
            file: ferroclaw_core::config::ConfigFile {
                model: Some(NO_MODEL_STAND_IN.into()),
                ..config.file.clone()
            },
            ..config.clone()
        };
        &stand_in
    };
    let runtime = Runtime::load(config.clone(), Default::default()).await?;
    let opened = runtime.open(Resume::New, Arc::new(NoOneToAsk), SessionOptions::default())?;
    let agent = opened.agent;
    let _ = std::fs::remove_file(agent.session().path());
    let request = agent.request();
    runtime.shutdown().await;

    let (dim, plain) =
        if std::io::stdout().is_terminal() { ("\x1b[2m", "\x1b[0m") } else { ("", "") };
    for layer in context.layers.iter().filter(|l| !l.text.is_empty()) {
        println!(
            "{dim}──── {} · ~{} tokens ────{plain}\n{}\n",
            layer.name,
            layer.tokens(),
            layer.text
        );
    }
    println!("profile: {}", profile.name());
    let mcp_tools = request.tools.iter().filter(|t| t.name.starts_with("mcp__")).count();
    let tool_chars: usize = request
        .tools
        .iter()
        .map(|t| t.name.len() + t.description.len() + t.input_schema.to_string().len())
        .sum();
    let tool_tokens = estimate_tokens("", &[], &request.tools);
    println!("{:<12} {:>8} {:>9}", "layer", "chars", "~tokens");
    for layer in &context.layers {
        println!("{:<12} {:>8} {:>9}", layer.name, layer.text.len(), layer.tokens());
    }
    println!(
        "{:<12} {:>8} {:>9}   ({} tools offered: {} built-in, {} MCP)",
        "tools",
        tool_chars,
        tool_tokens,
        request.tools.len(),
        request.tools.len() - mcp_tools,
        mcp_tools
    );
    let total = estimate_tokens(&request.system, &request.messages, &request.tools);
    println!("{:<12} {:>8} {:>9}", "total", "", total);
    println!(
        "{dim}(tokens estimated as characters / 4, from the request a new session sends){plain}"
    );
    // What the caps cut and the imports not followed.
    for note in &context.notes {
        println!("note: {note}");
    }
    Ok(exit::OK)
}
