//! The manager against real git in temp folders.

use std::path::PathBuf;

use super::*;
use ferroclaw_testkit::git::{git, init_repo};

/// A repository with one commit holding `notes.txt`.
fn repo() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    init_repo(&root, "notes.txt", "main\n");
    (dir, root)
}

fn event_names(m: &WorktreeManager) -> Vec<String> {
    m.events(100).unwrap().into_iter().map(|e| e.event).collect()
}

#[test]
fn create_makes_a_real_worktree_on_its_own_branch_and_records_it() {
    let (_dir, root) = repo();
    let m = WorktreeManager::open(&root);
    let w = m.create("auth", None, None).unwrap();
    assert_eq!(w.branch, "wt/auth");
    assert_eq!(w.path, root.join(".agent/worktrees/auth"));
    assert_eq!(std::fs::read_to_string(w.path.join("notes.txt")).unwrap(), "main\n");
    assert!(git(&root, &["branch", "--list", "wt/auth"]).contains("wt/auth"));
    assert!(git(&root, &["worktree", "list"]).contains(".agent/worktrees/auth"));
    let index: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(m.dir().join("index.json")).unwrap())
            .unwrap();
    assert_eq!(index["worktrees"][0]["name"], "auth");
    assert_eq!(index["worktrees"][0]["status"], "active");
    assert_eq!(event_names(&m), ["worktree.create.before", "worktree.create.after"]);
    assert_eq!(git(&root, &["status", "--porcelain"]), "", "the folder is git-ignored");
}

#[test]
fn bad_names_are_refused_before_anything_is_written() {
    let (_dir, root) = repo();
    let m = WorktreeManager::open(&root);
    let long = "x".repeat(41);
    for name in ["", "a/b", "../up", "..", "has space", "ü", long.as_str()] {
        let err = m.create(name, None, None).unwrap_err();
        assert!(matches!(err, WorktreeError::InvalidName { .. }), "{name:?}: {err}");
    }
    assert!(!m.dir().exists());
    assert!(validate_name(&"x".repeat(40)).is_ok() && validate_name("v1.2_fix-3").is_ok());
}

#[test]
fn a_folder_outside_git_is_refused_with_the_reason_and_nothing_written() {
    let dir = tempfile::tempdir().unwrap();
    let m = WorktreeManager::open(dir.path());
    let err = m.create("a", None, None).unwrap_err();
    assert!(matches!(err, WorktreeError::NotARepo { .. }), "{err}");
    assert!(err.to_string().contains("not a git repository"), "{err}");
    assert!(!m.dir().exists());
}

#[test]
fn uncommitted_changes_in_the_main_checkout_refuse_a_worktree_from_head() {
    let (_dir, root) = repo();
    std::fs::write(root.join("notes.txt"), "edited\n").unwrap();
    let m = WorktreeManager::open(&root);
    let err = m.create("a", None, None).unwrap_err();
    assert!(matches!(err, WorktreeError::DirtyBase { .. }), "{err}");
    assert!(err.to_string().contains("notes.txt"), "{err}");
    assert_eq!(event_names(&m), ["worktree.create.before", "worktree.create.failed"]);
    assert!(git(&root, &["branch", "--list", "wt/a"]).is_empty(), "no branch left behind");
    // From an explicit commit the main checkout's edits are not expected.
    m.create("a", None, Some("main")).unwrap();
}

#[test]
fn a_taken_name_and_a_leftover_branch_are_refused() {
    let (_dir, root) = repo();
    let m = WorktreeManager::open(&root);
    m.create("a", None, None).unwrap();
    let err = m.create("a", None, None).unwrap_err();
    assert!(matches!(err, WorktreeError::NameTaken { .. }), "{err}");
    m.remove("a", false, false).unwrap();
    let err = m.create("a", None, None).unwrap_err();
    assert!(matches!(err, WorktreeError::BranchExists { .. }), "{err}");
    assert!(err.to_string().contains("git branch -D wt/a"), "{err}");
}

#[test]
fn removing_uncommitted_work_is_refused_unless_forced() {
    let (_dir, root) = repo();
    let m = WorktreeManager::open(&root);
    let w = m.create("a", None, None).unwrap();
    std::fs::write(w.path.join("new.txt"), "work\n").unwrap();
    let err = m.remove("a", false, false).unwrap_err();
    assert!(matches!(err, WorktreeError::Dirty { .. }), "{err}");
    assert!(err.to_string().contains("new.txt"), "{err}");
    assert!(w.path.join("new.txt").is_file(), "nothing was lost");
    assert_eq!(m.get("a").unwrap().status, WorktreeStatus::Active);
    m.remove("a", true, false).unwrap();
    assert!(!w.path.exists());
    assert_eq!(m.list().unwrap()[0].status, WorktreeStatus::Removed);
    assert!(git(&root, &["branch", "--list", "wt/a"]).contains("wt/a"), "the branch stays");
    assert_eq!(
        event_names(&m)[2..],
        [
            "worktree.remove.before",
            "worktree.remove.failed",
            "worktree.remove.before",
            "worktree.remove.after"
        ]
    );
    let err = m.remove("a", false, false).unwrap_err();
    assert!(matches!(err, WorktreeError::Unknown { .. }), "{err}");
}

