//! Where hooks are written and how they are read: Claude Code's `hooks`
//! object, unchanged, in `settings.json` files, and the same shape as TOML
//! under `[hooks]` in our `config.toml`.
//!
//! ```toml
//! [[hooks.PreToolUse]]
//! matcher = "Bash"
//! [[hooks.PreToolUse.hooks]]
//! type = "command"
//! command = "~/.ferroclaw/hooks/no-rm.sh"
//! timeout = 10
//! fail_closed = true
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use regex::Regex;
use serde::Deserialize;

use super::{HookError, HookEvent};

/// Default seconds a hook command may run (Claude Code's default).
pub const DEFAULT_TIMEOUT_SECS: f64 = 60.0;

/// The `hooks` object of one file: event name -> matcher groups, as written.
pub type HookTable = BTreeMap<String, Vec<MatcherGroup>>;

/// One matcher with the hooks it runs.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct MatcherGroup {
    /// Tool names (`Bash`, `Edit|Write`) or a regex (`mcp__.*`); empty or
    /// `*` matches everything. Events without tools match on their subject
    /// (SessionStart's source, Notification's type, PreCompact's trigger).
    #[serde(default)]
    pub matcher: Option<String>,
    #[serde(default)]
    pub hooks: Vec<HookSpec>,
    /// The file it was read from, once tables of several files are merged.
    #[serde(skip)]
    pub source: Option<PathBuf>,
}

/// One hook as written.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct HookSpec {
    /// `command`, `http`, `prompt` or `agent` ([`super::prompt`]); another
    /// type is skipped with a warning.
    #[serde(rename = "type", default)]
    pub kind: String,
    #[serde(default)]
    pub command: Option<String>,
    /// A `prompt` or `agent` hook's question to the model (`$ARGUMENTS`:
    /// the event's JSON).
    #[serde(default)]
    pub prompt: Option<String>,
    /// A `prompt` hook's model in Claude Code; ferroclaw asks the session's own.
    #[serde(default)]
    pub model: Option<String>,
    /// An `http` hook's URL: the event's JSON is POSTed there.
    #[serde(default)]
    pub url: Option<String>,
    /// An `http` hook's headers; `$VAR` or `${VAR}` in a value is read from
    /// the environment for the names in `allowedEnvVars` only.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    #[serde(default, rename = "allowedEnvVars")]
    pub allowed_env_vars: Vec<String>,
    /// Run in the background: nothing waits for it, and what it says is not read.
    #[serde(rename = "async", default)]
    pub run_async: bool,
    /// Run once a session, then no more.
    #[serde(default)]
    pub once: bool,
    /// Shown to the user while the hook runs.
    #[serde(default, rename = "statusMessage")]
    pub status_message: Option<String>,
    /// Seconds (default [`DEFAULT_TIMEOUT_SECS`]).
    #[serde(default)]
    pub timeout: Option<f64>,
    /// A crash, timeout or unreadable answer blocks instead of letting the
    /// action through (ours; Claude Code lets them fall through).
    #[serde(default, alias = "failClosed")]
    pub fail_closed: bool,
}

/// A hook ready to run.
#[derive(Debug, Clone)]
pub struct Hook {
    pub event: HookEvent,
    pub matcher: Matcher,
    /// The shell command (for an `http` hook, its URL, as shown).
    pub command: String,
    pub timeout_secs: f64,
    pub fail_closed: bool,
    /// The file it came from, for messages and the session file.
    pub source: PathBuf,
    /// `async`, `once`, `statusMessage`, and the `http` type's fields.
    pub options: HookOptions,
}

/// How a hook runs, beyond its command.
#[derive(Debug, Clone, Default)]
pub struct HookOptions {
    /// POST the event's JSON here instead of running `command`.
    pub http: Option<HttpHook>,
    /// Ask the session's model this (a `prompt` or `agent` hook) instead.
    pub prompt: Option<String>,
    pub run_async: bool,
    /// Set once a `once` hook has run.
    pub once: Option<std::sync::Arc<std::sync::atomic::AtomicBool>>,
    pub status_message: Option<String>,
    /// Variables set for this hook's command alone (a plugin's paths).
    pub env: Vec<(String, String)>,
}

