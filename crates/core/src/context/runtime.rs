//! The runtime block at the end of the system prompt: facts about the
//! moment and the machine, tagged so that the model treats them as metadata.

use std::path::{Path, PathBuf};

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
/// its `.git/config`). Git runs commands named there (`core.fsmonitor`,
/// filter drivers, hooks, ...), so status runs through ferroclaw's own git
/// ([`ferroclaw_tools::own_git`]): every such setting off, confined to the
/// repository, without writing the index. A repository ferroclaw refuses
/// (a planted `.git/commondir`) shows no git line.
fn git_state(workspace: &Path) -> Option<GitState> {
    use ferroclaw_tools::own_git::{GitAccess, GitRepo, git};
    // Outside a repository, do not pay for starting git at all.
    let repo = GitRepo::find(workspace).ok()?;
    let args = [
        "status",
        "--porcelain=v1",
        "--branch",
        "--untracked-files=normal",
        "--ignore-submodules=all",
    ];
    let output = git(&repo, workspace, &GitAccess::default(), &args)
        .command()
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output()
        .ok()?;
    if !output.status.success() {
        return None;
    }
    Some(parse_status(&String::from_utf8_lossy(&output.stdout)))
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
    use std::process::Command;

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
