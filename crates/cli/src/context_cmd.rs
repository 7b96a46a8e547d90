//! `ferroclaw context`: the system prompt as the model will get it, layer by
//! layer with each layer's size, so a user can see what costs what.

use std::io::IsTerminal;

use ferroclaw_core::compaction::estimate_tokens;
use ferroclaw_core::context::PromptProfile;
use ferroclaw_core::{Config, ContextBuilder};

use crate::exit;
use crate::setup::SetupError;

/// Prints the assembled prompt (exactly, with `raw`) and a size table.
pub fn run(config: &Config, raw: bool) -> Result<i32, SetupError> {
    // No model configured: show the full profile, which any key would get.
    let profile = config.model_spec().map_or(PromptProfile::Full, |s| config.prompt_profile(&s));
    let context = ContextBuilder::for_config(config).profile(profile).build();
    for w in &context.warnings {
        eprintln!("{w}");
    }
    if raw {
        println!("{}", context.system_prompt());
        return Ok(exit::OK);
    }
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
    let mut tools = ferroclaw_tools::builtin_tools();
    context.register_tools(&mut tools, None);
    if profile == PromptProfile::Lean {
        tools = ferroclaw_core::context::lean_tools(&tools);
    }
    println!("profile: {}", profile.name());
    let tool_tokens = estimate_tokens("", &[], &tools.specs());
    println!("{:<12} {:>8} {:>9}", "layer", "chars", "~tokens");
    let mut total = 0;
    for layer in &context.layers {
        total += layer.tokens();
        println!("{:<12} {:>8} {:>9}", layer.name, layer.text.len(), layer.tokens());
    }
    println!(
        "{:<12} {:>8} {:>9}   ({} built-in and context tools; MCP and agent tools not counted)",
        "tools",
        "",
        tool_tokens,
        tools.len()
    );
    println!("{:<12} {:>8} {:>9}", "total", "", total + tool_tokens);
    println!("{dim}(tokens estimated as characters / 4){plain}");
    Ok(exit::OK)
}