/// An `http` hook's target.
#[derive(Debug, Clone)]
pub struct HttpHook {
    pub url: String,
    pub headers: BTreeMap<String, String>,
}

/// What a matcher accepts.
#[derive(Debug, Clone)]
pub enum Matcher {
    Any,
    /// Exact names, from `Bash` or `Edit|Write`.
    Names(Vec<String>),
    /// Anything else is a regex over the whole name.
    Regex(Regex),
}

impl Matcher {
    /// Reads a matcher as Claude Code does: empty or `*` for all, plain names
    /// separated by `|`, else a regular expression.
    pub fn parse(text: Option<&str>) -> Result<Matcher, String> {
        let text = text.map(str::trim).unwrap_or("");
        if text.is_empty() || text == "*" {
            return Ok(Matcher::Any);
        }
        let plain = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '|';
        if text.chars().all(plain) {
            return Ok(Matcher::Names(text.split('|').map(str::to_string).collect()));
        }
        Regex::new(&format!("^(?:{text})$"))
            .map(Matcher::Regex)
            .map_err(|e| format!("matcher {text:?} is not a valid regex: {e}"))
    }

    /// The matcher as written (`*` for all).
    pub fn describe(&self) -> String {
        match self {
            Matcher::Any => "*".into(),
            Matcher::Names(list) => list.join("|"),
            Matcher::Regex(re) => {
                let text = re.as_str();
                text.strip_prefix("^(?:").and_then(|t| t.strip_suffix(")$")).unwrap_or(text).into()
            }
        }
    }

    /// True when any of `names` (a tool's own name and its Claude Code name)
    /// is accepted.
    pub fn accepts(&self, names: &[&str]) -> bool {
        match self {
            Matcher::Any => true,
            Matcher::Names(list) => names.iter().any(|n| list.iter().any(|m| m == n)),
            Matcher::Regex(re) => names.iter().any(|n| re.is_match(n)),
        }
    }
}

/// Claude Code's settings files, in the order their hooks run: the user's,
/// then the project's, then the project's local one.
pub fn claude_files(workspace: &Path) -> (PathBuf, [PathBuf; 2]) {
    (
        claude_home().join("settings.json"),
        [
            workspace.join(".claude").join("settings.json"),
            workspace.join(".claude").join("settings.local.json"),
        ],
    )
}

/// `$CLAUDE_CONFIG_DIR`, else `~/.claude`.
fn claude_home() -> PathBuf {
    if let Some(dir) = std::env::var_os("CLAUDE_CONFIG_DIR").filter(|d| !d.is_empty()) {
        return PathBuf::from(dir);
    }
    std::env::var_os("HOME").map(PathBuf::from).unwrap_or_default().join(".claude")
}

/// The `hooks` object of a Claude Code settings file; `None` when the file
/// does not exist or has no hooks. Other keys of the file are not ours and
/// are left alone.
pub fn read_claude_file(path: &Path) -> Result<Option<HookTable>, HookError> {
    let max = ferroclaw_tools::repo_file::MAX_REPO_FILE_BYTES;
    let text = match ferroclaw_tools::repo_file::read_repo_text(path, max) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(HookError::Bad { path: path.to_path_buf(), message: e.to_string() }),
    };
    let bad = |message: String| HookError::Bad { path: path.to_path_buf(), message };
    let value: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| bad(format!("not valid JSON: {e}")))?;
    match value.get("hooks") {
        None | Some(serde_json::Value::Null) => Ok(None),
        Some(hooks) => serde_json::from_value(hooks.clone())
            .map(Some)
            .map_err(|e| bad(format!("\"hooks\": {e}"))),
    }
}

