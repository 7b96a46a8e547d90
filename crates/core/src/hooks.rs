//! Hooks: the user's own commands run at points of the agent's life (a tool
//! call about to run, a prompt submitted, the answer done), written in
//! Claude Code's format so existing hook scripts work unchanged.
//!
//! Where they come from, in the order they run ([`Hooks::load`]):
//! `[hooks]` in `$FERROCLAW_HOME/config.toml`, then in the project's
//! `.agent/config.toml`, then Claude Code's `~/.claude/settings.json`, then
//! the project's `.claude/settings.json` and `.claude/settings.local.json`;
//! the project's files only in a trusted workspace ([`crate::trust`]). A project's
//! hooks are commands a repository would run on the user's machine, so an
//! untrusted project's are skipped and named in [`crate::Config::ignored`].
//!
//! Each hook gets the event as JSON on stdin (Claude Code's fields:
//! `session_id`, `transcript_path`, `cwd`, `permission_mode`,
//! `hook_event_name`, `tool_name`, `tool_input`, `tool_response`, ..., the
//! tool fields in Claude Code's shapes through [`ferroclaw_tools::claude`]),
//! or, for an `http` hook, as a POST ([`http`]); a command hook answers by exit
//! code: 0 goes on (stdout may be JSON: `decision`, `reason`,
//! `hookSpecificOutput.permissionDecision`, `updatedInput`,
//! `additionalContext`, `continue`/`stopReason`, `systemMessage`); 2 blocks,
//! with stderr as the reason; anything else is an error shown to the user
//! that blocks nothing, unless the hook says `fail_closed = true`.
//!
//! Hooks of one event run one after another, in the order above (within a
//! file, as written): a hook that rewrites a tool's input (`updatedInput`)
//! hands the rewritten input to the next one. As in Claude Code (which runs
//! them all at once), every matching hook runs even after one blocked or
//! denied, so a hook that logs sees every event; the first block's reason
//! is the one given, and the strictest permission answer wins.
//!
//! ```
//! use ferroclaw_core::hooks::{HookEvent, Hooks};
//! let hooks = Hooks::none();
//! assert!(!hooks.has(HookEvent::PreToolUse));
//! assert_eq!(HookEvent::parse("PreToolUse"), Some(HookEvent::PreToolUse));
//! ```

use std::path::{Path, PathBuf};
use std::sync::Arc;

use ferroclaw_llm::Provider;
use serde_json::{Map, Value};

pub mod command;
pub mod http;
pub mod plugin;
pub mod prompt;
pub mod settings;

pub use settings::{Hook, HookOptions, HookTable, Matcher};

use command::Ended;

/// A hooks problem, said with the file to fix.
#[derive(Debug, thiserror::Error)]
pub enum HookError {
    #[error("{path}: hooks: {message}")]
    Bad { path: PathBuf, message: String },
}

macro_rules! events {
    ($($name:ident),* $(,)?) => {
        /// The points where hooks run (Claude Code's event names).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum HookEvent { $($name),* }

        impl HookEvent {
            /// Every event, in Claude Code's spelling.
            pub const ALL: &[HookEvent] = &[$(HookEvent::$name),*];

            /// The name as written in settings and sent as `hook_event_name`.
            pub fn name(self) -> &'static str {
                match self { $(HookEvent::$name => stringify!($name)),* }
            }
        }
    };
}

events!(
    SessionStart,
    UserPromptSubmit,
    PreToolUse,
    PermissionRequest,
    PostToolUse,
    PostToolUseFailure,
    PreCompact,
    PostCompact,
    SubagentStart,
    SubagentStop,
    Stop,
    SessionEnd,
    Notification,
    StopFailure,
);

impl HookEvent {
    /// Events Claude Code documents that have no moment in ferroclaw: their
    /// hooks are skipped with a warning.
    pub const NOT_RUN: &[&str] = &[
        "Setup",
        "TeammateIdle",
        "TaskCreated",
        "TaskCompleted",
        "WorktreeCreate",
        "WorktreeRemove",
        "ConfigChange",
        "InstructionsLoaded",
        "CwdChanged",
        "FileChanged",
        "Elicitation",
        "ElicitationResult",
    ];

