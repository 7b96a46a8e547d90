//! The file boundary against an attacker who races it on the file itself:
//! a thread flips the filesystem thousands of times while `read`, `write`,
//! `edit` and `multi_edit` run in a loop. What a user would notice is a
//! canary in a second folder standing for `~/.ssh`: it is never read into a
//! tool result, never changed, never replaced, and nothing lands beside it.
//! Each test's verdict is deterministic: it fails only if the race is ever
//! won (the loops are bounded, nothing sleeps).
//!
//! Decided here: a hard link in the workspace is the file itself (pnpm and
//! cargo link files from their stores), so `read` shows it; `write`, `edit`
//! and `multi_edit` replace the name with a new file, as Claude Code and a
//! careful editor do, so the other name (outside) keeps its content.
//!
//! Inside the workspace, a file the deny rules refuse stands for the
//! canary: a folder flipped to a link to its folder never gets a tool to
//! show, name or change it.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use ferroclaw_tools::{OpenRules, ToolError, ToolOutput};
use serde_json::json;

use crate::{Ws, workspace};

/// Rounds of tool calls per attack, each round several calls.
const ROUNDS: usize = 400;
/// What `~/.ssh/id_rsa` holds in these tests.
const SECRET: &str = "CANARY-PRIVATE-KEY\n";

/// A file outside the workspace, standing for `~/.ssh/id_rsa`.
struct Canary {
    dir: tempfile::TempDir,
    path: PathBuf,
    ino: u64,
}

impl Canary {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("id_rsa");
        std::fs::write(&path, SECRET).unwrap();
        let ino = std::fs::metadata(&path).unwrap().ino();
        Self { dir, path, ino }
    }

    /// Same content, same file, and nothing new beside it.
    fn assert_untouched(&self) {
        let meta = std::fs::symlink_metadata(&self.path).unwrap();
        assert!(meta.is_file() && meta.ino() == self.ino, "the canary was replaced");
        assert_eq!(std::fs::read_to_string(&self.path).unwrap(), SECRET, "the canary changed");
        let beside: Vec<_> = std::fs::read_dir(self.dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .filter(|n| n != "id_rsa")
            .collect();
        assert!(beside.is_empty(), "files landed beside the canary: {beside:?}");
    }
}

/// A thread running `flip` until stopped; `stop` says how often it ran.
struct Racer {
    stop: Arc<AtomicBool>,
    flips: Arc<AtomicU64>,
    handle: std::thread::JoinHandle<()>,
}

impl Racer {
    fn start(mut flip: impl FnMut() + Send + 'static) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let flips = Arc::new(AtomicU64::new(0));
        let (s, f) = (Arc::clone(&stop), Arc::clone(&flips));
        let handle = std::thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                flip();
                f.fetch_add(1, Ordering::Relaxed);
            }
        });
        Self { stop, flips, handle }
    }

    fn stop(self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        self.handle.join().unwrap();
        self.flips.load(Ordering::Relaxed)
    }
}

/// Runs `tool` and fails the test if the secret shows in what comes back.
async fn call_blind(
    ws: &Ws,
    tool: &str,
    input: serde_json::Value,
) -> Result<ToolOutput, ToolError> {
    let result = ws.call(tool, input).await;
    let text = match &result {
        Ok(out) => out.joined_text(),
        Err(e) => e.to_string(),
    };
    assert!(!text.contains("CANARY"), "{tool} showed the secret from outside: {text}");
    result
}

/// Puts `what` at `path` by a rename over it, so the name never disappears.
fn replace_with(ws: &Path, path: &Path, what: impl FnOnce(&Path) -> std::io::Result<()>) {
    let staging = ws.join(".racer-staging");
    let _ = std::fs::remove_file(&staging);
    if what(&staging).is_ok() {
        let _ = std::fs::rename(&staging, path);
    }
}

