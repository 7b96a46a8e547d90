//! The escape oracle: every hostile repository of
//! [`ferroclaw_testkit::hostile`] (config and attributes naming programs
//! through filters, fsmonitor, hooks, pagers, textconv and external diff,
//! gpg, includes, a planted `commondir`, a submodule's config, a bare
//! repository and a planted worktree index under `.agent/worktrees/`, links
//! and FIFOs) against every entry point that runs git or reads the
//! project: the session-opening `git status` and the read-only tools a
//! model may call unasked (`worktree_list`, `worktree_status`,
//! `worktree_events`, `read`, `grep`, `glob`, `list_dir`), a session that
//! writes (checkpoints) and the subcommands `rewind`, `doctor`, `status`,
//! `context`, `sessions`, `tasks`, `worktrees`, `team`, `index`.
//!
//! The canary the repositories name must never run (no marker beside it or
//! in the workspace), nothing may reach its loopback listener, and the
//! secret beside it (outside the workspace) must never reach the model.
//!
//! Against an older build: `FERROCLAW_BIN=/path/ferroclaw cargo test -p
//! ferroclaw-cli --test e2e -- escape_oracle::`. Main before the launcher (3b516ba):
//! 6 of 16 fixtures (`filter-clean`, `filter-process`, `include-path`,
//! `include-if`, `links-and-fifos`, `planted-worktree-index`) ran the canary
//! through the worktree tools' unhardened git, and the one-shot run sent
//! the secret to the listener. `ORACLE_FIXTURE=NAME` runs one fixture,
//! `ORACLE_VERBOSE=1` prints what every entry point said.

use crate::common;

use common::{Env, Wire, run};
use ferroclaw_testkit::hostile::{Canary, FIXTURES, hostile_repo};
use ferroclaw_testkit::{ScriptedToolCall, Turn};
use serde_json::json;

/// The read-only tools a model may call unasked in default mode.
fn read_only_calls() -> Vec<ScriptedToolCall> {
    vec![
        ScriptedToolCall::new("worktree_list", json!({})),
        ScriptedToolCall::new("worktree_status", json!({"name": "evil"})),
        ScriptedToolCall::new("worktree_events", json!({"limit": 5})),
        ScriptedToolCall::new("read", json!({"path": "secret-link"})),
        ScriptedToolCall::new("grep", json!({"pattern": "CANARY", "path": "."})),
        ScriptedToolCall::new("glob", json!({"pattern": "**/*"})),
        ScriptedToolCall::new("list_dir", json!({"path": "."})),
    ]
}

/// The subcommands that read the project or run git, each with its args.
const SUBCOMMANDS: &[&[&str]] = &[
    &["rewind", "--list"],
    &["rewind", "1", "--code"],
    &["doctor"],
    &["status"],
    &["context"],
    &["sessions", "list"],
    &["tasks"],
    &["worktrees"],
    &["team"],
    &["index"],
];

/// Runs every entry point against one fixture; returns the canary's hits
/// and the entry points that leaked the secret to the model.
fn probe(fixture: &str) -> Vec<String> {
    let canary = Canary::new();
    let env = Env::new(
        Wire::Anthropic,
        vec![
            Turn::tools(read_only_calls()).into(),
            Turn::text("looked").into(),
            Turn::tool("write", json!({"path": "new.txt", "content": "x\n"})).into(),
            Turn::text("wrote").into(),
        ],
    );
    hostile_repo(env.ws(), fixture, &canary);
    env.write_home_config("[team]\n");
    let mut hits = Vec::new();
    let mut step = |label: &str, args: &[&str]| {
        let mut cmd = env.cmd();
        cmd.args(args);
        let (_, stdout, stderr) = run(&mut cmd);
        if std::env::var_os("ORACLE_VERBOSE").is_some() {
            eprintln!("== {fixture} × {label}\n{stdout}\n{stderr}");
        }
        for hit in canary.hits(env.ws()) {
            hits.push(format!("{fixture} × {label}: {hit}"));
        }
        if stdout.contains("CANARY-SECRET") || stderr.contains("CANARY-SECRET") {
            hits.push(format!("{fixture} × {label}: printed the secret"));
        }
    };
    // Default mode: only read-only tools run unasked.
    step("-p (session status + read-only tools)", &["-p", "look around"]);
    step("-p --yes (checkpoint of a write)", &["-p", "write", "--yes"]);
    for args in SUBCOMMANDS {
        step(&args.join(" "), args);
    }
    for (i, request) in env.server.requests().iter().enumerate() {
        if std::env::var_os("ORACLE_VERBOSE").is_some() {
            eprintln!("== request {i}: {}", request.body);
        }
        if request.body.to_string().contains("CANARY-SECRET") {
            hits.push(format!("{fixture} × request {i}: the secret reached the model"));
        }
    }
    hits
}

#[test]
fn no_hostile_repository_makes_any_entry_point_run_its_program_or_leak_the_secret() {
    let mut hits = Vec::new();
    let only = std::env::var("ORACLE_FIXTURE").ok();
    for fixture in FIXTURES.iter().filter(|f| only.as_deref().is_none_or(|o| o == **f)) {
        hits.extend(probe(fixture));
    }
    assert!(hits.is_empty(), "canary hits:\n{}", hits.join("\n"));
}
