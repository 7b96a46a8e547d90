//! The differential harness: the pinned Claude Code and ferroclaw run the
//! same scenarios (project files, `.claude/` settings and hooks, CLAUDE.md
//! files, commands, agents) against the same scripted model, and what they
//! did is compared after ids, times and temp paths are normalised: each hook's
//! stdin field by field, the files on disk, what reached the model (tool
//! results, injected memory and commands), and the `-p` stream-json output.
//!
//! Scenarios live in `claude_diff/scenarios/*.toml`, written once in Claude
//! Code's terms. Every difference must be listed in
//! `claude_diff/known_differences.toml` as `fix` or `deliberate`.
//!
//! Claude Code comes from `FERROCLAW_CLAUDE_CODE_DIR`, else
//! `~/.cache/ferroclaw-claude-code` (installed by `scripts/test`:
//! `npm install --prefix DIR @anthropic-ai/claude-code@2.1.332`). Without it
//! the harness fails, unless the developer opted out with
//! `FERROCLAW_TEST_SKIP=claude-code`. Variables: `FERROCLAW_CLAUDE_DIFF_ONLY=A,B` runs
//! the scenarios whose names contain A or B; `FERROCLAW_CLAUDE_DIFF_WRITE=1` rewrites the
//! known-differences file from what this run found (reasons kept; with
//! `_ONLY`, only the matching scenarios' entries);
//! `FERROCLAW_CLAUDE_DIFF_SHOW=1` prints every difference with both values
//! (`=2`: and each side's whole `-p` output);
//! `FERROCLAW_CLAUDE_DIFF_RAW_INPUTS=1` sends every scenario's tool inputs to
//! ferroclaw exactly as Claude Code gets them (no `file_path` → `path`).

mod known;
mod observe;
mod scenario;

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Instant;

use ferroclaw_testkit::components::{self, Component};
use known::Difference;
use scenario::{Scenario, Side};

/// The Claude Code version the harness is pinned to (and `scripts/test` installs).
const PINNED: &str = "2.1.332";
/// Scenarios the harness must hold (issue 29 asks for at least 40).
const MIN_SCENARIOS: usize = 40;
/// Scenarios run at once (each runs its two sides one after the other).
const WORKERS: usize = 2;

fn here() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/claude_diff")
}

/// The pinned `claude` binary; `None` only when the developer opted out
/// (`FERROCLAW_TEST_SKIP=claude-code`).
#[track_caller]
fn claude_binary() -> Option<PathBuf> {
    let dir = components::require(Component::ClaudeCode, components::claude_code_dir())?;
    let package = dir.join("node_modules/@anthropic-ai/claude-code/package.json");
    let manifest = std::fs::read_to_string(&package)
        .unwrap_or_else(|e| panic!("{}: {e} (scripts/test installs it)", package.display()));
    assert!(
        manifest.contains(&format!("\"version\": \"{PINNED}\"")),
        "{} is not Claude Code {PINNED} (scripts/test installs it)",
        package.display()
    );
    Some(dir.join("node_modules/.bin/claude"))
}

#[test]
fn ferroclaw_does_what_the_pinned_claude_code_does_or_the_difference_is_explained() {
    let Some(claude) = claude_binary() else { return };
    let only = std::env::var("FERROCLAW_CLAUDE_DIFF_ONLY").unwrap_or_default();
    let scenarios: Vec<Scenario> = scenario::load_all(&here().join("scenarios"))
        .into_iter()
        .filter(|s| only.split(',').any(|part| s.name.contains(part)))
        .collect();
    assert!(
        !only.is_empty() || scenarios.len() >= MIN_SCENARIOS,
        "the harness promises at least {MIN_SCENARIOS} scenarios, found {}",
        scenarios.len()
    );
    let started = Instant::now();
    let found = run_all(&scenarios, &claude);
    let elapsed = started.elapsed().as_secs_f64();
    let names: Vec<String> = scenarios.iter().map(|s| s.name.clone()).collect();
    let known_path = here().join("known_differences.toml");
    let known = known::load(&known_path);
    if std::env::var("FERROCLAW_CLAUDE_DIFF_WRITE").is_ok_and(|v| v == "1") {
        known::write(&known_path, &known, &found, &names, !only.is_empty());
        eprintln!("wrote {} from {} differences", known_path.display(), found.len());
        return;
    }
    let show = std::env::var("FERROCLAW_CLAUDE_DIFF_SHOW").is_ok_and(|v| v == "1" || v == "2");
    let unexplained: Vec<&Difference> =
        found.iter().filter(|d| !known.iter().any(|k| k.matches(d))).collect();
    for d in found.iter().filter(|_| show) {
        eprintln!("{}", describe(d));
    }
    for k in &known {
        let in_run = (k.scenario == "*" && only.is_empty()) || names.contains(&k.scenario);
        if in_run && !found.iter().any(|d| k.matches(d)) {
            loud(&format!("stale, remove: {} {} ({})", k.scenario, k.key, k.reason));
        }
    }
    let (fix, deliberate) = known
        .iter()
        .fold((0, 0), |(f, d), k| if k.class == "fix" { (f + 1, d) } else { (f, d + 1) });
    loud(&format!(
        "claude_diff: {} scenarios in {elapsed:.0}s; {} differences, {} unexplained; \
         known entries: {fix} fix, {deliberate} deliberate",
        scenarios.len(),
        found.len(),
        unexplained.len()
    ));
    let report: Vec<String> = unexplained.iter().map(|d| describe(d)).collect();
    assert!(
        unexplained.is_empty(),
        "differences from Claude Code {PINNED} not in {}:\n{}",
        known_path.display(),
        report.join("\n")
    );
}

