use std::os::unix::fs::PermissionsExt;

use serde_json::json;

use crate::workspace;

#[tokio::test]
async fn write_creates_parent_folders_and_reports_bytes() {
    let ws = workspace();
    let out = ws.ok("write", json!({"path": "a/b/c.txt", "content": "hello"})).await;
    assert_eq!(ws.read("a/b/c.txt"), "hello");
    assert!(out.contains("Created a/b/c.txt (5 bytes written)"), "{out}");
}

#[tokio::test]
async fn write_overwrites_and_keeps_the_file_permissions() {
    let ws = workspace();
    ws.write("run.sh", "old");
    std::fs::set_permissions(ws.path("run.sh"), std::fs::Permissions::from_mode(0o750)).unwrap();
    ws.ok("read", json!({"path": "run.sh"})).await;
    let out = ws.ok("write", json!({"path": "run.sh", "content": "#!/bin/sh\n"})).await;
    assert!(out.contains("Overwrote run.sh"), "{out}");
    assert_eq!(ws.read("run.sh"), "#!/bin/sh\n");
    let mode = std::fs::metadata(ws.path("run.sh")).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o750);
}

#[tokio::test]
async fn write_leaves_no_temp_files_behind() {
    let ws = workspace();
    ws.ok("write", json!({"path": "x.txt", "content": "1"})).await;
    ws.ok("write", json!({"path": "x.txt", "content": "2"})).await;
    let names: Vec<String> = std::fs::read_dir(ws.dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["x.txt"]);
}

#[tokio::test]
async fn new_files_are_not_private_to_the_owner() {
    let ws = workspace();
    ws.ok("write", json!({"path": "n.txt", "content": ""})).await;
    let mode = std::fs::metadata(ws.path("n.txt")).unwrap().permissions().mode();
    assert_ne!(mode & 0o044, 0, "mode {mode:o} looks like a temp file's 0600");
}

#[tokio::test]
async fn write_refuses_a_folder_path() {
    let ws = workspace();
    std::fs::create_dir(ws.path("dir")).unwrap();
    let err = ws.err("write", json!({"path": "dir", "content": "x"})).await;
    assert!(err.contains("folder"), "{err}");
}

#[tokio::test]
async fn write_refuses_escapes_and_writes_nothing() {
    let ws = workspace();
    let outside = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(outside.path(), ws.path("out")).unwrap();
    let err = ws.err("write", json!({"path": "out/new.txt", "content": "x"})).await;
    assert!(err.contains("outside the workspace"), "{err}");
    assert!(!outside.path().join("new.txt").exists());
    let err = ws.err("write", json!({"path": "../escape.txt", "content": "x"})).await;
    assert!(err.contains("outside the workspace"), "{err}");
}

#[tokio::test]
async fn write_refuses_an_existing_file_the_conversation_never_read() {
    let ws = workspace();
    ws.write("notes.txt", "the user's notes\n");
    let err = ws.err("write", json!({"path": "notes.txt", "content": "blind\n"})).await;
    assert_eq!(err, ferroclaw_tools::NOT_READ_YET);
    assert_eq!(ws.read("notes.txt"), "the user's notes\n");
}

#[tokio::test]
async fn write_refuses_a_file_changed_since_it_was_read_and_keeps_the_change() {
    let ws = workspace();
    ws.write("notes.txt", "v1\n");
    ws.ok("read", json!({"path": "notes.txt", "limit": 1})).await;
    ws.write("notes.txt", "v1\nthe user's new line\n");
    let err = ws.err("write", json!({"path": "notes.txt", "content": "agent\n"})).await;
    assert_eq!(err, ferroclaw_tools::CHANGED_SINCE_READ);
    assert_eq!(ws.read("notes.txt"), "v1\nthe user's new line\n");
    // Read again, the write goes through; the conversation's own write
    // counts as known, so a second write needs no read.
    ws.ok("read", json!({"path": "notes.txt"})).await;
    ws.ok("write", json!({"path": "notes.txt", "content": "agent\n"})).await;
    ws.ok("write", json!({"path": "notes.txt", "content": "agent again\n"})).await;
    assert_eq!(ws.read("notes.txt"), "agent again\n");
}

#[tokio::test]
async fn an_edit_of_a_file_changed_since_read_applies_to_the_new_content_or_is_refused_as_stale() {
    let ws = workspace();
    ws.write("a.txt", "alpha\nbeta\n");
    ws.ok("read", json!({"path": "a.txt"})).await;
    ws.write("a.txt", "alpha\nbeta\nuser line\n");
    let out =
        ws.ok("edit", json!({"path": "a.txt", "old_string": "alpha", "new_string": "ALPHA"})).await;
    assert!(out.contains("the file had been modified on disk since you last read it"), "{out}");
    assert_eq!(ws.read("a.txt"), "ALPHA\nbeta\nuser line\n");
    ws.write("a.txt", "rewritten by the user\n");
    let err = ws
        .err(
            "multi_edit",
            json!({"path": "a.txt", "edits": [{"old_string": "beta", "new_string": "BETA"}]}),
        )
        .await;
    assert_eq!(err, ferroclaw_tools::CHANGED_SINCE_READ);
    assert_eq!(ws.read("a.txt"), "rewritten by the user\n");
}