/// Swaps the entries `a` and `b` in one step (`renameat2(RENAME_EXCHANGE)`):
/// a fast flip that never leaves either name missing.
fn exchange(a: &Path, b: &Path) {
    use std::os::unix::ffi::OsStrExt;
    let (Ok(a), Ok(b)) = (
        std::ffi::CString::new(a.as_os_str().as_bytes()),
        std::ffi::CString::new(b.as_os_str().as_bytes()),
    ) else {
        return;
    };
    // SAFETY: valid NUL-terminated paths; a failure only means no flip.
    unsafe {
        libc::renameat2(
            libc::AT_FDCWD,
            a.as_ptr(),
            libc::AT_FDCWD,
            b.as_ptr(),
            libc::RENAME_EXCHANGE,
        )
    };
}

/// Flips `at` between what it is and what `plant` puts beside it (planted
/// again whenever `planted` says a tool replaced it), many times a millisecond.
fn flipper(
    at: PathBuf,
    plant: impl Fn(&Path) -> std::io::Result<()> + Send + 'static,
    planted: impl Fn(&std::fs::Metadata) -> bool + Send + 'static,
) -> impl FnMut() + Send + 'static {
    let other = at.with_file_name(format!(
        ".racer-{}",
        at.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default()
    ));
    let ws = at.parent().map(Path::to_path_buf).unwrap_or_default();
    move || {
        if !std::fs::symlink_metadata(&other).is_ok_and(|m| planted(&m)) {
            replace_with(&ws, &other, &plant);
        }
        exchange(&at, &other);
        exchange(&at, &other);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redteam_race_a_file_swapped_for_a_link_out_is_never_read_or_written_through() {
    let ws = workspace();
    let canary = Canary::new();
    ws.write("file.txt", "inside\n");
    let target = canary.path.clone();
    let racer = Racer::start(flipper(
        ws.path("file.txt"),
        move |p| std::os::unix::fs::symlink(&target, p),
        std::fs::Metadata::is_symlink,
    ));
    let mut wrote = 0;
    for i in 0..ROUNDS {
        let _ = call_blind(&ws, "read", json!({"path": "file.txt"})).await;
        let content = format!("inside {i}\n");
        let r = call_blind(&ws, "write", json!({"path": "file.txt", "content": content})).await;
        wrote += usize::from(r.is_ok());
        let _ = call_blind(&ws, "read", json!({"path": "file.txt"})).await;
        let edit = json!({"path": "file.txt", "old_string": "inside", "new_string": "edited"});
        let _ = call_blind(&ws, "edit", edit).await;
        let _ = call_blind(&ws, "read", json!({"path": "file.txt"})).await;
        let step = json!({"old_string": "inside", "new_string": "multi"});
        let _ = call_blind(&ws, "multi_edit", json!({"path": "file.txt", "edits": [step]})).await;
    }
    let flips = racer.stop();
    canary.assert_untouched();
    eprintln!("{flips} swaps; {wrote} of {ROUNDS} writes landed inside, none outside");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redteam_race_a_file_swapped_for_a_fifo_never_hangs_a_tool() {
    // A FIFO opened to read waits for a writer forever; every open here is
    // non-blocking and looked at before it is read, so each call returns.
    let ws = workspace();
    ws.write("pipe.txt", "inside\n");
    let racer = Racer::start(flipper(ws.path("pipe.txt"), mkfifo, |m| {
        std::os::unix::fs::FileTypeExt::is_fifo(&m.file_type())
    }));
    for i in 0..ROUNDS {
        let _ = ws.call("read", json!({"path": "pipe.txt"})).await;
        let _ = ws.call("grep", json!({"pattern": "inside", "output_mode": "content"})).await;
        let edit = json!({"path": "pipe.txt", "old_string": "inside", "new_string": "edited"});
        let _ = ws.call("edit", edit).await;
        let _ =
            ws.call("write", json!({"path": "pipe.txt", "content": format!("inside {i}\n")})).await;
    }
    let flips = racer.stop();
    eprintln!("{flips} swaps for a FIFO; every call returned");
}

#[tokio::test]
async fn a_hard_link_to_a_file_outside_is_replaced_by_write_and_edit_not_written_through() {
    let ws = workspace();
    let canary = Canary::new();
    std::fs::hard_link(&canary.path, ws.path("linked.txt")).unwrap();
    // The link is the file itself: read shows it (see the module docs).
    assert!(ws.ok("read", json!({"path": "linked.txt"})).await.contains("CANARY"));
    let out = ws.ok("write", json!({"path": "linked.txt", "content": "mine\n"})).await;
    assert!(out.starts_with("Overwrote"), "{out}");
    assert_eq!(ws.read("linked.txt"), "mine\n");
    canary.assert_untouched();
    assert_eq!(std::fs::metadata(&canary.path).unwrap().nlink(), 1, "the link was replaced");

    std::fs::remove_file(ws.path("linked.txt")).unwrap();
    std::fs::hard_link(&canary.path, ws.path("linked.txt")).unwrap();
    ws.ok("read", json!({"path": "linked.txt"})).await;
    let edit = json!({"path": "linked.txt", "old_string": "PRIVATE", "new_string": "PUBLIC"});
    ws.ok("edit", edit).await;
    assert_eq!(ws.read("linked.txt"), "CANARY-PUBLIC-KEY\n");
    canary.assert_untouched();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redteam_race_a_file_relinked_to_a_file_outside_never_changes_it() {
    let ws = workspace();
    let canary = Canary::new();
    ws.write("linked.txt", "mine\n");
    let (target, ino) = (canary.path.clone(), canary.ino);
    let racer = Racer::start(flipper(
        ws.path("linked.txt"),
        move |p| std::fs::hard_link(&target, p),
        move |m| m.ino() == ino,
    ));
    for i in 0..ROUNDS {
        let _ = ws.call("read", json!({"path": "linked.txt"})).await;
        let content = format!("mine {i}\n");
        let _ = ws.call("write", json!({"path": "linked.txt", "content": content})).await;
        let _ = ws.call("read", json!({"path": "linked.txt"})).await;
        let edit = json!({"path": "linked.txt", "old_string": "PRIVATE", "new_string": "PUBLIC"});
        let _ = ws.call("edit", edit).await;
        let _ = ws.call("read", json!({"path": "linked.txt"})).await;
        let step = json!({"old_string": "KEY", "new_string": "LOCK"});
        let _ = ws.call("multi_edit", json!({"path": "linked.txt", "edits": [step]})).await;
    }
    let flips = racer.stop();
    let _ = std::fs::remove_file(ws.path("linked.txt"));
    let _ = std::fs::remove_file(ws.path(".racer-staging"));
    canary.assert_untouched();
    eprintln!("{flips} relinks; the file outside never changed");
}

/// A repository whose protected files the attacker wants to change.
fn repository(ws: &Ws) -> [(&'static str, &'static str); 3] {
    let files = [
        (".git/config", "[core]\n\trepositoryformatversion = 0\n"),
        (".git/hooks/README", "hooks\n"),
        (".claude/settings.json", "{}\n"),
    ];
    for (rel, content) in files {
        ws.write(rel, content);
    }
    files
}

#[tokio::test]
async fn a_protected_file_reached_through_a_link_to_its_folder_is_refused_by_the_tool() {
    let ws = workspace();
    let files = repository(&ws);
    std::os::unix::fs::symlink(ws.path(".git"), ws.path("cfg")).unwrap();
    ws.ok("read", json!({"path": "cfg/config"})).await;
    let msg = ws
        .err("write", json!({"path": "cfg/config", "content": "[core]\n\tfsmonitor = x\n"}))
        .await;
    assert!(msg.contains(".git/config") && msg.contains("git runs commands"), "{msg}");
    for (rel, content) in files {
        assert_eq!(ws.read(rel), content, "{rel} changed");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redteam_race_a_protected_file_behind_a_folder_swapped_for_a_link_is_never_written() {
    let ws = workspace();
    let files = repository(&ws);
    let mut flips: Vec<_> = [("cfg", ".git"), ("hooks", ".git/hooks"), ("claude", ".claude")]
        .into_iter()
        .map(|(name, protected)| {
            std::fs::create_dir(ws.path(name)).unwrap();
            let protected = ws.path(protected);
            flipper(
                ws.path(name),
                move |p| std::os::unix::fs::symlink(&protected, p),
                std::fs::Metadata::is_symlink,
            )
        })
        .collect();
    let racer = Racer::start(move || flips.iter_mut().for_each(|flip| flip()));
    let payload = "[core]\n\tfsmonitor = touch pwned\n";
    for _ in 0..ROUNDS {
        for (path, content) in [
            ("cfg/config", payload),
            ("hooks/pre-commit", "#!/bin/sh\ntouch pwned\n"),
            ("claude/settings.json", "{\"hooks\":{}}\n"),
        ] {
            let _ = call_blind(&ws, "read", json!({"path": path})).await;
            let _ = call_blind(&ws, "write", json!({"path": path, "content": content})).await;
        }
        let edit = json!({"path": "cfg/config", "old_string": "repositoryformatversion = 0", "new_string": "fsmonitor = x"});
        let _ = call_blind(&ws, "edit", edit).await;
    }
    let flips = racer.stop();
    for (rel, content) in files {
        assert_eq!(ws.read(rel), content, "{rel} changed");
    }
    let hooks: Vec<_> = std::fs::read_dir(ws.path(".git/hooks")).unwrap().flatten().collect();
    assert_eq!(hooks.len(), 1, "a hook was planted: {hooks:?}");
    eprintln!("{flips} swaps; no protected file changed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redteam_race_a_temp_file_replaced_before_its_rename_never_becomes_the_file() {
    let ws = workspace();
    let canary = Canary::new();
    let (root, target) = (ws.dir.path().to_path_buf(), canary.path.clone());
    let mut kind = 0u8;
    let racer = Racer::start(move || {
        let Ok(entries) = std::fs::read_dir(&root) else { return };
        for entry in entries.flatten() {
            if !entry.file_name().to_string_lossy().starts_with(".ferroclaw-write-") {
                continue;
            }
            kind = kind.wrapping_add(1);
            replace_with(&root, &entry.path(), |p| match kind % 3 {
                0 => std::os::unix::fs::symlink(&target, p),
                1 => std::fs::hard_link(&target, p),
                _ => mkfifo(p),
            });
        }
    });
    let mut wrote = 0;
    for i in 0..ROUNDS * 2 {
        let content = format!("payload {i}\n");
        let result = ws.call("write", json!({"path": "t.txt", "content": content})).await;
        if result.is_ok_and(|out| !out.is_error) {
            wrote += 1;
            let meta = std::fs::symlink_metadata(ws.path("t.txt")).unwrap();
            assert!(meta.is_file(), "write {i} succeeded but left a {:?}", meta.file_type());
            assert_ne!(meta.ino(), canary.ino, "write {i} succeeded but t.txt is the canary");
            assert_eq!(ws.read("t.txt"), content, "write {i} succeeded but wrote something else");
        } else if std::fs::symlink_metadata(ws.path("t.txt"))
            .is_ok_and(|m| !m.is_file() || m.ino() == canary.ino)
        {
            // A failed write may leave the attacker's entry in the file's place
            // (never changing the canary): start again from no file.
            let _ = std::fs::remove_file(ws.path("t.txt"));
        }
    }
    let flips = racer.stop();
    let _ = std::fs::remove_file(ws.path("t.txt"));
    canary.assert_untouched();
    eprintln!(
        "{flips} temp-file scans; {wrote} of {} writes succeeded, each as written",
        ROUNDS * 2
    );
}

fn mkfifo(path: &Path) -> std::io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).map_err(std::io::Error::other)?;
    // SAFETY: c is a valid NUL-terminated path.
    if unsafe { libc::mkfifo(c.as_ptr(), 0o600) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// What `secrets/key` holds: a file inside the workspace that the user's
/// deny rules keep from the agent.
const DENIED: &str = "DENIED-API-KEY\n";

/// A workspace holding `secrets/key`, which the deny rules refuse to every
/// file tool with its folder (as `Read(./secrets)` and `Edit(./secrets)`
/// do; the gate in `ferroclaw-core` hands a call the rules of its tool, see
/// `permission/open.rs`), and a real folder `x` holding a harmless `x/key`.
fn workspace_with_denied_secrets() -> Ws {
    let mut ws = workspace();
    ws.write("secrets/key", DENIED);
    ws.write("x/key", "public\n");
    let secrets = std::fs::canonicalize(ws.path("secrets")).unwrap();
    ws.ctx.open_rules = OpenRules::new(move |path| {
        path.starts_with(&secrets).then(|| "denied by the rule Read(./secrets) in config".into())
    });
    ws
}

/// Runs `tool` and fails the test if the denied file shows in what comes back.
async fn call_denied_blind(ws: &Ws, tool: &str, input: serde_json::Value) -> bool {
    let result = ws.call(tool, input.clone()).await;
    let text = match &result {
        Ok(out) => out.joined_text(),
        Err(e) => e.to_string(),
    };
    assert!(!text.contains("DENIED-API"), "{tool} {input} showed the denied file: {text}");
    assert!(!text.contains("secrets/key"), "{tool} {input} named the denied file: {text}");
    result.is_ok_and(|out| !out.is_error)
}

#[tokio::test]
async fn a_folder_linked_to_a_denied_one_gives_no_file_tool_its_files() {
    let ws = workspace_with_denied_secrets();
    let refused = ws.call("read", json!({"path": "secrets/key"})).await.unwrap_err().to_string();
    assert!(refused.contains("Read(./secrets)"), "{refused}");
    // A search over the whole workspace skips the denied file and finds the rest.
    let out = ws.ok("grep", json!({"pattern": "KEY|public", "output_mode": "content"})).await;
    assert!(out.contains("public") && !out.contains("DENIED"), "{out}");
    // `x` becomes a link to `secrets`: what the tools open through it is judged as itself.
    std::fs::remove_dir_all(ws.path("x")).unwrap();
    std::os::unix::fs::symlink("secrets", ws.path("x")).unwrap();
    for (tool, input) in [
        ("read", json!({"path": "x/key"})),
        ("grep", json!({"pattern": "KEY", "path": "x", "output_mode": "content"})),
        ("glob", json!({"pattern": "*", "path": "x"})),
        ("list_dir", json!({"path": "x"})),
        ("write", json!({"path": "x/key", "content": "mine\n"})),
        ("edit", json!({"path": "x/key", "old_string": "DENIED", "new_string": "mine"})),
        ("multi_edit", json!({"path": "x/key", "edits": [{"old_string": "D", "new_string": "d"}]})),
    ] {
        assert!(!call_denied_blind(&ws, tool, input).await, "{tool} went through the link");
    }
    assert_eq!(ws.read("secrets/key"), DENIED);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redteam_race_a_folder_swapped_for_a_link_to_a_denied_folder_never_shows_or_changes_it() {
    // The gate decided each call when `x` was a real folder; a racer flips
    // `x` to a link to `secrets` and back thousands of times while the
    // tools run. The deny rules judge the path each open reaches.
    let ws = workspace_with_denied_secrets();
    let ino = std::fs::metadata(ws.path("secrets/key")).unwrap().ino();
    let racer = Racer::start(flipper(
        ws.path("x"),
        |p| std::os::unix::fs::symlink("secrets", p),
        std::fs::Metadata::is_symlink,
    ));
    let mut read = 0;
    for i in 0..ROUNDS {
        read += usize::from(call_denied_blind(&ws, "read", json!({"path": "x/key"})).await);
        let grep = json!({"pattern": "KEY|public", "path": "x", "output_mode": "content"});
        call_denied_blind(&ws, "grep", grep).await;
        let grep = json!({"pattern": "KEY", "output_mode": "content"});
        call_denied_blind(&ws, "grep", grep).await;
        call_denied_blind(&ws, "glob", json!({"pattern": "**/key", "path": "x"})).await;
        call_denied_blind(&ws, "list_dir", json!({"path": "x"})).await;
        let write = json!({"path": "x/key", "content": format!("public {i}\n")});
        call_denied_blind(&ws, "write", write).await;
        let edit = json!({"path": "x/key", "old_string": "public", "new_string": "public"});
        call_denied_blind(&ws, "edit", edit).await;
    }
    let flips = racer.stop();
    let meta = std::fs::symlink_metadata(ws.path("secrets/key")).unwrap();
    assert!(meta.is_file() && meta.ino() == ino, "the denied file was replaced");
    assert_eq!(ws.read("secrets/key"), DENIED, "the denied file changed");
    eprintln!("{flips} swaps; {read} of {ROUNDS} reads of x/key went through, none to secrets/");
}
