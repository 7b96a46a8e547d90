//! One background job: spawning it in its own process group, supervising it
//! to its end (exit, timeout or kill), and reading its output.

use std::collections::VecDeque;
use std::io::Read;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::io::AsyncReadExt;
use tokio::net::unix::pipe::Receiver;
use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::ToolError;
use crate::background::{JobResult, JobStatus, JobSummary, RESULT_KEEP_CHARS};
use crate::bash::{GroupKill, kill_group, spawn_in_group};
use crate::bash_output::Capture;
use crate::child_groups::ChildGroups;

/// After the shell exits, how long to keep reading output its own background
/// children still write to the pipe (as `bash` does).
const DRAIN_AFTER_EXIT: Duration = Duration::from_millis(250);

/// Finished results not yet drained, and a wake-up for those waiting.
#[derive(Default)]
pub(crate) struct Queue {
    pub(crate) results: Mutex<VecDeque<JobResult>>,
    pub(crate) notify: Notify,
}

/// One job: what it runs, where its output goes, how it stands.
pub(crate) struct Job {
    pub(crate) id: String,
    command: String,
    detached: bool,
    started: Instant,
    output: Output,
    state: Mutex<JobState>,
    /// Cancelled to ask the supervisor to kill the job.
    pub(crate) stop: CancellationToken,
    /// Cancelled by the supervisor once the end is recorded.
    pub(crate) done: CancellationToken,
}

/// Where a job's output goes.
enum Output {
    Pipe(Mutex<Capture>),
    File(PathBuf),
}

/// Status, exit code and end of a job, and its group while it runs.
struct JobState {
    status: JobStatus,
    exit_code: Option<i32>,
    ended: Option<Instant>,
    /// The process group while the job runs.
    pgid: Option<i32>,
}

/// How a supervised run ended.
enum End {
    Exited(std::process::ExitStatus),
    WaitFailed,
    TimedOut,
    Killed,
}

/// Locks `m`, ignoring poisoning (a panicking holder leaves valid data here).
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// What the supervisor of a job owns: the shell, its group and its pipe.
pub(crate) struct Run {
    child: tokio::process::Child,
    group: GroupKill,
    pipe: Option<Receiver>,
    children: ChildGroups,
}

impl Job {
    /// Starts `command` in `workspace`: output to a pipe, or to
    /// `.agent/jobs/<id>.log` when `detached`.
    pub(crate) fn spawn(
        id: &str,
        command: &str,
        workspace: &Path,
        detached: bool,
        confinement: Option<Arc<crate::landlock::WriteConfinement>>,
        env: &[(std::ffi::OsString, std::ffi::OsString)],
        children: &ChildGroups,
    ) -> Result<(Arc<Job>, Run), ToolError> {
        let (output, fd, reader, script) = if detached {
            let dir = workspace.join(".agent").join("jobs");
            let path = dir.join(format!("{id}.log"));
            let file = std::fs::create_dir_all(&dir)
                .and_then(|()| std::fs::File::create(&path))
                .map_err(|e| ToolError::io(format!("cannot create {}", path.display()), e))?;
            // Ignored signals stay ignored across exec: the nohup of it.
            let script = format!("trap '' HUP\n{command}");
            (Output::File(path), OwnedFd::from(file), None, script)
        } else {
            let (reader, writer) =
                std::io::pipe().map_err(|e| ToolError::io("cannot create a pipe", e))?;
            let output = Output::Pipe(Mutex::new(Capture::default()));
            (output, OwnedFd::from(writer), Some(reader), command.to_string())
        };
        let (child, mut group) =
            spawn_in_group(&script, workspace, fd, confinement, env, detached)?;
        let pipe = reader
            .map(|r| Receiver::from_owned_fd(OwnedFd::from(r)))
            .transpose()
            .map_err(|e| ToolError::io("cannot read the command's output", e))?;
        let pgid = group.pgid();
        if detached {
            group.disarm(); // must outlive us; kills go through `pgid`
        } else if let Some(pgid) = pgid {
            children.record(pgid, Some(id), command);
        }
        let job = Arc::new(Job {
            id: id.to_string(),
            command: command.to_string(),
            detached,
            started: Instant::now(),
            output,
            state: Mutex::new(JobState {
                status: JobStatus::Running,
                exit_code: None,
                ended: None,
                pgid,
            }),
            stop: CancellationToken::new(),
            done: CancellationToken::new(),
        });
        Ok((job, Run { child, group, pipe, children: children.clone() }))
    }