    /// The event of a name as written in settings.
    pub fn parse(name: &str) -> Option<HookEvent> {
        HookEvent::ALL.iter().copied().find(|e| e.name() == name)
    }

    /// Every event name, for error messages.
    pub fn names() -> Vec<&'static str> {
        HookEvent::ALL.iter().map(|e| e.name()).collect()
    }
}

/// What every hook input carries, whatever the event.
#[derive(Debug, Clone)]
pub struct Common {
    pub session_id: String,
    pub transcript_path: PathBuf,
    pub cwd: PathBuf,
    /// Claude Code's spelling: `default`, `acceptEdits`, `bypassPermissions`, `plan`.
    pub permission_mode: String,
    /// Inside a sub-agent: its id and type (Claude Code's `agent_id` and
    /// `agent_type`, sent with every event the sub-agent runs).
    pub agent: Option<(String, String)>,
}

/// A hook's say on a tool call's permission; the strictest of several wins.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum PermissionAnswer {
    Allow,
    Ask,
    Deny(String),
}

/// What the hooks of one event said, together.
#[derive(Debug, Default)]
pub struct HookOutcome {
    /// A hook blocked (exit 2, `decision: "block"`, or a fail-closed hook
    /// that failed): the reason. What blocking means depends on the event.
    pub blocked: Option<String>,
    /// `permissionDecision` (PreToolUse) or `decision.behavior` (PermissionRequest).
    pub permission: Option<PermissionAnswer>,
    /// The tool input as the last rewriting hook left it.
    pub updated_input: Option<Value>,
    /// `additionalContext`, and plain stdout of UserPromptSubmit and SessionStart hooks.
    pub context: Vec<String>,
    /// For the user: `systemMessage`s and hooks that failed without blocking.
    pub notices: Vec<String>,
    /// `continue: false`: the agent stops, with this reason for the user.
    pub stop: Option<String>,
    /// One record per hook run, for the session file.
    pub runs: Vec<HookRecord>,
}

/// One hook run, as the session file keeps it.
#[derive(Debug, Clone)]
pub struct HookRecord {
    pub event: HookEvent,
    pub command: String,
    /// `None` when it timed out, did not start, or died by a signal.
    pub exit_code: Option<i32>,
    /// `ok`, `blocked: REASON`, `error: WHY`, ...
    pub result: String,
    pub duration_ms: u64,
}

impl HookRecord {
    /// An `async` hook, started and not waited for.
    fn started(event: HookEvent, hook: &Hook) -> HookRecord {
        let command = hook.command.clone();
        HookRecord {
            event,
            command,
            exit_code: None,
            result: "started (async)".into(),
            duration_ms: 0,
        }
    }
}

/// The hooks in force for one workspace.
#[derive(Debug, Clone, Default)]
pub struct Hooks {
    hooks: Vec<Hook>,
    workspace: PathBuf,
    /// The environment hook commands see (`[sandbox] hook_env`).
    env: command::HookEnvironment,
    /// Claude Code settings' `env`, set on top ([`crate::Config::claude_env`]).
    set_env: Vec<(String, String)>,
    /// The model `prompt` and `agent` hooks ask ([`Hooks::with_model`]).
    model: Option<prompt::HookModel>,
}

impl Hooks {
    /// No hooks at all.
    pub fn none() -> Hooks {
        Hooks::default()
    }

    /// The hooks of `config`: its `[hooks]` (the home file's, then a trusted
    /// project's: [`crate::Config::load`] leaves an untrusted project's out),
    /// then Claude Code's user settings, then, when the workspace is
    /// trusted, the project's Claude Code settings.
    pub fn load(config: &crate::Config) -> Result<Hooks, HookError> {
        let mut hooks = settings::compile(&config.file.hooks, &config.home.join("config.toml"))?;
        let (user, project) = settings::claude_files(&config.workspace);
        let mut files = vec![user];
        if config.trusted {
            files.extend(project);
        }
        for file in files {
            if let Some(table) = settings::read_claude_file(&file)? {
                hooks.extend(settings::compile(&table, &file)?);
            }
        }
        let plugin_data = config.home.join("plugins").join("data");
        for dir in &config.plugin_dirs {
            hooks.extend(plugin::hooks(dir, &config.workspace, &plugin_data)?);
        }
        let env = command::HookEnvironment::from_config(config.file.sandbox.as_ref());
        let set_env = config.claude_env.clone();
        Ok(Hooks { hooks, workspace: config.workspace.clone(), env, set_env, model: None })
    }

