//! The files the agent may never write, by any tool or command: those that
//! configure the next session (`.agent/config.toml`, `.mcp.json`, Claude
//! Code's settings, ferroclaw's own home) and those that make git run code
//! or move its configuration (`.git/config`, `.git/hooks/*`, `commondir`).
//! Everything inside `.git/` but the files git writes for normal work is
//! protected by name, so a file that does not exist yet is refused too.

use std::path::Path;

/// Folders that hold protected files (see [`protected_file`]).
pub const PROTECTED_FOLDERS: &[&str] = &[".git", ".agent", ".claude", ".ferroclaw"];

/// Why the agent may never write `path`, or `None`. These files configure
/// the next session (`.agent/config.toml`, `.mcp.json`, Claude Code's
/// settings, ferroclaw's own home) or make git run code (`.git/config` with
/// `core.fsmonitor`, `.git/hooks/*`).
pub fn protected_file(path: &Path) -> Option<&'static str> {
    let parts: Vec<String> =
        path.components().map(|c| c.as_os_str().to_string_lossy().into_owned()).collect();
    let n = parts.len();
    let last = parts.last().map(String::as_str).unwrap_or("");
    let parent = if n >= 2 { parts[n - 2].as_str() } else { "" };
    if last == ".mcp.json" {
        return Some("it starts MCP servers (commands) when a session opens");
    }
    if parent == ".agent" && matches!(last, "config.toml" | "mcp.json") {
        return Some("it configures the agent's permissions, sandbox and providers");
    }
    if parent == ".claude" && last.starts_with("settings") && last.ends_with(".json") {
        return Some("it configures agents' permissions and hooks");
    }
    if parent == ".ferroclaw" && matches!(last, "config.toml" | "trust.json") {
        return Some("it is ferroclaw's own configuration");
    }
    if last == ".git" {
        return Some("it tells git where the repository (and its config) is");
    }
    if parent == "worktrees" && n >= 3 && parts[n - 3] == ".agent" && last == "index.json" {
        return Some("ferroclaw runs git in the folders it names");
    }
    if let Some(at) = parts.iter().position(|p| p == ".git") {
        let inside: Vec<&str> = parts[at + 1..].iter().map(String::as_str).collect();
        return git_internal(&inside);
    }
    None
}

/// What git writes in its own folder for normal work (`git commit`, `fetch`,
/// `merge`, `rebase`): the agent's git may write these through the shell;
/// anything else inside `.git/` is protected.
const GIT_WORK_FILES: &[&str] = &[
    "objects",
    "refs",
    "logs",
    "packed-refs",
    "index",
    "HEAD",
    "ORIG_HEAD",
    "FETCH_HEAD",
    "MERGE_HEAD",
    "MERGE_MSG",
    "MERGE_MODE",
    "MERGE_RR",
    "AUTO_MERGE",
    "CHERRY_PICK_HEAD",
    "REVERT_HEAD",
    "REBASE_HEAD",
    "BISECT_LOG",
    "BISECT_START",
    "BISECT_TERMS",
    "BISECT_EXPECTED_REV",
    "BISECT_ANCESTORS_OK",
    "BISECT_NAMES",
    "COMMIT_EDITMSG",
    "TAG_EDITMSG",
    "SQUASH_MSG",
    "description",
    "shallow",
    "gc.log",
    "rebase-merge",
    "rebase-apply",
    "sequencer",
    "rr-cache",
    "lfs",
];

/// Why a path inside `.git/` (given as its parts after `.git`) is protected:
/// everything but [`GIT_WORK_FILES`] (and their lock files), so a file that
/// does not exist yet (`commondir`, `config.worktree`, `modules/x/config`)
/// is refused by name.
fn git_internal(inside: &[&str]) -> Option<&'static str> {
    let first = inside.first()?;
    let name = first.strip_suffix(".lock").unwrap_or(first);
    if GIT_WORK_FILES.contains(&name) || (*first == "info" && inside.get(1) == Some(&"exclude")) {
        return None;
    }
    Some(match name {
        "config" | "config.worktree" => {
            "git runs commands named in it (core.fsmonitor, core.pager, filters, ...)"
        }
        "hooks" => "git runs the hooks in it",
        "commondir" => "it moves git's config (and hooks) to another folder",
        "modules" | "worktrees" => "it holds the config, hooks and pointers of other git folders",
        "info" => "git reads attributes there that choose filter programs",
        _ => "it is git's own state, which only git writes",
    })
}