/// The hooks of one table, checked, in written order. An event or hook
/// type ferroclaw does not run is skipped with a one-line warning (as
/// Claude Code does), so the rest of the file stays in force.
pub fn compile(table: &HookTable, source: &Path) -> Result<Vec<Hook>, HookError> {
    let bad = |message: String| HookError::Bad { path: source.to_path_buf(), message };
    let mut out = Vec::new();
    for (name, groups) in table {
        let Some(event) = HookEvent::parse(name) else {
            let count: usize = groups.iter().map(|g| g.hooks.len()).sum();
            let why = match HookEvent::NOT_RUN.contains(&name.as_str()) {
                true => "is a Claude Code event ferroclaw does not have".to_string(),
                false => format!("is not a hook event (known: {})", HookEvent::names().join(", ")),
            };
            tracing::warn!(
                "{}: hooks: {name:?} {why}; its {count} hook(s) are skipped",
                source.display()
            );
            continue;
        };
        for group in groups {
            let source = group.source.as_deref().unwrap_or(source);
            let bad = |message: String| HookError::Bad { path: source.to_path_buf(), message };
            let matcher = Matcher::parse(group.matcher.as_deref()).map_err(bad)?;
            for spec in &group.hooks {
                let mut prompt = None;
                let (command, http) = match spec.kind.as_str() {
                    "command" => {
                        let command =
                            spec.command.clone().filter(|c| !c.trim().is_empty()).ok_or_else(
                                || bad(format!("{name}: a command hook needs \"command\"")),
                            )?;
                        (command, None)
                    }
                    kind @ ("prompt" | "agent") => {
                        let text = spec.prompt.clone().filter(|p| !p.trim().is_empty());
                        let text = text.ok_or_else(|| {
                            bad(format!("{name}: a {kind} hook needs \"prompt\""))
                        })?;
                        prompt = Some(text.clone());
                        (format!("{kind}: {}", crate::context::cap(&text, 60)), None)
                    }
                    "http" => {
                        let url = spec
                            .url
                            .clone()
                            .filter(|u| u.starts_with("http://") || u.starts_with("https://"))
                            .ok_or_else(|| {
                                bad(format!("{name}: an http hook needs an http(s) \"url\""))
                            })?;
                        let headers = spec
                            .headers
                            .iter()
                            .map(|(k, v)| (k.clone(), expand_env(v, &spec.allowed_env_vars)))
                            .collect();
                        let http = HttpHook { url: url.clone(), headers };
                        (url, Some(http))
                    }
                    other => {
                        tracing::warn!(
                            "{}: hooks: {name}: hook type {other:?} is not run by ferroclaw (use \"command\" or \"http\"); skipped",
                            source.display()
                        );
                        continue;
                    }
                };
                let timeout_secs = spec.timeout.unwrap_or(DEFAULT_TIMEOUT_SECS);
                if !timeout_secs.is_finite() || timeout_secs <= 0.0 {
                    return Err(bad(format!("{name}: timeout must be a positive number")));
                }
                let options = HookOptions {
                    http,
                    prompt,
                    run_async: spec.run_async,
                    once: spec.once.then(Default::default),
                    status_message: spec.status_message.clone(),
                    env: Vec::new(),
                };
                out.push(Hook {
                    event,
                    matcher: matcher.clone(),
                    command,
                    timeout_secs,
                    fail_closed: spec.fail_closed,
                    source: source.to_path_buf(),
                    options,
                });
            }
        }
    }
    let _ = bad;
    Ok(out)
}

/// `$NAME` and `${NAME}` in `value` replaced by the variable's value, for
/// the names in `allowed` (others are left as written).
fn expand_env(value: &str, allowed: &[String]) -> String {
    let mut out = value.to_string();
    for name in allowed {
        let var = std::env::var(name).unwrap_or_default();
        out = out.replace(&format!("${{{name}}}"), &var).replace(&format!("${name}"), &var);
    }
    out
}

/// Notes which file each group of `table` came from.
pub fn mark_source(table: &mut HookTable, source: &Path) {
    for group in table.values_mut().flatten() {
        group.source.get_or_insert_with(|| source.to_path_buf());
    }
}

/// Lays `later`'s groups after `earlier`'s, event by event.
pub fn append(earlier: &mut HookTable, later: HookTable) {
    for (event, groups) in later {
        earlier.entry(event).or_default().extend(groups);
    }
}