    /// True until the supervisor records the end.
    pub(crate) fn is_running(&self) -> bool {
        lock(&self.state).status == JobStatus::Running
    }

    /// The job at a glance.
    pub(crate) fn summary(&self) -> JobSummary {
        let state = lock(&self.state);
        JobSummary {
            id: self.id.clone(),
            command: self.command.clone(),
            status: state.status,
            exit_code: state.exit_code,
            elapsed: state.ended.unwrap_or_else(Instant::now) - self.started,
            detached: self.detached,
        }
    }

    /// Kills the group at once, without the runtime (for drop and shutdown).
    pub(crate) fn kill_now_unless_detached(&self) {
        if self.detached {
            return;
        }
        self.stop.cancel();
        let state = lock(&self.state);
        if let (JobStatus::Running, Some(pgid)) = (state.status, state.pgid) {
            kill_group(pgid);
        }
    }

    /// The output so far, head and tail, as `bash` shows it.
    pub(crate) fn output_text(&self) -> String {
        match &self.output {
            Output::Pipe(capture) => lock(capture).render(),
            Output::File(path) => match capture_file(path) {
                Ok(capture) => capture.render(),
                Err(e) => format!("[cannot read {}: {e}]", path.display()),
            },
        }
    }

    /// The log file of a detached job.
    pub(crate) fn log_file(&self) -> Option<&Path> {
        match &self.output {
            Output::File(path) => Some(path),
            Output::Pipe(_) => None,
        }
    }

    /// Appends output read from the pipe.
    fn push_output(&self, bytes: &[u8]) {
        if let Output::Pipe(capture) = &self.output {
            lock(capture).push(bytes);
        }
    }
}

impl Run {
    /// Waits for the job to end (exit, timeout or kill), records how, and queues
    /// its result.
    pub(crate) async fn supervise(self, job: Arc<Job>, timeout: Duration, queue: Arc<Queue>) {
        let Run { mut child, mut group, mut pipe, children } = self;
        let pgid = lock(&job.state).pgid;
        let deadline = job.started + timeout;
        let mut buf = vec![0u8; 64 * 1024];
        let mut exited: Option<std::process::ExitStatus> = None;
        let mut drain_until = deadline;
        let end = loop {
            let reading = pipe.is_some();
            tokio::select! {
                read = async { pipe.as_mut()?.read(&mut buf).await.ok() }, if reading => match read {
                    Some(n) if n > 0 => job.push_output(&buf[..n]),
                    _ => pipe = None,
                },
                status = child.wait(), if exited.is_none() => match status {
                    Ok(status) => {
                        exited = Some(status);
                        drain_until = deadline.min(Instant::now() + DRAIN_AFTER_EXIT);
                    }
                    Err(_) => break End::WaitFailed,
                },
                _ = tokio::time::sleep_until(drain_until), if exited.is_some() => {
                    if let Output::Pipe(capture) = &job.output {
                        lock(capture).note_background();
                    }
                    break End::Exited(exited.unwrap_or_default());
                }
                _ = tokio::time::sleep_until(deadline), if exited.is_none() => break End::TimedOut,
                _ = job.stop.cancelled(), if exited.is_none() => break End::Killed,
            }
            if let (Some(status), None) = (exited, &pipe) {
                break End::Exited(status);
            }
        };
        if let End::TimedOut | End::Killed | End::WaitFailed = end {
            match lock(&job.state).pgid {
                Some(pgid) if job.detached => kill_group(pgid),
                _ => group.kill(),
            }
            let _ = tokio::time::timeout(Duration::from_secs(1), child.wait()).await;
            if let Some(pipe) = pipe.as_mut() {
                // Whatever the killed processes had already written.
                let _ = tokio::time::timeout(Duration::from_millis(100), async {
                    while let Ok(n) = pipe.read(&mut buf).await {
                        if n == 0 {
                            break;
                        }
                        job.push_output(&buf[..n]);
                    }
                })
                .await;
            }
        }
        // Children a finished shell left behind keep running, as with `bash`
        // (recorded, until the session ends).
        group.disarm();
        if let (Some(pgid), false) = (pgid, job.detached) {
            children.ended(pgid);
        }
        let (status, exit_code, signal) = match end {
            // Our own SIGKILL (shutdown) may be seen as an exit before the stop.
            End::Exited(status) if status.code().is_none() && job.stop.is_cancelled() => {
                (JobStatus::Killed, None, None)
            }
            End::Exited(status) => {
                match (status.code(), std::os::unix::process::ExitStatusExt::signal(&status)) {
                    (Some(code), _) => (JobStatus::Completed, Some(code), None),
                    (None, signal) => (JobStatus::Error, None, signal),
                }
            }
            End::WaitFailed => (JobStatus::Error, None, None),
            End::TimedOut => (JobStatus::Timeout, None, None),
            End::Killed => (JobStatus::Killed, None, None),
        };
        let ended = Instant::now();
        {
            let mut state = lock(&job.state);
            *state = JobState { status, exit_code, ended: Some(ended), pgid: None };
        }
        let mut result = head_and_tail(&job.output_text(), RESULT_KEEP_CHARS);
        match (status, signal) {
            (JobStatus::Timeout, _) => result.push_str(&format!(
                "\n[timed out after {}; the command and every process it started were killed]",
                human_elapsed(timeout)
            )),
            (JobStatus::Error, Some(signal)) => {
                result.push_str(&format!("\n[killed by signal {signal}]"));
            }
            _ => {}
        }
        lock(&queue.results).push_back(JobResult {
            task_id: job.id.clone(),
            status,
            exit_code,
            command: job.command.clone(),
            result,
            elapsed: ended - job.started,
        });
        job.done.cancel();
        queue.notify.notify_waiters();
    }
}

