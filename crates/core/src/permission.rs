//! Whether a tool call may run: the permission mode, allow/deny rules, and
//! what the user approved during the session. Deny always wins.
//!
//! Rules apply to what a call does, not to how it is spelt: tool aliases
//! resolve first (`exec` is `bash`), a `bash` command is parsed into every
//! simple command it would run and each must be allowed, and file paths are
//! resolved (`sub/../.env` is `.env`) before rules see them. Some files are
//! never written by the agent in any mode ([`protected`]).

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};
use serde_json::Value;

mod ask;
mod command;
#[cfg(test)]
mod everyday;
mod open;
mod paths;
mod rule;

use command::command_allowed;

use paths::{GIT_HOOKS_MARK, protected_from};
pub use paths::{Resolved, protected, resolve};
pub use rule::{EDIT_TOOLS, READ_FAMILY, Rule, command_prefix, wildcard};

/// How freely tools run, like Claude Code's modes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PermissionMode {
    /// Read-only tools run freely; edits and commands ask.
    #[default]
    Default,
    /// File edits in the workspace run freely; commands ask.
    AcceptEdits,
    /// Nothing asks (`--yes`); deny rules still apply.
    Bypass,
    /// Only read-only tools run; the model must present a plan.
    Plan,
}

impl std::str::FromStr for PermissionMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "default" => Ok(Self::Default),
            "accept-edits" | "acceptEdits" => Ok(Self::AcceptEdits),
            "bypass" | "bypassPermissions" => Ok(Self::Bypass),
            "plan" => Ok(Self::Plan),
            other => Err(format!(
                "unknown permission mode {other:?}; valid: default, accept-edits, bypass, plan"
            )),
        }
    }
}

/// Tools that change only the agent's own state (its memory files, which
/// refuse secrets and injected instructions; its todo list; the task board):
/// they run without asking.
pub const SELF_STATE_TOOLS: &[&str] = &[
    "memory",
    "skill_manage",
    "todo_write",
    "task_create",
    "task_update",
    "task_list",
    "task_get",
    "task_bind_worktree",
];

/// Read-only tools that still reach out (a URL can carry data away): they
/// ask in default mode like tools that change things.
pub const OUTWARD_TOOLS: &[&str] = &["web_fetch"];

/// Programs that write the files named in their arguments; a protected file
/// among them is refused.
const WRITING_PROGRAMS: &[&str] = &[
    "tee", "cp", "mv", "ln", "install", "touch", "truncate", "rm", "chmod", "chown", "rsync",
    "sed", "perl", "dd", "patch", "unlink", "shred",
];

/// The verdict on one call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    Allow,
    /// Refused; the reason goes to the model.
    Deny(String),
    /// The user must approve.
    Ask,
}

/// What a rule pattern is matched against: the command, path, url or pattern.
pub fn call_subject(input: &Value) -> Option<&str> {
    ["command", "path", "file_path", "url", "pattern"]
        .iter()
        .find_map(|k| input.get(k).and_then(Value::as_str))
}

/// The file path a file tool's call names (`path` or `file_path`); `.` for
/// tools that default to the workspace.
fn call_path<'a>(tool: &str, input: &'a Value) -> Option<&'a str> {
    let given = ["path", "file_path"].iter().find_map(|k| input.get(k).and_then(Value::as_str));
    match given {
        Some(p) => Some(p),
        None if matches!(tool, "grep" | "glob" | "list_dir") => Some("."),
        None => None,
    }
}

/// The simple commands of a `bash` call, as the approval prompt shows them
/// (one line each); `None` lines mark what the parser could not understand.
pub fn parsed_commands(command: &str) -> Vec<String> {
    let script = ferroclaw_tools::shell::parse(command);
    let mut lines: Vec<String> =
        script.commands.iter().map(ferroclaw_tools::shell::SimpleCommand::text).collect();
    for w in script.file_writes() {
        lines.push(format!("writes {}", w.target.text));
    }
    for u in &script.unknown {
        lines.push(format!("not understood: {u}"));
    }
    lines
}

