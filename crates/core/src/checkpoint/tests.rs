use std::path::Path;

use super::*;
use crate::session::{CheckpointKind, Entry, SessionStore};
use ferroclaw_protocol::Message;

fn limits() -> Limits {
    Settings::default().limits()
}

#[test]
fn a_hostile_repository_cannot_run_filters_hooks_or_fsmonitor_or_change_bytes() {
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let ws = ws.path();
    let marker = home.path().join("pwned");
    let evil = format!("sh -c 'touch {}; cat'", marker.display());
    // The workspace's own repository defines a filter, an fsmonitor and hooks,
    // and its attributes ask for them and for line-ending conversion.
    ferroclaw_testkit::git::git(ws, &["init", "-q"]);
    let config = format!(
        "[filter \"evil\"]\n\tclean = {evil}\n\tsmudge = {evil}\n\trequired = true\n\
         [core]\n\tfsmonitor = {evil}\n\thooksPath = hooks\n"
    );
    std::fs::OpenOptions::new()
        .append(true)
        .open(ws.join(".git/config"))
        .and_then(|mut f| std::io::Write::write_all(&mut f, config.as_bytes()))
        .unwrap();
    std::fs::write(ws.join(".gitattributes"), "* filter=evil text eol=crlf ident\n").unwrap();
    std::fs::write(ws.join("lf.txt"), "one\ntwo $Id$\n").unwrap();
    std::fs::write(ws.join("crlf.txt"), "one\r\ntwo\r\n").unwrap();
    let repo = ShadowRepo::open(home.path(), ws, "s1").unwrap();
    let before = repo.snapshot(limits()).unwrap();
    std::fs::write(ws.join("lf.txt"), "changed\n").unwrap();
    std::fs::remove_file(ws.join("crlf.txt")).unwrap();
    repo.snapshot(limits()).unwrap();
    repo.restore(&before.tree).unwrap();
    assert_eq!(std::fs::read(ws.join("lf.txt")).unwrap(), b"one\ntwo $Id$\n");
    assert_eq!(std::fs::read(ws.join("crlf.txt")).unwrap(), b"one\r\ntwo\r\n");
    assert!(!marker.exists(), "nothing from the repository ran");
    assert!(!ws.join(".git/refs/checkpoints").exists(), "the user's repository is untouched");
}

#[test]
fn files_over_the_cap_are_skipped_with_a_note_and_left_alone_by_a_restore() {
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let ws = ws.path();
    std::fs::write(ws.join("small.txt"), "small").unwrap();
    std::fs::write(ws.join("big.bin"), vec![7u8; 4096]).unwrap();
    let repo = ShadowRepo::open(home.path(), ws, "s1").unwrap();
    let capped = Limits { max_file_bytes: 1024, max_files: 100 };
    let first = repo.snapshot(capped).unwrap();
    assert_eq!(first.skipped.len(), 1);
    assert!(first.skipped[0].starts_with("big.bin ("), "{:?}", first.skipped);
    std::fs::write(ws.join("small.txt"), "changed").unwrap();
    std::fs::write(ws.join("big.bin"), vec![8u8; 4096]).unwrap();
    repo.snapshot(capped).unwrap();
    repo.restore(&first.tree).unwrap();
    assert_eq!(std::fs::read_to_string(ws.join("small.txt")).unwrap(), "small");
    assert_eq!(std::fs::read(ws.join("big.bin")).unwrap(), vec![8u8; 4096], "not touched");
    let too_many = Limits { max_file_bytes: 1024, max_files: 0 };
    std::fs::write(ws.join("new.txt"), "x").unwrap();
    assert!(matches!(repo.snapshot(too_many), Err(CheckpointError::TooManyFiles { .. })));
}

#[test]
fn an_unchanged_workspace_reuses_the_last_checkpoint_and_old_ones_are_pruned_by_count() {
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let settings = Settings { keep: 2, ..Settings::default() };
    let mut checkpoints = Checkpoints::open(home.path(), ws.path(), "s1", settings).unwrap();
    std::fs::write(ws.path().join("a"), "1").unwrap();
    let first = checkpoints.take("one").unwrap();
    assert_eq!(checkpoints.take("again").unwrap().commit, first.commit, "nothing changed");
    for i in 2..5 {
        std::fs::write(ws.path().join("a"), i.to_string()).unwrap();
        checkpoints.take("more").unwrap();
    }
    assert_eq!(checkpoints.repo().kept("s1").unwrap().len(), 4, "pruned once per session");
    let again = Checkpoints::open(home.path(), ws.path(), "s2", settings).unwrap();
    let mut again = again.for_session("s1");
    std::fs::write(ws.path().join("a"), "5").unwrap();
    again.take("last").unwrap();
    assert_eq!(again.repo().kept("s1").unwrap().len(), 2, "the newest two are kept");
}

fn checkpoint(log: &mut crate::session::SessionLog, id: &str, kind: CheckpointKind) {
    checkpoint_back(log, id, kind, 0);
}

fn checkpoint_back(
    log: &mut crate::session::SessionLog,
    id: &str,
    kind: CheckpointKind,
    back: usize,
) {
    log.append(&Entry::Checkpoint {
        ts: 1,
        id: id.into(),
        commit: "c".into(),
        label: id.into(),
        kind,
        skipped: Vec::new(),
        back,
        records_changes: false,
    })
    .unwrap();
}

