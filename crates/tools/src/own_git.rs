//! ferroclaw's own `git` (worktree tools, the session-opening status,
//! checkpoints): a [`Launch`] that runs no program a repository names and,
//! should a setting we did not think of still name one, cannot reach outside.
//!
//! Two layers:
//! 1. **Neutralised configuration.** No system or global config
//!    (`GIT_CONFIG_NOSYSTEM`, `GIT_CONFIG_GLOBAL=/dev/null`), and on the
//!    command line (which wins over every config file, included ones, a
//!    `commondir`'s and `config.worktree`) every program-running setting is
//!    switched off: fsmonitor, hooks, pagers, editors, `core.sshCommand`,
//!    credential helpers, gpg, `core.alternateRefsCommand`, external diff,
//!    transports (`protocol.allow=never`), submodule recursion, automatic
//!    gc. Filter, diff and merge drivers have free names, so the config git
//!    would read (the repository's, and each submodule's under
//!    `.git/modules`) is read first, which runs nothing, and every driver it
//!    names is emptied. The environment is exact: no secret, `HOME` and
//!    `XDG_CONFIG_HOME` at `/dev/null`.
//! 2. **Confinement.** git runs under Landlock writing only beneath the
//!    repository (its work tree, git folder and common folder) and the
//!    fixed temp, reading only those and the system folders
//!    ([`crate::process::SYSTEM_READ_DIRS`]; not `~/.ssh`), in a network
//!    namespace of its own (and, where Landlock's ABI is 4+, with TCP denied
//!    as well), with the repository's protected files read-only.
//!
//! The repository is found here, not by git: `GIT_DIR` and `GIT_WORK_TREE`
//! name exactly the folders checked. A main repository's `.git` holding a
//! `commondir` (git's pointer to another config and hooks folder, which only
//! a linked worktree's git folder has) is refused, as is a linked one whose
//! `commondir` does not lead back above it. Bare repositories are never
//! found (only a `.git` entry counts).

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::landlock::{TcpPolicy, WriteConfinement};
use crate::process::{EnvPolicy, Launch, system_read_roots};

/// Settings given on git's command line, overriding every config file.
const NEUTRAL_CONFIG: &[&str] = &[
    "core.fsmonitor=false",
    "core.hooksPath=/dev/null",
    "core.pager=cat",
    "core.editor=true",
    "sequence.editor=true",
    "core.askPass=",
    "core.sshCommand=false",
    "core.alternateRefsCommand=",
    "core.untrackedCache=false",
    "credential.helper=",
    "gpg.program=false",
    "gpg.openpgp.program=false",
    "gpg.x509.program=false",
    "gpg.ssh.program=false",
    "log.showSignature=false",
    "commit.gpgSign=false",
    "tag.gpgSign=false",
    "diff.external=",
    "diff.ignoreSubmodules=all",
    "status.submoduleSummary=false",
    "submodule.recurse=false",
    "fetch.recurseSubmodules=false",
    "protocol.allow=never",
    "safe.bareRepository=explicit",
    "gc.auto=0",
    "maintenance.auto=false",
];

/// Config keys with free driver names that run a program: found in the
/// config git would read and emptied (git runs no driver whose command is
/// empty).
const DRIVER_KEYS: &str =
    r"^(filter\..*\.(clean|smudge|process)|diff\..*\.(textconv|command)|merge\..*\.driver)$";

/// Why ferroclaw will not run git in a folder.
#[derive(Debug, thiserror::Error)]
pub enum GitRefused {
    /// No `.git` in the folder or above it.
    #[error("{0} is not inside a git repository")]
    NotARepository(PathBuf),
    /// A main repository's `.git` names another folder for its config.
    #[error(
        "{0} exists: it moves git's config and hooks to another folder, which only a linked worktree's git folder does; ferroclaw will not run git here (remove it if you did not create it)"
    )]
    PlantedCommonDir(PathBuf),
    /// A `.git` file or `commondir` that leads somewhere unexpected.
    #[error("{path}: {why}; ferroclaw will not run git here")]
    Unexpected { path: PathBuf, why: String },
}

/// A repository as found from a folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GitRepo {
    /// The work tree's top folder.
    pub top: PathBuf,
    /// Its git folder (`top/.git`, or `<common>/worktrees/NAME` for a linked worktree).
    pub git_dir: PathBuf,
    /// The folder with the shared config, objects and refs.
    pub common_dir: PathBuf,
}

