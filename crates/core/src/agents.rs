//! Kinds of sub-agent: the built-in `general` and `explore`, and the user's
//! own from `~/.claude/agents/*.md` and `$FERROCLAW_HOME/agents/*.md` (user),
//! `.claude/agents/*.md` and `.agent/agents/*.md` (project), Claude Code
//! style: frontmatter `name`, `description`, `tools` (an allow-list, as a
//! YAML list or a comma-separated string; Claude Code's names such as `Read`
//! or `Bash` mean ferroclaw's `read` and `bash`), `model` (`PROVIDER/MODEL`,
//! or Claude Code's `haiku`/`sonnet`/`opus`/`inherit`, see
//! [`crate::model_alias`]); the body is the sub-agent's instructions.
//!
//! Until the project is trusted ([`crate::trust`]), its agent types get no
//! `model` (a sub-agent's conversation must not go to a provider the project
//! picks) and do not replace a built-in or the user's own type of the same name.

use std::path::Path;

use serde_json::Value;

use crate::frontmatter;

/// One kind of sub-agent.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentType {
    pub name: String,
    pub description: String,
    /// Tools it may use; `None` means all of the parent's (minus delegation).
    pub tools: Option<Vec<String>>,
    /// Only read-only tools (the built-in `explore`).
    pub read_only: bool,
    /// `PROVIDER/MODEL`, or a Claude name (`haiku`), to use instead of the
    /// parent's; `None` (or `inherit`) for the parent's.
    pub model: Option<String>,
    /// Instructions added to the sub-agent's system prompt.
    pub prompt: String,
}

/// The built-in kinds.
pub fn builtin() -> Vec<AgentType> {
    vec![
        AgentType {
            name: "general".into(),
            description: "a general-purpose agent with the parent's tools, for self-contained multi-step work".into(),
            tools: None,
            read_only: false,
            model: None,
            prompt: "Do the task completely, then report what you did and found.".into(),
        },
        AgentType {
            name: "explore".into(),
            description: "read-only: searches and reads code to answer a question, changes nothing".into(),
            tools: None,
            read_only: true,
            model: None,
            prompt: "Search and read to answer the question. You cannot change anything. Report the \
                     answer with the file paths and line numbers that support it."
                .into(),
        },
    ]
}

/// Built-in kinds, then the user's (`~/.claude/agents`, then
/// `$FERROCLAW_HOME/agents`), then the project's (`.claude/agents`, then
/// `.agent/agents`); a later one with the same name replaces an earlier one,
/// except that an untrusted project's (`trusted` false) replaces nothing and
/// gets no `model`. Returns the kinds and one warning per file that could not
/// be used (the file is skipped, never fatal).
pub fn load(workspace: &Path, home: &Path, trusted: bool) -> (Vec<AgentType>, Vec<String>) {
    let mut types = builtin();
    let mut warnings = Vec::new();
    let claude_user =
        crate::context::instructions::claude_home().map(|c| (c.join("agents"), false));
    let dirs = claude_user
        .into_iter()
        .chain([(home.join("agents"), false)])
        .chain(project_dirs(workspace).into_iter().map(|d| (d, true)));
    for (dir, in_project) in dirs {
        let untrusted = in_project && !trusted;
        for path in markdown_files(std::slice::from_ref(&dir)) {
            match parse(&path) {
                Ok(t) if untrusted && types.iter().any(|x| x.name == t.name) => {
                    warnings.push(format!(
                        "{}: not used until you trust the project (`ferroclaw trust`): it would replace the agent type {:?}",
                        path.display(),
                        t.name
                    ));
                }
                Ok(mut t) => {
                    if untrusted {
                        t.model = None;
                    }
                    match types.iter_mut().find(|x| x.name == t.name) {
                        Some(slot) => *slot = t,
                        None => types.push(t),
                    }
                }
                Err(e) => warnings.push(format!("{}: {e}", path.display())),
            }
        }
    }
    (types, warnings)
}

/// The project's agent folders (Claude Code's, then ferroclaw's).
fn project_dirs(workspace: &Path) -> [std::path::PathBuf; 2] {
    [workspace.join(".claude").join("agents"), workspace.join(".agent").join("agents")]
}

/// The `*.md` files in `dirs`, sorted (a folder that cannot be read has none).
fn markdown_files(dirs: &[std::path::PathBuf]) -> Vec<std::path::PathBuf> {
    let mut files: Vec<_> = dirs
        .iter()
        .flat_map(std::fs::read_dir)
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    files.sort();
    files
}

/// What an untrusted project's agent types ask for that waits for trust
/// (a `model`, replacing a built-in), one line each.
pub fn untrusted_notes(workspace: &Path) -> Vec<String> {
    let builtins = builtin();
    let mut notes = Vec::new();
    for path in markdown_files(&project_dirs(workspace)) {
        let Ok(t) = parse(&path) else { continue };
        let mut what = Vec::new();
        if let Some(model) = &t.model {
            what.push(format!("model {model}"));
        }
        if builtins.iter().any(|b| b.name == t.name) {
            what.push(format!("replaces the built-in {:?}", t.name));
        }
        if !what.is_empty() {
            let rel = path.strip_prefix(workspace).unwrap_or(&path).display().to_string();
            notes.push(format!("agent type {} in {rel}: {}", t.name, what.join("; ")));
        }
    }
    notes
}

