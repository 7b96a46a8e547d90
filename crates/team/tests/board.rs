//! Specifications of the task board: files on disk, dependencies, locking.

use std::path::Path;

use ferroclaw_team::{BoardError, TaskBoard, TaskStatus, TaskUpdate, render_board};
use serde_json::Value;

fn board() -> (tempfile::TempDir, TaskBoard) {
    let dir = tempfile::tempdir().unwrap();
    let board = TaskBoard::open(dir.path());
    (dir, board)
}

/// The raw JSON of task `id` on disk.
fn on_disk(board: &TaskBoard, id: u64) -> Value {
    let text = std::fs::read_to_string(board.dir().join(format!("task_{id}.json"))).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn ids(value: &Value) -> Vec<u64> {
    value.as_array().unwrap().iter().map(|v| v.as_u64().unwrap()).collect()
}

/// Every file on disk agrees: `a.blockedBy` holds `b` exactly when `b.blocks` holds `a`.
fn assert_consistent_on_disk(board: &TaskBoard) {
    let tasks: Vec<Value> = std::fs::read_dir(board.dir())
        .unwrap()
        .filter_map(|e| {
            let path = e.unwrap().path();
            let name = path.file_name()?.to_str()?.to_string();
            (name.starts_with("task_") && name.ends_with(".json"))
                .then(|| serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap())
        })
        .collect();
    let find = |id: u64| tasks.iter().find(|t| t["id"] == id).unwrap();
    for t in &tasks {
        let id = t["id"].as_u64().unwrap();
        for b in ids(&t["blockedBy"]) {
            assert!(ids(&find(b)["blocks"]).contains(&id), "#{b}.blocks lacks #{id}");
        }
        for w in ids(&t["blocks"]) {
            assert!(ids(&find(w)["blockedBy"]).contains(&id), "#{w}.blockedBy lacks #{id}");
        }
    }
}

fn blocked_by(ids: &[u64]) -> TaskUpdate {
    TaskUpdate { add_blocked_by: ids.to_vec(), ..Default::default() }
}

fn status(status: TaskStatus) -> TaskUpdate {
    TaskUpdate { status: Some(status), ..Default::default() }
}

/// The bytes of every file in the board's folder, to prove nothing changed.
fn snapshot(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let path = e.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read(&path).unwrap())
        })
        .collect();
    files.sort();
    files
}

#[test]
fn tasks_are_files_in_the_reference_format_with_ids_counting_up() {
    let (_dir, board) = board();
    let a = board.create("  First  ", "details").unwrap();
    let b = board.create("Second", "").unwrap();
    assert_eq!((a.id, b.id), (1, 2));
    let json = on_disk(&board, 1);
    assert_eq!(json["subject"], "First");
    assert_eq!(json["status"], "pending");
    assert_eq!(json["owner"], "");
    assert_eq!(json["worktree"], "");
    assert_eq!(json["blockedBy"], serde_json::json!([]));
    assert!(json["created_at"].as_str().unwrap().ends_with('Z'));
    for key in ["id", "description", "blocks", "updated_at"] {
        assert!(json.get(key).is_some(), "{key} missing");
    }
    assert!(matches!(board.create("  ", ""), Err(BoardError::Invalid(_))));
}

#[test]
fn dependencies_are_kept_on_both_sides_on_disk() {
    let (_dir, board) = board();
    for s in ["a", "b", "c"] {
        board.create(s, "").unwrap();
    }
    board.update(1, &blocked_by(&[2])).unwrap();
    assert_eq!(ids(&on_disk(&board, 1)["blockedBy"]), [2]);
    assert_eq!(ids(&on_disk(&board, 2)["blocks"]), [1]);

    let blocks_c = TaskUpdate { add_blocks: vec![3], ..Default::default() };
    board.update(2, &blocks_c).unwrap();
    assert_eq!(ids(&on_disk(&board, 3)["blockedBy"]), [2]);
    assert_eq!(ids(&on_disk(&board, 2)["blocks"]), [1, 3]);
    assert_consistent_on_disk(&board);

    let unlink = TaskUpdate { remove_blocked_by: vec![2], ..Default::default() };
    board.update(1, &unlink).unwrap();
    let unlink_c = TaskUpdate { remove_blocks: vec![3], ..Default::default() };
    board.update(2, &unlink_c).unwrap();
    for id in 1..=3 {
        let json = on_disk(&board, id);
        assert!(ids(&json["blockedBy"]).is_empty() && ids(&json["blocks"]).is_empty());
    }
}

