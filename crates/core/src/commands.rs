//! Custom slash commands, as Claude Code has them: Markdown files in
//! `.agent/commands/`, `.claude/commands/` and `$FERROCLAW_HOME/commands/`
//! (a subfolder makes a namespace: `frontend/test.md` is `/frontend:test`).
//! Frontmatter may give `description`, `argument-hint`, `allowed-tools`
//! (granted for that request only), `model` (`PROVIDER/MODEL`, or Claude
//! Code's `haiku`/`sonnet`/`opus`/`claude-*`, see [`crate::model_alias`]) and
//! `arguments` (names for the words typed); the body may use `$ARGUMENTS`,
//! `$ARGUMENTS[0]`, `$0`, `$name` (see [`Arguments`]), `@file` mentions and
//! `` !`cmd` `` (the command's output, run only if the permission rules allow
//! it or the user says yes: see [`crate::Agent::command_prompt`]). A body
//! with no placeholder gets the arguments appended, as Claude Code does.
//!
//! ```
//! use ferroclaw_core::commands::CustomCommand;
//! let cmd = CustomCommand::parse("fix", "---\ndescription: Fix an issue\narguments: [issue]\n---\nFix issue #$issue: $ARGUMENTS\n").unwrap();
//! assert_eq!(cmd.description, "Fix an issue");
//! assert_eq!(cmd.expand_arguments("42 in the parser"), "Fix issue #42: 42 in the parser\n");
//! let plain = CustomCommand::parse("review", "Review the diff.").unwrap();
//! assert_eq!(plain.expand_arguments("src/"), "Review the diff.\n\nARGUMENTS: src/");
//! ```

use std::path::{Path, PathBuf};

use ferroclaw_tools::repo_file::{MAX_REPO_FILE_BYTES, read_repo_text};
use serde_json::Value;

use crate::frontmatter;

mod arguments;
pub use arguments::Arguments;

/// Deepest subfolder read for namespaces.
const MAX_DEPTH: usize = 3;

/// One custom command.
#[derive(Debug, Clone, PartialEq)]
pub struct CustomCommand {
    /// As typed after `/`: `review`, `frontend:test`.
    pub name: String,
    /// Frontmatter `description`, else the body's first line.
    pub description: String,
    /// Frontmatter `argument-hint` (`[issue-number]`).
    pub argument_hint: Option<String>,
    /// Permission rules granted while the command's request runs
    /// (`Bash(git add:*)`, `Read`); empty for an untrusted project's command.
    pub allowed_tools: Vec<String>,
    /// `PROVIDER/MODEL`, or a Claude name (`haiku`, `claude-sonnet-4-0`),
    /// for the command's request.
    pub model: Option<String>,
    /// Frontmatter `arguments`: names for the typed words, in order
    /// (`$issue` is the first word when the list starts with `issue`).
    pub arguments: Vec<String>,
    pub body: String,
    /// The file, for messages.
    pub path: PathBuf,
}