impl GitRepo {
    /// The repository holding `dir`, found by walking up to the first `.git`.
    pub fn find(dir: &Path) -> Result<Self, GitRefused> {
        let start = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
        for top in start.ancestors() {
            let dot_git = top.join(".git");
            let Ok(meta) = std::fs::metadata(&dot_git) else { continue };
            let git_dir = if meta.is_dir() {
                let planted = dot_git.join("commondir");
                if std::fs::symlink_metadata(&planted).is_ok() {
                    return Err(GitRefused::PlantedCommonDir(planted));
                }
                dot_git
            } else {
                pointed_git_dir(&dot_git)?
            };
            let common_dir = common_dir_of(&git_dir)?;
            return Ok(Self { top: top.to_path_buf(), git_dir, common_dir });
        }
        Err(GitRefused::NotARepository(dir.to_path_buf()))
    }

    /// The folders git may read and write for this repository.
    fn folders(&self) -> Vec<PathBuf> {
        let mut folders = vec![self.top.clone(), self.git_dir.clone(), self.common_dir.clone()];
        folders.dedup();
        folders
    }

    /// The project roots whose protected files stay read-only: the work tree
    /// and, for a linked worktree, the main one holding the common folder.
    fn projects(&self) -> Vec<PathBuf> {
        let mut projects = vec![self.top.clone()];
        if self.common_dir.file_name().is_some_and(|n| n == ".git")
            && let Some(main) = self.common_dir.parent()
            && main != self.top
        {
            projects.push(main.to_path_buf());
        }
        projects
    }
}

/// The git folder a `.git` file (`gitdir: PATH`) points at.
fn pointed_git_dir(dot_git: &Path) -> Result<PathBuf, GitRefused> {
    let unexpected = |why: &str| GitRefused::Unexpected { path: dot_git.into(), why: why.into() };
    let text = crate::repo_file::read_repo_text(dot_git, crate::repo_file::MAX_REPO_FILE_BYTES)
        .map_err(|_| unexpected("cannot be read"))?;
    let target = text
        .lines()
        .next()
        .and_then(|l| l.strip_prefix("gitdir: "))
        .ok_or_else(|| unexpected("is not a `gitdir:` pointer"))?;
    let base = dot_git.parent().unwrap_or(Path::new("/"));
    std::fs::canonicalize(base.join(target.trim()))
        .map_err(|_| unexpected("points at a git folder that does not exist"))
}

/// The common folder of `git_dir`: itself, or where its `commondir` leads,
/// which must be above it (`<common>/worktrees/NAME` → `<common>`).
fn common_dir_of(git_dir: &Path) -> Result<PathBuf, GitRefused> {
    let pointer = git_dir.join("commondir");
    let Ok(text) =
        crate::repo_file::read_repo_text(&pointer, crate::repo_file::MAX_REPO_FILE_BYTES)
    else {
        return Ok(git_dir.to_path_buf());
    };
    let common = std::fs::canonicalize(git_dir.join(text.trim())).ok();
    match common {
        Some(common) if git_dir.starts_with(&common) && common != git_dir => Ok(common),
        _ => Err(GitRefused::Unexpected {
            path: pointer,
            why: "it does not lead to the repository this git folder belongs to".into(),
        }),
    }
}

/// What ferroclaw's own git may change besides what every git call may.
#[derive(Debug, Clone, Default)]
pub struct GitAccess {
    /// Protected paths (relative to a project) git itself must write, e.g.
    /// `.git/worktrees` for `git worktree add`/`remove`.
    pub writes_protected: Vec<&'static str>,
}

/// `git ARGS` for `repo`, run from `cwd`, neutralised and confined.
pub fn git(repo: &GitRepo, cwd: &Path, access: &GitAccess, args: &[&str]) -> Launch {
    let drivers = driver_settings(repo);
    base(repo, cwd, access).args(drivers).args(args)
}

/// The git command before its driver overrides and arguments.
fn base(repo: &GitRepo, cwd: &Path, access: &GitAccess) -> Launch {
    let confinement =
        confine(&repo.folders(), &repo.folders(), &repo.projects(), &access.writes_protected);
    let mut env = neutral_env();
    env.push(("GIT_DIR".into(), repo.git_dir.clone().into()));
    env.push(("GIT_WORK_TREE".into(), repo.top.clone().into()));
    Launch::new("git", cwd)
        .env_policy(EnvPolicy::Exact(env))
        .args(neutral_args())
        .confined(confinement)
}

