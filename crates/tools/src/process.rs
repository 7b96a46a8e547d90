//! The one way ferroclaw starts a process on a session's behalf: `bash`,
//! background jobs, MCP stdio servers, hooks and ferroclaw's own `git`
//! (worktrees, checkpoints, the session-opening status) all build a
//! [`Launch`] and turn it into a command with [`Launch::command`], which
//! applies, in one place:
//! - the environment ([`EnvPolicy`]): the allow-list of [`crate::child_env`]
//!   with the fixed `TMPDIR`, or exactly the variables given, or (hooks,
//!   when config says so) ferroclaw's whole environment;
//! - the confinement ([`crate::landlock::WriteConfinement`]): Landlock
//!   writes (and, for git, reads), the read-only protected files and, for
//!   git, a network namespace of its own;
//! - the working folder and, when asked, a process group of its own.
//!
//! ```
//! use ferroclaw_tools::process::{EnvPolicy, Launch};
//! let launch = Launch::new("/bin/echo", "/tmp").arg("hi").env_policy(EnvPolicy::Sandbox(vec![]));
//! let out = launch.command().output().unwrap();
//! assert_eq!(out.stdout, b"hi\n");
//! ```

use std::ffi::{OsStr, OsString};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::sync::Arc;

use crate::child_env;
use crate::landlock::WriteConfinement;

/// Which environment a started process sees.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EnvPolicy {
    /// The allow-list ([`child_env::PASSED_ENV`]), these extra names, and
    /// `TMPDIR=/tmp`: no provider key, token or secret unless named.
    Sandbox(Vec<String>),
    /// Exactly these variables, nothing from ferroclaw's environment.
    Exact(Vec<(OsString, OsString)>),
    /// ferroclaw's whole environment (hooks by default, as in Claude Code).
    Inherit,
}

/// A process to start: program, arguments, folder, environment and
/// confinement. Build it, then [`Launch::command`] or [`Launch::tokio_command`].
#[derive(Debug, Clone)]
pub struct Launch {
    program: OsString,
    args: Vec<OsString>,
    cwd: PathBuf,
    env: EnvPolicy,
    /// Set on top of the policy's variables.
    extra_env: Vec<(OsString, OsString)>,
    confinement: Option<Arc<WriteConfinement>>,
    own_group: bool,
}

impl Launch {
    /// `program` in `cwd`, with the sandbox environment and no confinement yet.
    pub fn new(program: impl AsRef<OsStr>, cwd: impl Into<PathBuf>) -> Self {
        Self {
            program: program.as_ref().to_os_string(),
            args: Vec::new(),
            cwd: cwd.into(),
            env: EnvPolicy::Sandbox(Vec::new()),
            extra_env: Vec::new(),
            confinement: None,
            own_group: false,
        }
    }

    /// Adds one argument.
    pub fn arg(mut self, arg: impl AsRef<OsStr>) -> Self {
        self.args.push(arg.as_ref().to_os_string());
        self
    }

    /// Adds arguments.
    pub fn args<I: IntoIterator<Item = S>, S: AsRef<OsStr>>(mut self, args: I) -> Self {
        self.args.extend(args.into_iter().map(|a| a.as_ref().to_os_string()));
        self
    }

    /// Which environment the process sees.
    pub fn env_policy(mut self, env: EnvPolicy) -> Self {
        self.env = env;
        self
    }