/// A log file's content through [`Capture`] (bounded memory, any size).
fn capture_file(path: &Path) -> std::io::Result<Capture> {
    let mut file = crate::own_file::open(path)?;
    let mut capture = Capture::default();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match file.read(&mut buf)? {
            0 => return Ok(capture),
            n => capture.push(&buf[..n]),
        }
    }
}

/// `text` with only its first and last `keep` characters when longer.
fn head_and_tail(text: &str, keep: usize) -> String {
    let chars = text.chars().count();
    if chars <= 2 * keep {
        return text.to_string();
    }
    let head: String = text.chars().take(keep).collect();
    let tail: String = text.chars().skip(chars - keep).collect();
    format!(
        "{head}\n[... {} characters cut; check_background shows more ...]\n{tail}",
        chars - 2 * keep
    )
}

/// A duration for people: `0.3 s`, `42 s`, `3 min 5 s`, `2 h 10 min`.
pub(crate) fn human_elapsed(d: Duration) -> String {
    let secs = d.as_secs();
    match secs {
        0..10 => format!("{:.1} s", d.as_secs_f64()),
        10..60 => format!("{secs} s"),
        60..3600 => format!("{} min {} s", secs / 60, secs % 60),
        _ => format!("{} h {} min", secs / 3600, secs % 3600 / 60),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn head_and_tail_keeps_both_ends_and_counts_the_cut() {
        let text = format!("START{}END", "x".repeat(5000));
        let cut = head_and_tail(&text, 10);
        assert!(cut.starts_with("STARTxxxxx\n"), "{cut}");
        assert!(cut.ends_with("\nxxxxxxxEND"), "{cut}");
        assert!(cut.contains("4988 characters cut"), "{cut}");
        assert_eq!(head_and_tail("short", 10), "short");
    }

    #[test]
    fn elapsed_reads_naturally() {
        assert_eq!(human_elapsed(Duration::from_millis(300)), "0.3 s");
        assert_eq!(human_elapsed(Duration::from_secs(42)), "42 s");
        assert_eq!(human_elapsed(Duration::from_secs(185)), "3 min 5 s");
        assert_eq!(human_elapsed(Duration::from_secs(7800)), "2 h 10 min");
    }
}
