//! Paths as permission rules see them: resolved against the workspace, `..`
//! removed, links followed where they exist, so `sub/../.env`, `./.env`,
//! `/abs/ws/.env` and a link to it are all `.env`. The files no tool of the
//! agent may ever write are [`ferroclaw_tools::protected_file`].

use std::path::{Path, PathBuf};

pub use ferroclaw_tools::protected_file as protected;

/// A path resolved for rule matching.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    /// Absolute, normalised, links resolved where the path exists.
    pub abs: PathBuf,
    /// Relative to the workspace with `/` separators, when inside it
    /// (`.` for the workspace itself).
    pub rel: Option<String>,
}

impl Resolved {
    /// The absolute path as text.
    pub fn abs_text(&self) -> String {
        self.abs.to_string_lossy().into_owned()
    }
}

/// Resolves `given` (relative to `workspace`, or absolute, or `~/...`).
pub fn resolve(workspace: &Path, given: &str) -> Resolved {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let joined = match (given.strip_prefix('~'), &home) {
        (Some(rest), Some(h)) if rest.is_empty() || rest.starts_with('/') => {
            h.join(rest.trim_start_matches('/'))
        }
        _ if Path::new(given).is_absolute() => PathBuf::from(given),
        _ => workspace.join(given),
    };
    let abs = follow_links(&ferroclaw_tools::normalize_path(&joined));
    let ws = follow_links(&ferroclaw_tools::normalize_path(workspace));
    let rel = abs.strip_prefix(&ws).ok().map(|r| {
        let parts: Vec<String> =
            r.components().map(|c| c.as_os_str().to_string_lossy().into_owned()).collect();
        if parts.is_empty() { ".".to_string() } else { parts.join("/") }
    });
    Resolved { abs, rel }
}

/// The longest existing ancestor of `path` with its links resolved, and the
/// rest appended (a file about to be created resolves through its folder).
fn follow_links(path: &Path) -> PathBuf {
    let mut missing = Vec::new();
    let mut current = path.to_path_buf();
    loop {
        if let Ok(real) = std::fs::canonicalize(&current) {
            let mut out = real;
            for part in missing.iter().rev() {
                out.push(part);
            }
            return ferroclaw_tools::normalize_path(&out);
        }
        match (current.file_name().map(std::ffi::OsStr::to_os_string), current.parent()) {
            (Some(name), Some(parent)) => {
                missing.push(name);
                current = parent.to_path_buf();
            }
            _ => return path.to_path_buf(),
        }
    }
}

/// Stands in the folders a command may `cd` into for "a folder named at run
/// time, maybe `.git/hooks`".
pub(super) const GIT_HOOKS_MARK: &str = "<.git/hooks?>";

/// The hooks git runs (githooks(5)).
const GIT_HOOKS: &[&str] = &[
    "applypatch-msg",
    "pre-applypatch",
    "post-applypatch",
    "pre-commit",
    "pre-merge-commit",
    "prepare-commit-msg",
    "commit-msg",
    "post-commit",
    "pre-rebase",
    "post-checkout",
    "post-merge",
    "pre-push",
    "pre-receive",
    "update",
    "proc-receive",
    "post-receive",
    "post-update",
    "reference-transaction",
    "push-to-checkout",
    "pre-auto-gc",
    "post-rewrite",
    "sendemail-validate",
    "fsmonitor-watchman",
    "post-index-change",
];

/// Inside `.git`, the names git follows to other config or runs. After a
/// `cd` named at run time (which may or may not land in `.git`), only these
/// are refused there, so `cd "$d" && echo x > notes.txt` still runs while
/// `cd "$d" && echo x > commondir` does not.
const GIT_FOLLOWED: &[&str] =
    &["config", "config.worktree", "commondir", "hooks", "info", "modules", "worktrees"];

/// Why `target`, written from any of `bases`, is a protected file.
pub(super) fn protected_from(bases: &[PathBuf], target: &str) -> Option<&'static str> {
    let cd_at_run_time = bases.iter().any(|b| b.as_os_str() == GIT_HOOKS_MARK);
    bases.iter().find_map(|base| {
        if base.as_os_str() == GIT_HOOKS_MARK {
            let name = ferroclaw_tools::shell::basename(target);
            return GIT_HOOKS.contains(&name).then_some("git runs the hooks in .git/hooks");
        }
        let abs = resolve(base, target).abs;
        if cd_at_run_time
            && base.file_name().is_some_and(|n| n == ".git")
            && let Ok(rel) = abs.strip_prefix(base)
        {
            let first = rel.components().next().map(|c| c.as_os_str().to_string_lossy());
            if !first.is_some_and(|f| GIT_FOLLOWED.contains(&f.as_ref())) {
                return None;
            }
        }
        protected(&abs)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dot_dot_and_absolute_spellings_resolve_to_the_same_relative_path() {
        let ws = tempfile::tempdir().unwrap();
        let abs = ws.path().join(".env").to_string_lossy().into_owned();
        for given in ["sub/../.env", "./.env", ".env", abs.as_str()] {
            assert_eq!(resolve(ws.path(), given).rel.as_deref(), Some(".env"), "{given}");
        }
        assert_eq!(resolve(ws.path(), "../x").rel, None);
    }

    #[test]
    fn files_that_configure_the_next_session_are_protected() {
        for p in [
            "/w/.agent/config.toml",
            "/w/.mcp.json",
            "/w/.claude/settings.local.json",
            "/w/.git/config",
            "/w/.git/hooks/pre-commit",
            "/w/sub/.git/config",
        ] {
            assert!(protected(Path::new(p)).is_some(), "{p}");
        }
        assert!(protected(Path::new("/w/src/config.toml")).is_none());
        assert!(protected(Path::new("/w/.github/workflows/ci.yml")).is_none());
    }

    #[test]
    fn all_of_dot_git_is_protected_but_what_git_writes_for_normal_work() {
        // Files git follows to another config, or runs: refused by name,
        // whether they exist or not.
        for p in [
            "/w/.git/commondir",
            "/w/.git/config.worktree",
            "/w/.git/info/attributes",
            "/w/.git/modules/sub/config",
            "/w/.git/modules/sub/hooks/post-checkout",
            "/w/.git/modules/sub/commondir",
            "/w/.git/worktrees/x/commondir",
            "/w/.git/worktrees/x/gitdir",
            "/w/.git/worktrees/x/HEAD",
            "/w/.git/packed-refs-but-not-really",
            "/w/.agent/worktrees/index.json",
        ] {
            assert!(protected(Path::new(p)).is_some(), "{p}");
        }
        for p in [
            "/w/.git/objects/ab/cdef",
            "/w/.git/refs/heads/main",
            "/w/.git/logs/HEAD",
            "/w/.git/packed-refs",
            "/w/.git/index",
            "/w/.git/index.lock",
            "/w/.git/HEAD",
            "/w/.git/ORIG_HEAD",
            "/w/.git/FETCH_HEAD",
            "/w/.git/MERGE_MSG",
            "/w/.git/COMMIT_EDITMSG",
            "/w/.git/info/exclude",
            "/w/.git/rebase-merge/done",
            "/w/.agent/worktrees/plan-a/src/main.rs",
        ] {
            assert!(protected(Path::new(p)).is_none(), "{p}");
        }
    }
}
