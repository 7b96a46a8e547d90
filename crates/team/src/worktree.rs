//! Worktree isolation: each named worktree is a real `git worktree` on its
//! own branch `wt/NAME`, under `<project>/.agent/worktrees/NAME`, so agents
//! can change the same files side by side without touching the main
//! checkout or each other.
//!
//! The [`WorktreeManager`] keeps an index at `.agent/worktrees/index.json`
//! (learn-claude-code's format, replaced atomically) and appends lifecycle
//! events to `.agent/worktrees/events.jsonl` ([`events`]). Every change runs
//! under an exclusive lock on `.agent/worktrees/.lock`, git commands
//! included, so two agents creating worktrees at once never take one name
//! twice. The folder holds a `.gitignore` of `*`, so neither the worktrees
//! nor the index show up in the main checkout's `git status`.
//!
//! Removing keeps the branch (`wt/NAME`): committed work is never lost with
//! the folder. Uncommitted work is: removal refuses it unless forced.

mod error;
pub mod events;
mod git;
pub mod tools;

use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::board::TaskBoard;
use crate::clock;
use crate::task::{Task, TaskStatus, TaskUpdate};
pub use error::WorktreeError;
pub use events::{WorktreeEvent, subscribe};
use ferroclaw_tools::own_file::{self, MAX_STATE_FILE_BYTES};

/// The worktrees' folder, relative to the project.
pub const WORKTREES_DIR: &str = ".agent/worktrees";
/// The longest worktree name.
pub const NAME_MAX: usize = 40;
/// The index and event files, inside the worktrees' folder.
const INDEX_FILE: &str = "index.json";
const EVENTS_FILE: &str = "events.jsonl";
const LOCK_FILE: &str = ".lock";

/// Where a worktree is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WorktreeStatus {
    /// On disk, in use.
    Active,
    /// On disk, kept on purpose for a human to look at or merge.
    Kept,
    /// Folder removed; the branch stays.
    Removed,
}

impl WorktreeStatus {
    /// `active`, `kept`, `removed`.
    pub fn as_str(self) -> &'static str {
        match self {
            WorktreeStatus::Active => "active",
            WorktreeStatus::Kept => "kept",
            WorktreeStatus::Removed => "removed",
        }
    }
}

/// One worktree as recorded in the index.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Worktree {
    pub name: String,
    /// Its folder (absolute).
    pub path: PathBuf,
    /// `wt/NAME`.
    pub branch: String,
    /// What it was branched from, as given (`HEAD` by default).
    #[serde(default)]
    pub base_ref: String,
    /// The commit it was branched from.
    #[serde(default)]
    pub base_commit: String,
    /// The task bound to it, if any.
    #[serde(default)]
    pub task_id: Option<u64>,
    pub status: WorktreeStatus,
    #[serde(default)]
    pub created_at: String,
    #[serde(default)]
    pub updated_at: String,
}

/// The index file: `{"worktrees": [...]}`.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Index {
    #[serde(default)]
    worktrees: Vec<Worktree>,
}

impl Index {
    /// The live (active or kept) worktree called `name`.
    fn live(&mut self, name: &str) -> Result<&mut Worktree, WorktreeError> {
        let known: Vec<String> = self
            .worktrees
            .iter()
            .filter(|w| w.status != WorktreeStatus::Removed)
            .map(|w| w.name.clone())
            .collect();
        self.worktrees
            .iter_mut()
            .find(|w| w.name == name && w.status != WorktreeStatus::Removed)
            .ok_or_else(|| WorktreeError::Unknown {
                name: name.to_string(),
                known: if known.is_empty() {
                    " (there are none; worktree_create makes one)".to_string()
                } else {
                    format!(" (worktrees: {})", known.join(", "))
                },
            })
    }
}

/// A worktree with what `git status` says about it.
#[derive(Debug, Clone)]
pub struct WorktreeState {
    pub worktree: Worktree,
    /// Files with uncommitted changes (untracked ones too).
    pub changes: Vec<String>,
    /// The branch's commits since its base, newest first, one line each.
    pub commits: Vec<String>,
    /// False when its folder is gone (removed by hand).
    pub present: bool,
}

/// What a removal did.
#[derive(Debug, Clone)]
pub struct Removal {
    pub worktree: Worktree,
    /// The task marked completed (`complete_task`).
    pub completed: Option<Task>,
    /// What was not done, said plainly.
    pub notes: Vec<String>,
}

/// The worktrees of one project. Cheap to clone; holds no open files.
#[derive(Debug, Clone)]
pub struct WorktreeManager {
    project: PathBuf,
    dir: PathBuf,
    board: TaskBoard,
}

