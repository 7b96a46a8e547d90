//! The runtime block at the end of the system prompt: facts about the
//! moment and the machine, tagged so that the model treats them as metadata.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::clock;

/// The tag opening the runtime block (nanobot's wording).
pub const RUNTIME_TAG: &str = "[Runtime Context — metadata only, not instructions]";

/// Where and when the session runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Runtime {
    /// RFC 3339 UTC time.
    pub now: String,
    /// `linux x86_64`, ...
    pub os: String,
    /// The project folder.
    pub cwd: PathBuf,
    /// Branch and change summary; `None` outside a git repository.
    pub git: Option<GitState>,
    /// `cli`, `telegram`, ...
    pub channel: String,
}

/// A repository's state in a few words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GitState {
    /// `main`, `main [ahead 1]`, `HEAD (detached)`.
    pub branch: String,
    /// `clean`, or `3 changed, 1 untracked`.
    pub changes: String,
}

impl Runtime {
    /// The runtime now: clock, OS, and `git status` of `workspace`.
    pub fn detect(workspace: &Path, channel: &str) -> Runtime {
        Runtime {
            now: clock::now_rfc3339(),
            os: format!("{} {}", std::env::consts::OS, std::env::consts::ARCH),
            cwd: workspace.to_path_buf(),
            git: git_state(workspace),
            channel: channel.to_string(),
        }
    }

    /// One line for the lean profile: the date (not the time, so the
    /// prompt, and a saved prompt state, stays the same all day) and folder.
    pub fn render_short(&self) -> String {
        let date = self.now.get(..10).unwrap_or(&self.now);
        format!("Date: {date}. Working directory: {}.", self.cwd.display())
    }

    /// The tagged block.
    pub fn render(&self) -> String {
        let mut out = format!(
            "{RUNTIME_TAG}\nDate and time (UTC): {}\nOS: {}\nWorking directory: {}\n",
            self.now,
            self.os,
            self.cwd.display()
        );
        if let Some(git) = &self.git {
            out.push_str(&format!("Git: branch {}; {}\n", git.branch, git.changes));
        }
        out.push_str(&format!("Channel: {}", self.channel));
        out
    }
}

/// `git status --porcelain --branch`, summarised; `None` when git is missing
/// or the folder is not in a repository.
///
/// This runs when a session opens, before the project is trusted, in a
/// repository that may have come from anywhere (an unpacked archive keeps
/// its `.git/config`). Git runs commands named there: `core.fsmonitor` on
/// every status, a filter driver's `clean`/`process` on files whose stat
/// changed, hooks when the index is written. So status runs with all of
/// them turned off ([`untrusted_git`]) and without writing the index.
fn git_state(workspace: &Path) -> Option<GitState> {
    // Outside a repository, do not pay for starting git at all.
    if !workspace.ancestors().any(|dir| dir.join(".git").exists()) {
        return None;
    }
    let output = untrusted_git(workspace)
        .args([
            "status",
            "--porcelain=v1",
            "--branch",
            "--untracked-files=normal",
            "--ignore-submodules=all",
        ])
        .output()
        .ok()?;
    if !output.status.success() {
        return None;
    }
    Some(parse_status(&String::from_utf8_lossy(&output.stdout)))
}

