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
//! - the working folder and, when asked, a process group of its own;
//! - death with ferroclaw: the child gets `PR_SET_PDEATHSIG` (SIGKILL), so
//!   a kill -9 of ferroclaw takes its direct children with it, unless the
//!   launch [outlives ferroclaw](Launch::outlives_ferroclaw) (a detached job).
//!
//! Linux sends the parent-death signal when the *thread* that forked the
//! child ends, not the process: a child forked on a tokio worker that later
//! retires (after `block_in_place`, a blocking-pool thread ending after its
//! idle time) would be killed mid-run. So every child that is not waited for
//! on the thread that started it is started on the launcher thread, which
//! lives as long as the process: [`spawn`] runs the spawning code there (in
//! the caller's tokio runtime). A command waited for where it starts
//! (`output()`, `status()`) may start on any thread.
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
    /// Keeps running when ferroclaw ends (no parent-death signal).
    outlives: bool,
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
            outlives: false,
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

    /// Lets the process outlive ferroclaw (a detached background job): no
    /// parent-death signal is set.
    pub fn outlives_ferroclaw(mut self) -> Self {
        self.outlives = true;
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
        if !self.outlives {
            // After the confinement: nothing after this changes credentials,
            // which would clear the signal.
            // SAFETY: dies_with makes only async-signal-safe syscalls.
            unsafe {
                command.pre_exec(dies_with(std::process::id()));
            }
        }
        command
    }

    /// [`Self::command`] for tokio.
    pub fn tokio_command(&self) -> tokio::process::Command {
        tokio::process::Command::from(self.command())
    }
}

/// The `pre_exec` step that makes the child die with ferroclaw: SIGKILL on
/// the parent's death (see the module docs for the thread it is tied to),
/// then a check that the parent (`parent`, ferroclaw's pid) did not die
/// before the signal was set, in which case the child stops before running.
fn dies_with(parent: u32) -> impl FnMut() -> std::io::Result<()> + Send + Sync + 'static {
    move || {
        // SAFETY: prctl and getppid are async-signal-safe syscalls.
        let set = unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong) };
        if set != 0 {
            return Err(std::io::Error::last_os_error());
        }
        if u32::try_from(unsafe { libc::getppid() }).ok() != Some(parent) {
            return Err(std::io::Error::other("ferroclaw ended before the command started"));
        }
        Ok(())
    }
}

type Job = Box<dyn FnOnce() + Send>;

/// The launcher thread's queue, started on first use.
fn launcher() -> Option<&'static std::sync::Mutex<std::sync::mpsc::Sender<Job>>> {
    static LAUNCHER: std::sync::OnceLock<Option<std::sync::Mutex<std::sync::mpsc::Sender<Job>>>> =
        std::sync::OnceLock::new();
    LAUNCHER
        .get_or_init(|| {
            let (tx, rx) = std::sync::mpsc::channel::<Job>();
            let started = std::thread::Builder::new().name("ferroclaw-launcher".to_string()).spawn(
                move || {
                    // Lives as long as the process: the sender is never dropped.
                    while let Ok(job) = rx.recv() {
                        // A panicking job must not end the thread children are tied to.
                        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job));
                    }
                },
            );
            match started {
                Ok(_) => Some(std::sync::Mutex::new(tx)),
                Err(e) => {
                    tracing::warn!(
                        "cannot start the launcher thread ({e}); children start where asked"
                    );
                    None
                }
            }
        })
        .as_ref()
}

/// Runs `start` (code that spawns a child: `command.spawn()`, a wrapper's
/// spawn) on the launcher thread, inside the caller's tokio runtime when
/// there is one, and returns what it returned. The child's parent-death
/// signal is then tied to a thread that ends only with the process. Blocks
/// the caller for the time of the fork and exec.
pub fn spawn<T: Send + 'static>(
    start: impl FnOnce() -> std::io::Result<T> + Send + 'static,
) -> std::io::Result<T> {
    let Some(launcher) = launcher() else {
        return start();
    };
    let runtime = tokio::runtime::Handle::try_current().ok();
    let (tx, rx) = std::sync::mpsc::sync_channel(1);
    let job: Job = Box::new(move || {
        let _entered = runtime.as_ref().map(|r| r.enter());
        let _ = tx.send(start());
    });
    let sent = launcher.lock().unwrap_or_else(std::sync::PoisonError::into_inner).send(job);
    if sent.is_err() {
        return Err(std::io::Error::other("the launcher thread is gone"));
    }
    rx.recv().unwrap_or_else(|_| Err(std::io::Error::other("the launcher thread failed")))
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
    fn a_child_dies_with_the_thread_that_forked_it_so_spawns_go_to_the_launcher() {
        use std::os::unix::process::ExitStatusExt;
        // The pitfall: forked on a thread that then ends, the child is killed.
        let mut direct =
            std::thread::spawn(|| Launch::new("sleep", "/").arg("30").command().spawn().unwrap())
                .join()
                .unwrap();
        assert_eq!(direct.wait().unwrap().signal(), Some(libc::SIGKILL));
        // Through the launcher it lives until it is told to stop.
        let mut launched = std::thread::spawn(|| {
            let mut command = Launch::new("sleep", "/").arg("30").command();
            spawn(move || command.spawn()).unwrap()
        })
        .join()
        .unwrap();
        // SAFETY: signals the child this test started.
        unsafe { libc::kill(launched.id() as i32, libc::SIGTERM) };
        assert_eq!(launched.wait().unwrap().signal(), Some(libc::SIGTERM));
    }

    #[test]
    fn a_launch_that_outlives_ferroclaw_has_no_parent_death_signal() {
        use std::os::unix::process::ExitStatusExt;
        let mut child = std::thread::spawn(|| {
            Launch::new("sleep", "/").arg("30").outlives_ferroclaw().command().spawn().unwrap()
        })
        .join()
        .unwrap();
        // SAFETY: signals the child this test started.
        unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        assert_eq!(child.wait().unwrap().signal(), Some(libc::SIGTERM));
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