/// Runs every scenario on both sides, [`WORKERS`] at a time.
fn run_all(scenarios: &[Scenario], claude: &Path) -> Vec<Difference> {
    let next = Mutex::new(0usize);
    let found = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..WORKERS {
            scope.spawn(|| {
                loop {
                    let i = {
                        let mut next = next.lock().unwrap();
                        *next += 1;
                        *next - 1
                    };
                    let Some(s) = scenarios.get(i) else { break };
                    let (claude_facts, claude_err) = observe::observe(s, Side::Claude, claude);
                    let (ferro_facts, ferro_err) = observe::observe(s, Side::Ferroclaw, claude);
                    let diffs = known::differences(&s.name, &claude_facts, &ferro_facts);
                    if std::env::var("FERROCLAW_CLAUDE_DIFF_SHOW")
                        .is_ok_and(|v| v == "1" || v == "2")
                    {
                        eprintln!("--- {}: claude stderr:\n{claude_err}", s.name);
                        eprintln!("--- {}: ferroclaw stderr:\n{ferro_err}", s.name);
                    }
                    found.lock().unwrap().extend(diffs);
                }
            });
        }
    });
    let mut found = found.into_inner().unwrap();
    found.sort_by(|a, b| (&a.scenario, &a.key).cmp(&(&b.scenario, &b.key)));
    found
}

/// Written to stderr past the test harness's capture, so that a skip or the
/// summary shows in CI's log even when the test passes.
fn loud(text: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "{text}");
}

fn describe(d: &Difference) -> String {
    let cut = |v: &Option<String>| match v {
        None => "<absent>".to_string(),
        Some(s) if s.chars().count() > 300 => {
            format!("{:?}...", s.chars().take(300).collect::<String>())
        }
        Some(s) => format!("{s:?}"),
    };
    format!(
        "{} {}\n    claude:    {}\n    ferroclaw: {}",
        d.scenario,
        d.key,
        cut(&d.claude),
        cut(&d.ferroclaw)
    )
}

#[test]
fn a_listed_difference_covers_its_key_at_any_index_and_only_in_its_scenario() {
    let entry = |scenario: &str, key: &str| known::Known {
        scenario: scenario.into(),
        key: key.into(),
        class: "fix".into(),
        reason: "r".into(),
    };
    let seen = |scenario: &str, key: &str| Difference {
        scenario: scenario.into(),
        key: key.into(),
        claude: Some("a".into()),
        ferroclaw: None,
    };
    let listed = entry("deny_read_env", "hooks.PreToolUse[*].tool_input.file_path");
    assert!(listed.matches(&seen("deny_read_env", "hooks.PreToolUse[3].tool_input.file_path")));
    assert!(!listed.matches(&seen("read_file", "hooks.PreToolUse[0].tool_input.file_path")));
    assert!(!listed.matches(&seen("deny_read_env", "hooks.PreToolUse[0].tool_input.path")));
    let everywhere = entry("*", "disk/*");
    assert!(everywhere.matches(&seen("read_file", "disk/notes.txt")));
    assert!(!everywhere.matches(&seen("read_file", "exit_code")));
}