    /// The hooks given, run in `workspace` (for tests and embedders).
    pub fn from_hooks(hooks: Vec<Hook>, workspace: &Path) -> Hooks {
        Hooks { hooks, workspace: workspace.to_path_buf(), ..Hooks::default() }
    }

    /// These hooks with `provider`'s `model` to ask for `prompt` and `agent`
    /// hooks (an agent's own model); `None` when no hook needs one.
    pub fn with_model(&self, provider: Arc<dyn Provider>, model: &str) -> Option<Hooks> {
        if !self.hooks.iter().any(|h| h.options.prompt.is_some()) {
            return None;
        }
        let model = prompt::HookModel { provider, model: model.to_string() };
        Some(Hooks { model: Some(model), ..self.clone() })
    }

    /// True when some hook listens to `event` (so callers skip building its input).
    pub fn has(&self, event: HookEvent) -> bool {
        self.hooks.iter().any(|h| h.event == event)
    }

    /// Every hook, in the order they run.
    pub fn list(&self) -> &[Hook] {
        &self.hooks
    }

    /// The variables set for `hook`'s command: Claude Code settings' `env`,
    /// then the hook's own (a plugin's paths).
    fn env_for(&self, hook: &Hook) -> Vec<(String, String)> {
        self.set_env.iter().chain(&hook.options.env).cloned().collect()
    }

    /// Starts an `async` hook in the background: nothing waits for it and
    /// its answer is not read (Claude Code's `async: true`).
    fn start_async(&self, hook: &Hook, text: String) {
        let (hook, workspace, env) = (hook.clone(), self.workspace.clone(), self.env.clone());
        let (set_env, model) = (self.env_for(&hook), self.model.clone());
        tokio::spawn(async move {
            let run = match (&hook.options.http, &hook.options.prompt) {
                (Some(target), _) => http::post(target, &text, hook.timeout_secs).await,
                (None, Some(question)) => {
                    prompt::ask(model.as_ref(), question, &text, hook.timeout_secs).await
                }
                (None, None) => {
                    let timeout = hook.timeout_secs;
                    command::run(&hook.command, &text, &workspace, timeout, &env, &set_env).await
                }
            };
            if !matches!(run.ended, Ended::Exited(Some(0))) {
                tracing::warn!(
                    "async hook `{}` ended: {:?} {}",
                    hook.command,
                    run.ended,
                    run.stderr
                );
            }
        });
    }

    /// Runs the hooks of `event` whose matcher accepts one of `subject`
    /// (a tool's names, a SessionStart source, ...), one after another,
    /// with `fields` added to the common input.
    pub async fn run(
        &self,
        event: HookEvent,
        subject: &[&str],
        common: &Common,
        fields: Value,
    ) -> HookOutcome {
        let mut outcome = HookOutcome::default();
        let mut input = base_input(event, common);
        if let Value::Object(extra) = fields {
            input.extend(extra);
        }
        for hook in self.hooks.iter().filter(|h| h.event == event && h.matcher.accepts(subject)) {
            if let Some(updated) = &outcome.updated_input {
                input.insert("tool_input".into(), updated.clone());
            }
            let text = Value::Object(input.clone()).to_string();
            if let Some(ran) = &hook.options.once
                && ran.swap(true, std::sync::atomic::Ordering::SeqCst)
            {
                continue;
            }
            if let Some(message) = &hook.options.status_message {
                tracing::info!("{} hook: {message}", event.name());
            }
            if hook.options.run_async {
                self.start_async(hook, text);
                outcome.runs.push(HookRecord::started(event, hook));
                continue;
            }
            let run = match (&hook.options.http, &hook.options.prompt) {
                (Some(target), _) => http::post(target, &text, hook.timeout_secs).await,
                (None, Some(question)) => {
                    prompt::ask(self.model.as_ref(), question, &text, hook.timeout_secs).await
                }
                (None, None) => {
                    command::run(
                        &hook.command,
                        &text,
                        &self.workspace,
                        hook.timeout_secs,
                        &self.env,
                        &self.env_for(hook),
                    )
                    .await
                }
            };
            let result = read_answer(event, hook, &run, &mut outcome);
            let exit_code = match run.ended {
                Ended::Exited(code) => code,
                _ => None,
            };
            outcome.runs.push(HookRecord {
                event,
                command: hook.command.clone(),
                exit_code,
                result,
                duration_ms: run.duration_ms,
            });
        }
        outcome
    }
}

