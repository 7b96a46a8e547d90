//! `ferroclaw worktrees`: the project's worktrees (`.agent/worktrees/`) and
//! their latest lifecycle events; and the REPL's live event lines.

use ferroclaw_team::worktree::tools::{render_events, render_worktrees};
use ferroclaw_team::worktree::{WorktreeEvent, WorktreeManager};
use tokio::sync::broadcast;

use crate::args::Cli;
use crate::exit;
use crate::setup::{self, SetupError};

/// Events `ferroclaw worktrees` shows.
const RECENT_EVENTS: usize = 20;

/// Prints the index and the latest events; an unreadable index is an error.
pub(crate) fn run(cli: &Cli) -> Result<i32, SetupError> {
    let workspace = setup::workspace(cli)?;
    if !ferroclaw_team::worktree::in_git_repo(&workspace) {
        println!("{} is not in a git repository; worktrees need one.", workspace.display());
        return Ok(exit::OK);
    }
    let manager = WorktreeManager::open(workspace);
    let (worktrees, events) = match (manager.list(), manager.events(RECENT_EVENTS)) {
        (Ok(worktrees), Ok(events)) => (worktrees, events),
        (Err(e), _) | (_, Err(e)) => {
            eprintln!("ferroclaw: worktrees {}: {e}", manager.dir().display());
            return Ok(exit::FAILED);
        }
    };
    println!("Worktrees ({}):", manager.dir().display());
    println!("{}", render_worktrees(&worktrees));
    println!("\nRecent events:");
    println!("{}", render_events(&events));
    Ok(exit::OK)
}

/// Prints each worktree event of this process on stderr as it happens,
/// until the bus closes.
pub(crate) async fn print_events(mut events: broadcast::Receiver<WorktreeEvent>) {
    let style = crate::style::Style::for_stderr();
    loop {
        match events.recv().await {
            Ok(event) => eprintln!("{}", style.dim(&format!("[worktree] {}", event.line()))),
            Err(broadcast::error::RecvError::Lagged(n)) => eprintln!(
                "{}",
                style.dim(&format!(
                    "[worktree] {n} events not shown (`ferroclaw worktrees` lists them)"
                ))
            ),
            Err(broadcast::error::RecvError::Closed) => break,
        }
    }
}