/// The permission state of a session.
#[derive(Debug)]
pub struct Permissions {
    /// The mode in force; plan mode switches it when a plan is approved.
    mode: Mutex<PermissionMode>,
    allow: Vec<Rule>,
    deny: Vec<Rule>,
    /// Calls that ask even where an allow rule or the mode would allow.
    ask: Vec<Rule>,
    /// Rules the user approved with "always" during this session.
    session_allow: Mutex<Vec<Rule>>,
    /// Rules granted for the request running now (a custom command's
    /// `allowed-tools`), dropped when it ends.
    turn_allow: Mutex<Vec<Rule>>,
    /// Paths in rules are relative to it.
    workspace: PathBuf,
}

impl Permissions {
    /// Builds the state from a mode and rule texts; a bad rule is an error
    /// naming it. Paths are taken relative to the current folder until
    /// [`Permissions::with_workspace`] says otherwise.
    pub fn new(mode: PermissionMode, allow: &[String], deny: &[String]) -> Result<Self, String> {
        let parse = |v: &[String]| v.iter().map(|r| Rule::parse(r)).collect::<Result<Vec<_>, _>>();
        Ok(Self {
            mode: Mutex::new(mode),
            allow: parse(allow)?,
            deny: parse(deny)?,
            ask: Vec::new(),
            session_allow: Mutex::new(Vec::new()),
            turn_allow: Mutex::new(Vec::new()),
            workspace: std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/")),
        })
    }

    /// The same state with paths taken relative to `workspace`.
    pub fn with_workspace(mut self, workspace: impl Into<PathBuf>) -> Self {
        self.workspace = workspace.into();
        self
    }