/// For an untrusted workspace: the project's Claude Code settings files
/// whose hooks are skipped, one note each (`.agent/config.toml`'s are noted
/// by [`crate::config::ConfigFile::take_untrusted`]).
pub fn untrusted_notes(workspace: &Path) -> Vec<String> {
    let (_, project) = settings::claude_files(workspace);
    let mut notes = Vec::new();
    for file in project {
        let name = file.strip_prefix(workspace).unwrap_or(&file).display().to_string();
        match settings::read_claude_file(&file) {
            Ok(Some(table)) if !table.is_empty() => {
                notes
                    .push(format!("hooks (commands) for {} in {name}", settings::describe(&table)));
            }
            Ok(_) => {}
            Err(e) => notes.push(format!("hooks in {name} (and the file does not read: {e})")),
        }
    }
    notes
}

/// The fields every event sends.
fn base_input(event: HookEvent, common: &Common) -> Map<String, Value> {
    let mut input = Map::new();
    input.insert("session_id".into(), common.session_id.clone().into());
    input.insert(
        "transcript_path".into(),
        common.transcript_path.to_string_lossy().into_owned().into(),
    );
    input.insert("cwd".into(), common.cwd.to_string_lossy().into_owned().into());
    // Claude Code sends no mode with the session's or a sub-agent's start, nor the session's end.
    if !matches!(event, HookEvent::SessionStart | HookEvent::SessionEnd | HookEvent::SubagentStart)
    {
        input.insert("permission_mode".into(), common.permission_mode.clone().into());
    }
    input.insert("hook_event_name".into(), event.name().into());
    if let Some((id, kind)) = &common.agent {
        input.insert("agent_id".into(), id.clone().into());
        input.insert("agent_type".into(), kind.clone().into());
    }
    input
}

/// Folds one run's answer into `outcome`; returns what the session file says of it.
fn read_answer(
    event: HookEvent,
    hook: &Hook,
    run: &command::CommandRun,
    outcome: &mut HookOutcome,
) -> String {
    let failed = |why: String, outcome: &mut HookOutcome| {
        let what = format!("{} hook `{}` {why}", event.name(), hook.command);
        if hook.fail_closed {
            block(outcome, format!("{what}; it is fail_closed, so this is blocked"));
            format!("blocked (fail_closed): {why}")
        } else {
            outcome.notices.push(what);
            format!("error: {why}")
        }
    };
    if let Some(note) = run.cap_note() {
        if run.over_cap.is_some_and(|(stream, _)| stream == "stdout") {
            return failed(note, outcome);
        }
        outcome.notices.push(format!("{} hook `{}` {note}", event.name(), hook.command));
    }
    match &run.ended {
        Ended::NotStarted(e) => failed(format!("could not start: {e}"), outcome),
        Ended::TimedOut => failed(format!("timed out after {}s", hook.timeout_secs), outcome),
        Ended::Exited(None) => failed("was killed by a signal".into(), outcome),
        Ended::Exited(Some(2)) => {
            let reason = if run.stderr.is_empty() {
                format!("blocked by the {} hook `{}`", event.name(), hook.command)
            } else {
                run.stderr.clone()
            };
            block(outcome, reason.clone());
            format!("blocked: {reason}")
        }
        Ended::Exited(Some(0)) => {
            if !run.stdout.starts_with('{') {
                let plain = matches!(event, HookEvent::UserPromptSubmit | HookEvent::SessionStart);
                if plain && !run.stdout.is_empty() {
                    outcome.context.push(run.stdout.clone());
                }
                return "ok".into();
            }
            match serde_json::from_str::<Value>(&run.stdout) {
                Ok(answer) => read_json(&answer, outcome),
                Err(e) => failed(format!("printed JSON that does not parse ({e})"), outcome),
            }
        }
        Ended::Exited(Some(code)) => {
            let why = match run.stderr.is_empty() {
                true => format!("failed with exit code {code}"),
                false => format!("failed with exit code {code}: {}", run.stderr),
            };
            failed(why, outcome)
        }
    }
}