#[test]
fn a_dependency_cycle_is_refused_naming_it_and_nothing_changes() {
    let (dir, board) = board();
    for s in ["a", "b", "c"] {
        board.create(s, "").unwrap();
    }
    board.update(2, &blocked_by(&[1])).unwrap();
    board.update(3, &blocked_by(&[2])).unwrap();
    let before = snapshot(&dir.path().join(".agent/tasks"));
    let err = board.update(1, &blocked_by(&[3])).unwrap_err();
    assert!(matches!(err, BoardError::Cycle { .. }), "{err}");
    assert!(err.to_string().contains("#1 waits for #3 waits for #2 waits for #1"), "{err}");
    let err = board.update(2, &blocked_by(&[2])).unwrap_err();
    assert!(err.to_string().contains("#2 waits for #2"), "{err}");
    assert_eq!(snapshot(&dir.path().join(".agent/tasks")), before);
}

#[test]
fn unknown_ids_are_refused_and_nothing_changes() {
    let (dir, board) = board();
    board.create("a", "").unwrap();
    let before = snapshot(&dir.path().join(".agent/tasks"));
    assert!(matches!(
        board.update(9, &status(TaskStatus::Completed)),
        Err(BoardError::UnknownTask { id: 9 })
    ));
    assert!(matches!(board.update(1, &blocked_by(&[7])), Err(BoardError::UnknownTask { id: 7 })));
    assert!(matches!(board.get(5), Err(BoardError::UnknownTask { id: 5 })));
    assert_eq!(snapshot(&dir.path().join(".agent/tasks")), before);
}

#[test]
fn completing_tasks_in_a_chain_unblocks_each_dependent_in_turn() {
    let (_dir, board) = board();
    let a = board.create("schema", "").unwrap().id;
    let b = board.create("api", "").unwrap().id;
    let c = board.create("docs", "").unwrap().id;
    board.update(b, &blocked_by(&[a])).unwrap();
    board.update(c, &blocked_by(&[b])).unwrap();
    let ready: Vec<u64> = board.ready().unwrap().iter().map(|t| t.id).collect();
    assert_eq!(ready, [a]);

    let err = board.update(b, &status(TaskStatus::InProgress)).unwrap_err();
    assert!(matches!(err, BoardError::Blocked { id, ref blockers } if id == b && blockers == &[a]));
    assert!(err.to_string().contains("blocked by #1"), "{err}");
    assert!(board.update(c, &status(TaskStatus::Completed)).is_err(), "cannot complete early");

    board.update(a, &status(TaskStatus::InProgress)).unwrap();
    let done = board.update(a, &status(TaskStatus::Completed)).unwrap();
    assert_eq!(done.unblocked.iter().map(|t| t.id).collect::<Vec<_>>(), [b]);
    assert!(ids(&on_disk(&board, b)["blockedBy"]).is_empty());
    assert!(ids(&on_disk(&board, a)["blocks"]).is_empty());
    assert_eq!(ids(&on_disk(&board, c)["blockedBy"]), [b]);
    assert_consistent_on_disk(&board);

    board.update(b, &status(TaskStatus::InProgress)).unwrap();
    let done = board.update(b, &status(TaskStatus::Completed)).unwrap();
    assert_eq!(done.unblocked.iter().map(|t| t.id).collect::<Vec<_>>(), [c]);
    assert!(ids(&on_disk(&board, c)["blockedBy"]).is_empty());
    assert_consistent_on_disk(&board);

    let done = board.update(c, &status(TaskStatus::Completed)).unwrap();
    assert!(done.unblocked.is_empty());
    assert!(board.ready().unwrap().is_empty());
    assert_consistent_on_disk(&board);
    assert_eq!(on_disk(&board, c)["status"], "completed");
}

