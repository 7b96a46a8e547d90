//! The board as compact text, for the model (`task_list`) and for people
//! (`ferroclaw tasks`).

use crate::board::Listing;
use crate::error::list;
use crate::task::{Task, TaskStatus};

/// One line per task (`[x]` completed, `[>]` in progress, `[ ]` pending)
/// with owner and open blockers, then the tasks ready now and any unreadable
/// task files.
///
/// ```
/// use ferroclaw_team::{Listing, render_board};
/// assert!(render_board(&Listing::default()).starts_with("The task board is empty"));
/// ```
pub fn render_board(listing: &Listing) -> String {
    if listing.tasks.is_empty() && listing.unreadable.is_empty() {
        return "The task board is empty.".to_string();
    }
    let done = listing.tasks.iter().filter(|t| t.status == TaskStatus::Completed).count();
    let mut out = format!("Tasks ({done}/{} completed):\n", listing.tasks.len());
    for task in &listing.tasks {
        out.push_str(&task_line(task, &listing.open_blockers(task)));
        out.push('\n');
    }
    let ready = listing.ready();
    if !ready.is_empty() {
        out.push_str("Ready now: ");
        let names: Vec<String> = ready.iter().map(|t| format!("#{} {}", t.id, t.subject)).collect();
        out.push_str(&names.join("; "));
        out.push('\n');
    }
    for bad in &listing.unreadable {
        out.push_str(&format!("Unreadable: {}: {}\n", bad.path.display(), bad.problem));
    }
    out.truncate(out.trim_end().len());
    out
}

/// `[ ] #3 Write tests (owner: alice; blocked by #1, #2)`.
pub fn task_line(task: &Task, open_blockers: &[u64]) -> String {
    let mark = match task.status {
        TaskStatus::Pending => "[ ]",
        TaskStatus::InProgress => "[>]",
        TaskStatus::Completed => "[x]",
    };
    let mut extra = Vec::new();
    if let Some(owner) = &task.owner {
        extra.push(format!("owner: {owner}"));
    }
    if let Some(worktree) = &task.worktree {
        extra.push(format!("worktree: {worktree}"));
    }
    if !open_blockers.is_empty() {
        extra.push(format!("blocked by {}", list(open_blockers)));
    }
    let extra = if extra.is_empty() { String::new() } else { format!(" ({})", extra.join("; ")) };
    format!("{mark} #{} {}{extra}", task.id, task.subject)
}

/// The team for people (`ferroclaw team`, `/team`): each member's role,
/// status and unread messages, and the requests still pending.
/// `user_config` is the user's config file as shown to people
/// (`~/.ferroclaw/config.toml` unless `FERROCLAW_HOME` moves it).
pub fn render_team(team: &crate::Team, user_config: &str) -> Result<String, crate::TeamError> {
    let Some(config) = team.load()? else {
        return Ok(format!(
            "No team in this workspace. With a [team] section in the config \
             ({user_config} or .agent/config.toml) the lead gets spawn_teammate."
        ));
    };
    let unread = |name: &str| {
        crate::InboxReader::open(&team.inbox_dir(), name).peek().map_or(0, |b| b.messages.len())
    };
    let mut out = format!("Team {} (lead: {}", config.team_name, config.lead);
    if let Some(session) = &config.lead_session {
        out.push_str(&format!(", session {session}"));
    }
    out.push_str(&format!("), {} unread for the lead\n", unread(&config.lead)));
    if config.members.is_empty() {
        out.push_str("  no teammates yet\n");
    }
    for m in &config.members {
        out.push_str(&format!(
            "  {:<12} {:<9} {}  ({} unread{})\n",
            m.name,
            m.status.as_str(),
            m.role,
            unread(&m.name),
            if m.plan_required { ", plan required" } else { "" }
        ));
    }
    let pending: Vec<crate::Request> =
        team.requests()?.into_iter().filter(|r| r.status == "pending").collect();
    for r in pending {
        out.push_str(&format!(
            "  pending {} request {}: {} -> {}\n",
            r.kind, r.request_id, r.from, r.to
        ));
    }
    Ok(out.trim_end().to_string())
}