impl CustomCommand {
    /// Reads a command file's text.
    pub fn parse(name: &str, text: &str) -> Result<CustomCommand, String> {
        let doc = match frontmatter::parse(text) {
            Ok(doc) => doc,
            // Claude Code's own examples (`argument-hint: [pr] [priority]`)
            // are not YAML; read such blocks as plain `key: value` lines.
            Err(frontmatter::FrontmatterError::Yaml(e)) => plain_frontmatter(text).ok_or(e)?,
            Err(e) => return Err(e.to_string()),
        };
        let field = |k: &str| match doc.fields.get(k)? {
            Value::String(s) => Some(s.clone()),
            // `argument-hint: [message]` is a YAML list: shown as written.
            Value::Array(items) => Some(
                items
                    .iter()
                    .map(|v| {
                        format!("[{}]", v.as_str().map_or_else(|| v.to_string(), str::to_string))
                    })
                    .collect::<Vec<_>>()
                    .join(" "),
            ),
            Value::Null => None,
            other => Some(other.to_string()),
        };
        let allowed_tools = match doc.fields.get("allowed-tools") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::String(s)) => split_tools(s),
            Some(Value::Array(items)) => {
                items.iter().filter_map(Value::as_str).map(|s| s.trim().to_string()).collect()
            }
            Some(_) => return Err("allowed-tools must be a string or a list".into()),
        };
        for rule in &allowed_tools {
            crate::permission::Rule::parse(rule).map_err(|e| format!("allowed-tools: {e}"))?;
        }
        let arguments = match doc.fields.get("arguments") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::String(s)) => s
                .split(|c: char| c == ',' || c.is_whitespace())
                .filter(|w| !w.is_empty())
                .map(str::to_string)
                .collect(),
            Some(Value::Array(items)) => items
                .iter()
                .map(|v| v.as_str().map(|s| s.trim().to_string()).ok_or("arguments must be names"))
                .collect::<Result<_, _>>()?,
            Some(_) => return Err("arguments must be a list of names".into()),
        };
        let first_line = doc.body.lines().map(str::trim).find(|l| !l.is_empty()).unwrap_or("");
        Ok(CustomCommand {
            name: name.to_string(),
            description: field("description").unwrap_or_else(|| first_line.to_string()),
            argument_hint: field("argument-hint"),
            allowed_tools,
            model: field("model"),
            arguments,
            body: doc.body,
            path: PathBuf::new(),
        })
    }

    /// The body for `args` (everything typed after the name): placeholders
    /// filled in, or the arguments appended when there is none.
    pub fn expand_arguments(&self, args: &str) -> String {
        Arguments::new(args, &self.arguments).apply(&self.body)
    }
}

/// Every custom command for `workspace`, first found wins by name:
/// `.agent/commands`, `.claude/commands`, `$FERROCLAW_HOME/commands`,
/// `~/.claude/commands`. A project's commands still work in an untrusted
/// workspace (`trusted` false, also when it had nothing to trust), but their
/// `allowed-tools` and `model` are not used and their `@file`
/// mentions of files outside the project (`@~/.ssh/id_rsa`) include nothing. Returns the
/// commands (by name) and the files that could not be read.
pub fn load(workspace: &Path, home: &Path, trusted: bool) -> (Vec<CustomCommand>, Vec<String>) {
    let claude_home = std::env::var_os("CLAUDE_CONFIG_DIR")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".claude")));
    let user_roots: Vec<PathBuf> = std::iter::once(home.join("commands"))
        .chain(claude_home.map(|c| c.join("commands")))
        .collect();
    // Run from the home folder, `~/.claude/commands` is the user's own.
    let users = |p: &Path| {
        let p = std::fs::canonicalize(p).ok();
        p.is_some() && user_roots.iter().any(|u| std::fs::canonicalize(u).ok() == p)
    };
    let mut roots: Vec<(PathBuf, bool)> =
        project_roots(workspace).into_iter().map(|r| (r.clone(), !users(&r))).collect();
    roots.extend(user_roots.iter().map(|r| (r.clone(), false)));
    let mut commands: Vec<CustomCommand> = Vec::new();
    let mut problems = Vec::new();
    for (root, in_project) in roots {
        let mut files = Vec::new();
        collect(&root, &root, 0, &mut files);
        files.sort();
        for (name, path) in files {
            if commands.iter().any(|c| c.name == name) {
                continue;
            }
            let parsed = read_repo_text(&path, MAX_REPO_FILE_BYTES)
                .map_err(|e| e.to_string())
                .and_then(|text| CustomCommand::parse(&name, &text));
            match parsed {
                Ok(mut cmd) => {
                    if in_project && !trusted {
                        cmd.allowed_tools.clear();
                        // Nor may it send the conversation to another of
                        // the user's providers (away from a local model).
                        cmd.model = None;
                        cmd.body = crate::mentions::without_outside_mentions(&cmd.body);
                    }
                    cmd.path = path;
                    commands.push(cmd);
                }
                Err(e) => problems.push(format!("{}: {e}", path.display())),
            }
        }
    }
    commands.sort_by(|a, b| a.name.cmp(&b.name));
    (commands, problems)
}

/// The project's command folders.
fn project_roots(workspace: &Path) -> [PathBuf; 2] {
    [workspace.join(".agent").join("commands"), workspace.join(".claude").join("commands")]
}

