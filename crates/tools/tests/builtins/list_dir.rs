use serde_json::json;

use crate::workspace;

#[tokio::test]
async fn list_dir_shows_kinds_and_sizes_folders_first() {
    let ws = workspace();
    ws.write("b.txt", "12345");
    ws.write("a.txt", "");
    ws.write("src/lib.rs", "");
    ws.write(".env.example", "X=1");
    std::os::unix::fs::symlink("b.txt", ws.path("link")).unwrap();
    let out = ws.ok("list_dir", json!({})).await;
    let rows: Vec<Vec<&str>> =
        out.lines().skip(1).map(|l| l.split_whitespace().collect()).collect();
    assert_eq!(
        rows,
        [
            vec!["dir", "-", "src/"],
            vec!["file", "3", ".env.example"],
            vec!["file", "0", "a.txt"],
            vec!["file", "5", "b.txt"],
            vec!["symlink", "-", "link"],
        ]
    );
}

#[tokio::test]
async fn list_dir_skips_git_and_gitignored_entries() {
    let ws = workspace();
    ws.write(".git/HEAD", "ref");
    ws.write(".gitignore", "target\n");
    ws.write("target/x", "");
    ws.write("Cargo.toml", "");
    let out = ws.ok("list_dir", json!({"path": "."})).await;
    assert!(!out.contains(".git/") && !out.contains("target"), "{out}");
    assert!(out.contains(".gitignore") && out.contains("Cargo.toml"), "{out}");
}

#[tokio::test]
async fn list_dir_caps_entries_with_a_note() {
    let ws = workspace();
    for i in 0..520 {
        ws.write(&format!("f{i:03}"), "");
    }
    let out = ws.ok("list_dir", json!({})).await;
    assert!(out.contains("20 more entries not shown"), "{out}");
}

#[tokio::test]
async fn list_dir_refuses_files_and_outside_paths() {
    let ws = workspace();
    ws.write("a.txt", "");
    assert!(ws.err("list_dir", json!({"path": "a.txt"})).await.contains("not a folder"));
    assert!(ws.err("list_dir", json!({"path": "/"})).await.contains("outside the workspace"));
}