/// The events with hooks in `table`, for notes (`PreToolUse, Stop`).
pub fn describe(table: &HookTable) -> String {
    table.keys().cloned().collect::<Vec<_>>().join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matchers_read_as_claude_code_reads_them() {
        assert!(Matcher::parse(None).unwrap().accepts(&["anything"]));
        assert!(Matcher::parse(Some("*")).unwrap().accepts(&["anything"]));
        let list = Matcher::parse(Some("Edit|Write")).unwrap();
        assert!(list.accepts(&["write", "Write"]) && !list.accepts(&["bash", "Bash"]));
        assert!(!Matcher::parse(Some("Bash")).unwrap().accepts(&["BashOutput"]), "exact names");
        let re = Matcher::parse(Some("mcp__.*")).unwrap();
        assert!(re.accepts(&["mcp__github__search"]) && !re.accepts(&["bash"]));
        assert!(Matcher::parse(Some("(")).is_err());
    }

    #[test]
    fn toml_and_json_hooks_have_the_same_shape() {
        let toml: toml::Table = toml::from_str(
            "[[PreToolUse]]\nmatcher = \"Bash\"\n[[PreToolUse.hooks]]\ntype = \"command\"\ncommand = \"x\"\nfail_closed = true\n",
        )
        .unwrap();
        let from_toml: HookTable = toml.try_into().unwrap();
        let from_json: HookTable = serde_json::from_str(
            r#"{"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "x", "failClosed": true}]}]}"#,
        )
        .unwrap();
        let a = compile(&from_toml, Path::new("a")).unwrap();
        let b = compile(&from_json, Path::new("b")).unwrap();
        assert_eq!((a.len(), a[0].command.as_str(), a[0].fail_closed), (1, "x", true));
        assert_eq!((b.len(), b[0].command.as_str(), b[0].fail_closed), (1, "x", true));
        assert_eq!(a[0].timeout_secs, DEFAULT_TIMEOUT_SECS);
    }

    #[test]
    fn an_unknown_event_or_type_is_skipped_and_the_rest_stays_in_force() {
        let table: HookTable = serde_json::from_str(
            r#"{"PreToolUze": [{"hooks": [{"type": "command", "command": "x"}]}],
                "Setup": [{"hooks": [{"type": "command", "command": "y"}]}],
                "preToolUse": [{"hooks": [{"type": "command", "command": "z"}]}],
                "Stop": [{"hooks": [{"type": "prompt", "prompt": "done?"}, {"type": "mcp"},
                                    {"type": "command", "command": "ok", "async": true, "once": true,
                                     "statusMessage": "checking"}]}]}"#,
        )
        .unwrap();
        let hooks = compile(&table, Path::new("s.json")).unwrap();
        assert_eq!(hooks.len(), 2, "{hooks:?}");
        assert_eq!(hooks[0].options.prompt.as_deref(), Some("done?"), "a prompt hook is kept");
        let stop = &hooks[1];
        assert_eq!((stop.event, stop.command.as_str()), (HookEvent::Stop, "ok"));
        assert!(stop.options.run_async && stop.options.once.is_some());
        assert_eq!(stop.options.status_message.as_deref(), Some("checking"));
    }

    #[test]
    fn a_missing_command_or_url_is_one_clear_error() {
        let table: HookTable =
            serde_json::from_str(r#"{"Stop": [{"hooks": [{"type": "command"}]}]}"#).unwrap();
        let e = compile(&table, Path::new("s.json")).unwrap_err().to_string();
        assert!(e.contains("s.json") && e.contains("command"), "{e}");
        let table: HookTable =
            serde_json::from_str(r#"{"Stop": [{"hooks": [{"type": "http", "url": "ftp://x"}]}]}"#)
                .unwrap();
        assert!(compile(&table, Path::new("s.json")).is_err());
        let table: HookTable = serde_json::from_str(
            r#"{"Stop": [{"hooks": [{"type": "http", "url": "http://127.0.0.1:9/h"}]}]}"#,
        )
        .unwrap();
        let hooks = compile(&table, Path::new("s.json")).unwrap();
        assert_eq!(
            hooks[0].options.http.as_ref().map(|h| h.url.as_str()),
            Some("http://127.0.0.1:9/h")
        );
    }
}
