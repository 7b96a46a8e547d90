//! The exec oracle: the shell gate checked against what bash really does.
//!
//! Command spellings are generated from a grammar of bash forms (lists,
//! pipes, substitutions, coprocs, functions, here-documents, brace and
//! arithmetic expansion, control structures, wrappers with every option
//! form, quoting) over real programs, each with arguments that write, run
//! or only read. For each, the permission gate decides under the rules a
//! user writes (`bash(PROGRAM:*)` for every program, no edit rule). Each
//! call it allows is then run under `strace -f` in a throw-away folder (its
//! own HOME and TMPDIR, stdin from /dev/null, no network address in any
//! spelling), and every program executed and every file written must be one
//! the gate's model reported. A miss is printed as a red-team case to paste
//! into `crates/cli/tests/redteam/effects.toml`.
//!
//! Deterministic (fixed seed); `EXEC_ORACLE_SPELLINGS` changes the count.

use crate::oracle;

use oracle::{Fixture, Miss, generate, observe, reported};

use ferroclaw_core::permission::{Decision, PermissionMode, Permissions};
use ferroclaw_testkit::components::{self, Component};
use serde_json::json;

/// Spellings per run: enough to meet every form many times over, small
/// enough for two cores in about a minute.
const SPELLINGS: usize = 5200;
/// The seed of the spelling generator.
const SEED: u64 = 0x5eed_2028;

#[test]
fn every_program_run_and_file_written_by_an_allowed_command_is_one_the_gate_reported() {
    if components::require(Component::Strace, components::strace()).is_none() {
        return; // FERROCLAW_TEST_SKIP names strace
    }
    let fixture = Fixture::new();
    let programs = fixture.programs();
    assert!(programs.len() >= 60, "only {} of the oracle's programs are installed", programs.len());
    let count = std::env::var("EXEC_ORACLE_SPELLINGS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(SPELLINGS);
    let spellings = generate(&programs, count, SEED);
    let rules: Vec<String> = programs
        .iter()
        .map(|p| p.name.to_string())
        .chain(["f", "wait", "bash", "sh"].map(String::from))
        .map(|name| format!("bash({name}:*)"))
        .collect();
    let workers = 4;
    let chunks: Vec<Vec<String>> = (0..workers)
        .map(|w| spellings.iter().skip(w).step_by(workers).cloned().collect())
        .collect();
    let results: Vec<(usize, usize, Vec<Miss>)> = std::thread::scope(|s| {
        let handles: Vec<_> = chunks
            .iter()
            .map(|chunk| {
                let fixture = &fixture;
                let rules = &rules;
                s.spawn(move || {
                    let (mut allowed, mut asked, mut misses) = (0, 0, Vec::new());
                    for command in chunk {
                        let ws = fixture.copy();
                        let gate = Permissions::new(PermissionMode::Default, rules, &[])
                            .unwrap()
                            .with_workspace(ws.root());
                        let decision = gate.decide("bash", false, &json!({ "command": command }));
                        if decision != Decision::Allow {
                            asked += 1;
                            continue;
                        }
                        allowed += 1;
                        let seen = observe(&ws, command);
                        let model = reported(command, ws.root());
                        if let Some(miss) = model.misses(&seen, command, ws.root()) {
                            misses.push(miss);
                        }
                    }
                    (allowed, asked, misses)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let allowed: usize = results.iter().map(|r| r.0).sum();
    let asked: usize = results.iter().map(|r| r.1).sum();
    let misses: Vec<&Miss> = results.iter().flat_map(|r| r.2.iter()).collect();
    eprintln!(
        "exec oracle: {} spellings over {} programs; {allowed} allowed and run under strace, \
         {asked} asked; {} misses",
        spellings.len(),
        programs.len(),
        misses.len()
    );
    for miss in &misses {
        eprintln!("{}", miss.as_case());
    }
    assert!(spellings.len() >= count.min(5000), "{} spellings", spellings.len());
    assert!(allowed >= spellings.len() / 3, "too few spellings ran: {allowed}");
    assert!(misses.is_empty(), "{} commands did what the gate did not report", misses.len());
}