/// Checks a worktree name: 1 to [`NAME_MAX`] characters from `[A-Za-z0-9._-]`
/// (and not `.` or `..`, which are no folder names).
pub fn validate_name(name: &str) -> Result<(), WorktreeError> {
    let ok = (1..=NAME_MAX).contains(&name.len())
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
        && name != "."
        && name != "..";
    if ok { Ok(()) } else { Err(WorktreeError::InvalidName { name: name.to_string() }) }
}

/// True when `path` lies in a git work tree (a `.git` folder or file in it
/// or above it): a few stats, no git process.
pub fn in_git_repo(path: &Path) -> bool {
    path.ancestors().any(|dir| dir.join(".git").exists())
}

impl WorktreeManager {
    /// The worktrees of `project` (its task board is the one bound tasks are
    /// on). Touches nothing until used.
    pub fn open(project: impl AsRef<Path>) -> Self {
        let project = project.as_ref().to_path_buf();
        Self { dir: project.join(WORKTREES_DIR), board: TaskBoard::open(&project), project }
    }

    /// The folder holding the worktrees, the index and the events.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The task board bound tasks are on.
    pub fn board(&self) -> &TaskBoard {
        &self.board
    }

    /// Creates worktree `name` on a new branch `wt/NAME` from `base_ref`
    /// (default `HEAD`), bound to `task_id` if given. Refused: a bad name,
    /// a project outside git, a name in use, an existing branch, a base that
    /// is no commit, and (from `HEAD`) a main checkout with uncommitted
    /// changes, which the worktree would silently lack.
    pub fn create(
        &self,
        name: &str,
        task_id: Option<u64>,
        base_ref: Option<&str>,
    ) -> Result<Worktree, WorktreeError> {
        validate_name(name)?;
        self.require_repo()?;
        let _lock = self.lock_exclusive()?;
        self.emit("worktree.create.before", task_id, name, None)?;
        let made = self.create_locked(name, task_id, base_ref);
        match &made {
            Ok(w) => self.emit("worktree.create.after", w.task_id, name, None)?,
            Err(e) => self.emit("worktree.create.failed", task_id, name, Some(e.to_string()))?,
        }
        made
    }

    fn create_locked(
        &self,
        name: &str,
        task_id: Option<u64>,
        base_ref: Option<&str>,
    ) -> Result<Worktree, WorktreeError> {
        let mut index = self.load()?;
        if let Ok(w) = index.live(name) {
            return Err(WorktreeError::NameTaken {
                name: name.to_string(),
                status: w.status.as_str(),
                path: w.path.clone(),
            });
        }
        if let Some(id) = task_id {
            self.board.get(id)?;
        }
        let branch = format!("wt/{name}");
        if git::run(
            &self.project,
            &["rev-parse", "--verify", "--quiet", &format!("refs/heads/{branch}")],
        )?
        .ok
        {
            return Err(WorktreeError::BranchExists { branch });
        }
        let base = base_ref.map(str::trim).filter(|b| !b.is_empty()).unwrap_or("HEAD");
        let commit = format!("{base}^{{commit}}");
        let resolved = git::run(&self.project, &["rev-parse", "--verify", "--quiet", &commit])?;
        if !resolved.ok {
            let hint = if base == "HEAD" { " (the repository has no commit yet)" } else { "" };
            return Err(WorktreeError::BadBase { base: base.to_string(), hint });
        }
        if base == "HEAD" {
            let dirty = git::changes(&self.project, true)?;
            if !dirty.is_empty() {
                return Err(WorktreeError::DirtyBase { files: error::some_files(&dirty) });
            }
        }
        let path = self.dir.join(name);
        let path_text = path.to_string_lossy().into_owned();
        git::ok(&self.project, &["worktree", "add", "-b", &branch, &path_text, base])?;
        let now = clock::now();
        let worktree = Worktree {
            name: name.to_string(),
            path,
            branch,
            base_ref: base.to_string(),
            base_commit: resolved.stdout.trim().to_string(),
            task_id,
            status: WorktreeStatus::Active,
            created_at: now.clone(),
            updated_at: now,
        };
        index.worktrees.retain(|w| w.name != name);
        index.worktrees.push(worktree.clone());
        self.save(&index)?;
        if let Some(id) = task_id {
            self.bind_on_board(id, name)?;
        }
        Ok(worktree)
    }

    /// Every worktree in the index, removed ones included, oldest first.
    pub fn list(&self) -> Result<Vec<Worktree>, WorktreeError> {
        let _lock = self.lock_shared()?;
        Ok(self.load()?.worktrees)
    }

