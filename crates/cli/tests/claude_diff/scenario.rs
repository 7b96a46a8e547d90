//! A scenario file's contents and how each side's folder is laid out from it.
//!
//! A scenario is written once, in Claude Code's terms (tool names, inputs,
//! settings, hook configuration); both sides get the same files and the same
//! model script. The only mechanical change for ferroclaw is
//! [`for_ferroclaw`], which renames Claude's input keys that today's
//! ferroclaw tools do not accept (never a second hand-written script).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use ferroclaw_testkit::{ScriptedToolCall, Step, Turn};
use serde::Deserialize;
use serde_json::{Value, json};

/// Every hook event Claude Code documents; `dump_hooks = ["*"]` installs a
/// recording hook for each.
pub(super) const ALL_EVENTS: &[&str] = &[
    "PreToolUse",
    "PostToolUse",
    "PostToolUseFailure",
    "PermissionRequest",
    "UserPromptSubmit",
    "Notification",
    "Stop",
    "SubagentStart",
    "SubagentStop",
    "PreCompact",
    "SessionStart",
    "SessionEnd",
];

/// One themed file of scenarios (`scenarios/*.toml`).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ScenarioFile {
    pub scenario: Vec<Scenario>,
}

/// One scenario: the project, the prompt, the model's script.
#[derive(Deserialize, Clone)]
#[serde(deny_unknown_fields)]
pub(super) struct Scenario {
    pub name: String,
    /// The user's request (`-p PROMPT`); `/cmd args` runs a custom command.
    pub prompt: String,
    /// Claude Code's permission mode: `bypassPermissions` (the default: no
    /// prompts, deny rules still apply), `default`, `acceptEdits`, `plan`.
    #[serde(default = "bypass")]
    pub mode: String,
    /// `stream-json` (default) or `json`.
    #[serde(default = "stream_json")]
    pub output: String,
    /// Project files, relative to the project root (`.claude/settings.json`
    /// included). `{{root}}` and `{{home}}` are replaced by each side's paths.
    #[serde(default)]
    pub files: BTreeMap<String, String>,
    /// Files under the throw-away HOME (`.claude/CLAUDE.md`, ...).
    #[serde(default)]
    pub home_files: BTreeMap<String, String>,
    /// Files made executable after writing (hook scripts).
    #[serde(default)]
    pub executable: Vec<String>,
    /// Events that get a hook recording its stdin (`["*"]`: every event).
    #[serde(default)]
    pub dump_hooks: Vec<String>,
    /// Working folder below the project root.
    #[serde(default)]
    pub cwd: Option<String>,
    /// Strings whose presence in the model's requests is compared (memory
    /// files' contents, command bodies).
    #[serde(default)]
    pub markers: Vec<String>,
    /// Compare the key sets of every `-p` output message (the schema).
    #[serde(default)]
    pub compare_schema: bool,
    /// Send Claude's tool inputs to ferroclaw unchanged (no [`for_ferroclaw`]).
    #[serde(default)]
    pub raw_inputs: bool,
    /// Further flags for both programs (`--plugin-dir {{root}}/plugin`).
    #[serde(default)]
    pub args: Vec<String>,
    /// The model's answers, in order.
    pub script: Vec<ScriptTurn>,
}

/// One scripted answer: text, then tool calls in Claude Code's shape.
#[derive(Deserialize, Clone)]
#[serde(deny_unknown_fields)]
pub(super) struct ScriptTurn {
    #[serde(default)]
    pub text: String,
    #[serde(default)]
    pub tools: Vec<ScriptCall>,
}

/// A tool call: Claude Code's tool name and input.
#[derive(Deserialize, Clone)]
#[serde(deny_unknown_fields)]
pub(super) struct ScriptCall {
    pub name: String,
    #[serde(default = "empty_object")]
    pub input: Value,
}

fn bypass() -> String {
    "bypassPermissions".into()
}
fn stream_json() -> String {
    "stream-json".into()
}
fn empty_object() -> Value {
    json!({})
}

/// Which program a side runs.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Side {
    Claude,
    Ferroclaw,
}

/// One side's throw-away folders: `DIR/project`, `DIR/home`, `DIR/hooks.jsonl`.
pub(super) struct Layout {
    pub dir: tempfile::TempDir,
}

impl Layout {
    pub(super) fn root(&self) -> PathBuf {
        self.dir.path().join("project")
    }
    pub(super) fn home(&self) -> PathBuf {
        self.dir.path().join("home")
    }
    pub(super) fn hook_log(&self) -> PathBuf {
        self.dir.path().join("hooks.jsonl")
    }
    pub(super) fn cwd(&self, scenario: &Scenario) -> PathBuf {
        scenario.cwd.as_ref().map_or_else(|| self.root(), |sub| self.root().join(sub))
    }
    /// `{{root}}` and `{{home}}` filled in for this side.
    pub(super) fn fill(&self, text: &str) -> String {
        text.replace("{{root}}", &self.root().to_string_lossy())
            .replace("{{home}}", &self.home().to_string_lossy())
    }
}

/// Records a hook's stdin, one JSON line per run, in the order runs end.
const DUMP_HOOK: &str = r#"import json, sys
raw = sys.stdin.read()
try:
    payload = json.loads(raw)
