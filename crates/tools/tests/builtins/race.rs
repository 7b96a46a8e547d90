//! Confinement under a racing swapper: a thread keeps swapping a folder of
//! the workspace for a symlink to a folder outside while the file tools run.
//! The tools check a path and then open it beneath the workspace without
//! following links, so nothing may land outside and nothing outside may leak.
//! The attacks on the file itself (swapped for a link, hard-linked out, its
//! temp file replaced) and on protected files are in `race_file.rs`.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use serde_json::json;

use crate::workspace;

/// Tool calls made while the swapper runs (the 250).
const ROUNDS: usize = 250;

/// Swaps `ws/dir` between a real folder and a link to `outside` until told to stop.
fn start_swapper(ws: &Path, outside: &Path, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<()> {
    let dir = ws.join("dir");
    let real = ws.join("dir.real");
    let link = ws.join("dir.link");
    std::fs::create_dir_all(&real).unwrap();
    std::fs::write(real.join("file.txt"), "inside\n").unwrap();
    std::fs::rename(&real, &dir).unwrap();
    let outside = outside.to_path_buf();
    std::thread::spawn(move || {
        while !stop.load(Ordering::Relaxed) {
            // dir (folder) -> dir.real, link -> dir; then back.
            let _ = std::os::unix::fs::symlink(&outside, &link);
            let _ = std::fs::rename(&dir, &real);
            let _ = std::fs::rename(&link, &dir);
            std::thread::yield_now();
            let _ = std::fs::rename(&dir, &link);
            let _ = std::fs::rename(&real, &dir);
            let _ = std::fs::remove_file(&link);
            std::thread::yield_now();
        }
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redteam_race_write_under_a_swapper_lands_nothing_outside() {
    let ws = workspace();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("file.txt"), "inside\n").unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let swapper = start_swapper(ws.dir.path(), outside.path(), Arc::clone(&stop));
    let mut written = 0;
    for i in 0..ROUNDS {
        let path = format!("dir/new-{i}.txt");
        if ws.call("write", json!({"path": path, "content": "payload"})).await.is_ok() {
            written += 1;
        }
        // Read first, as an edit needs: the edit itself then races the swapper.
        let _ = ws.call("read", json!({"path": "dir/file.txt"})).await;
        let edit = json!({"path": "dir/file.txt", "old_string": "inside", "new_string": format!("inside-{i}")});
        let _ = ws.call("edit", edit).await;
        let _ = ws.call("read", json!({"path": "dir/file.txt"})).await;
        let step = json!({"old_string": "inside", "new_string": "inside"});
        let _ = ws.call("multi_edit", json!({"path": "dir/file.txt", "edits": [step]})).await;
    }
    stop.store(true, Ordering::Relaxed);
    swapper.join().unwrap();
    let landed: Vec<_> = std::fs::read_dir(outside.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .filter(|name| name != "file.txt")
        .collect();
    assert!(landed.is_empty(), "{} files landed outside the workspace: {landed:?}", landed.len());
    let untouched = std::fs::read_to_string(outside.path().join("file.txt")).unwrap();
    assert_eq!(untouched, "inside\n", "an edit went through the link");
    eprintln!("{written} of {ROUNDS} writes went through inside; 0 outside");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redteam_race_read_and_grep_under_a_swapper_leak_nothing() {
    let ws = workspace();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("file.txt"), "OUTSIDE-SECRET\n").unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let swapper = start_swapper(ws.dir.path(), outside.path(), Arc::clone(&stop));
    for _ in 0..ROUNDS {
        for (tool, input) in [
            ("read", json!({"path": "dir/file.txt"})),
            ("grep", json!({"pattern": "SECRET", "path": "dir", "output_mode": "content"})),
            (
                "grep",
                json!({"pattern": "SECRET", "path": "dir/file.txt", "output_mode": "content"}),
            ),
        ] {
            if let Ok(out) = ws.call(tool, input).await {
                assert!(!out.joined_text().contains("OUTSIDE-SECRET"), "{tool} leaked: {out:?}");
            }
        }
    }
    stop.store(true, Ordering::Relaxed);
    swapper.join().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redteam_race_list_dir_and_glob_under_a_swapper_show_no_names_from_outside() {
    let ws = workspace();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("OUTSIDE-NAME.txt"), "x").unwrap();
    std::fs::create_dir(outside.path().join("OUTSIDE-DIR")).unwrap();
    std::fs::write(outside.path().join("OUTSIDE-DIR/deeper.txt"), "x").unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let swapper = start_swapper(ws.dir.path(), outside.path(), Arc::clone(&stop));
    let mut listed = 0;
    for _ in 0..ROUNDS {
        for (tool, input) in [
            ("list_dir", json!({"path": "dir"})),
            ("glob", json!({"pattern": "**/*.txt", "path": "dir"})),
            ("glob", json!({"pattern": "dir/**/*"})),
        ] {
            if let Ok(out) = ws.call(tool, input).await {
                let text = out.joined_text();
                assert!(!text.contains("OUTSIDE-"), "{tool} listed a name from outside: {text}");
                listed += usize::from(text.contains("file.txt"));
            }
        }
    }
    stop.store(true, Ordering::Relaxed);
    swapper.join().unwrap();
    eprintln!("{listed} listings showed the inside file; none showed a name from outside");
}
