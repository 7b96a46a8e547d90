//! The everyday-commands corpus (`everyday.toml`): how many commands people
//! type run unasked under the rules they write for them. Understanding
//! options must not cost the user more questions than matching prefixes did.

use super::*;
use serde_json::json;

/// Commands of the corpus that ran unasked on main before the gate decided on
/// effects (measured with this test on `3b516ba`).
const RUN_UNASKED_ON_MAIN: usize = 275;

#[derive(serde::Deserialize)]
struct Corpus {
    allow: Vec<String>,
    commands: Vec<String>,
}

#[test]
fn everyday_commands_run_unasked_at_least_as_often_as_with_prefix_rules() {
    let corpus: Corpus = toml::from_str(include_str!("everyday.toml")).unwrap();
    assert!(corpus.commands.len() >= 200, "{} commands", corpus.commands.len());
    let ws = tempfile::tempdir().unwrap();
    let p = Permissions::new(PermissionMode::Default, &corpus.allow, &[])
        .unwrap()
        .with_workspace(ws.path());
    let asked: Vec<&String> = corpus
        .commands
        .iter()
        .filter(|c| p.decide("bash", false, &json!({ "command": c })) != Decision::Allow)
        .collect();
    let unasked = corpus.commands.len() - asked.len();
    eprintln!(
        "{unasked} of {} everyday commands run unasked; asked: {asked:#?}",
        corpus.commands.len()
    );
    assert!(unasked >= RUN_UNASKED_ON_MAIN, "{unasked} < {RUN_UNASKED_ON_MAIN} on main");
}