#[test]
fn a_completed_task_is_not_added_as_a_blocker() {
    let (_dir, board) = board();
    board.create("a", "").unwrap();
    board.create("b", "").unwrap();
    board.update(1, &status(TaskStatus::Completed)).unwrap();
    let updated = board.update(2, &blocked_by(&[1])).unwrap();
    assert!(updated.task.blocked_by.is_empty());
    assert!(updated.notes[0].contains("already completed"), "{:?}", updated.notes);
}

#[test]
fn owner_can_be_set_and_cleared() {
    let (_dir, board) = board();
    board.create("a", "").unwrap();
    let set = TaskUpdate { owner: Some("alice".into()), ..Default::default() };
    assert_eq!(board.update(1, &set).unwrap().task.owner.as_deref(), Some("alice"));
    assert_eq!(on_disk(&board, 1)["owner"], "alice");
    let clear = TaskUpdate { owner: Some(String::new()), ..Default::default() };
    assert_eq!(board.update(1, &clear).unwrap().task.owner, None);
    assert_eq!(on_disk(&board, 1)["owner"], "");
}

#[test]
fn concurrent_writers_lose_no_task_and_no_dependency() {
    let (_dir, board) = board();
    let threads: Vec<_> = (0..8)
        .map(|t| {
            let board = board.clone();
            std::thread::spawn(move || {
                (0..20)
                    .map(|i| board.create(&format!("t{t}-{i}"), "").unwrap().id)
                    .collect::<Vec<u64>>()
            })
        })
        .collect();
    let mut all: Vec<u64> = threads.into_iter().flat_map(|h| h.join().unwrap()).collect();
    all.sort_unstable();
    assert_eq!(all, (1..=160).collect::<Vec<u64>>(), "160 distinct ids");
    assert_eq!(board.list().unwrap().tasks.len(), 160, "no lost task");

    // Read-modify-write of task 1 from 8 threads at once: no lost update.
    let threads: Vec<_> = (0..8u64)
        .map(|t| {
            let board = board.clone();
            std::thread::spawn(move || {
                for id in (2..=160u64).filter(|id| id % 8 == t) {
                    board.update(id, &blocked_by(&[1])).unwrap();
                }
            })
        })
        .collect();
    for h in threads {
        h.join().unwrap();
    }
    assert_eq!(board.get(1).unwrap().blocks.len(), 159);
    assert_consistent_on_disk(&board);
    let leftovers = std::fs::read_dir(board.dir())
        .unwrap()
        .filter(|e| e.as_ref().unwrap().file_name().to_string_lossy().ends_with(".tmp"))
        .count();
    assert_eq!(leftovers, 0, "no temporary files left behind");
}

#[test]
fn a_corrupt_task_file_is_reported_with_its_path_and_hides_nothing_else() {
    let (_dir, board) = board();
    board.create("a", "").unwrap();
    board.create("b", "").unwrap();
    let bad = board.dir().join("task_3.json");
    std::fs::write(&bad, "{ not json").unwrap();
    std::fs::write(board.dir().join("task_7.json"), on_disk(&board, 1).to_string()).unwrap();

    let listing = board.list().unwrap();
    assert_eq!(listing.tasks.len(), 2);
    assert_eq!(listing.unreadable.len(), 2);
    assert_eq!(listing.unreadable[0].path, bad);
    assert!(listing.unreadable[1].problem.contains("holds task #1"), "{:?}", listing.unreadable);
    let err = board.get(3).unwrap_err().to_string();
    assert!(err.contains("task_3.json"), "{err}");
    let text = render_board(&listing);
    assert!(text.contains("Unreadable: ") && text.contains("task_3.json"), "{text}");

    assert_eq!(board.create("c", "").unwrap().id, 8, "ids of broken files are not reused");
    let err = board.update(1, &blocked_by(&[3])).unwrap_err();
    assert!(matches!(err, BoardError::Unreadable { .. }), "{err}");
    board.update(2, &blocked_by(&[1])).unwrap();
    assert_eq!(board.ready().unwrap().len(), 2, "#1 and #8");
}

#[test]
fn reading_a_board_that_was_never_written_creates_nothing() {
    let (dir, board) = board();
    let listing = board.list().unwrap();
    assert!(listing.tasks.is_empty() && listing.unreadable.is_empty());
    assert!(board.ready().unwrap().is_empty());
    assert!(!dir.path().join(".agent").exists());
    assert!(render_board(&listing).contains("empty"));
}