/// What an untrusted project's commands ask for that waits for trust
/// (`/deploy in .claude/commands/deploy.md: allowed-tools Bash`), one line each.
pub fn untrusted_notes(workspace: &Path) -> Vec<String> {
    let mut notes = Vec::new();
    for root in project_roots(workspace) {
        let mut files = Vec::new();
        collect(&root, &root, 0, &mut files);
        files.sort();
        for (name, path) in files {
            let Ok(text) = read_repo_text(&path, MAX_REPO_FILE_BYTES) else { continue };
            let Ok(cmd) = CustomCommand::parse(&name, &text) else { continue };
            let mut what = Vec::new();
            if !cmd.allowed_tools.is_empty() {
                what.push(format!("allowed-tools {}", cmd.allowed_tools.join(", ")));
            }
            if let Some(model) = &cmd.model {
                what.push(format!("model {model}"));
            }
            if !what.is_empty() {
                let rel = path.strip_prefix(workspace).unwrap_or(&path).display().to_string();
                notes.push(format!("/{name} in {rel}: {}", what.join("; ")));
            }
        }
    }
    notes
}

/// The command a typed line calls (`/review src` -> `review`, `"src"`), if any.
pub fn find<'c, 'l>(
    commands: &'c [CustomCommand],
    line: &'l str,
) -> Option<(&'c CustomCommand, &'l str)> {
    let rest = line.trim_start().strip_prefix('/')?;
    let (name, args) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
    commands.iter().find(|c| c.name == name).map(|c| (c, args.trim()))
}

/// The `` !`cmd` `` spans of a text, as (span, command).
pub fn shell_spans(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find("!`") {
        let after = &rest[i + 2..];
        let Some(end) = after.find('`') else { break };
        let command = &after[..end];
        if !command.trim().is_empty() {
            out.push((format!("!`{command}`"), command.trim().to_string()));
        }
        rest = &after[end + 1..];
    }
    out
}

/// A frontmatter block read as `key: value` lines, when it is not YAML.
fn plain_frontmatter(text: &str) -> Option<frontmatter::Document> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut lines = text.split_inclusive('\n');
    if lines.next()?.trim_end() != "---" {
        return None;
    }
    let mut fields = serde_json::Map::new();
    let mut consumed = text.split_inclusive('\n').next()?.len();
    for line in lines {
        consumed += line.len();
        if line.trim_end() == "---" {
            let body = text[consumed..].trim_start_matches(['\n', '\r']).to_string();
            return Some(frontmatter::Document { fields, body, has_frontmatter: true });
        }
        if let Some((key, value)) = line.split_once(':') {
            fields.insert(key.trim().to_string(), Value::String(value.trim().to_string()));
        }
    }
    None
}

/// `*.md` files under `dir`, named `sub:dir:stem`.
fn collect(root: &Path, dir: &Path, depth: usize, out: &mut Vec<(String, PathBuf)>) {
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() && depth < MAX_DEPTH {
            collect(root, &path, depth + 1, out);
        } else if path.extension().is_some_and(|x| x == "md") {
            let rel = path.strip_prefix(root).unwrap_or(&path).with_extension("");
            let name: Vec<String> =
                rel.components().map(|c| c.as_os_str().to_string_lossy().into_owned()).collect();
            out.push((name.join(":"), path));
        }
    }
}

