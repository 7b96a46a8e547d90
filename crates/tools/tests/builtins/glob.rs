use std::time::{Duration, SystemTime};

use serde_json::json;

use crate::{Ws, workspace};

fn touch(ws: &Ws, rel: &str, seconds_ago: u64) {
    ws.write(rel, rel);
    let file = std::fs::File::options().write(true).open(ws.path(rel)).unwrap();
    file.set_modified(SystemTime::now() - Duration::from_secs(seconds_ago)).unwrap();
}

#[tokio::test]
async fn glob_lists_matches_newest_first() {
    let ws = workspace();
    touch(&ws, "src/old.rs", 300);
    touch(&ws, "src/new.rs", 1);
    touch(&ws, "src/mid/mid.rs", 100);
    touch(&ws, "README.md", 0);
    let out = ws.ok("glob", json!({"pattern": "**/*.rs"})).await;
    assert_eq!(out, "src/new.rs\nsrc/mid/mid.rs\nsrc/old.rs\n");
}

#[tokio::test]
async fn glob_star_stays_within_one_folder() {
    let ws = workspace();
    touch(&ws, "top.rs", 0);
    touch(&ws, "src/deep.rs", 0);
    assert_eq!(ws.ok("glob", json!({"pattern": "*.rs"})).await, "top.rs\n");
}

#[tokio::test]
async fn glob_skips_gitignored_files_and_the_git_folder() {
    let ws = workspace();
    ws.write(".gitignore", "target/\n*.log\n");
    touch(&ws, "target/debug/gen.rs", 0);
    touch(&ws, "debug.log", 0);
    touch(&ws, ".git/config.rs", 0);
    touch(&ws, "src/lib.rs", 0);
    touch(&ws, ".github/ci.rs", 0);
    let out = ws.ok("glob", json!({"pattern": "**/*"})).await;
    let mut listed: Vec<&str> = out.lines().collect();
    listed.sort();
    assert_eq!(listed, [".github/ci.rs", ".gitignore", "src/lib.rs"]);
}

#[tokio::test]
async fn glob_within_a_path_reports_workspace_relative_paths() {
    let ws = workspace();
    touch(&ws, "docs/a.md", 0);
    touch(&ws, "b.md", 0);
    assert_eq!(ws.ok("glob", json!({"pattern": "*.md", "path": "docs"})).await, "docs/a.md\n");
}

#[tokio::test]
async fn glob_caps_its_results_with_a_note() {
    let ws = workspace();
    for i in 0..230 {
        ws.write(&format!("f{i:03}.txt"), "");
    }
    let out = ws.ok("glob", json!({"pattern": "*.txt"})).await;
    assert_eq!(out.lines().filter(|l| l.ends_with(".txt")).count(), 200);
    assert!(out.contains("30 more not shown"), "{out}");
}

#[tokio::test]
async fn glob_says_when_nothing_matches_and_refuses_bad_patterns() {
    let ws = workspace();
    assert!(ws.ok("glob", json!({"pattern": "*.zig"})).await.contains("No files match"));
    let err = ws.err("glob", json!({"pattern": "src/[unclosed"})).await;
    assert!(err.contains("bad glob pattern"), "{err}");
    let err = ws.err("glob", json!({"pattern": "*.rs", "path": "../"})).await;
    assert!(err.contains("outside the workspace"), "{err}");
}
