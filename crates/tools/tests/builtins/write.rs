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
