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

/// The cap on what a hook may print, per stream (and on an http hook's
/// answer): far above any decision or context a hook gives. Beyond it the
/// rest is read and dropped (memory stays bounded), and the run says so
/// ([`CommandRun::over_cap`]): an answer on stdout that was cut is not read.
pub const MAX_OUTPUT_BYTES: usize = 64 * 1024;

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
    /// The stream that went over [`MAX_OUTPUT_BYTES`] (`stdout` first)
    /// and how many bytes it had.
    pub over_cap: Option<(&'static str, u64)>,
}

impl CommandRun {
    /// What the hook printed over the cap, said for the user; `None` when
    /// nothing was.
    pub fn cap_note(&self) -> Option<String> {
        let (stream, len) = self.over_cap?;
        Some(format!(
            "printed {len} bytes on {stream}, over the {} KiB cap on hook output; the rest was \
             dropped{}",
            MAX_OUTPUT_BYTES / 1024,
            if stream == "stdout" { " and its answer was not read" } else { "" }
        ))
    }
}

/// Reads `stream` to its end, keeping its first [`MAX_OUTPUT_BYTES`];
/// returns them and how many bytes there were.
pub(crate) async fn read_capped(
    mut stream: impl tokio::io::AsyncRead + Unpin,
) -> std::io::Result<(Vec<u8>, u64)> {
    use tokio::io::AsyncReadExt;
    let mut kept = Vec::new();
    let mut total = 0u64;
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let n = stream.read(&mut buf).await?;
        if n == 0 {
            return Ok((kept, total));
        }
        total += n as u64;
        let room = MAX_OUTPUT_BYTES.saturating_sub(kept.len());
        kept.extend_from_slice(&buf[..n.min(room)]);
    }
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
        over_cap: None,
    };
    let mut launch = Launch::new("sh", workspace).arg("-c").arg(command).env_policy(env.policy());
    for (name, value) in set {
        launch = launch.env(name, value);
    }
    let mut launch = launch
        .env("CLAUDE_PROJECT_DIR", workspace)
        .env("FERROCLAW_PROJECT_DIR", workspace)
        .tokio_command();
    launch.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).kill_on_drop(true);
    // On the launcher thread: it dies with ferroclaw, not with a worker thread.
    let child = ferroclaw_tools::process::spawn(move || launch.spawn());
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
    let (Some(stdout), Some(stderr)) = (child.stdout.take(), child.stderr.take()) else {
        return done(Ended::NotStarted("no output pipes".into()), b"", b"");
    };
    let finished = async {
        let (out, err) = tokio::try_join!(read_capped(stdout), read_capped(stderr))?;
        Ok::<_, std::io::Error>((child.wait().await?, out, err))
    };
    match tokio::time::timeout(limit, finished).await {
        Ok(Ok((status, (out, out_len), (err, err_len)))) => {
            let over_cap = [("stdout", out_len), ("stderr", err_len)]
                .into_iter()
                .find(|(_, len)| *len > MAX_OUTPUT_BYTES as u64);
            CommandRun { over_cap, ..done(Ended::Exited(status.code()), &out, &err) }
        }
        Ok(Err(e)) => done(Ended::NotStarted(e.to_string()), b"", b""),
        // Dropping the future kills the child (kill_on_drop).
        Err(_) => done(Ended::TimedOut, b"", b""),
    }
}

fn text(bytes: &[u8]) -> String {
    let cut = &bytes[..bytes.len().min(MAX_OUTPUT_BYTES)];
    String::from_utf8_lossy(cut).trim().to_string()
}
