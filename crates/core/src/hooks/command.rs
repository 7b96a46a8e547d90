//! Running one hook command: `sh -c COMMAND` in the workspace, the event's
//! JSON on stdin, stdout and stderr captured, killed at its timeout. Started
//! through the one launcher ([`ferroclaw_tools::process::Launch`]); hooks
//! are the user's own programs and run unconfined, with the environment
//! `[sandbox] hook_env` names ([`HookEnvironment`]).

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use ferroclaw_tools::process::{EnvPolicy, Launch};
use tokio::io::AsyncWriteExt;

/// Output of a hook beyond this many bytes (per stream) is cut.
const MAX_OUTPUT_BYTES: usize = 64 * 1024;

/// How a hook command ended.
#[derive(Debug, Clone)]
pub enum Ended {
    /// It exited with this code (`None`: killed by a signal).
    Exited(Option<i32>),
    /// It ran past its timeout and was killed.
    TimedOut,
    /// It could not be started.
    NotStarted(String),
}

/// What one run produced.
#[derive(Debug, Clone)]
pub struct CommandRun {
    pub ended: Ended,
    pub stdout: String,
    pub stderr: String,
    pub duration_ms: u64,
}

/// Which environment hook commands see.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum HookEnvironment {
    /// ferroclaw's whole environment, secrets included (Claude Code's way;
    /// the default).
    #[default]
    All,
    /// The allow-list `bash` gets, plus these names (`[sandbox] env`).
    Sandbox(Vec<String>),
}

impl HookEnvironment {
    /// From `[sandbox] hook_env` (and `env`, the names it passes).
    pub fn from_config(sandbox: Option<&crate::config::SandboxSection>) -> Self {
        match sandbox {
            Some(s) if s.hook_env == Some(crate::config::HookEnv::Sandbox) => {
                HookEnvironment::Sandbox(s.env.clone())
            }
            _ => HookEnvironment::All,
        }
    }

    fn policy(&self) -> EnvPolicy {
        match self {
            HookEnvironment::All => EnvPolicy::Inherit,
            HookEnvironment::Sandbox(names) => EnvPolicy::Sandbox(names.clone()),
        }
    }
}

/// Runs `command` with `input` on stdin, in `workspace`, for at most
/// `timeout_secs`. `CLAUDE_PROJECT_DIR` (and `FERROCLAW_PROJECT_DIR`) name the
/// workspace, as Claude Code's hooks expect; `set` (Claude Code settings'
/// `env`) is set on top of `env`'s variables.
pub async fn run(
    command: &str,
    input: &str,
    workspace: &Path,
    timeout_secs: f64,
    env: &HookEnvironment,
    set: &[(String, String)],
) -> CommandRun {
    let started = Instant::now();
    let done = |ended, stdout: &[u8], stderr: &[u8]| CommandRun {
        ended,
        stdout: text(stdout),
        stderr: text(stderr),
        duration_ms: started.elapsed().as_millis() as u64,
    };
    let mut launch = Launch::new("sh", workspace).arg("-c").arg(command).env_policy(env.policy());
    for (name, value) in set {
        launch = launch.env(name, value);
    }
    let child = launch
        .env("CLAUDE_PROJECT_DIR", workspace)
        .env("FERROCLAW_PROJECT_DIR", workspace)
        .tokio_command()
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn();
    let mut child = match child {
        Ok(c) => c,
        Err(e) => return done(Ended::NotStarted(e.to_string()), b"", b""),
    };
    if let Some(mut stdin) = child.stdin.take() {
        // A hook that does not read its input must not fail the run.
        let _ = stdin.write_all(input.as_bytes()).await;
        drop(stdin);
    }
    let limit = Duration::from_secs_f64(timeout_secs);
    match tokio::time::timeout(limit, child.wait_with_output()).await {
        Ok(Ok(out)) => done(Ended::Exited(out.status.code()), &out.stdout, &out.stderr),
        Ok(Err(e)) => done(Ended::NotStarted(e.to_string()), b"", b""),
        // Dropping the future kills the child (kill_on_drop).
        Err(_) => done(Ended::TimedOut, b"", b""),
    }
}

fn text(bytes: &[u8]) -> String {
    let cut = &bytes[..bytes.len().min(MAX_OUTPUT_BYTES)];
    String::from_utf8_lossy(cut).trim().to_string()
}
