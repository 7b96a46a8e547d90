//! Real git for tests, without the user's or the system's config.

use std::path::Path;
use std::process::Command;

/// Runs `git -C dir args...` and returns its stdout; panics with git's
/// stderr when it fails (a test's setup went wrong).
pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .unwrap_or_else(|e| panic!("cannot run git: {e}"));
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Makes `dir` a repository on branch `main` with one commit holding
/// `file` (with `content`), and a committer identity of its own.
pub fn init_repo(dir: &Path, file: &str, content: &str) {
    git(dir, &["init", "-q", "-b", "main"]);
    git(dir, &["config", "user.name", "Test"]);
    git(dir, &["config", "user.email", "test@example.com"]);
    std::fs::write(dir.join(file), content).unwrap_or_else(|e| panic!("cannot write {file}: {e}"));
    git(dir, &["add", file]);
    git(dir, &["commit", "-q", "-m", "first"]);
}