/// `Bash(git add:*), Read` -> two rules (commas inside parentheses stay).
fn split_tools(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut depth = 0;
    let mut current = String::new();
    for c in text.chars() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(std::mem::take(&mut current));
                continue;
            }
            _ => {}
        }
        current.push(c);
    }
    out.push(current);
    out.into_iter().map(|s| s.trim().to_string()).filter(|s| !s.is_empty()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_fill_dollar_arguments_and_positions_counted_from_zero() {
        let cmd = CustomCommand::parse("x", "Review $0 for $1 ($ARGUMENTS), cost $5$\n").unwrap();
        assert_eq!(
            cmd.expand_arguments("src/lib.rs \"security bugs\""),
            "Review src/lib.rs for security bugs (src/lib.rs \"security bugs\"), cost $5$\n"
        );
    }

    #[test]
    fn frontmatter_gives_hint_tools_and_model_and_the_first_line_describes_otherwise() {
        let text = "---\nargument-hint: [file]\nallowed-tools: Bash(git add:*), Bash(git status:*), Read\nmodel: anthropic/claude-haiku\n---\n\nCommit the work.\n";
        let cmd = CustomCommand::parse("commit", text).unwrap();
        assert_eq!(cmd.description, "Commit the work.");
        assert_eq!(cmd.argument_hint.as_deref(), Some("[file]"));
        assert_eq!(cmd.allowed_tools, ["Bash(git add:*)", "Bash(git status:*)", "Read"]);
        assert_eq!(cmd.model.as_deref(), Some("anthropic/claude-haiku"));
        assert!(CustomCommand::parse("bad", "---\nallowed-tools: Bash(\n---\nx").is_err());
    }

    #[test]
    fn claude_codes_argument_hints_read_whether_or_not_they_are_yaml() {
        let list = CustomCommand::parse("a", "---\nargument-hint: [message]\n---\nx").unwrap();
        assert_eq!(list.argument_hint.as_deref(), Some("[message]"));
        let text =
            "---\nargument-hint: [pr-number] [priority]\ndescription: Review\n---\nReview $1\n";
        let plain = CustomCommand::parse("b", text).unwrap();
        assert_eq!(plain.argument_hint.as_deref(), Some("[pr-number] [priority]"));
        assert_eq!((plain.description.as_str(), plain.body.as_str()), ("Review", "Review $1\n"));
    }

    #[test]
    fn folders_namespace_commands_and_the_project_wins_but_untrusted_gets_no_tools() {
        let ws = tempfile::tempdir().unwrap();
        let home = tempfile::tempdir().unwrap();
        let write = |p: PathBuf, t: &str| {
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, t).unwrap();
        };
        write(ws.path().join(".claude/commands/frontend/test.md"), "Run the tests\n");
        write(
            ws.path().join(".agent/commands/deploy.md"),
            "---\nallowed-tools: Bash\nmodel: openrouter/some-model\n---\nProject deploy\n",
        );
        write(home.path().join("commands/deploy.md"), "Home deploy\n");
        write(home.path().join("commands/notes.txt"), "not a command");
        let (cmds, problems) = load(ws.path(), home.path(), false);
        assert!(problems.is_empty(), "{problems:?}");
        let names: Vec<&str> = cmds.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["deploy", "frontend:test"]);
        assert_eq!(cmds[0].description, "Project deploy");
        assert!(cmds[0].allowed_tools.is_empty(), "an untrusted project grants nothing");
        assert_eq!(cmds[0].model, None, "nor picks the provider the conversation goes to");
        let (cmds, _) = load(ws.path(), home.path(), true);
        assert_eq!(cmds[0].allowed_tools, ["Bash"]);
        assert_eq!(cmds[0].model.as_deref(), Some("openrouter/some-model"));
        assert_eq!(
            find(&cmds, "/frontend:test now").map(|(c, a)| (c.name.as_str(), a)),
            Some(("frontend:test", "now"))
        );
        assert!(find(&cmds, "/nope").is_none());
    }

    #[test]
    fn an_untrusted_projects_command_includes_no_file_from_outside_the_project() {
        let ws = tempfile::tempdir().unwrap();
        let home = tempfile::tempdir().unwrap();
        let dir = ws.path().join(".claude/commands");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("review.md"), "Review @src/a.rs with @~/.ssh/id_rsa\n").unwrap();
        std::fs::create_dir_all(home.path().join("commands")).unwrap();
        std::fs::write(home.path().join("commands/mine.md"), "Use @~/notes.md\n").unwrap();
        let (cmds, _) = load(ws.path(), home.path(), false);
        assert_eq!(cmds[1].body, "Review @src/a.rs with ~/.ssh/id_rsa\n");
        assert_eq!(cmds[0].body, "Use @~/notes.md\n", "the user's own commands are theirs");
        let (cmds, _) = load(ws.path(), home.path(), true);
        assert_eq!(cmds[1].body, "Review @src/a.rs with @~/.ssh/id_rsa\n");
    }

    #[test]
    fn shell_spans_are_found() {
        assert_eq!(
            shell_spans("Status: !`git status` and !`git diff HEAD` done, `plain`"),
            vec![
                ("!`git status`".to_string(), "git status".to_string()),
                ("!`git diff HEAD`".to_string(), "git diff HEAD".to_string())
            ]
        );
    }
}