    /// Sets one variable on top of the policy's.
    pub fn env(mut self, name: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> Self {
        self.extra_env.push((name.as_ref().to_os_string(), value.as_ref().to_os_string()));
        self
    }

    /// Confines the process (`None`: confinement is off or unavailable).
    pub fn confined(mut self, confinement: Option<Arc<WriteConfinement>>) -> Self {
        self.confinement = confinement;
        self
    }

    /// Starts the process in a process group of its own (so a timeout can
    /// kill everything it started).
    pub fn in_own_group(mut self) -> Self {
        self.own_group = true;
        self
    }

    /// The program.
    pub fn program(&self) -> &OsStr {
        &self.program
    }

    /// The arguments.
    pub fn arguments(&self) -> &[OsString] {
        &self.args
    }

    /// The confinement applied, if any.
    pub fn confinement(&self) -> Option<&Arc<WriteConfinement>> {
        self.confinement.as_ref()
    }

    /// The environment the process gets, in order (later names win).
    pub fn environment(&self) -> Option<Vec<(OsString, OsString)>> {
        let mut env = match &self.env {
            EnvPolicy::Sandbox(extra) => child_env::current_child_env(extra),
            EnvPolicy::Exact(vars) => vars.clone(),
            EnvPolicy::Inherit => return None,
        };
        env.extend(self.extra_env.iter().cloned());
        Some(env)
    }

    /// The command, with the environment, folder, group and confinement
    /// applied: the single place where ferroclaw's children are confined.
    /// Standard streams are left to the caller.
    pub fn command(&self) -> std::process::Command {
        let mut command = std::process::Command::new(&self.program);
        command.args(&self.args).current_dir(&self.cwd);
        match self.environment() {
            Some(env) => {
                command.env_clear().envs(env);
            }
            None => {
                command.envs(self.extra_env.iter().cloned());
            }
        }
        if self.own_group {
            command.process_group(0);
        }
        if let Some(confinement) = self.confinement.clone() {
            // SAFETY: apply_in_child makes only async-signal-safe syscalls.
            unsafe {
                command.pre_exec(move || confinement.apply_in_child());
            }
        }
        command
    }

    /// [`Self::command`] for tokio.
    pub fn tokio_command(&self) -> tokio::process::Command {
        tokio::process::Command::from(self.command())
    }
}

/// The folders a confined process that may read only what it needs still
/// reads: where programs, libraries, locales and certificates live. Home
/// folders are not among them (`~/.ssh`, `~/.aws`, ...).
pub const SYSTEM_READ_DIRS: &[&str] = &[
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/etc",
    "/dev",
    "/proc",
    "/nix",
    "/opt",
    "/run/current-system",
];

/// [`SYSTEM_READ_DIRS`], the fixed temp folders and the folder a program
/// found on `PATH` lives in (with its `lib`/`libexec` beside it, e.g.
/// `/usr/local`), when that is not a home folder.
pub fn system_read_roots(program: &str) -> Vec<PathBuf> {
    let mut roots: Vec<PathBuf> = SYSTEM_READ_DIRS.iter().map(PathBuf::from).collect();
    roots.extend(crate::landlock::TEMP_DIRS.iter().map(PathBuf::from));
    if let Some(found) = find_on_path(program).and_then(|p| std::fs::canonicalize(p).ok())
        && let Some(bin) = found.parent()
    {
        let home = std::env::var_os("HOME").map(PathBuf::from);
        let prefix = bin.parent().filter(|p| {
            p.components().count() > 2 && home.as_ref().is_none_or(|h| !h.starts_with(p))
        });
        roots.push(prefix.unwrap_or(bin).to_path_buf());
    }
    roots
}

/// The first `program` on `PATH`.
fn find_on_path(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|dir| dir.join(program)).find(|p| p.is_file())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sandbox_environment_carries_no_secret_and_a_fixed_temp() {
        let launch = Launch::new("env", "/").env("EXTRA", "1");
        let env = launch.environment().unwrap();
        assert!(env.iter().any(|(k, v)| k == "TMPDIR" && v == "/tmp"));
        assert!(env.iter().any(|(k, v)| k == "EXTRA" && v == "1"));
        assert!(!env.iter().any(|(k, _)| k.to_string_lossy().contains("KEY")));
    }

    #[test]
    fn an_exact_environment_is_all_the_process_sees() {
        let out = Launch::new("/usr/bin/env", "/")
            .env_policy(EnvPolicy::Exact(vec![("ONLY".into(), "this".into())]))
            .command()
            .output()
            .unwrap();
        assert_eq!(String::from_utf8_lossy(&out.stdout), "ONLY=this\n");
    }
}