/// `--no-pager` and `-c KEY=VALUE` for every neutral setting.
pub fn neutral_args() -> Vec<String> {
    let mut args = vec!["--no-pager".to_string()];
    for setting in NEUTRAL_CONFIG {
        args.push("-c".into());
        args.push((*setting).into());
    }
    args
}

/// The exact environment of ferroclaw's git: `PATH`, the C locale, no home
/// and no config beyond the repository's, no prompts, no optional locks.
pub fn neutral_env() -> Vec<(OsString, OsString)> {
    let mut env: Vec<(OsString, OsString)> = Vec::new();
    if let Some(path) = std::env::var_os("PATH") {
        env.push(("PATH".into(), path));
    }
    for (name, value) in [
        ("LC_ALL", "C"),
        ("HOME", "/dev/null"),
        ("XDG_CONFIG_HOME", "/dev/null"),
        ("TMPDIR", crate::child_env::CHILD_TMPDIR),
        ("GIT_CONFIG_NOSYSTEM", "1"),
        ("GIT_CONFIG_GLOBAL", "/dev/null"),
        ("GIT_TERMINAL_PROMPT", "0"),
        ("GIT_OPTIONAL_LOCKS", "0"),
        ("GIT_NO_REPLACE_OBJECTS", "1"),
        ("GIT_PROTOCOL_FROM_USER", "0"),
        ("GIT_PAGER", "cat"),
        ("PAGER", "cat"),
        ("GIT_EDITOR", "true"),
    ] {
        env.push((name.into(), value.into()));
    }
    env
}

/// The confinement of ferroclaw's own git: writes beneath `writable` and
/// the temp folders, reads beneath `readable` and the system folders, no
/// network, the protected files of `projects` read-only (but `except`).
/// `None` where the kernel has no Landlock (the neutral config still holds).
pub fn confine(
    writable: &[PathBuf],
    readable: &[PathBuf],
    projects: &[PathBuf],
    except: &[&str],
) -> Option<Arc<WriteConfinement>> {
    let mut roots = writable.to_vec();
    roots.extend(WriteConfinement::standard_roots());
    let mut reads = system_read_roots("git");
    reads.extend(readable.iter().cloned());
    let no_tcp = TcpPolicy { connect: Some(Vec::new()), bind: Some(Vec::new()) };
    match WriteConfinement::prepare_limited(&roots, Some(&reads), &no_tcp) {
        Ok(Some(c)) => Some(Arc::new(c.without_network().protect_files_except(projects, except))),
        Ok(None) => None,
        Err(e) => {
            tracing::warn!("cannot confine ferroclaw's own git: {e}");
            None
        }
    }
}

/// `-c KEY=` for every filter, diff and merge driver command named in the
/// config git would read for `repo`, submodules' included.
fn driver_settings(repo: &GitRepo) -> Vec<String> {
    let mut keys = Vec::new();
    let mut sources: Vec<Vec<String>> = vec![Vec::new()];
    for config in module_configs(&repo.common_dir) {
        sources.push(vec!["--file".into(), config.display().to_string()]);
    }
    for source in sources {
        let launch = base(repo, &repo.top, &GitAccess::default())
            .arg("config")
            .args(&source)
            .args(["--includes", "--name-only", "--get-regexp", DRIVER_KEYS]);
        let Ok(out) = launch.command().stdin(std::process::Stdio::null()).output() else {
            continue;
        };
        keys.extend(String::from_utf8_lossy(&out.stdout).lines().map(str::to_string));
    }
    keys.sort();
    keys.dedup();
    let mut args = Vec::new();
    for key in keys.iter().filter(|k| !k.is_empty()) {
        args.push("-c".to_string());
        args.push(format!("{key}="));
        if let Some((driver, _)) = key.strip_prefix("filter.").and_then(|k| k.rsplit_once('.')) {
            args.push("-c".to_string());
            args.push(format!("filter.{driver}.required=false"));
        }
    }
    args
}

/// Every `config` beneath `<common>/modules` (submodules, nested ones too).
fn module_configs(common_dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut stack = vec![(common_dir.join("modules"), 0)];
    while let Some((dir, depth)) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        for entry in entries.flatten() {
            let path = entry.path();
            if depth < 8 && entry.file_type().is_ok_and(|t| t.is_dir()) {
                stack.push((path, depth + 1));
            } else if entry.file_name() == "config" {
                found.push(path);
            }
        }
    }
    found
}

#[cfg(test)]
#[path = "own_git_tests.rs"]
mod tests;
