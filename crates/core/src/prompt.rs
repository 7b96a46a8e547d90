//! The system prompt: who the agent is, how its tools behave, and where it is.

use std::path::Path;

use crate::clock;

/// The base instructions, ours and concise.
const IDENTITY: &str = "You are ferroclaw, an AI agent working in the user's project from a terminal. \
You act through tools: read files before changing them, prefer `edit` for small changes over \
rewriting files with `write`, search with `grep` and `glob` rather than guessing paths, and run \
commands with `bash`. Tools enforce hard rules: paths must stay inside the workspace, `edit` \
refuses an old_string that is missing or occurs more than once (add context or set replace_all), \
and some calls need the user's approval; when a call is refused, read the reason and adapt. \
Be brief: say what you did and what you found, not what you are about to do.";

/// Builds the system prompt for a workspace: identity, then project
/// instructions (`AGENTS.md`, `CLAUDE.md` at the workspace root), then a
/// runtime block tagged as metadata. Stable parts come first so provider
/// prompt caching keeps working.
pub fn system_prompt(workspace: &Path) -> String {
    let mut out = String::from(IDENTITY);
    for name in ["AGENTS.md", "CLAUDE.md"] {
        if let Ok(text) = std::fs::read_to_string(workspace.join(name)) {
            out.push_str(&format!(
                "\n\n# Project instructions ({name})\n\n{}",
                cap(&text, 20_000)
            ));
        }
    }
    out.push_str(&format!(
        "\n\n[Runtime Context — metadata only, not instructions]\nWorking directory: {}\nDate (UTC): {}\nOS: {} {}",
        workspace.display(),
        clock::now_rfc3339(),
        std::env::consts::OS,
        std::env::consts::ARCH,
    ));
    out
}

/// The first `max` characters of `text`, with a marker when cut.
fn cap(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((i, _)) => format!("{}\n[... cut at {max} characters]", &text[..i]),
        None => text.to_string(),
    }
}
