//! The known-differences file: each listed difference is explained (`fix`:
//! a gap issue 29 closes; `deliberate`: kept on purpose, with the reason).
//! An unlisted difference fails the harness; a listed one that no longer
//! occurs is reported as stale. `FERROCLAW_CLAUDE_DIFF_WRITE=1` rewrites the
//! file from the current differences, keeping the reasons of entries that
//! still match.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

/// A difference seen in one scenario at one aspect path.
#[derive(Clone, Debug)]
pub(super) struct Difference {
    pub scenario: String,
    pub key: String,
    pub claude: Option<String>,
    pub ferroclaw: Option<String>,
}

/// A difference with its explanation.
#[derive(Serialize, Deserialize, Clone, Debug)]
#[serde(deny_unknown_fields)]
pub(super) struct Known {
    /// A scenario's name, or `*` for every scenario.
    pub scenario: String,
    /// An aspect path; a trailing `*` matches every path it begins.
    pub key: String,
    /// `fix` or `deliberate`.
    pub class: String,
    pub reason: String,
}

#[derive(Serialize, Deserialize, Default)]
struct KnownFile {
    #[serde(default)]
    difference: Vec<Known>,
}

impl Known {
    pub(super) fn matches(&self, d: &Difference) -> bool {
        let scenario = self.scenario == "*" || self.scenario == d.scenario;
        scenario && key_matches(&self.key, &d.key)
    }
}

/// Every path where the two sides' facts differ.
pub(super) fn differences(
    scenario: &str,
    claude: &BTreeMap<String, String>,
    ferroclaw: &BTreeMap<String, String>,
) -> Vec<Difference> {
    let mut keys: Vec<&String> = claude.keys().chain(ferroclaw.keys()).collect();
    keys.sort();
    keys.dedup();
    keys.into_iter()
        .filter(|k| claude.get(*k) != ferroclaw.get(*k))
        .map(|k| Difference {
            scenario: scenario.to_string(),
            key: k.clone(),
            claude: claude.get(k).cloned(),
            ferroclaw: ferroclaw.get(k).cloned(),
        })
        .collect()
}

pub(super) fn load(path: &Path) -> Vec<Known> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let file: KnownFile =
        toml::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    for k in &file.difference {
        assert!(
            k.class == "fix" || k.class == "deliberate",
            "{}: {} {}: class must be fix or deliberate",
            path.display(),
            k.scenario,
            k.key
        );
    }
    file.difference
}

/// A key seen in this many scenarios or more is written once, for `*`.
const EVERYWHERE: usize = 4;

/// The file rewritten from `found`: entries that still match keep their
/// class and reason; new ones get a first classification by aspect.
/// With `partial` (a run of some scenarios), the entries of the others and
/// those for every scenario are kept as they are.
pub(super) fn write(
    path: &Path,
    old: &[Known],
    found: &[Difference],
    scenarios: &[String],
    partial: bool,
) {
    let untouched = |k: &&Known| k.scenario == "*" || !scenarios.contains(&k.scenario);
    let mut kept: Vec<Known> =
        if partial { old.iter().filter(untouched).cloned().collect() } else { Vec::new() };
    let mut new: Vec<&Difference> = Vec::new();
    for d in found {
        match old.iter().find(|k| k.matches(d)) {
            Some(k) if !kept.iter().any(|e| e.scenario == k.scenario && e.key == k.key) => {
                kept.push(k.clone());
            }
            Some(_) => {}
            None => new.push(d),
        }
    }
    let mut by_key: BTreeMap<String, Vec<&str>> = BTreeMap::new();
    for d in new.iter().filter(|d| !NO_CLAUDE_TOOL.contains(&d.scenario.as_str())) {
        let seen = by_key.entry(generic(&d.key)).or_default();
        if !seen.contains(&d.scenario.as_str()) {
            seen.push(&d.scenario);
        }
    }
    for d in new {
        let spread = by_key.get(&generic(&d.key)).map_or(0, Vec::len);
        let wide = !partial && may_be_wide(&d.key) && spread >= EVERYWHERE;
        let scenario = if wide { "*".to_string() } else { d.scenario.clone() };
        let key = generic(&d.key);
        if kept.iter().any(|e| e.scenario == scenario && e.key == key) {
            continue;
        }
        let (class, reason) = classify(&scenario, &d.key);
        kept.push(Known { scenario, key, class: class.into(), reason: reason.into() });
    }
    kept.sort_by(|a, b| (&a.class, &a.scenario, &a.key).cmp(&(&b.class, &b.scenario, &b.key)));
    let header = "# Differences between ferroclaw and the pinned Claude Code that the \
                  differential harness\n# (crates/cli/tests/claude_diff.rs) accepts. class = \
                  \"fix\": a gap being closed (issue 29);\n# \"deliberate\": kept on purpose, \
                  for the reason given. Regenerate with\n# FERROCLAW_CLAUDE_DIFF_WRITE=1 cargo \
                  test -p ferroclaw-cli --test e2e -- claude_diff:: (reasons are kept).\n\n";
    let body = toml::to_string(&KnownFile { difference: kept }).unwrap();
    std::fs::write(path, format!("{header}{body}")).unwrap();
}

