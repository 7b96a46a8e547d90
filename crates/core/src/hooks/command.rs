//! Running one hook command: `sh -c COMMAND` in the workspace, the event's
//! JSON on stdin, stdout and stderr captured, killed at its timeout.

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

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

/// Runs `command` with `input` on stdin, in `workspace`, for at most
/// `timeout_secs`. `CLAUDE_PROJECT_DIR` (and `FERROCLAW_PROJECT_DIR`) name the
/// workspace, as Claude Code's hooks expect.
pub async fn run(command: &str, input: &str, workspace: &Path, timeout_secs: f64) -> CommandRun {
    let started = Instant::now();
    let done = |ended, stdout: &[u8], stderr: &[u8]| CommandRun {
        ended,
        stdout: text(stdout),
        stderr: text(stderr),
        duration_ms: started.elapsed().as_millis() as u64,
    };
    let child = tokio::process::Command::new("sh")
        .arg("-c")
        .arg(command)
        .current_dir(workspace)
        .env("CLAUDE_PROJECT_DIR", workspace)
        .env("FERROCLAW_PROJECT_DIR", workspace)
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
