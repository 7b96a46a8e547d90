//! The task board on disk: one JSON file per task under
//! `<workspace>/.agent/tasks/`, every change made under an exclusive lock on
//! `.agent/tasks/.lock` and written atomically, so several agents and
//! processes can share one board.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};

use crate::clock;
use crate::error::BoardError;
use crate::task::{Task, TaskStatus, TaskUpdate};
use ferroclaw_tools::own_file::{self, MAX_STATE_FILE_BYTES};

/// The board's folder, relative to the workspace.
pub const BOARD_DIR: &str = ".agent/tasks";
/// The lock file every reader and writer takes, inside the board's folder.
const LOCK_FILE: &str = ".lock";

/// A task board rooted in a workspace. Cheap to clone; holds no open files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskBoard {
    dir: PathBuf,
}

/// Everything on the board at one moment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Listing {
    /// The readable tasks, by id.
    pub tasks: Vec<Task>,
    /// Task files that could not be read, with why.
    pub unreadable: Vec<Unreadable>,
}

/// A task file that is not a valid task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unreadable {
    /// The task's id, from the file name.
    pub id: u64,
    /// The file.
    pub path: PathBuf,
    /// What is wrong with it.
    pub problem: String,
}

/// What an update did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Updated {
    /// The task as it is now.
    pub task: Task,
    /// Tasks this update made ready (pending, nothing open left to wait for).
    pub unblocked: Vec<Task>,
    /// Things skipped, said plainly (a dependency on a completed task).
    pub notes: Vec<String>,
}

impl TaskBoard {
    /// The board of `workspace`. Touches nothing until used; reading a board
    /// that was never written gives an empty listing.
    pub fn open(workspace: impl AsRef<Path>) -> Self {
        Self { dir: workspace.as_ref().join(BOARD_DIR) }
    }

    /// The folder holding the task files.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Adds a pending task with the next free id (highest id + 1).
    pub fn create(&self, subject: &str, description: &str) -> Result<Task, BoardError> {
        let subject = subject.trim();
        if subject.is_empty() {
            return Err(BoardError::Invalid("a task needs a subject".to_string()));
        }
        let _lock = self.lock_exclusive()?;
        let id = self.ids_on_disk()?.last().map_or(1, |last| last + 1);
        let now = clock::now();
        let task = Task {
            id,
            subject: subject.to_string(),
            description: description.trim().to_string(),
            status: TaskStatus::Pending,
            blocked_by: Vec::new(),
            blocks: Vec::new(),
            owner: None,
            worktree: None,
            created_at: now.clone(),
            updated_at: now,
        };
        self.write(&task)?;
        self.sync_dir();
        Ok(task)
    }

    /// Task `id`.
    pub fn get(&self, id: u64) -> Result<Task, BoardError> {
        let _lock = self.lock_shared()?;
        match self.read(id)? {
            Some(task) => Ok(task),
            None => Err(BoardError::UnknownTask { id }),
        }
    }

    /// Every task, by id, and the task files that could not be read.
    pub fn list(&self) -> Result<Listing, BoardError> {
        let _lock = self.lock_shared()?;
        Ok(self.load()?.into_listing())
    }

    /// The pending tasks with nothing open to wait for, by id.
    pub fn ready(&self) -> Result<Vec<Task>, BoardError> {
        Ok(self.list()?.ready().into_iter().cloned().collect())
    }