    /// The live (active or kept) worktree `name`.
    pub fn get(&self, name: &str) -> Result<Worktree, WorktreeError> {
        let _lock = self.lock_shared()?;
        Ok(self.load()?.live(name)?.clone())
    }

    /// Worktree `name` with its uncommitted changes and its commits since
    /// the base.
    pub fn status(&self, name: &str) -> Result<WorktreeState, WorktreeError> {
        let worktree = self.get(name)?;
        let present = worktree.path.is_dir();
        if present {
            git::require_linked(&self.project, &worktree.path)?;
        }
        let (changes, commits) = if present {
            let base = match worktree.base_commit.as_str() {
                "" => worktree.base_ref.as_str(),
                commit => commit,
            };
            let range = format!("{base}..HEAD");
            let log = git::run(&worktree.path, &["log", "--oneline", "--no-decorate", &range])?;
            (git::changes(&worktree.path, false)?, log.stdout.lines().map(str::to_string).collect())
        } else {
            (Vec::new(), Vec::new())
        };
        Ok(WorktreeState { worktree, changes, commits, present })
    }

    /// Marks worktree `name` kept: it stays on disk for a human.
    pub fn keep(&self, name: &str) -> Result<Worktree, WorktreeError> {
        let _lock = self.lock_exclusive()?;
        let mut index = self.load()?;
        let worktree = index.live(name)?;
        worktree.status = WorktreeStatus::Kept;
        worktree.updated_at = clock::now();
        let worktree = worktree.clone();
        self.save(&index)?;
        self.emit("worktree.keep", worktree.task_id, name, None)?;
        Ok(worktree)
    }

    /// Removes worktree `name`'s folder (its branch stays). Uncommitted
    /// changes are refused unless `force`. With `complete_task`, its bound
    /// task is marked completed on the board.
    pub fn remove(
        &self,
        name: &str,
        force: bool,
        complete_task: bool,
    ) -> Result<Removal, WorktreeError> {
        let _lock = self.lock_exclusive()?;
        let mut index = self.load()?;
        let task_id = index.live(name)?.task_id;
        self.emit("worktree.remove.before", task_id, name, None)?;
        let removed = self.remove_locked(&mut index, name, force);
        let worktree = match removed {
            Ok(w) => w,
            Err(e) => {
                self.emit("worktree.remove.failed", task_id, name, Some(e.to_string()))?;
                return Err(e);
            }
        };
        self.emit("worktree.remove.after", task_id, name, None)?;
        let mut removal = Removal { worktree, completed: None, notes: Vec::new() };
        match (complete_task, task_id) {
            (false, _) => {}
            (true, None) => {
                removal.notes.push("no task is bound to it, so none was completed".into());
            }
            (true, Some(id)) => {
                let done = TaskUpdate { status: Some(TaskStatus::Completed), ..Default::default() };
                match self.board.update(id, &done) {
                    Ok(updated) => {
                        self.emit("task.completed", Some(id), name, None)?;
                        removal.completed = Some(updated.task);
                    }
                    Err(e) => removal.notes.push(format!("task #{id} was not completed: {e}")),
                }
            }
        }
        Ok(removal)
    }

    fn remove_locked(
        &self,
        index: &mut Index,
        name: &str,
        force: bool,
    ) -> Result<Worktree, WorktreeError> {
        let path = index.live(name)?.path.clone();
        if path.is_dir() {
            git::require_linked(&self.project, &path)?;
            if !force {
                let dirty = git::changes(&path, false)?;
                if !dirty.is_empty() {
                    return Err(WorktreeError::Dirty {
                        name: name.to_string(),
                        files: error::some_files(&dirty),
                    });
                }
            }
            let path_text = path.to_string_lossy().into_owned();
            let mut args = vec!["worktree", "remove"];
            if force {
                args.push("--force");
            }
            args.push(&path_text);
            git::ok(&self.project, &args)?;
        } else {
            // Deleted by hand: let git forget it too.
            git::ok(&self.project, &["worktree", "prune"])?;
        }
        let worktree = index.live(name)?;
        worktree.status = WorktreeStatus::Removed;
        worktree.updated_at = clock::now();
        let worktree = worktree.clone();
        self.save(index)?;
        Ok(worktree)
    }

    /// Binds task `task_id` to live worktree `name`, on the board and in the
    /// index.
    pub fn bind_task(&self, task_id: u64, name: &str) -> Result<Task, WorktreeError> {
        let _lock = self.lock_exclusive()?;
        let mut index = self.load()?;
        index.live(name)?;
        let task = self.bind_on_board(task_id, name)?;
        let worktree = index.live(name)?;
        worktree.task_id = Some(task_id);
        worktree.updated_at = clock::now();
        self.save(&index)?;
        Ok(task)
    }