    /// The mode in force.
    pub fn mode(&self) -> PermissionMode {
        *self.mode.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Switches the mode (plan approved, `/plan` in the REPL).
    pub fn set_mode(&self, mode: PermissionMode) {
        *self.mode.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = mode;
    }

    /// Decides a call of `tool` (read-only or not) with `input`. The tool
    /// name is resolved first (`exec` is `bash`, `Read` is `read`), so rules
    /// and answers apply to the tool, whatever it was called.
    pub fn decide(&self, tool: &str, read_only: bool, input: &Value) -> Decision {
        let tool = ferroclaw_tools::canonical_tool_name(tool);
        let mode = self.mode();
        let mut session = self.session_allow.lock().map(|r| r.clone()).unwrap_or_default();
        session.extend(self.turn_allow.lock().map(|r| r.clone()).unwrap_or_default());
        let allow: Vec<&Rule> = self.allow.iter().chain(session.iter()).collect();
        // A command a bash deny rule cannot judge (its program computed, or
        // read by a shell from stdin) is asked, even in bypass mode, unless
        // an allow rule names it.
        let mut unjudged = false;
        let allowed = match tool {
            // `worktree_run` runs its command through the bash tool: the
            // same rules judge it.
            "bash" | "worktree_run" => {
                let command = input.get("command").and_then(Value::as_str).unwrap_or("");
                unjudged = self.deny.iter().any(|r| r.covers_tool("bash") && r.pattern.is_some())
                    && hides_commands(&ferroclaw_tools::shell::parse(command));
                match self.decide_command(command, &allow) {
                    Err(reason) => return Decision::Deny(reason),
                    Ok(allowed) => allowed,
                }
            }
            _ if call_path(tool, input).is_some() && is_file_tool(tool) => {
                let given = call_path(tool, input).unwrap_or(".");
                match self.decide_path(tool, given, &allow) {
                    Err(reason) => return Decision::Deny(reason),
                    Ok(allowed) => allowed,
                }
            }
            "web_fetch" => {
                let url = input.get("url").and_then(Value::as_str).unwrap_or("").trim();
                let host = ferroclaw_tools::ssrf::url_host(url);
                let host = host.as_deref();
                if let Some(rule) =
                    self.deny.iter().find(|r| r.covers_tool(tool) && r.matches_url(url, host))
                {
                    return Decision::Deny(format!("denied by the rule {rule} in config"));
                }
                allow.iter().any(|r| r.covers_tool(tool) && r.matches_url(url, host))
            }
            _ => {
                let subject = call_subject(input);
                let matches = |r: &Rule| {
                    r.covers_tool(tool)
                        && (r.pattern.is_none()
                            || subject
                                .is_some_and(|s| r.matches_command(s.trim_start_matches("./"))))
                };
                if let Some(rule) = self.deny.iter().find(|r| matches(r)) {
                    return Decision::Deny(format!("denied by the rule {rule} in config"));
                }
                allow.iter().any(|r| matches(r))
            }
        };
        if mode == PermissionMode::Plan && !read_only {
            return Decision::Deny(format!(
                "plan mode: only read-only tools may run, {tool} changes things; present your plan first"
            ));
        }
        if self.asks(tool, input) {
            return Decision::Ask;
        }
        if unjudged && !allowed {
            return Decision::Ask;
        }
        let free =
            (read_only && !OUTWARD_TOOLS.contains(&tool)) || SELF_STATE_TOOLS.contains(&tool);
        if free || allowed {
            return Decision::Allow;
        }
        match mode {
            PermissionMode::Bypass => Decision::Allow,
            PermissionMode::AcceptEdits if EDIT_TOOLS.contains(&tool) => Decision::Allow,
            _ => Decision::Ask,
        }
    }

    /// A `bash` command: `Err` when a deny rule or a protected file refuses
    /// it; `Ok(true)` when every simple command matches an allow rule, every
    /// file it writes is allowed, and the parser understood all of it.
    fn decide_command(&self, command: &str, allow: &[&Rule]) -> Result<bool, String> {
        let script = ferroclaw_tools::shell::parse(command);
        let denied = |text: &str| {
            self.deny.iter().find(|r| r.covers_tool("bash") && r.matches_command(text))
        };
        if let Some(rule) = denied(command.trim()) {
            return Err(format!("denied by the rule {rule} in config"));
        }
        for cmd in &script.commands {
            // The whole, what each wrapper runs, and every split point after a
            // wrapper whose options the table does not know.
            let mut texts = vec![cmd.text()];
            for words in cmd.possible_commands() {
                let words: Vec<&str> = words.iter().map(|w| w.text.as_str()).collect();
                let mut bare = words.clone();
                if let Some(first) = bare.first_mut() {
                    *first = ferroclaw_tools::shell::basename(first);
                }
                texts.push(words.join(" "));
                texts.push(bare.join(" "));
            }
            for text in texts {
                if let Some(rule) = denied(&text) {
                    return Err(format!(
                        "denied by the rule {rule} in config (it covers `{}`)",
                        cmd.text()
                    ));
                }
            }
        }
        // Folders the command may `cd` into: a protected file is looked for
        // from each (`cd .git && echo x > config`). A `cd` to a folder named
        // at run time (`cd "$d"`) may land in any of them, so protected files
        // are looked for from every folder that holds some.
        let mut bases = vec![self.workspace.clone()];
        for cmd in &script.commands {
            if !matches!(cmd.program(), Some("cd" | "pushd")) {
                continue;
            }
            let Some(dir) = cmd.unwrapped().iter().skip(1).find(|w| !w.text.starts_with('-'))
            else {
                continue;
            };
            if dir.dynamic {
                for folder in ferroclaw_tools::PROTECTED_FOLDERS {
                    bases.push(self.workspace.join(folder));
                }
                // Any name in `.git/hooks` is protected; after a `cd` named
                // at run time, refuse the names git runs as hooks.
                bases.push(PathBuf::from(GIT_HOOKS_MARK));
            } else if let Some(last) = bases.last() {
                let next = resolve(last, &dir.text).abs;
                bases.push(next);
            }
        }
        for cmd in &script.commands {
            self.check_writing_program(cmd, &bases)?;
        }
        // What is written: redirections and the options that write (`sort -o
        // F`, `git log --output=F`, `sed -i`), each needing what a write
        // needs; and the files a program writes as its purpose (`touch F`),
        // which its rule covers but protection and deny rules still refuse.
        let mut writes: Vec<(ferroclaw_tools::shell::Word, bool)> =
            script.file_writes().iter().map(|r| (r.target.clone(), true)).collect();
        for cmd in &script.commands {
            let fx = ferroclaw_tools::effects::of(&cmd.words);
            let word = |w: &ferroclaw_tools::effects::Write| ferroclaw_tools::shell::Word {
                text: w.path.clone(),
                dynamic: w.dynamic,
            };
            writes.extend(fx.writes.iter().map(|w| (word(w), true)));
            writes.extend(fx.operand_writes.iter().map(|w| (word(w), false)));
        }
        let mut writes_allowed = true;
        for (target_word, needs_permission) in &writes {
            let text = target_word.text.as_str();
            let target = resolve(&self.workspace, text);
            if let Some(why) = protected_from(&bases, text) {
                return Err(format!(
                    "{text} may not be written by the agent: {why}; the user edits it"
                ));
            }
            if let Some(rule) = self.deny.iter().find(|r| {
                r.covers_tool("edit")
                    && r.matches_path(
                        target.rel.as_deref(),
                        &target.abs_text(),
                        home().as_deref(),
                        true,
                    )
            }) {
                return Err(format!(
                    "denied by the rule {rule} in config (the command writes {text})"
                ));
            }
            if !needs_permission {
                continue;
            }
            let by_mode = self.mode() == PermissionMode::AcceptEdits && target.rel.is_some();
            writes_allowed &= !target_word.dynamic
                && (by_mode
                    || allow.iter().any(|r| {
                        r.covers_tool("edit")
                            && r.pattern.is_some()
                            && r.matches_path(
                                target.rel.as_deref(),
                                &target.abs_text(),
                                home().as_deref(),
                                false,
                            )
                    }));
        }
        let every_command = !script.commands.is_empty()
            && script.commands.iter().all(|cmd| command_allowed(cmd, allow));
        Ok(script.understood() && every_command && writes_allowed)
    }

    /// Refuses `tee .git/config`, `cp x .mcp.json`, `git config core.fsmonitor ...`.
    fn check_writing_program(
        &self,
        cmd: &ferroclaw_tools::shell::SimpleCommand,
        bases: &[PathBuf],
    ) -> Result<(), String> {
        let words = cmd.unwrapped();
        let Some(program) = cmd.program() else { return Ok(()) };
        if program == "git" {
            let args: Vec<&str> = words[1..].iter().map(|w| w.text.as_str()).collect();
            if let Some(at) = args.iter().position(|a| *a == "config") {
                let rest = &args[at + 1..];
                let reads = rest.iter().any(|a| {
                    matches!(
                        *a,
                        "--get" | "--get-all" | "--get-regexp" | "-l" | "--list" | "--show-origin"
                    )
                });
                let values = rest.iter().filter(|a| !a.starts_with('-')).count();
                if !reads
                    && (values >= 2
                        || rest.iter().any(|a| {
                            a.starts_with("--add")
                                || a.starts_with("--unset")
                                || *a == "--edit"
                                || *a == "-e"
                                || a.starts_with("--replace")
                        }))
                {
                    return Err("git config may not be changed by the agent: git runs commands named in it; the user changes it".into());
                }
            }
            return Ok(());
        }
        if !WRITING_PROGRAMS.contains(&program) {
            return Ok(());
        }
        for word in &words[1..] {
            let text = word.text.strip_prefix("of=").unwrap_or(&word.text);
            if text.starts_with('-') || text.is_empty() {
                continue;
            }
            if let Some(why) = protected_from(bases, text) {
                return Err(format!("{program} may not touch {text}: {why}; the user edits it"));
            }
        }
        Ok(())
    }

    /// A file tool's path: `Err` when a deny rule or protection refuses it;
    /// `Ok(true)` when an allow rule covers it.
    fn decide_path(&self, tool: &str, given: &str, allow: &[&Rule]) -> Result<bool, String> {
        let target = resolve(&self.workspace, given);
        let abs = target.abs_text();
        let home = home();
        let rel = target.rel.as_deref();
        let given_trimmed = given.trim_start_matches("./");
        if let Some(rule) = self.deny.iter().find(|r| {
            r.covers_tool(tool)
                && (r.matches_path(rel, &abs, home.as_deref(), true)
                    || r.matches_path(Some(given_trimmed), &abs, home.as_deref(), true))
        }) {
            return Err(format!("denied by the rule {rule} in config (it covers {given})"));
        }
        if matches!(tool, "grep" | "glob" | "list_dir") {
            // A search over a folder reads what is in it: refuse when it holds a denied file.
            for rule in self.deny.iter().filter(|r| r.covers_tool(tool)) {
                let Some(p) = rule.pattern.as_deref().filter(|p| !p.contains('*')) else {
                    continue;
                };
                // Claude Code writes absolute paths as `//abs/path`.
                let p_abs = p.strip_prefix('/').filter(|rest| rest.starts_with('/')).unwrap_or(p);
                let denied = resolve(&self.workspace, p_abs.trim_start_matches("./"));
                if tool != "list_dir" && denied.abs.starts_with(&target.abs) && denied.abs.exists()
                {
                    return Err(format!(
                        "denied by the rule {rule} in config: {tool} over {given} would read {p}; search a narrower path"
                    ));
                }
            }
        }
        if EDIT_TOOLS.contains(&tool)
            && let Some(why) = protected(&target.abs)
        {
            return Err(format!(
                "{given} may not be written by the agent: {why}; the user edits it"
            ));
        }
        Ok(allow
            .iter()
            .any(|r| r.covers_tool(tool) && r.matches_path(rel, &abs, home.as_deref(), false)))
    }

    /// Remembers an "always allow" answer for the rest of the session.
    pub fn allow_for_session(&self, rule: Rule) {
        if let Ok(mut rules) = self.session_allow.lock() {
            rules.push(rule);
        }
    }

    /// Grants `rules` until [`end_turn`](Self::end_turn) (a custom
    /// command's `allowed-tools`, for its request only).
    pub fn allow_for_turn(&self, rules: Vec<Rule>) {
        if let Ok(mut turn) = self.turn_allow.lock() {
            turn.extend(rules);
        }
    }

    /// True when `rule` is one of the allow rules in force (configured,
    /// approved "always" in this session, or granted for this request).
    pub fn has_allow_rule(&self, rule: &Rule) -> bool {
        let held = |m: &Mutex<Vec<Rule>>| m.lock().is_ok_and(|rules| rules.contains(rule));
        self.allow.contains(rule) || held(&self.session_allow) || held(&self.turn_allow)
    }

    /// Drops the rules granted for the request that ended.
    pub fn end_turn(&self) {
        if let Ok(mut turn) = self.turn_allow.lock() {
            turn.clear();
        }
    }

    /// The rules an "always" answer to this call adds, the same way for every
    /// tool: `bash(git status:*)` for each simple command of a command,
    /// `edit(src/**)` (the file's folder) for edits, `web_fetch(domain:HOST)`
    /// for fetches, the tool itself otherwise. Empty when the call cannot be
    /// generalised safely (a command the parser did not understand, or a
    /// `*` in what the call names, which a rule would read as a wildcard:
    /// `rm -rf build/*` would cover `rm -rf build/ ~/code`): then "always"
    /// means this call only.
    pub fn always_rules(&self, tool: &str, input: &Value) -> Vec<Rule> {
        always_rules(&self.workspace, tool, input)
    }
}

/// True when `script` may run commands its parse does not show: a part the
/// grammar could not read, a program computed at run time (`$x`, `rm${IFS}`,
/// `$'rm'`, `{rm,-rf,x}`), a shell or `source` reading commands from stdin
/// or a file (`echo rm x | bash`, `source <(...)`, `| su`, `| sudo -s`), or
/// an alias.
fn hides_commands(script: &ferroclaw_tools::shell::Script) -> bool {
    const READERS: &[&str] = &["sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "source", "."];
    !script.understood()
        || script.commands.iter().any(|cmd| {
            let words = cmd.unwrapped();
            // `sudo -s`, `sudo -i`, `doas -s`: a shell reading stdin.
            let sudo_shell = words.first().is_some_and(|w| {
                matches!(ferroclaw_tools::shell::basename(&w.text), "sudo" | "doas")
            }) && words
                .iter()
                .any(|w| matches!(w.text.as_str(), "-s" | "-i" | "--shell" | "--login"));
            if sudo_shell {
                return true;
            }
            let Some(program) = cmd.program() else {
                // `sudo -s`, `sudo -i`, `doas -s`: a shell reading stdin.
                let sudo = cmd.words.first().is_some_and(|w| {
                    matches!(ferroclaw_tools::shell::basename(&w.text), "sudo" | "doas")
                });
                let shell = cmd
                    .words
                    .iter()
                    .any(|w| matches!(w.text.as_str(), "-s" | "-i" | "--shell" | "--login"));
                return cmd.dynamic_program() || (sudo && shell);
            };
            let reads_script = match program {
                "source" | "." => true,
                // Without `-c`, su and script start a shell reading stdin.
                "su" | "script" => !words[1..]
                    .iter()
                    .any(|w| matches!(w.text.as_str(), "-c" | "--command" | "--session-command")),
                shell if READERS.contains(&shell) => !matches!(
                    ferroclaw_tools::shell::shell_input(&words[1..]),
                    ferroclaw_tools::shell::ShellInput::Command(_)
                ),
                _ => false,
            };
            reads_script
                || program == "alias"
                || (program.starts_with('{') && program.contains(','))
        })
}

/// The rules an "always" answer to a call of `tool` adds in `workspace`; see
/// [`Permissions::always_rules`].
pub fn always_rules(workspace: &Path, tool: &str, input: &Value) -> Vec<Rule> {
    let tool = ferroclaw_tools::canonical_tool_name(tool);
    match tool {
        "bash" => {
            let command = input.get("command").and_then(Value::as_str).unwrap_or("");
            let script = ferroclaw_tools::shell::parse(command);
            if !script.understood()
                || script
                    .commands
                    .iter()
                    .any(ferroclaw_tools::shell::SimpleCommand::dynamic_program)
            {
                return Vec::new();
            }
            let mut rules: Vec<Rule> = Vec::new();
            for cmd in &script.commands {
                let Some(rule) = command::always_rule(cmd) else { return Vec::new() };
                if !rules.contains(&rule) {
                    rules.push(rule);
                }
            }
            // The files it writes, by redirection or by option (`sort -o F`).
            let mut written: Vec<ferroclaw_tools::shell::Word> =
                script.file_writes().iter().map(|r| r.target.clone()).collect();
            for cmd in &script.commands {
                let fx = ferroclaw_tools::effects::of(&cmd.words);
                written.extend(fx.writes.iter().map(|w| ferroclaw_tools::shell::Word {
                    text: w.path.clone(),
                    dynamic: w.dynamic,
                }));
            }
            for w in &written {
                if w.dynamic {
                    return Vec::new();
                }
                let target = resolve(workspace, &w.text);
                if let Some(rel) = target.rel {
                    if rel.contains('*') {
                        return Vec::new();
                    }
                    rules.push(Rule::new("edit", Some(rel)));
                }
            }
            rules
        }
        "web_fetch" => {
            let url = input.get("url").and_then(Value::as_str).unwrap_or("");
            match ferroclaw_tools::ssrf::url_host(url) {
                Some(host) => vec![Rule::new("web_fetch", Some(format!("domain:{host}")))],
                None => Vec::new(),
            }
        }
        _ if is_file_tool(tool) => {
            let Some(given) = call_path(tool, input) else { return vec![Rule::new(tool, None)] };
            let target = resolve(workspace, given);
            if target.abs_text().contains('*') {
                return Vec::new();
            }
            let family = if EDIT_TOOLS.contains(&tool) { "edit" } else { tool };
            let pattern = match target.rel.as_deref() {
                Some(rel) => match rel.rsplit_once('/') {
                    Some((dir, _)) => format!("{dir}/**"),
                    None => rel.to_string(),
                },
                None => match target.abs.parent() {
                    Some(dir) => format!("/{}/**", dir.to_string_lossy().trim_start_matches('/')),
                    None => target.abs_text(),
                },
            };
            vec![Rule::new(family, Some(pattern))]
        }
        _ => vec![Rule::new(tool, None)],
    }
}

/// The rules an "always" answer adds, said for the prompt and the echo:
/// `bash(git status:*), bash(cargo test:*)`, or `this call only`.
pub fn describe_rules(rules: &[Rule]) -> String {
    if rules.is_empty() {
        return "this call only (the command is too complex to generalise)".to_string();
    }
    rules.iter().map(Rule::to_string).collect::<Vec<_>>().join(", ")
}

fn is_file_tool(tool: &str) -> bool {
    READ_FAMILY.contains(&tool) || EDIT_TOOLS.contains(&tool)
}

fn home() -> Option<String> {
    std::env::var("HOME").ok().filter(|h| !h.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn perms(mode: PermissionMode, allow: &[&str], deny: &[&str]) -> Permissions {
        let s = |v: &[&str]| v.iter().map(ToString::to_string).collect::<Vec<_>>();
        Permissions::new(mode, &s(allow), &s(deny)).unwrap()
    }

    #[test]
    fn default_mode_runs_reads_and_asks_for_writes_and_commands() {
        let p = perms(PermissionMode::Default, &[], &[]);
        assert_eq!(p.decide("read", true, &json!({"path": "a"})), Decision::Allow);
        assert_eq!(p.decide("write", false, &json!({"path": "a"})), Decision::Ask);
        assert_eq!(p.decide("bash", false, &json!({"command": "ls"})), Decision::Ask);
    }

    #[test]
    fn accept_edits_runs_edits_but_asks_for_bash() {
        let p = perms(PermissionMode::AcceptEdits, &[], &[]);
        assert_eq!(p.decide("edit", false, &json!({"path": "a"})), Decision::Allow);
        assert_eq!(p.decide("bash", false, &json!({"command": "ls"})), Decision::Ask);
    }

    #[test]
    fn deny_rules_win_even_in_bypass_mode() {
        let p = perms(PermissionMode::Bypass, &["bash"], &["bash(curl *)", "read(.env)"]);
        assert!(matches!(
            p.decide("bash", false, &json!({"command": "curl x"})),
            Decision::Deny(_)
        ));
        assert!(matches!(p.decide("read", true, &json!({"path": "./.env"})), Decision::Deny(_)));
        assert_eq!(p.decide("bash", false, &json!({"command": "ls"})), Decision::Allow);
    }

    #[test]
    fn a_command_run_in_a_worktree_is_judged_by_the_bash_rules() {
        let p = perms(PermissionMode::Bypass, &[], &["bash(curl *)"]);
        let run = |command: &str| json!({"name": "a", "command": command});
        assert!(matches!(p.decide("worktree_run", false, &run("curl x")), Decision::Deny(_)));
        assert_eq!(p.decide("worktree_run", false, &run("ls")), Decision::Allow);
        let p = perms(PermissionMode::Default, &["bash(cargo test*)"], &[]);
        assert_eq!(p.decide("worktree_run", false, &run("cargo test -q")), Decision::Allow);
        assert_eq!(p.decide("worktree_run", false, &run("rm -rf src")), Decision::Ask);
    }

    #[test]
    fn allow_rules_match_command_prefixes_and_path_globs() {
        let p = perms(PermissionMode::Default, &["bash(git status*)", "edit(src/**)"], &[]);
        assert_eq!(p.decide("bash", false, &json!({"command": "git status -s"})), Decision::Allow);
        assert_eq!(p.decide("bash", false, &json!({"command": "git push"})), Decision::Ask);
        assert_eq!(p.decide("edit", false, &json!({"path": "src/a/b.rs"})), Decision::Allow);
        assert_eq!(p.decide("edit", false, &json!({"path": "Cargo.toml"})), Decision::Ask);
    }

    #[test]
    fn plan_mode_refuses_anything_that_changes_things() {
        let p = perms(PermissionMode::Plan, &["bash"], &[]);
        assert!(
            matches!(p.decide("bash", false, &json!({"command": "ls"})), Decision::Deny(m) if m.contains("plan mode"))
        );
        assert_eq!(p.decide("grep", true, &json!({"pattern": "x"})), Decision::Allow);
    }

    #[test]
    fn an_alias_gets_the_rules_and_answers_of_its_tool() {
        let p = perms(PermissionMode::Bypass, &[], &["bash(touch *)"]);
        for tool in ["exec", "Bash", "bash"] {
            let d = p.decide(tool, false, &json!({"command": " /usr/bin/touch X"}));
            assert!(matches!(d, Decision::Deny(_)), "{tool}: {d:?}");
        }
        let p = perms(PermissionMode::Default, &[], &[]);
        for rule in p.always_rules("exec", &json!({"command": "ls -la"})) {
            p.allow_for_session(rule);
        }
        assert_eq!(p.decide("exec", false, &json!({"command": "ls"})), Decision::Allow);
        assert_eq!(p.decide("exec", false, &json!({"command": "rm -rf x"})), Decision::Ask);
    }

    #[test]
    fn the_prompt_can_show_every_command_a_call_would_run() {
        assert_eq!(
            parsed_commands("git status; echo $(touch x) > out"),
            ["git status", "echo $(touch x)", "touch x", "writes out"]
        );
    }

    #[test]
    fn session_approvals_apply_to_later_calls() {
        let p = perms(PermissionMode::Default, &[], &[]);
        p.allow_for_session(Rule::parse("bash(cargo test*)").unwrap());
        assert_eq!(p.decide("bash", false, &json!({"command": "cargo test -q"})), Decision::Allow);
        assert!(Rule::parse("bash(oops").is_err());
    }
}
