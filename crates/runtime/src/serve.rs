//! What `ferroclaw mcp serve` offers an MCP client: no agent, the built-in
//! tools (and the code graph's, where the project has an index) the
//! permission mode lets run without asking, behind the same
//! permission gate an agent's calls pass; the skills as prompts; the memory
//! files and this project's session transcripts as resources.

use std::collections::BTreeMap;
use std::sync::Arc;

use ferroclaw_core::skills::{Skill, SkillSet};
use ferroclaw_core::{Config, Decision, PermissionMode, Permissions, SessionStore};
use ferroclaw_mcp::{Catalog, PromptDef, ResourceFolder, ToolServer};
use ferroclaw_tools::{ToolContext, ToolRegistry};
use serde_json::{Value, json};

use crate::RuntimeError;
use ferroclaw_tools::repo_file::{MAX_REPO_FILE_BYTES, read_repo_text};

/// The tool server for this workspace under `mode` (deny rules still apply).
pub fn tool_server(config: &Config, mode: PermissionMode) -> Result<ToolServer, RuntimeError> {
    let permissions = Arc::new(
        Permissions::new(mode, &config.file.permissions.allow, &config.file.permissions.deny)
            .and_then(|p| p.with_ask(&config.file.permissions.ask))
            .map_err(RuntimeError::Other)?
            .with_workspace(config.workspace.clone()),
    );
    let mut offered = ferroclaw_tools::builtin_tools();
    // The code graph's tools once the project has an index (and its edits
    // re-indexed), as for an agent.
    if ferroclaw_codegraph::db_path(&config.home, &config.workspace).is_file() {
        ferroclaw_codegraph::register_code_tools(&mut offered, &config.workspace, &config.home);
    }
    let mut tools = ToolRegistry::new();
    for name in offered.names() {
        if let Some(tool) = offered.get(name)
            && permissions.decide(name, tool.read_only(), &json!({})) == Decision::Allow
        {
            tools.register_arc(Arc::clone(tool));
        }
    }
    let read_only: BTreeMap<String, bool> = tools
        .names()
        .into_iter()
        .filter_map(|n| tools.get(n).map(|t| (n.to_string(), t.read_only())))
        .collect();
    let gate: ferroclaw_mcp::Gate = Arc::new(move |name: &str, input: &Value| {
        match permissions.decide(name, read_only.get(name).copied().unwrap_or(false), input) {
            Decision::Allow => Ok(()),
            Decision::Deny(reason) => Err(reason),
            Decision::Ask => Err(format!(
                "{name} needs approval, which nobody can give to an MCP client here; restart `ferroclaw mcp serve` with --yes or --permission-mode, or add an allow rule"
            )),
        }
    });
    let mut context = ToolContext::new(&config.workspace);
    context.allowed_dirs = config.file.allowed_dirs.clone().unwrap_or_default();
    Ok(ToolServer::new(tools, context, gate).with_catalog(catalog(config)))
}

/// The skills as prompts, memory files and session transcripts as resources.
pub(crate) fn catalog(config: &Config) -> Catalog {
    let skills = SkillSet::discover(&config.workspace, &config.home);
    let prompts = skills.skills().iter().filter(|s| s.unavailable.is_none()).map(prompt).collect();
    let own = ferroclaw_core::memory::workspace_dir(&config.home);
    let folder =
        |prefix: &str, dir: std::path::PathBuf, ext: &str, mime: &str, what: &str| ResourceFolder {
            uri_prefix: format!("ferroclaw://{prefix}/"),
            dir,
            extension: ext.into(),
            mime_type: mime.into(),
            description: what.into(),
        };
    let folders = vec![
        folder(
            "memory",
            own.join("memory"),
            ".md",
            "text/markdown",
            "ferroclaw's memory: MEMORY.md (facts), HISTORY.md (a log of past sessions)",
        ),
        folder(
            "profile",
            own.clone(),
            ".md",
            "text/markdown",
            "ferroclaw's own files: USER.md (the user's profile) and the bootstrap files",
        ),
        folder(
            "sessions",
            SessionStore::new(&config.home).project_dir(&config.workspace),
            ".jsonl",
            "application/jsonl",
            "this project's conversations, one JSON entry a line (see `ferroclaw sessions list`)",
        ),
    ];
    Catalog { prompts, folders }
}

/// A skill as a prompt: its instructions, with `$ARGUMENTS` filled from the
/// one argument its frontmatter's `argument-hint` describes (or a named
/// argument per entry of an `arguments` list).
fn prompt(skill: &Skill) -> PromptDef {
    let fields = read_repo_text(&skill.path, MAX_REPO_FILE_BYTES)
        .ok()
        .and_then(|text| ferroclaw_core::frontmatter::parse(&text).ok())
        .map(|doc| doc.fields)
        .unwrap_or_default();
    let hint = fields.get("argument-hint").and_then(|v| v.as_str()).map(str::to_string);
    let named: Vec<(String, String, bool)> = fields
        .get("arguments")
        .and_then(|v| v.as_array())
        .into_iter()
        .flatten()
        .filter_map(|v| match v {
            Value::String(name) => Some((name.clone(), String::new(), false)),
            Value::Object(o) => Some((
                o.get("name")?.as_str()?.to_string(),
                o.get("description").and_then(Value::as_str).unwrap_or_default().to_string(),
                o.get("required").and_then(Value::as_bool).unwrap_or(false),
            )),
            _ => None,
        })
        .collect();
    let arguments = if named.is_empty() {
        vec![(
            "arguments".to_string(),
            hint.unwrap_or_else(|| "what to apply the skill to (optional)".into()),
            false,
        )]
    } else {
        named
    };
    let mut body = skill.body.trim().to_string();
    if !body.contains('$') {
        body.push_str("\n\n$ARGUMENTS");
    }
    PromptDef { name: skill.name.clone(), description: skill.description.clone(), arguments, body }
}
