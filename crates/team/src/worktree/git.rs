//! The few git commands worktrees need, run synchronously in a folder.

use std::path::Path;
use std::process::Command;

use super::error::WorktreeError;

/// What a finished git command said.
pub(crate) struct Output {
    pub(crate) ok: bool,
    pub(crate) stdout: String,
    pub(crate) stderr: String,
}

/// Settings that keep a repository's own files from running a program
/// through these commands: no bare repository found by walking up (a cloned
/// project can carry one as plain files, with a config naming programs), no
/// fsmonitor, no signature check (`log.showSignature` runs `gpg.program`).
const HARDENED: [&str; 6] = [
    "-c",
    "safe.bareRepository=explicit",
    "-c",
    "core.fsmonitor=false",
    "-c",
    "log.showSignature=false",
];

/// Runs `git -C dir ARGS`; only a git that cannot be started is an error.
pub(crate) fn run(dir: &Path, args: &[&str]) -> Result<Output, WorktreeError> {
    let out = Command::new("git")
        .args(HARDENED)
        .arg("-C")
        .arg(dir)
        .args(args)
        // Never wait for a credential or editor prompt.
        .env("GIT_TERMINAL_PROMPT", "0")
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| WorktreeError::io("cannot run git (is it installed?)", e))?;
    Ok(Output {
        ok: out.status.success(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
    })
}

/// Runs `git -C dir ARGS` and returns its stdout; a failure is an error
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
    let out = ok(dir, &["status", "--porcelain", untracked])?;
    Ok(out.lines().filter(|l| l.len() > 3).map(|l| l[3..].to_string()).collect())
}
