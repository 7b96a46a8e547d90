//! Coordination between agents: the shared task board, and the files of an
//! agent team (who is on it, their inboxes, protocol requests).
//!
//! The [`TaskBoard`] keeps tasks as files under `<workspace>/.agent/tasks/`,
//! one `task_<id>.json` per task in learn-claude-code's format (`id`,
//! `subject`, `description`, `status`, `blockedBy`, `blocks`, `owner`,
//! `worktree`, `created_at`, `updated_at`). Dependencies are kept on both
//! sides, cycles are refused, and completing a task frees the tasks waiting
//! for it. Every change happens under an exclusive lock on
//! `.agent/tasks/.lock` and every file is replaced atomically, so several
//! agents and processes can share one board. A corrupt file is reported with
//! its path and does not hide the other tasks.
//!
//! [`board_tools`] gives the model's tools: `task_create`, `task_update`,
//! `task_list`, `task_get`.
//!
//! A [`Team`] lives in `<workspace>/.agent/team/`: `config.json` (members,
//! status, sessions), one append-only inbox per member (`inbox/NAME.jsonl`,
//! see [`inbox`] for why a message is never lost nor read twice) and the
//! protocol requests. [`lead_tools`] and [`teammate_tools`] are the team's
//! tools for one [`Seat`]. This crate does not run agents or talk to models:
//! `ferroclaw-runtime` starts teammates.
//!
//! ```
//! use ferroclaw_team::{TaskBoard, TaskStatus, TaskUpdate};
//!
//! let dir = tempfile::tempdir()?;
//! let board = TaskBoard::open(dir.path());
//! let schema = board.create("Design the schema", "")?;
//! let api = board.create("Write the API", "Done when the tests pass.")?;
//! board.update(api.id, &TaskUpdate { add_blocked_by: vec![schema.id], ..Default::default() })?;
//! assert_eq!(board.ready()?.len(), 1, "only the schema can start");
//!
//! let done = TaskUpdate { status: Some(TaskStatus::Completed), ..Default::default() };
//! let updated = board.update(schema.id, &done)?;
//! assert_eq!(updated.unblocked[0].id, api.id, "the API is ready now");
//! assert!(board.get(api.id)?.blocked_by.is_empty());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod board;
mod clock;
pub mod config;
mod confined;
mod error;
pub mod inbox;
mod render;
pub mod seat_tools;
mod task;
mod tools;
pub mod worktree;

pub use board::{BOARD_DIR, Listing, TaskBoard, Unreadable, Updated};
pub use config::{LEAD, Member, MemberStatus, Request, TEAM_DIR, Team, TeamConfig};
pub use error::{BoardError, TeamError};
pub use inbox::{Batch, InboxMessage, InboxReader, MessageType};
pub use render::{render_board, render_team, task_line};
pub use seat_tools::{PlanGate, Seat, TEAM_TOOL_NAMES, lead_tools, plan_approved, teammate_tools};
pub use task::{Task, TaskStatus, TaskUpdate};
pub use tools::{
    TaskCreateTool, TaskGetTool, TaskListTool, TaskUpdateTool, board_tools, register_board_tools,
};
pub use worktree::tools::register_worktree_tools;
pub use worktree::{WorktreeError, WorktreeManager};
