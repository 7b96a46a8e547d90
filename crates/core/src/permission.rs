//! Whether a tool call may run: the permission mode, allow/deny rules, and
//! what the user approved during the session. Deny always wins.

use std::sync::Mutex;

use serde::{Deserialize, Serialize};
use serde_json::Value;

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
/// refuse secrets and injected instructions): they run without asking.
pub const SELF_STATE_TOOLS: &[&str] = &["memory"];

/// Tools that change files in the workspace (and nothing else).
pub const EDIT_TOOLS: &[&str] = &["write", "edit", "multi_edit"];

/// The verdict on one call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    Allow,
    /// Refused; the reason goes to the model.
    Deny(String),
    /// The user must approve.
    Ask,
}

/// One rule: `tool` or `tool(pattern)`, where the pattern is matched against
/// the call's subject (the command for `bash`, the path for file tools) and
/// `*` matches anything, `/` included.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    pub tool: String,
    pub pattern: Option<String>,
}

impl Rule {
    /// Parses `bash(git status*)`, `edit(src/**)`, `web_fetch`, `mcp__github__*`.
    pub fn parse(text: &str) -> Result<Rule, String> {
        let text = text.trim();
        match text.split_once('(') {
            None if !text.is_empty() => Ok(Rule { tool: text.to_string(), pattern: None }),
            Some((tool, rest)) if !tool.is_empty() && rest.ends_with(')') => Ok(Rule {
                tool: tool.trim().to_string(),
                pattern: Some(rest[..rest.len() - 1].to_string()),
            }),
            _ => Err(format!("bad permission rule {text:?}: write TOOL or TOOL(PATTERN)")),
        }
    }

    /// True when the rule covers this call.
    pub fn matches(&self, tool: &str, input: &Value) -> bool {
        if !wildcard(&self.tool, tool) {
            return false;
        }
        match &self.pattern {
            None => true,
            Some(p) => call_subject(input).is_some_and(|s| wildcard(p, s.trim_start_matches("./"))),
        }
    }
}

impl std::fmt::Display for Rule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.pattern {
            Some(p) => write!(f, "{}({p})", self.tool),
            None => f.write_str(&self.tool),
        }
    }
}

/// What a rule pattern is matched against: the command, path, url or pattern.
pub fn call_subject(input: &Value) -> Option<&str> {
    ["command", "path", "file_path", "url", "pattern"]
        .iter()
        .find_map(|k| input.get(k).and_then(Value::as_str))
}

/// `*` matches any run of characters (including `/`); everything else is literal.
fn wildcard(pattern: &str, text: &str) -> bool {
    let parts: Vec<&str> = pattern.split('*').collect();
    if parts.len() == 1 {
        return pattern == text;
    }
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if !text.starts_with(first) || text.len() < first.len() + last.len() || !text.ends_with(last) {
        return false;
    }
    let mut rest = &text[first.len()..text.len() - last.len()];
    for middle in &parts[1..parts.len() - 1] {
        match rest.find(middle) {
            Some(i) => rest = &rest[i + middle.len()..],
            None => return false,
        }
    }
    true
}

/// The permission state of a session.
#[derive(Debug, Default)]
pub struct Permissions {
    /// The mode in force; plan mode switches it when a plan is approved.
    mode: Mutex<PermissionMode>,
    allow: Vec<Rule>,
    deny: Vec<Rule>,
    /// Rules the user approved with "always" during this session.
    session_allow: Mutex<Vec<Rule>>,
}

impl Permissions {
    /// Builds the state from a mode and rule texts; a bad rule is an error naming it.
    pub fn new(mode: PermissionMode, allow: &[String], deny: &[String]) -> Result<Self, String> {
        let parse = |v: &[String]| v.iter().map(|r| Rule::parse(r)).collect::<Result<Vec<_>, _>>();
        Ok(Self {
            mode: Mutex::new(mode),
            allow: parse(allow)?,
            deny: parse(deny)?,
            session_allow: Mutex::new(Vec::new()),
        })
    }

    /// The mode in force.
    pub fn mode(&self) -> PermissionMode {
        *self.mode.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Switches the mode (plan approved, `/plan` in the REPL).
    pub fn set_mode(&self, mode: PermissionMode) {
        *self.mode.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = mode;
    }

    /// Decides a call of `tool` (read-only or not) with `input`.
    pub fn decide(&self, tool: &str, read_only: bool, input: &Value) -> Decision {
        let mode = self.mode();
        if let Some(rule) = self.deny.iter().find(|r| r.matches(tool, input)) {
            return Decision::Deny(format!("denied by the rule {rule} in config"));
        }
        if mode == PermissionMode::Plan && !read_only {
            return Decision::Deny(format!(
                "plan mode: only read-only tools may run, {tool} changes things; present your plan first"
            ));
        }
        let approved = self
            .session_allow
            .lock()
            .map(|rules| rules.iter().any(|r| r.matches(tool, input)))
            .unwrap_or(false);
        let free = read_only || SELF_STATE_TOOLS.contains(&tool);
        if free || approved || self.allow.iter().any(|r| r.matches(tool, input)) {
            return Decision::Allow;
        }
        match mode {
            PermissionMode::Bypass => Decision::Allow,
            PermissionMode::AcceptEdits if EDIT_TOOLS.contains(&tool) => Decision::Allow,
            _ => Decision::Ask,
        }
    }

    /// Remembers an "always allow" answer for the rest of the session.
    pub fn allow_for_session(&self, rule: Rule) {
        if let Ok(mut rules) = self.session_allow.lock() {
            rules.push(rule);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn perms(mode: PermissionMode, allow: &[&str], deny: &[&str]) -> Permissions {
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
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
    fn session_approvals_apply_to_later_calls() {
        let p = perms(PermissionMode::Default, &[], &[]);
        p.allow_for_session(Rule::parse("bash(cargo test*)").unwrap());
        assert_eq!(p.decide("bash", false, &json!({"command": "cargo test -q"})), Decision::Allow);
        assert!(Rule::parse("bash(oops").is_err());
    }
}