    /// Applies `update` to task `id`, keeping both sides of every dependency
    /// in step. Refuses unknown ids, dependency cycles, and starting or
    /// completing a task that still waits for open tasks. Completing a task
    /// removes it from every task's `blockedBy`. A refused update changes
    /// nothing on disk.
    pub fn update(&self, id: u64, update: &TaskUpdate) -> Result<Updated, BoardError> {
        let _lock = self.lock_exclusive()?;
        let mut board = self.load()?;
        board.require(id)?;
        let mut changed = BTreeSet::from([id]);
        let mut notes = Vec::new();
        for &blocker in &update.add_blocked_by {
            board.link(id, blocker, &mut changed, &mut notes)?;
        }
        for &waiter in &update.add_blocks {
            board.link(waiter, id, &mut changed, &mut notes)?;
        }
        for &blocker in &update.remove_blocked_by {
            board.unlink(id, blocker, &mut changed);
        }
        for &waiter in &update.remove_blocks {
            board.unlink(waiter, id, &mut changed);
        }
        let mut unblocked = Vec::new();
        if let Some(status) = update.status {
            let blockers = board.open_blockers(id);
            if status != TaskStatus::Pending && !blockers.is_empty() {
                return Err(BoardError::Blocked { id, blockers });
            }
            if status == TaskStatus::Completed {
                unblocked = board.release(id, &mut changed, &mut notes);
            }
        }
        let task = board.tasks.get_mut(&id).ok_or(BoardError::UnknownTask { id })?;
        if let Some(status) = update.status {
            task.status = status;
        }
        if let Some(subject) = &update.subject {
            if subject.trim().is_empty() {
                return Err(BoardError::Invalid("a task needs a subject".to_string()));
            }
            task.subject = subject.trim().to_string();
        }
        if let Some(description) = &update.description {
            task.description = description.trim().to_string();
        }
        if let Some(owner) = &update.owner {
            task.owner = Some(owner.trim().to_string()).filter(|o| !o.is_empty());
        }
        if let Some(worktree) = &update.worktree {
            task.worktree = Some(worktree.trim().to_string()).filter(|w| !w.is_empty());
        }
        let now = clock::now();
        for changed_id in &changed {
            if let Some(task) = board.tasks.get_mut(changed_id) {
                task.updated_at.clone_from(&now);
                self.write(task)?;
            }
        }
        self.sync_dir();
        let task = board.tasks[&id].clone();
        let unblocked = unblocked.iter().filter_map(|id| board.tasks.get(id).cloned()).collect();
        Ok(Updated { task, unblocked, notes })
    }

    /// Claims task `id` for `owner` atomically: under the board's lock, the
    /// task must be pending, unowned and wait for nothing open; it becomes
    /// `in_progress` owned by `owner`. Two agents never claim the same task.
    pub fn claim(&self, id: u64, owner: &str) -> Result<Task, BoardError> {
        let _lock = self.lock_exclusive()?;
        let mut board = self.load()?;
        board.require(id)?;
        let blockers = board.open_blockers(id);
        let task = board.tasks.get_mut(&id).ok_or(BoardError::UnknownTask { id })?;
        if task.status != TaskStatus::Pending || task.owner.is_some() {
            return Err(BoardError::Invalid(format!(
                "task #{id} is not free to claim: it is {}{}",
                task.status,
                task.owner.as_deref().map(|o| format!(", owned by {o}")).unwrap_or_default()
            )));
        }
        if !blockers.is_empty() {
            return Err(BoardError::Blocked { id, blockers });
        }
        task.status = TaskStatus::InProgress;
        task.owner = Some(owner.to_string());
        task.updated_at = clock::now();
        let task = task.clone();
        self.write(&task)?;
        self.sync_dir();
        Ok(task)
    }

    /// Claims the first pending, unowned task that waits for nothing open
    /// (lowest id), if any: what an idle teammate does on its own.
    pub fn claim_next(&self, owner: &str) -> Result<Option<Task>, BoardError> {
        for task in self.ready()? {
            if task.owner.is_some() {
                continue;
            }
            match self.claim(task.id, owner) {
                Ok(task) => return Ok(Some(task)),
                // Someone else was faster: try the next one.
                Err(BoardError::Invalid(_) | BoardError::Blocked { .. }) => continue,
                Err(e) => return Err(e),
            }
        }
        Ok(None)
    }

    /// Takes the board's lock for a change, creating the folder if needed.
    fn lock_exclusive(&self) -> Result<File, BoardError> {
        std::fs::create_dir_all(&self.dir)
            .map_err(|e| BoardError::io(format!("cannot create {}", self.dir.display()), e))?;
        let file = self.lock_file()?;
        file.lock().map_err(|e| {
            BoardError::io(format!("cannot lock {}", self.lock_path().display()), e)
        })?;
        Ok(file)
    }

    /// Takes the board's lock for reading; `None` when there is no board yet.
    fn lock_shared(&self) -> Result<Option<File>, BoardError> {
        if !self.dir.is_dir() {
            return Ok(None);
        }
        let file = self.lock_file()?;
        file.lock_shared().map_err(|e| {
            BoardError::io(format!("cannot lock {}", self.lock_path().display()), e)
        })?;
        Ok(Some(file))
    }

    fn lock_path(&self) -> PathBuf {
        self.dir.join(LOCK_FILE)
    }

    fn lock_file(&self) -> Result<File, BoardError> {
        OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(self.lock_path())
            .map_err(|e| BoardError::io(format!("cannot open {}", self.lock_path().display()), e))
    }

