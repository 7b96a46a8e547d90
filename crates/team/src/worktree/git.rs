//! The few git commands worktrees need, run synchronously in a folder
//! through ferroclaw's own git ([`ferroclaw_tools::own_git`]): no program a
//! repository names runs (filters, fsmonitor, hooks, pagers, ...), and git
//! itself is confined to the repository, without network or home secrets.

use std::path::Path;

use ferroclaw_tools::own_git::{self, GitAccess, GitRepo};

use super::error::WorktreeError;

/// What a finished git command said.
pub(crate) struct Output {
    pub(crate) ok: bool,
    pub(crate) stdout: String,
    pub(crate) stderr: String,
}

/// Runs `git ARGS` in `dir`; only a git that cannot be started, or a
/// repository ferroclaw refuses to run git in, is an error.
pub(crate) fn run(dir: &Path, args: &[&str]) -> Result<Output, WorktreeError> {
    let repo = match GitRepo::find(dir) {
        Ok(repo) => repo,
        Err(own_git::GitRefused::NotARepository(_)) => {
            return Ok(Output {
                ok: false,
                stdout: String::new(),
                stderr: "fatal: not a git repository".into(),
            });
        }
        Err(refused) => return Err(WorktreeError::Refused(refused.to_string())),
    };
    // `worktree add`/`remove`/`prune` write `.git/worktrees/NAME`, and
    // `remove` deletes `.agent/worktrees/NAME` with its `.git` file (bound
    // read-only for every other command, as a nested repository's is).
    let access = GitAccess { writes_protected: vec![".git/worktrees", ".agent/worktrees"] };
    let out = own_git::git(&repo, dir, &access, args)
        .command()
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| WorktreeError::io("cannot run git (is it installed?)", e))?;
    Ok(Output {
        ok: out.status.success(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
    })
}

/// Runs `git ARGS` in `dir` and returns its stdout; a failure is an error
/// carrying git's own message.
pub(crate) fn ok(dir: &Path, args: &[&str]) -> Result<String, WorktreeError> {
    let out = run(dir, args)?;
    if out.ok {
        Ok(out.stdout)
    } else {
        Err(WorktreeError::Git { args: args.join(" "), stderr: out.stderr })
    }
}

/// The paths `git status --porcelain` lists in `dir` (untracked files too
/// unless `tracked_only`).
pub(crate) fn changes(dir: &Path, tracked_only: bool) -> Result<Vec<String>, WorktreeError> {
    let untracked = if tracked_only { "--untracked-files=no" } else { "--untracked-files=all" };
    let out = ok(dir, &["status", "--porcelain", "--ignore-submodules=all", untracked])?;
    Ok(out.lines().filter(|l| l.len() > 3).map(|l| l[3..].to_string()).collect())
}

/// Refuses to run git in `path` unless it is a linked worktree of the
/// repository holding `project`: the index is a project file a cloned
/// repository can carry, and `.agent/worktrees/NAME` can hold a whole
/// repository of its own (with its own config) rather than a worktree.
pub(crate) fn require_linked(project: &Path, path: &Path) -> Result<(), WorktreeError> {
    let refused = |why: String| WorktreeError::Refused(why);
    let main = GitRepo::find(project).map_err(|e| refused(e.to_string()))?;
    let linked = GitRepo::find(path).map_err(|e| refused(e.to_string()))?;
    if linked.common_dir == main.common_dir && linked.git_dir != main.git_dir {
        Ok(())
    } else {
        Err(refused(format!(
            "{} is not a git worktree of this project (its repository is {}); ferroclaw will not run git there",
            path.display(),
            linked.common_dir.display()
        )))
    }
}
