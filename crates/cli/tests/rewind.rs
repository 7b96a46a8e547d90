//! End-to-end: checkpoints taken before a request's first call that may
//! change files capture what `edit` and `bash` change, `ferroclaw rewind`
//! restores code and conversation, and the rewind itself can be undone; the
//! user's own repository is never touched, and a request that only talks or
//! reads takes no checkpoint.

use crate::common;

use common::{Env, Wire, run};
use ferroclaw_testkit::Turn;
use ferroclaw_testkit::git::git;
use serde_json::json;

/// Every user text sent in a request body.
fn user_texts(body: &serde_json::Value) -> String {
    body["messages"].to_string()
}

#[test]
fn an_edit_and_a_file_made_by_bash_are_rewound_and_the_rewind_undone() {
    let env = Env::new(
        Wire::Anthropic,
        vec![
            Turn::read_then(
                "edit",
                json!({"path": "a.txt", "old_string": "one", "new_string": "two"}),
            )
            .into(),
            Turn::text("edited").into(),
            Turn::tool("bash", json!({"command": "echo made > b.txt"})).into(),
            Turn::text("made").into(),
            Turn::text("after the rewind").into(),
            Turn::text("after the undo").into(),
        ],
    );
    let ws = env.ws();
    git(ws, &["init", "-q"]);
    std::fs::write(ws.join("a.txt"), "one\n").unwrap();
    std::fs::write(ws.join(".gitignore"), "build/\n").unwrap();
    git(ws, &["add", "-A"]);
    git(ws, &["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "init"]);
    std::fs::create_dir(ws.join("build")).unwrap();
    std::fs::write(ws.join("build/out.txt"), "ignored output\n").unwrap();
    let user_refs = git(ws, &["for-each-ref"]);
    let head = git(ws, &["rev-parse", "HEAD"]);

    let (code, _, stderr) = run(&mut env.oneshot("change a.txt", &["--yes"]));
    assert_eq!(code, 0, "{stderr}");
    let (code, _, stderr) = run(&mut env.oneshot("make b.txt", &["--yes", "-c"]));
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(std::fs::read_to_string(ws.join("a.txt")).unwrap(), "two\n");
    assert!(ws.join("b.txt").is_file());

    let (code, listed, stderr) = run(env.cmd().args(["rewind", "--list"]));
    assert_eq!(code, 0, "{stderr}");
    let lines: Vec<&str> = listed.lines().collect();
    assert!(lines[0].starts_with("#1") && lines[0].contains("change a.txt"), "{listed}");
    assert!(lines[0].contains("M a.txt"), "the request's edit is listed: {listed}");
    assert!(lines[1].starts_with("#2") && lines[1].contains("make b.txt"), "{listed}");
    assert!(lines[1].contains("A b.txt"), "the file bash made is listed: {listed}");

    let (code, out, stderr) = run(env.cmd().args(["rewind", "1"]));
    assert_eq!(code, 0, "{stderr}");
    assert!(out.contains("rewound code and conversation to #1"), "{out}");
    assert_eq!(std::fs::read_to_string(ws.join("a.txt")).unwrap(), "one\n");
    assert!(!ws.join("b.txt").exists(), "the file made by bash is gone");
    assert_eq!(
        std::fs::read_to_string(ws.join("build/out.txt")).unwrap(),
        "ignored output\n",
        "ignored files are left alone"
    );
    assert_eq!(git(ws, &["status", "--porcelain"]), "", "the user's repository is as committed");
    assert_eq!(git(ws, &["for-each-ref"]), user_refs, "no refs made in the user's repository");
    assert_eq!(git(ws, &["rev-parse", "HEAD"]), head);

    let (code, _, stderr) = run(&mut env.oneshot("what now?", &["-c"]));
    assert_eq!(code, 0, "{stderr}");
    let sent = user_texts(&env.request_body(4));
    assert!(sent.contains("what now?"), "{sent}");
    assert!(
        !sent.contains("change a.txt") && !sent.contains("make b.txt"),
        "the rewound requests are no longer in the conversation: {sent}"
    );

    let (code, out, stderr) = run(env.cmd().args(["rewind", "--undo"]));
    assert_eq!(code, 0, "{stderr}");
    assert!(out.contains("rewound code and conversation"), "{out}");
    assert_eq!(std::fs::read_to_string(ws.join("a.txt")).unwrap(), "two\n");
    assert_eq!(std::fs::read_to_string(ws.join("b.txt")).unwrap(), "made\n");

    let (code, _, stderr) = run(&mut env.oneshot("and now?", &["-c"]));
    assert_eq!(code, 0, "{stderr}");
    let sent = user_texts(&env.request_body(5));
    assert!(sent.contains("change a.txt") && sent.contains("make b.txt"), "{sent}");
    assert!(!sent.contains("what now?"), "the undo went back to before the rewind: {sent}");
}

#[test]
fn the_repl_lists_rewinds_and_undoes_with_slash_rewind() {
    let env = Env::new(
        Wire::Anthropic,
        vec![
            Turn::read_then(
                "edit",
                json!({"path": "a.txt", "old_string": "one", "new_string": "two"}),
            )
            .into(),
            Turn::text("edited").into(),
            Turn::text("fresh start").into(),
        ],
    );
    std::fs::write(env.ws().join("a.txt"), "one\n").unwrap();
    let input = "change a.txt\n/rewind\n/rewind 1 code\n/rewind undo\n/rewind 1 conversation\nagain\n/exit\n";
    let (code, stdout, stderr) =
        run(env.cmd().args(["--permission-mode", "accept-edits"]).write_stdin(input));
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("#1") && stdout.contains("› change a.txt"), "{stdout}");
    assert!(stdout.contains("rewound code to #1") && stdout.contains("M a.txt"), "{stdout}");
    assert!(stdout.contains("rewound code to #2 (before rewinding to #1)"), "undone: {stdout}");
    assert!(stdout.contains("rewound conversation to #1"), "{stdout}");
    assert_eq!(
        std::fs::read_to_string(env.ws().join("a.txt")).unwrap(),
        "two\n",
        "the code rewind was undone and the conversation rewind left the files alone"
    );
    let sent = user_texts(&env.request_body(2));
    assert!(sent.contains("again") && !sent.contains("change a.txt"), "{sent}");
}

#[test]
fn a_request_that_only_talks_or_reads_takes_no_checkpoint() {
    let env = Env::new(
        Wire::Anthropic,
        vec![
            Turn::text("hello").into(),
            Turn::tool("read", json!({"path": "a.txt"})).into(),
            Turn::text("it says one").into(),
            Turn::tool("edit", json!({"path": "a.txt", "old_string": "one", "new_string": "two"}))
                .into(),
            Turn::text("edited").into(),
        ],
    );
    std::fs::write(env.ws().join("a.txt"), "one\n").unwrap();
    let (code, _, stderr) = run(&mut env.oneshot("hi", &["--yes"]));
    assert_eq!(code, 0, "{stderr}");
    let (code, _, stderr) = run(&mut env.oneshot("what does a.txt say?", &["--yes", "-c"]));
    assert_eq!(code, 0, "{stderr}");

    let (code, listed, stderr) = run(env.cmd().args(["rewind", "--list"]));
    assert_eq!(code, 0, "{stderr}");
    assert!(listed.starts_with("no checkpoints yet"), "{listed}");
    assert!(!env.home.path().join("checkpoints").exists(), "git never ran for them");

    let (code, _, stderr) = run(&mut env.oneshot("change a.txt", &["--yes", "-c"]));
    assert_eq!(code, 0, "{stderr}");
    let (code, listed, stderr) = run(env.cmd().args(["rewind", "--list"]));
    assert_eq!(code, 0, "{stderr}");
    let lines: Vec<&str> = listed.lines().collect();
    assert_eq!(lines.len(), 1, "one checkpoint, for the request that edited: {listed}");
    assert!(lines[0].starts_with("#1") && lines[0].contains("change a.txt"), "{listed}");
    assert!(lines[0].contains("M a.txt"), "{listed}");
}

#[test]
fn a_rewind_restores_only_what_ferroclaw_changed_and_names_what_the_user_changed_since() {
    let env = Env::new(
        Wire::Anthropic,
        vec![
            Turn::read_then(
                "edit",
                json!({"path": "a.txt", "old_string": "one", "new_string": "two"}),
            )
            .into(),
            Turn::read_then("edit", json!({"path": "c.txt", "old_string": "x", "new_string": "y"}))
                .into(),
            Turn::text("edited").into(),
        ],
    );
    let ws = env.ws();
    git(ws, &["init", "-q"]);
    std::fs::write(ws.join("a.txt"), "one\n").unwrap();
    std::fs::write(ws.join("c.txt"), "x\n").unwrap();
    std::fs::write(ws.join("mine.txt"), "my draft\n").unwrap();
    let (code, _, stderr) = run(&mut env.oneshot("change a and c", &["--yes"]));
    assert_eq!(code, 0, "{stderr}");
    // The user's own work after the request: a file of theirs, and one the
    // agent had edited.
    std::fs::write(ws.join("mine.txt"), "my draft, improved\n").unwrap();
    std::fs::write(ws.join("c.txt"), "y, and the user's line\n").unwrap();

    let (code, out, stderr) = run(env.cmd().args(["rewind", "1", "--code"]));
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(std::fs::read_to_string(ws.join("a.txt")).unwrap(), "one\n");
    assert!(out.contains("M a.txt"), "{out}");
    assert_eq!(
        std::fs::read_to_string(ws.join("mine.txt")).unwrap(),
        "my draft, improved\n",
        "a file only the user changed is not ferroclaw's to rewind"
    );
    assert_eq!(std::fs::read_to_string(ws.join("c.txt")).unwrap(), "y, and the user's line\n");
    assert!(out.contains("not restored: c.txt (changed since ferroclaw changed it"), "{out}");
}

#[test]
fn an_edit_to_a_gitignored_file_is_rewound_and_the_rewind_undone() {
    let env = Env::new(
        Wire::Anthropic,
        vec![
            Turn::read_then(
                "edit",
                json!({"path": "build/config.local", "old_string": "port=1", "new_string": "port=2"}),
            )
            .into(),
            Turn::text("edited").into(),
        ],
    );
    let ws = env.ws();
    git(ws, &["init", "-q"]);
    std::fs::write(ws.join(".gitignore"), "build/\n").unwrap();
    std::fs::create_dir(ws.join("build")).unwrap();
    std::fs::write(ws.join("build/config.local"), "port=1\n").unwrap();
    std::fs::write(ws.join("build/other.txt"), "untouched\n").unwrap();
    let (code, _, stderr) = run(&mut env.oneshot("change the port", &["--yes"]));
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(std::fs::read_to_string(ws.join("build/config.local")).unwrap(), "port=2\n");

    let (code, out, stderr) = run(env.cmd().args(["rewind", "1", "--code"]));
    assert_eq!(code, 0, "{stderr}");
    assert!(out.contains("M build/config.local"), "{out}");
    assert_eq!(std::fs::read_to_string(ws.join("build/config.local")).unwrap(), "port=1\n");
    assert_eq!(std::fs::read_to_string(ws.join("build/other.txt")).unwrap(), "untouched\n");

    let (code, _, stderr) = run(env.cmd().args(["rewind", "--undo"]));
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(std::fs::read_to_string(ws.join("build/config.local")).unwrap(), "port=2\n");
}