    fn path_of(&self, id: u64) -> PathBuf {
        self.dir.join(format!("task_{id}.json"))
    }

    /// The ids of every task file, readable or not, ascending.
    fn ids_on_disk(&self) -> Result<Vec<u64>, BoardError> {
        let entries = match std::fs::read_dir(&self.dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => {
                return Err(BoardError::io(format!("cannot list {}", self.dir.display()), e));
            }
        };
        let mut ids: Vec<u64> = entries
            .filter_map(|entry| {
                let name = entry.ok()?.file_name();
                name.to_str()?.strip_prefix("task_")?.strip_suffix(".json")?.parse().ok()
            })
            .collect();
        ids.sort_unstable();
        Ok(ids)
    }

    /// Task `id` from its file; `None` when there is no such file.
    fn read(&self, id: u64) -> Result<Option<Task>, BoardError> {
        let path = self.path_of(id);
        let text = match own_file::read_text(&path, MAX_STATE_FILE_BYTES) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => {
                return Err(BoardError::Unreadable { path, problem: e.to_string() });
            }
        };
        let problem = match serde_json::from_str::<Task>(&text) {
            Ok(task) if task.id == id => return Ok(Some(task)),
            Ok(task) => format!("it holds task #{} but is named for #{id}", task.id),
            Err(e) => format!("not a valid task: {e}"),
        };
        Err(BoardError::Unreadable { path, problem })
    }

    /// Every task file, read.
    fn load(&self) -> Result<Board, BoardError> {
        let mut board = Board::default();
        for id in self.ids_on_disk()? {
            match self.read(id) {
                Ok(Some(task)) => {
                    board.tasks.insert(id, task);
                }
                Ok(None) => {} // removed by hand since listing
                Err(BoardError::Unreadable { path, problem }) => {
                    board.unreadable.insert(id, Unreadable { id, path, problem });
                }
                Err(e) => return Err(e),
            }
        }
        Ok(board)
    }

    /// Writes `task` to its file atomically: a temporary file in the same
    /// folder, flushed to disk, renamed over the old one.
    fn write(&self, task: &Task) -> Result<(), BoardError> {
        let path = self.path_of(task.id);
        let context = || format!("cannot write {}", path.display());
        let mut json = serde_json::to_vec_pretty(task)
            .map_err(|e| BoardError::Invalid(format!("cannot encode task #{}: {e}", task.id)))?;
        json.push(b'\n');
        crate::confined::write_atomic(&path, &json).map_err(|e| BoardError::io(context(), e))
    }

    /// Makes the renames durable; a failure here loses nothing already
    /// visible, so it is ignored.
    fn sync_dir(&self) {
        if let Ok(dir) = File::open(&self.dir) {
            let _ = dir.sync_all();
        }
    }
}

impl Listing {
    /// Task `id`, if readable.
    pub fn get(&self, id: u64) -> Option<&Task> {
        self.tasks.iter().find(|t| t.id == id)
    }

    /// The tasks `task` still waits for: blockers not completed (an
    /// unreadable blocker counts as open; a deleted one does not).
    pub fn open_blockers(&self, task: &Task) -> Vec<u64> {
        task.blocked_by
            .iter()
            .copied()
            .filter(|id| match self.get(*id) {
                Some(blocker) => blocker.status != TaskStatus::Completed,
                None => self.unreadable.iter().any(|u| u.id == *id),
            })
            .collect()
    }

    /// The pending tasks with nothing open to wait for, by id.
    pub fn ready(&self) -> Vec<&Task> {
        self.tasks
            .iter()
            .filter(|t| t.status == TaskStatus::Pending && self.open_blockers(t).is_empty())
            .collect()
    }
}

/// The board in memory while one change is worked out.
#[derive(Default)]
struct Board {
    tasks: BTreeMap<u64, Task>,
    unreadable: BTreeMap<u64, Unreadable>,
}

impl Board {
    fn into_listing(self) -> Listing {
        Listing {
            tasks: self.tasks.into_values().collect(),
            unreadable: self.unreadable.into_values().collect(),
        }
    }

    /// Refuses ids that have no readable task.
    fn require(&self, id: u64) -> Result<&Task, BoardError> {
        if let Some(bad) = self.unreadable.get(&id) {
            return Err(BoardError::Unreadable {
                path: bad.path.clone(),
                problem: bad.problem.clone(),
            });
        }
        self.tasks.get(&id).ok_or(BoardError::UnknownTask { id })
    }

