//! The slash commands an editor offers (`available_commands_update`): ours
//! that work over ACP, and the skills of the project and home.

use std::path::Path;

use serde_json::{Value, json};

/// Built-in commands handled by `ferroclaw acp` itself.
pub const BUILTIN: [(&str, &str, Option<&str>); 3] = [
    ("usage", "tokens and cost of this session", None),
    ("todos", "the model's todo list", None),
    ("compact", "summarise the conversation to free context", Some("what to keep")),
];

/// Every command to offer in `workspace`: built-ins, then skills (a skill
/// runs as `/NAME ARGS`: the model loads it and follows it), then custom
/// commands.
pub fn available(
    workspace: &Path,
    home: &Path,
    custom: &[ferroclaw_core::commands::CustomCommand],
) -> Vec<Value> {
    let mut out: Vec<Value> =
        BUILTIN.iter().map(|(name, description, hint)| command(name, description, *hint)).collect();
    let skills = ferroclaw_core::skills::SkillSet::discover(workspace, home);
    for skill in skills.skills() {
        out.push(command(&skill.name, &skill.description, Some("what to do")));
    }
    for c in custom {
        if !out.iter().any(|o| o["name"] == c.name.as_str()) {
            out.push(command(&c.name, &c.description, c.argument_hint.as_deref()));
        }
    }
    out
}

fn command(name: &str, description: &str, hint: Option<&str>) -> Value {
    let mut c = json!({"name": name, "description": description});
    if let Some(hint) = hint {
        c["input"] = json!({"hint": hint});
    }
    c
}

/// A prompt naming a skill (`/NAME ARGS`), as the request the model gets.
pub fn skill_request(workspace: &Path, home: &Path, prompt: &str) -> Option<String> {
    let rest = prompt.strip_prefix('/')?;
    let (name, args) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
    let skills = ferroclaw_core::skills::SkillSet::discover(workspace, home);
    let skill = skills.get(name)?;
    Some(format!(
        "Use the skill `{}` (load it with load_skill) for this request: {}",
        skill.name,
        args.trim()
    ))
}