/// Reads one agent file.
fn parse(path: &Path) -> Result<AgentType, String> {
    let max = ferroclaw_tools::repo_file::MAX_REPO_FILE_BYTES;
    let text = ferroclaw_tools::repo_file::read_repo_text(path, max).map_err(|e| e.to_string())?;
    let doc = frontmatter::parse(&text).map_err(|e| e.to_string())?;
    let stem = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    let field = |k: &str| {
        doc.fields.get(k).and_then(Value::as_str).map(str::trim).filter(|s| !s.is_empty())
    };
    let name = field("name").map_or(stem, str::to_string);
    let description =
        field("description").ok_or("the frontmatter needs a description")?.to_string();
    let tools = match doc.fields.get("tools") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => {
            Some(s.split(',').map(str::trim).filter(|t| !t.is_empty()).map(tool_name).collect())
        }
        Some(Value::Array(list)) => Some(
            list.iter()
                .map(|v| v.as_str().map(tool_name).ok_or("tools must be names"))
                .collect::<Result<Vec<_>, _>>()?,
        ),
        Some(_) => {
            return Err("tools must be a list of tool names or a comma-separated string".into());
        }
    };
    if doc.body.trim().is_empty() {
        return Err("the body (the agent's instructions) is empty".into());
    }
    Ok(AgentType {
        name,
        description,
        tools,
        read_only: false,
        model: field("model").filter(|m| *m != "inherit").map(str::to_string),
        prompt: doc.body.trim().to_string(),
    })
}

/// Ferroclaw's name for a tool a Claude Code agent file lists (`Read` is
/// `read`, `Task`/`Agent` is `task`); other names stay as written.
fn tool_name(name: &str) -> String {
    match name.trim() {
        "Task" | "Agent" => "task".into(),
        "TodoWrite" => "todo_write".into(),
        "WebSearch" => "web_search".into(),
        other => ferroclaw_tools::canonical_tool_name(other).to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn project_agents_are_read_with_their_tool_allow_list_and_bad_ones_warned() {
        let ws = tempfile::tempdir().unwrap();
        let home = tempfile::tempdir().unwrap();
        let dir = ws.path().join(".agent/agents");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("reviewer.md"),
            "---\nname: reviewer\ndescription: reviews diffs\ntools: read, grep\n---\nReview carefully.\n",
        )
        .unwrap();
        std::fs::write(dir.join("broken.md"), "---\nname: broken\n---\nno description\n").unwrap();
        let (types, warnings) = load(ws.path(), home.path(), true);
        let r = types.iter().find(|t| t.name == "reviewer").unwrap();
        assert_eq!(r.tools.as_deref(), Some(&["read".to_string(), "grep".to_string()][..]));
        assert_eq!(r.prompt, "Review carefully.");
        assert!(types.iter().any(|t| t.name == "explore" && t.read_only));
        assert_eq!(warnings.len(), 1);
        assert!(
            warnings[0].contains("broken.md") && warnings[0].contains("description"),
            "{warnings:?}"
        );
    }

    #[test]
    fn an_untrusted_projects_explore_neither_replaces_the_built_in_nor_picks_a_model() {
        let ws = tempfile::tempdir().unwrap();
        let home = tempfile::tempdir().unwrap();
        let dir = ws.path().join(".agent/agents");
        std::fs::create_dir_all(&dir).unwrap();
        let explore =
            "---\nname: explore\ndescription: d\nmodel: ollama/llama3\n---\nSend everything.\n";
        std::fs::write(dir.join("explore.md"), explore).unwrap();
        std::fs::write(dir.join("helper.md"), "---\ndescription: d\nmodel: ollama/x\n---\nHelp.\n")
            .unwrap();

        let (types, warnings) = load(ws.path(), home.path(), false);
        let e = types.iter().find(|t| t.name == "explore").unwrap();
        assert!(e.read_only && e.model.is_none() && !e.prompt.contains("Send"), "{e:?}");
        assert!(warnings.iter().any(|w| w.contains("ferroclaw trust")), "{warnings:?}");
        let h = types.iter().find(|t| t.name == "helper").unwrap();
        assert_eq!(h.model, None, "no provider picked by an untrusted project");
        let notes = untrusted_notes(ws.path()).join("\n");
        assert!(notes.contains("ollama/llama3") && notes.contains("built-in"), "{notes}");

        let (types, _) = load(ws.path(), home.path(), true);
        let e = types.iter().find(|t| t.name == "explore").unwrap();
        assert_eq!(e.model.as_deref(), Some("ollama/llama3"), "trusted, it applies");
    }

    #[test]
    fn claude_code_agents_are_read_with_their_tools_in_ferroclaws_names() {
        let ws = tempfile::tempdir().unwrap();
        let home = tempfile::tempdir().unwrap();
        let dir = ws.path().join(".claude/agents");
        std::fs::create_dir_all(&dir).unwrap();
        let text = "---\nname: code-reviewer\ndescription: Reviews code\ntools: Read, Grep, Glob, Bash\nmodel: haiku\n---\nYou review code.\n";
        std::fs::write(dir.join("rev.md"), text).unwrap();
        let same = "---\nname: same\ndescription: d\nmodel: inherit\n---\nx\n";
        std::fs::write(dir.join("same.md"), same).unwrap();
        let (types, warnings) = load(ws.path(), home.path(), true);
        assert!(warnings.is_empty(), "{warnings:?}");
        let r = types.iter().find(|t| t.name == "code-reviewer").unwrap();
        assert_eq!(r.tools.clone().unwrap(), ["read", "grep", "glob", "bash"]);
        assert_eq!(r.model.as_deref(), Some("haiku"));
        assert_eq!(types.iter().find(|t| t.name == "same").unwrap().model, None);
    }
}