    /// See [`Listing::open_blockers`].
    fn open_blockers(&self, id: u64) -> Vec<u64> {
        let Some(task) = self.tasks.get(&id) else {
            return Vec::new();
        };
        task.blocked_by
            .iter()
            .copied()
            .filter(|b| match self.tasks.get(b) {
                Some(blocker) => blocker.status != TaskStatus::Completed,
                None => self.unreadable.contains_key(b),
            })
            .collect()
    }

    /// Makes `waiter` wait for `blocker`, on both sides; refuses cycles.
    fn link(
        &mut self,
        waiter: u64,
        blocker: u64,
        changed: &mut BTreeSet<u64>,
        notes: &mut Vec<String>,
    ) -> Result<(), BoardError> {
        if waiter == blocker {
            return Err(BoardError::Cycle { cycle: vec![waiter, waiter] });
        }
        let waiter_status = self.require(waiter)?.status;
        if self.require(blocker)?.status == TaskStatus::Completed {
            notes.push(format!(
                "#{blocker} is already completed, so #{waiter} does not wait for it"
            ));
            return Ok(());
        }
        if waiter_status == TaskStatus::Completed {
            notes.push(format!(
                "#{waiter} is already completed, so it does not wait for #{blocker}"
            ));
            return Ok(());
        }
        if let Some(path) = self.wait_path(blocker, waiter) {
            let mut cycle = vec![waiter];
            cycle.extend(path);
            return Err(BoardError::Cycle { cycle });
        }
        for (id, list, other) in [(waiter, true, blocker), (blocker, false, waiter)] {
            if let Some(task) = self.tasks.get_mut(&id) {
                let list = if list { &mut task.blocked_by } else { &mut task.blocks };
                if !list.contains(&other) {
                    list.push(other);
                    changed.insert(id);
                }
            }
        }
        Ok(())
    }

    /// `waiter` no longer waits for `blocker`, on both sides.
    fn unlink(&mut self, waiter: u64, blocker: u64, changed: &mut BTreeSet<u64>) {
        if let Some(task) = self.tasks.get_mut(&waiter)
            && let Some(at) = task.blocked_by.iter().position(|&b| b == blocker)
        {
            task.blocked_by.remove(at);
            changed.insert(waiter);
        }
        if let Some(task) = self.tasks.get_mut(&blocker)
            && let Some(at) = task.blocks.iter().position(|&w| w == waiter)
        {
            task.blocks.remove(at);
            changed.insert(blocker);
        }
    }

    /// A chain `from` waits for ... waits for `to`, following `blockedBy`.
    fn wait_path(&self, from: u64, to: u64) -> Option<Vec<u64>> {
        let mut came_from: BTreeMap<u64, u64> = BTreeMap::new();
        let mut stack = vec![from];
        let mut seen = BTreeSet::from([from]);
        while let Some(id) = stack.pop() {
            if id == to {
                let mut path = vec![to];
                let mut at = to;
                while let Some(&prev) = came_from.get(&at) {
                    path.push(prev);
                    at = prev;
                }
                path.reverse();
                return Some(path);
            }
            for &next in self.tasks.get(&id).map_or(&[][..], |t| &t.blocked_by) {
                if seen.insert(next) {
                    came_from.insert(next, id);
                    stack.push(next);
                }
            }
        }
        None
    }

    /// Removes completed `id` from every `blockedBy` and clears its
    /// `blocks`; returns the tasks that became ready.
    fn release(
        &mut self,
        id: u64,
        changed: &mut BTreeSet<u64>,
        notes: &mut Vec<String>,
    ) -> Vec<u64> {
        let waiters: Vec<u64> =
            self.tasks.values().filter(|t| t.blocked_by.contains(&id)).map(|t| t.id).collect();
        for &waiter in &waiters {
            self.unlink(waiter, id, changed);
        }
        if let Some(task) = self.tasks.get_mut(&id)
            && !task.blocks.is_empty()
        {
            task.blocks.clear(); // stale entries of waiters edited by hand
        }
        for bad in self.unreadable.values() {
            notes.push(format!(
                "{} is unreadable; if it waits for #{id}, fix it by hand",
                bad.path.display()
            ));
        }
        waiters
            .into_iter()
            .filter(|w| {
                self.tasks.get(w).is_some_and(|t| t.status == TaskStatus::Pending)
                    && self.open_blockers(*w).is_empty()
            })
            .collect()
    }
}