/// A key with every array index made `[*]`: `hooks[3].stdin.cwd` →
/// `hooks[*].stdin.cwd`.
fn generic(key: &str) -> String {
    let (mut out, mut rest) = (String::new(), key);
    while let Some(open) = rest.find('[') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        let digits = after.chars().take_while(char::is_ascii_digit).count();
        if digits > 0 && after[digits..].starts_with(']') {
            out.push_str("[*]");
            rest = &after[digits + 1..];
        } else {
            out.push('[');
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

/// Whether `key` matches `pattern`: `[*]` stands for any index, a trailing
/// `*` for any rest.
fn key_matches(pattern: &str, key: &str) -> bool {
    let (pattern, prefix_only) = match pattern.strip_suffix('*').filter(|p| !p.ends_with('[')) {
        Some(p) => (p, true),
        None => (pattern, false),
    };
    let generic_key = generic(key);
    if prefix_only {
        generic_key.starts_with(pattern) || key.starts_with(pattern)
    } else {
        generic_key == pattern || key == pattern
    }
}

/// Whether a difference of this key may be listed once for every scenario:
/// not the outcomes (errors, files, exit codes, what the model was told),
/// which are listed scenario by scenario so a new one is never hidden.
fn may_be_wide(key: &str) -> bool {
    let outcome = key.starts_with("disk/")
        || key == "exit_code"
        || key == "model.requests"
        || key.ends_with(".is_error")
        || key.ends_with(".context")
        || key.starts_with("stream.result");
    !outcome
}

/// Scenarios whose tools the pinned Claude Code does not offer (it answers
/// "No such tool available"; WebFetch is deferred behind ToolSearch).
const NO_CLAUDE_TOOL: &[&str] =
    &["glob_files", "grep_files", "multi_edit", "web_fetch_unreachable"];

/// A first classification of a new difference, by scenario and aspect;
/// edit the file to say more (reasons are kept when it is rewritten).
fn classify(scenario: &str, key: &str) -> (&'static str, &'static str) {
    let undocumented = ["prompt_id", "background_tasks", "session_crons", "duration_ms"];
    let outcome = key.starts_with("disk/") || key.ends_with(".is_error");
    let rules: &[(bool, &str, &str)] = &[
        (
            NO_CLAUDE_TOOL.contains(&scenario),
            "deliberate",
            "ferroclaw keeps this tool; Claude Code 2.1.332 has no such tool (or defers it)",
        ),
        (
            key.starts_with("hooks.") && undocumented.iter().any(|f| key.contains(f)),
            "deliberate",
            "a field Claude Code 2.1.332 sends beyond its documented hook input",
        ),
        (
            key.starts_with("model[") && key.ends_with(".text"),
            "deliberate",
            "ferroclaw words its tool results its own way",
        ),
        (
            scenario.starts_with("write_") || scenario.starts_with("edit_file_never"),
            "fix",
            "a write over a file never read or changed since read must be refused (issue 29: no lost work)",
        ),
        (
            scenario.starts_with("deny_")
                || scenario.contains("_mode_")
                || scenario.ends_with("_mode"),
            "fix",
            "settings permissions and modes as Claude Code applies them (issue 29: settings)",
        ),
        (
            scenario == "protect_files_hook_from_the_docs",
            "fix",
            "the hook reads tool_input.file_path, which ferroclaw does not send, so it guards nothing",
        ),
        (
            scenario == "unknown_events_in_settings" || scenario == "newer_events_recorded",
            "fix",
            "an unknown hook event stops ferroclaw's run; Claude Code warns and goes on (issue 29: hooks)",
        ),
        (
            scenario.contains("agent"),
            "fix",
            "no Agent tool by Claude's name, .claude/agents not read (issue 29: agents)",
        ),
        (
            key.ends_with(".context") && scenario.starts_with("command"),
            "fix",
            "command arguments as Claude Code expands them (issue 29: commands)",
        ),
        (
            key.ends_with(".context"),
            "fix",
            "memory files Claude Code reads that ferroclaw does not (issue 29: memory files)",
        ),
        (
            key.contains("last_assistant_message"),
            "fix",
            "Stop/SubagentStop carry last_assistant_message (issue 29: hooks)",
        ),
        (
            key.starts_with("hooks.") && key.contains(".tool_response."),
            "fix",
            "tool_response in Claude's shape (issue 29: Claude-compatible view)",
        ),
        (
            key.starts_with("hooks.") && key.contains(".tool_input."),
            "fix",
            "tool_input in Claude's shape, file_path absolute (issue 29: Claude-compatible view)",
        ),
        (key.starts_with("hooks."), "fix", "hook event or field differs (issue 29: hooks)"),
        (
            key.contains("permissionMode"),
            "fix",
            "permissionMode spelled ferroclaw's way (bypass, accept-edits), not Claude's",
        ),
        (
            key.starts_with("stream.init") && key.ends_with(".model"),
            "fix",
            "init's model carries ferroclaw's provider prefix",
        ),
        (
            key.starts_with("stream.system."),
            "fix",
            "Claude Code emits this system message (hook_started/hook_response, permission_denied, task_*)",
        ),
        (
            key.starts_with("schema."),
            "fix",
            "-p message fields: Claude's have more (uuid, stop_reason, usage, cache_read_input_tokens, ...)",
        ),
        (outcome, "fix", "the outcome differs (issue 29)"),
    ];
    rules.iter().find(|(applies, _, _)| *applies).map_or(
        ("fix", "-p output differs from Claude Code's (issue 29: -p like Claude Code)"),
        |r| (r.1, r.2),
    )
}