fn rewind(log: &mut crate::session::SessionLog, to: &str) {
    log.append(&Entry::Rewind { ts: 2, to: to.into(), code: false, conversation: true }).unwrap();
}

#[test]
fn a_rewound_conversation_is_the_history_at_its_checkpoint_and_an_undo_brings_it_back() {
    let home = tempfile::tempdir().unwrap();
    let store = SessionStore::new(home.path());
    let mut log = store.create(Path::new("/p"), "m/m").unwrap();
    checkpoint(&mut log, "c1", CheckpointKind::Request);
    log.append_message(&Message::user("first")).unwrap();
    log.append_message(&Message::assistant("one")).unwrap();
    checkpoint(&mut log, "c2", CheckpointKind::Request);
    log.append_message(&Message::user("second")).unwrap();
    log.append_message(&Message::assistant("two")).unwrap();
    let texts = |log: &crate::session::SessionLog| -> Vec<String> {
        log.conversation(crate::session::RESUME_TAIL_BYTES)
            .unwrap()
            .iter()
            .map(Message::text)
            .collect()
    };
    checkpoint(&mut log, "u1", CheckpointKind::Rewind);
    rewind(&mut log, "c2");
    assert_eq!(texts(&log), ["first", "one"]);
    log.append_message(&Message::user("third")).unwrap();
    log.append_message(&Message::assistant("three")).unwrap();
    assert_eq!(texts(&log), ["first", "one", "third", "three"]);
    checkpoint(&mut log, "u2", CheckpointKind::Rewind);
    rewind(&mut log, "u1");
    assert_eq!(texts(&log), ["first", "one", "second", "two"], "undone");
    // A window too small for the checkpoint is widened until it is found.
    let path = log.path().to_path_buf();
    drop(log);
    let resumed = crate::session::SessionLog::resume(&path, 10).unwrap();
    let texts: Vec<String> = resumed.messages.iter().map(Message::text).collect();
    assert_eq!(texts, ["first", "one", "second", "two"]);
}

#[test]
fn a_rewind_to_before_a_compaction_brings_back_the_full_history() {
    let home = tempfile::tempdir().unwrap();
    let store = SessionStore::new(home.path());
    let mut log = store.create(Path::new("/p"), "m/m").unwrap();
    log.append_message(&Message::user("first")).unwrap();
    log.append_message(&Message::assistant("one")).unwrap();
    checkpoint(&mut log, "c1", CheckpointKind::Request);
    log.append_message(&Message::user("second")).unwrap();
    log.append(&Entry::Compaction { ts: 1, summary: "summary".into(), replaced: 3 }).unwrap();
    let texts = |log: &crate::session::SessionLog| -> Vec<String> {
        log.conversation(crate::session::RESUME_TAIL_BYTES)
            .unwrap()
            .iter()
            .map(Message::text)
            .collect()
    };
    assert_eq!(texts(&log), ["summary"]);
    rewind(&mut log, "c1");
    assert_eq!(texts(&log), ["first", "one"]);
}

#[test]
fn a_checkpoint_taken_mid_request_rewinds_the_conversation_to_where_the_request_began() {
    let home = tempfile::tempdir().unwrap();
    let store = SessionStore::new(home.path());
    let mut log = store.create(Path::new("/p"), "m/m").unwrap();
    log.append_message(&Message::user("first")).unwrap();
    log.append_message(&Message::assistant("one")).unwrap();
    log.append_message(&Message::user("change a.txt")).unwrap();
    log.append_message(&Message::assistant("calling edit")).unwrap();
    // Taken just before the edit ran: after the request and the answer asking for it.
    checkpoint_back(&mut log, "c1", CheckpointKind::Request, 2);
    log.append_message(&Message::user("edit result")).unwrap();
    log.append_message(&Message::assistant("edited")).unwrap();
    checkpoint(&mut log, "u1", CheckpointKind::Rewind);
    rewind(&mut log, "c1");
    let texts: Vec<String> = log
        .conversation(crate::session::RESUME_TAIL_BYTES)
        .unwrap()
        .iter()
        .map(Message::text)
        .collect();
    assert_eq!(texts, ["first", "one"]);
}

#[test]
fn undoing_a_write_brings_back_the_content_just_before_it_not_the_requests_start() {
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let ws = ws.path();
    std::fs::write(ws.join("notes.txt"), "at the request's start\n").unwrap();
    let repo = ShadowRepo::open(home.path(), ws, "s1").unwrap();
    let _request_start = repo.snapshot(limits()).unwrap();
    // The user saves between two of the agent's calls...
    std::fs::write(ws.join("notes.txt"), "the user's save\n").unwrap();
    // ...then the agent's write runs, snapshotted around its batch.
    let before = repo.snapshot(limits()).unwrap();
    std::fs::write(ws.join("notes.txt"), "the agent's write\n").unwrap();
    let after = repo.snapshot(limits()).unwrap();
    let change = repo.commit_change("s1", &before.tree, &after.tree).unwrap();
    let now = repo.snapshot(limits()).unwrap();
    let undone = changes::undo(&repo, &[change], &now.tree).unwrap();
    assert_eq!(undone.files, ["M notes.txt"]);
    assert_eq!(std::fs::read_to_string(ws.join("notes.txt")).unwrap(), "the user's save\n");
}