#[test]
fn a_bound_task_is_completed_when_its_worktree_is_removed_with_complete_task() {
    let (_dir, root) = repo();
    let m = WorktreeManager::open(&root);
    let task = m.board().create("Fix login", "").unwrap();
    m.create("login", Some(task.id), None).unwrap();
    assert_eq!(m.board().get(task.id).unwrap().worktree.as_deref(), Some("login"));
    let removal = m.remove("login", false, true).unwrap();
    assert_eq!(removal.completed.unwrap().status, TaskStatus::Completed);
    assert_eq!(m.board().get(task.id).unwrap().status, TaskStatus::Completed);
    let last = m.events(1).unwrap().remove(0);
    assert_eq!((last.event.as_str(), last.task), ("task.completed", Some(task.id)));
}

#[test]
fn keep_and_bind_change_the_index_and_unknown_tasks_are_refused() {
    let (_dir, root) = repo();
    let m = WorktreeManager::open(&root);
    m.create("a", None, None).unwrap();
    assert_eq!(m.keep("a").unwrap().status, WorktreeStatus::Kept);
    assert!(matches!(m.bind_task(7, "a"), Err(WorktreeError::Board(_))));
    let task = m.board().create("t", "").unwrap();
    m.bind_task(task.id, "a").unwrap();
    assert_eq!(m.get("a").unwrap().task_id, Some(task.id));
    assert!(matches!(m.create("b", Some(99), None), Err(WorktreeError::Board(_))));
    assert!(event_names(&m).contains(&"worktree.keep".to_string()));
}

#[test]
fn the_bus_carries_each_event_written_to_the_file() {
    let (_dir, root) = repo();
    let mut rx = subscribe();
    let m = WorktreeManager::open(&root);
    m.create("bus", None, None).unwrap();
    let mut seen = Vec::new();
    while let Ok(e) = rx.try_recv() {
        if e.project == root {
            seen.push(e);
        }
    }
    assert_eq!(
        seen,
        m.events(10)
            .unwrap()
            .into_iter()
            .map(|mut e| {
                e.project = root.clone();
                e
            })
            .collect::<Vec<_>>()
    );
}

#[test]
fn concurrent_creates_each_get_their_worktree_and_the_index_keeps_them_all() {
    let (_dir, root) = repo();
    let threads: Vec<_> = (0..6)
        .map(|i| {
            let m = WorktreeManager::open(&root);
            std::thread::spawn(move || m.create(&format!("w{i}"), None, None).map(|_| ()))
        })
        .collect();
    for t in threads {
        t.join().unwrap().unwrap();
    }
    let mut names: Vec<String> =
        WorktreeManager::open(&root).list().unwrap().into_iter().map(|w| w.name).collect();
    names.sort();
    assert_eq!(names, ["w0", "w1", "w2", "w3", "w4", "w5"]);
}

#[test]
fn status_shows_uncommitted_files_and_the_commits_since_the_base() {
    let (_dir, root) = repo();
    let m = WorktreeManager::open(&root);
    let w = m.create("s", None, None).unwrap();
    std::fs::write(w.path.join("notes.txt"), "changed\n").unwrap();
    git(&w.path, &["commit", "-q", "-am", "change notes"]);
    std::fs::write(w.path.join("draft.txt"), "x").unwrap();
    let state = m.status("s").unwrap();
    assert!(state.present);
    assert_eq!(state.changes, ["draft.txt"]);
    assert_eq!(state.commits.len(), 1, "{:?}", state.commits);
    assert!(state.commits[0].contains("change notes"));
}

#[test]
fn a_repository_planted_where_a_worktree_would_be_is_refused_not_run() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let canary = ferroclaw_testkit::hostile::Canary::new();
    ferroclaw_testkit::hostile::hostile_repo(&root, "planted-worktree-index", &canary);
    let m = WorktreeManager::open(&root);
    let err = m.status("evil").unwrap_err();
    assert!(err.to_string().contains("is not a git worktree of this project"), "{err}");
    let err = m.remove("evil", true, false).unwrap_err();
    assert!(err.to_string().contains("is not a git worktree of this project"), "{err}");
    assert!(root.join(".agent/worktrees/evil/b.txt").is_file(), "nothing was removed");
    assert_eq!(canary.hits(&root), Vec::<String>::new());
}