except ValueError:
    payload = {"unparsed": raw}
with open(sys.argv[1], "a") as log:
    log.write(json.dumps({"hook": sys.argv[2], "stdin": payload}) + "\n")
"#;

/// Lays out one side: project (a git repository), HOME, the recording hook.
pub(super) fn lay_out(scenario: &Scenario) -> Layout {
    let layout = Layout { dir: tempfile::Builder::new().prefix("claude-diff-").tempdir().unwrap() };
    let (root, home) = (layout.root(), layout.home());
    std::fs::create_dir_all(&root).unwrap();
    std::fs::create_dir_all(&home).unwrap();
    ferroclaw_testkit::git::git(&root, &["init", "-q", "-b", "main"]);
    for (base, files) in [(&root, &scenario.files), (&home, &scenario.home_files)] {
        for (rel, text) in files {
            let path = base.join(rel);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, layout.fill(text)).unwrap();
        }
    }
    for rel in &scenario.executable {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::Permissions::from_mode(0o755);
        std::fs::set_permissions(root.join(rel), mode).unwrap();
    }
    if let Some(cwd) = &scenario.cwd {
        std::fs::create_dir_all(root.join(cwd)).unwrap();
    }
    if !scenario.dump_hooks.is_empty() {
        add_dump_hooks(&layout, scenario);
    }
    layout
}

/// Adds a recording hook for each event in `dump_hooks` to the project's
/// `.claude/settings.json`, after the scenario's own hooks.
fn add_dump_hooks(layout: &Layout, scenario: &Scenario) {
    let script = layout.dir.path().join("dump_hook.py");
    std::fs::write(&script, DUMP_HOOK).unwrap();
    let settings_path = layout.root().join(".claude/settings.json");
    let mut settings: Value = std::fs::read_to_string(&settings_path)
        .map(|text| serde_json::from_str(&text).unwrap())
        .unwrap_or_else(|_| json!({}));
    let events: Vec<&str> = if scenario.dump_hooks.iter().any(|e| e == "*") {
        ALL_EVENTS.to_vec()
    } else {
        scenario.dump_hooks.iter().map(String::as_str).collect()
    };
    for event in events {
        let command = format!(
            "python3 {} {} {event}",
            script.to_string_lossy(),
            layout.hook_log().to_string_lossy()
        );
        let group = json!({"matcher": "*", "hooks": [{"type": "command", "command": command}]});
        let list = settings["hooks"][event].as_array().cloned().unwrap_or_default();
        settings["hooks"][event] = Value::Array([list, vec![group]].concat());
    }
    std::fs::create_dir_all(settings_path.parent().unwrap()).unwrap();
    std::fs::write(&settings_path, serde_json::to_string_pretty(&settings).unwrap()).unwrap();
}

/// The model script for one side, with deterministic tool-use ids.
pub(super) fn steps(scenario: &Scenario, layout: &Layout, side: Side) -> Vec<Step> {
    let everywhere_raw = std::env::var("FERROCLAW_CLAUDE_DIFF_RAW_INPUTS").is_ok_and(|v| v == "1");
    let translate = side == Side::Ferroclaw && !scenario.raw_inputs && !everywhere_raw;
    let turns = scenario.script.iter().enumerate().map(|(n, turn)| {
        let calls = turn.tools.iter().enumerate().map(|(i, call)| {
            let input: Value = serde_json::from_str(&layout.fill(&call.input.to_string())).unwrap();
            let input = if translate { for_ferroclaw(input) } else { input };
            let id = format!("toolu_diff_{n}_{i}");
            ScriptedToolCall { id, name: call.name.clone(), arguments: input }
        });
        let turn = Turn { text: turn.text.clone(), tool_calls: calls.collect(), ..Turn::default() };
        Step::from(turn)
    });
    // A side that asks more often than scripted gets a plain end of turn
    // (an exhausted script answers 500, which Claude Code retries for minutes).
    let spare = (0..SPARE_TURNS).map(|_| Step::from(Turn::text(SCRIPT_OVER)));
    turns.chain(spare).collect()
}

/// Answers after the script's own, so that extra requests end the turn.
const SPARE_TURNS: usize = 4;
/// What the spare answers say.
pub(super) const SCRIPT_OVER: &str = "(the script is over)";

/// Claude Code's input keys renamed to the ones today's ferroclaw tools take
/// (`file_path` → `path`); everything else, tool names included, unchanged
/// (ferroclaw maps Claude's tool names itself).
pub(super) fn for_ferroclaw(input: Value) -> Value {
    let Value::Object(map) = input else { return input };
    let renamed = map.into_iter().map(|(key, value)| match key.as_str() {
        "file_path" => ("path".to_string(), value),
        _ => (key, value),
    });
    Value::Object(renamed.collect())
}

/// Every scenario, from every file under `scenarios/`, in file then file order.
pub(super) fn load_all(dir: &Path) -> Vec<Scenario> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    files.sort();
    let mut all = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        let parsed: ScenarioFile =
            toml::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        all.extend(parsed.scenario);
    }
    let mut names: Vec<&str> = all.iter().map(|s| s.name.as_str()).collect();
    names.sort_unstable();
    names.windows(2).for_each(|w| assert_ne!(w[0], w[1], "two scenarios named {}", w[0]));
    all
}