/// Claude Code's JSON answer (exit 0).
fn read_json(answer: &Value, outcome: &mut HookOutcome) -> String {
    let text = |v: &Value, key: &str| v.get(key).and_then(Value::as_str).map(str::to_string);
    let reason = text(answer, "reason").unwrap_or_default();
    let mut result = "ok".to_string();
    if let Some(message) = text(answer, "systemMessage") {
        outcome.notices.push(message);
    }
    match answer.get("decision").and_then(Value::as_str) {
        Some("block") => {
            let why =
                if reason.is_empty() { "blocked by a hook".to_string() } else { reason.clone() };
            block(outcome, why.clone());
            result = format!("blocked: {why}");
        }
        Some("approve") => raise(outcome, PermissionAnswer::Allow),
        _ => {}
    }
    if let Some(specific) = answer.get("hookSpecificOutput") {
        let why = text(specific, "permissionDecisionReason").unwrap_or_else(|| reason.clone());
        match specific.get("permissionDecision").and_then(Value::as_str) {
            Some("allow") => raise(outcome, PermissionAnswer::Allow),
            Some("ask") => raise(outcome, PermissionAnswer::Ask),
            Some("deny") => {
                let why = if why.is_empty() { "denied by a hook".into() } else { why };
                result = format!("deny: {why}");
                raise(outcome, PermissionAnswer::Deny(why));
            }
            _ => {}
        }
        // PermissionRequest: {"decision": {"behavior": "allow"|"deny", "message", "updatedInput"}}.
        if let Some(decision) = specific.get("decision").filter(|d| d.is_object()) {
            match decision.get("behavior").and_then(Value::as_str) {
                Some("allow") => raise(outcome, PermissionAnswer::Allow),
                Some("deny") => {
                    let why =
                        text(decision, "message").unwrap_or_else(|| "denied by a hook".into());
                    result = format!("deny: {why}");
                    raise(outcome, PermissionAnswer::Deny(why));
                }
                _ => {}
            }
            if let Some(input) = decision.get("updatedInput").filter(|v| v.is_object()) {
                outcome.updated_input = Some(input.clone());
            }
        }
        if let Some(input) = specific.get("updatedInput").filter(|v| v.is_object()) {
            outcome.updated_input = Some(input.clone());
            result.push_str(" (input rewritten)");
        }
        if let Some(context) = text(specific, "additionalContext").filter(|c| !c.is_empty()) {
            outcome.context.push(context);
        }
    }
    if answer.get("continue").and_then(Value::as_bool) == Some(false) {
        let why = text(answer, "stopReason").unwrap_or_else(|| "stopped by a hook".into());
        result = format!("stop: {why}");
        outcome.stop.get_or_insert(why);
    }
    result
}

/// Blocks, unless an earlier hook of the chain already did (its reason stays).
fn block(outcome: &mut HookOutcome, reason: String) {
    outcome.blocked.get_or_insert(reason);
}

/// Keeps the strictest permission answer.
fn raise(outcome: &mut HookOutcome, answer: PermissionAnswer) {
    if outcome.permission.as_ref().is_none_or(|current| answer > *current) {
        outcome.permission = Some(answer);
    }
}

/// True for the reason of a tool call a hook refused (as the loop words it:
/// `blocked by a PreToolUse hook: ...`, `denied by a PermissionRequest hook: ...`).
pub fn refused_by_hook(reason: &str) -> bool {
    (reason.starts_with("blocked by a ") || reason.starts_with("denied by a "))
        && reason.split(':').next().is_some_and(|head| head.ends_with(" hook"))
}

/// Claude Code's name for one of our tools (`bash` -> `Bash`), so matchers
/// and scripts written for Claude Code see the names they know (the table
/// is [`ferroclaw_tools::claude`]).
pub fn claude_tool_name(tool: &str) -> Option<&'static str> {
    ferroclaw_tools::claude::claude_name(tool)
}

#[cfg(test)]
mod tests;