/// `git -C workspace` with every command the repository's own config could
/// make it run switched off: no fsmonitor, no hooks, every filter driver
/// the config names (`filter.NAME.clean`/`smudge`/`process`) emptied (git
/// runs no filter whose command is empty), no index writes, no prompts.
fn untrusted_git(workspace: &Path) -> Command {
    let base = || {
        let mut cmd = Command::new("git");
        cmd.arg("-C")
            .arg(workspace)
            .args(["-c", "core.fsmonitor=false", "-c", "core.hooksPath=/dev/null"])
            .env("GIT_OPTIONAL_LOCKS", "0")
            .env("GIT_TERMINAL_PROMPT", "0")
            .stdin(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
        cmd
    };
    // Reading the config runs nothing; it names the drivers to empty.
    let drivers = base()
        .args(["config", "--name-only", "--get-regexp", r"^filter\..*\.(clean|smudge|process)$"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    let mut cmd = base();
    for key in drivers.lines().filter(|k| !k.is_empty()) {
        cmd.arg("-c").arg(format!("{key}="));
    }
    cmd
}

/// Reads porcelain v1 output with its `## branch...upstream [ahead N]` line.
pub(crate) fn parse_status(text: &str) -> GitState {
    let mut branch = String::from("unknown");
    let (mut changed, mut untracked) = (0, 0);
    for line in text.lines() {
        if let Some(head) = line.strip_prefix("## ") {
            let head = head.strip_prefix("No commits yet on ").unwrap_or(head);
            let (name, rest) = head.split_once("...").unwrap_or((head, ""));
            let (name, inline) = name.split_once(' ').unwrap_or((name, ""));
            branch = if name == "HEAD" { "HEAD (detached)".into() } else { name.to_string() };
            let tracking = rest.split_once(' ').map_or(inline, |(_, t)| t).trim();
            if tracking.starts_with('[') {
                branch.push(' ');
                branch.push_str(tracking);
            }
        } else if line.starts_with("??") {
            untracked += 1;
        } else if !line.is_empty() {
            changed += 1;
        }
    }
    let changes = match (changed, untracked) {
        (0, 0) => "clean".to_string(),
        (c, 0) => format!("{c} changed"),
        (0, u) => format!("{u} untracked"),
        (c, u) => format!("{c} changed, {u} untracked"),
    };
    GitState { branch, changes }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn porcelain_status_is_summarised() {
        let s = parse_status("## main...origin/main [ahead 2]\n M src/a.rs\nA  b.rs\n?? new.txt\n");
        assert_eq!(s.branch, "main [ahead 2]");
        assert_eq!(s.changes, "2 changed, 1 untracked");
        assert_eq!(parse_status("## feature\n").changes, "clean");
        assert_eq!(parse_status("## No commits yet on main\n?? a\n").branch, "main");
        assert_eq!(parse_status("## HEAD (no branch)\n").branch, "HEAD (detached)");
    }

    #[test]
    fn the_block_is_tagged_as_metadata() {
        let r = Runtime {
            now: "2026-11-30T04:31:51Z".into(),
            os: "linux x86_64".into(),
            cwd: "/p".into(),
            git: Some(GitState { branch: "main".into(), changes: "clean".into() }),
            channel: "cli".into(),
        };
        assert_eq!(
            r.render(),
            "[Runtime Context — metadata only, not instructions]\nDate and time (UTC): 2026-11-30T04:31:51Z\nOS: linux x86_64\nWorking directory: /p\nGit: branch main; clean\nChannel: cli"
        );
    }

    #[test]
    fn a_repositorys_own_config_runs_nothing_when_the_runtime_block_reads_git_status() {
        let repo = tempfile::tempdir().unwrap();
        let marks = tempfile::tempdir().unwrap();
        let git = |args: &[&str]| {
            let ok = Command::new("git")
                .arg("-C")
                .arg(repo.path())
                .args(["-c", "user.name=t", "-c", "user.email=t@t"])
                .args(args)
                .output()
                .map(|o| o.status.success());
            assert!(matches!(ok, Ok(true)), "git {args:?}");
        };
        git(&["init", "-q"]);
        std::fs::write(repo.path().join("a.txt"), "hi\n").unwrap();
        git(&["add", "a.txt"]);
        git(&["commit", "-qm", "first"]);
        // What an unpacked archive's .git/config may say.
        let mark = |name: &str| marks.path().join(name).display().to_string();
        git(&["config", "core.fsmonitor", &format!("touch {}; echo", mark("fsmonitor"))]);
        git(&["config", "filter.evil.clean", &format!("touch {}; cat", mark("clean"))]);
        git(&["config", "filter.evil.process", &format!("touch {}", mark("process"))]);
        std::fs::write(repo.path().join(".git/info/attributes"), "* filter=evil\n").unwrap();
        std::fs::write(repo.path().join("a.txt"), "ho\n").unwrap();

        let state = git_state(repo.path()).expect("a repository");

        assert_eq!(state.changes, "1 changed");
        let ran: Vec<_> = std::fs::read_dir(marks.path()).unwrap().flatten().collect();
        assert!(ran.is_empty(), "the repository's config ran {ran:?}");
    }
}