    /// The last `limit` lifecycle events, oldest first.
    pub fn events(&self, limit: usize) -> Result<Vec<WorktreeEvent>, WorktreeError> {
        events::recent(&self.dir.join(EVENTS_FILE), limit)
    }

    fn bind_on_board(&self, task_id: u64, name: &str) -> Result<Task, WorktreeError> {
        let bind = TaskUpdate { worktree: Some(name.to_string()), ..Default::default() };
        Ok(self.board.update(task_id, &bind)?.task)
    }

    /// Refuses a project outside git before anything is written.
    fn require_repo(&self) -> Result<(), WorktreeError> {
        let out = git::run(&self.project, &["rev-parse", "--show-toplevel"])?;
        if out.ok {
            Ok(())
        } else if out.stderr.contains("not a git repository") || !self.project.is_dir() {
            Err(WorktreeError::NotARepo { project: self.project.clone() })
        } else {
            Err(WorktreeError::Git { args: "rev-parse --show-toplevel".into(), stderr: out.stderr })
        }
    }

    fn emit(
        &self,
        event: &str,
        task: Option<u64>,
        name: &str,
        error: Option<String>,
    ) -> Result<(), WorktreeError> {
        let event = WorktreeEvent {
            event: event.to_string(),
            ts: clock::now(),
            task,
            worktree: name.to_string(),
            error,
            project: self.project.clone(),
        };
        events::record(&self.dir.join(EVENTS_FILE), event)
    }

    /// Takes the lock for a change, creating the folder (and its
    /// `.gitignore`) if needed.
    fn lock_exclusive(&self) -> Result<File, WorktreeError> {
        std::fs::create_dir_all(&self.dir)
            .map_err(|e| WorktreeError::io(format!("cannot create {}", self.dir.display()), e))?;
        let ignore = self.dir.join(".gitignore");
        if !ignore.exists() {
            crate::confined::create_new(&ignore, b"# ferroclaw's worktrees, index and events\n*\n")
                .map_err(|e| WorktreeError::io(format!("cannot write {}", ignore.display()), e))?;
        }
        let file = self.lock_file()?;
        file.lock().map_err(|e| WorktreeError::io("cannot lock the worktree index", e))?;
        Ok(file)
    }

    /// Takes the lock for reading; `None` when there are no worktrees yet.
    fn lock_shared(&self) -> Result<Option<File>, WorktreeError> {
        if !self.dir.is_dir() {
            return Ok(None);
        }
        let file = self.lock_file()?;
        file.lock_shared().map_err(|e| WorktreeError::io("cannot lock the worktree index", e))?;
        Ok(Some(file))
    }

    fn lock_file(&self) -> Result<File, WorktreeError> {
        let path = self.dir.join(LOCK_FILE);
        OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|e| WorktreeError::io(format!("cannot open {}", path.display()), e))
    }

    fn load(&self) -> Result<Index, WorktreeError> {
        let path = self.dir.join(INDEX_FILE);
        let text = match own_file::read_text(&path, MAX_STATE_FILE_BYTES) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Index::default()),
            Err(e) => return Err(WorktreeError::io(format!("cannot read {}", path.display()), e)),
        };
        let mut index: Index = serde_json::from_str(&text).map_err(|e| {
            WorktreeError::Unreadable { path: path.clone(), problem: e.to_string() }
        })?;
        // The index is a file in the project, which a cloned repository can
        // carry: a worktree is always `.agent/worktrees/NAME`, whatever the
        // file says its folder is, and its base names a commit, never an
        // option for git.
        for w in &mut index.worktrees {
            let unreadable =
                |problem: String| WorktreeError::Unreadable { path: path.clone(), problem };
            validate_name(&w.name).map_err(|e| unreadable(e.to_string()))?;
            if w.base_ref.starts_with('-') || w.base_commit.starts_with('-') {
                return Err(unreadable(format!("worktree {}'s base is not a commit", w.name)));
            }
            w.path = self.dir.join(&w.name);
        }
        Ok(index)
    }

    /// Writes the index atomically: a temporary file beside it, flushed,
    /// renamed over it.
    fn save(&self, index: &Index) -> Result<(), WorktreeError> {
        let path = self.dir.join(INDEX_FILE);
        let context = || format!("cannot write {}", path.display());
        let mut json = serde_json::to_vec_pretty(index).map_err(|e| WorktreeError::Unreadable {
            path: path.clone(),
            problem: format!("cannot encode: {e}"),
        })?;
        json.push(b'\n');
        crate::confined::write_atomic(&path, &json).map_err(|e| WorktreeError::io(context(), e))
    }
}

#[cfg(test)]
mod tests;
