//! Background jobs: shell commands that run while the conversation goes on.
//!
//! [`JobManager::start`] spawns `bash -c` in its own process group (the same
//! spawn, kill and deny-list code as the `bash` tool) and returns an 8-hex id
//! at once. A supervisor task captures the output (head and tail, bounded like
//! `bash`), enforces the timeout and, when the job ends, pushes a
//! [`JobResult`] onto a queue. [`JobManager::drain_finished`] hands each
//! result out exactly once; the agent loop puts them, formatted by
//! [`format_results`], into the next model request.
//!
//! Jobs die with the manager (its last clone dropped, or
//! [`JobManager::shutdown`]) unless started detached: a detached job ignores
//! SIGHUP, writes to `.agent/jobs/<id>.log` in the workspace instead of a pipe,
//! and keeps running after ferroclaw exits (its timeout is only enforced while
//! ferroclaw runs, and its result is then never collected).

use std::collections::VecDeque;
use std::fmt;
use std::hash::BuildHasher;
use std::io::Read;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use serde::Serialize;
use tokio::io::AsyncReadExt;
use tokio::net::unix::pipe::Receiver;
use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::ToolError;
use crate::bash::{GroupKill, kill_group, spawn_in_group};
use crate::bash_output::Capture;
use crate::deny::dangerous_command;

/// Timeout of a job started without one (learn-claude-code uses 300 s for
/// its background runs; builds and test suites need longer).
pub const DEFAULT_JOB_TIMEOUT: Duration = Duration::from_secs(30 * 60);
/// The longest timeout a job may ask for unless the manager is built with
/// another ([`JobManager::with_max_timeout`]).
pub const MAX_JOB_TIMEOUT: Duration = Duration::from_secs(4 * 60 * 60);
/// Jobs running at once; more are refused so a looping model cannot fork
/// the machine to death.
pub const MAX_RUNNING_JOBS: usize = 16;
/// Characters of output kept from each end in a queued [`JobResult`]; the
/// full capture stays available to [`JobManager::check`].
pub const RESULT_KEEP_CHARS: usize = 1_000;
/// Finished jobs remembered for `check_background`; older ones are forgotten.
const KEPT_FINISHED_JOBS: usize = 50;
/// After the shell exits, how long to keep reading output its own background
/// children still write to the pipe (as `bash` does).
const DRAIN_AFTER_EXIT: Duration = Duration::from_millis(250);
/// How long `kill` waits for the supervisor to record the end.
const KILL_WAIT: Duration = Duration::from_secs(3);

/// Where a job is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum JobStatus {
    /// Still running.
    Running,
    /// The shell exited by itself (with any exit code).
    Completed,
    /// Killed, with its process group, when its timeout passed.
    Timeout,
    /// Died from a signal it was not sent by us, or could not be waited for.
    Error,
    /// Killed on request (`kill_background`, or the session ended).
    Killed,
}

impl fmt::Display for JobStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            JobStatus::Running => "running",
            JobStatus::Completed => "completed",
            JobStatus::Timeout => "timeout",
            JobStatus::Error => "error",
            JobStatus::Killed => "killed",
        })
    }
}

/// A finished job, as queued for the model (learn-claude-code's shape).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JobResult {
    /// The job's 8-hex id.
    pub task_id: String,
    /// How it ended (never `Running`).
    pub status: JobStatus,
    /// The shell's exit code, when it exited by itself.
    pub exit_code: Option<i32>,
    /// The command line as given.
    pub command: String,
    /// Head and tail of the output (at most [`RESULT_KEEP_CHARS`] each).
    pub result: String,
    /// Time from start to end.
    #[serde(skip)]
    pub elapsed: Duration,
}

/// One job at a glance, for listings (the REPL's running jobs).
#[derive(Debug, Clone, PartialEq)]
pub struct JobSummary {
    /// The job's 8-hex id.
    pub id: String,
    /// The command line as given.
    pub command: String,
    /// Where it is in its life.
    pub status: JobStatus,
    /// The shell's exit code, once it exited by itself.
    pub exit_code: Option<i32>,
    /// Time since start, or from start to end.
    pub elapsed: Duration,
    /// True when it survives the session.
    pub detached: bool,
}

/// How to run a job.
#[derive(Debug, Clone, Default)]
pub struct JobOptions {
    /// Kill the job after this long; `None` = [`DEFAULT_JOB_TIMEOUT`]. Capped
    /// at the manager's maximum.
    pub timeout: Option<Duration>,
    /// Keep running after the session ends (output goes to a log file).
    pub detached: bool,
}

/// Runs and tracks background jobs. Cheap to clone; all clones share the
/// jobs. When the last clone is dropped, jobs not detached are killed.
#[derive(Clone)]
pub struct JobManager {
    inner: Arc<Inner>,
}

struct Inner {
    jobs: Mutex<Vec<Arc<Job>>>,
    queue: Arc<Queue>,
    max_timeout: Duration,
}

/// Finished results not yet drained, and a wake-up for those waiting.
#[derive(Default)]
struct Queue {
    results: Mutex<VecDeque<JobResult>>,
    notify: Notify,
}

struct Job {
    id: String,
    command: String,
    detached: bool,
    started: Instant,
    output: Output,
    state: Mutex<JobState>,
    /// Cancelled to ask the supervisor to kill the job.
    stop: CancellationToken,
    /// Cancelled by the supervisor once the end is recorded.
    done: CancellationToken,
}

/// Where a job's output goes.
enum Output {
    Pipe(Mutex<Capture>),
    File(PathBuf),
}

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
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Default for JobManager {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for JobManager {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JobManager")
            .field("jobs", &self.jobs().len())
            .finish()
    }
}

impl JobManager {
    /// A manager with no jobs and the default limits.
    pub fn new() -> Self {
        Self::with_max_timeout(MAX_JOB_TIMEOUT)
    }

    /// A manager whose jobs may ask for timeouts up to `max_timeout`.
    pub fn with_max_timeout(max_timeout: Duration) -> Self {
        Self {
            inner: Arc::new(Inner {
                jobs: Mutex::new(Vec::new()),
                queue: Arc::new(Queue::default()),
                max_timeout,
            }),
        }
    }

    /// The longest timeout a job may have.
    pub fn max_timeout(&self) -> Duration {
        self.inner.max_timeout
    }

    /// Starts `command` with `bash -c` in `workspace` and returns its id at
    /// once. Refuses empty and catastrophic commands (the `bash` deny list)
    /// and more than [`MAX_RUNNING_JOBS`] at a time. Must be called inside a
    /// tokio runtime.
    pub fn start(
        &self,
        command: &str,
        workspace: &Path,
        options: JobOptions,
    ) -> Result<String, ToolError> {
        if command.trim().is_empty() {
            return Err(ToolError::InvalidArguments("command is empty".to_string()));
        }
        if let Some(reason) = dangerous_command(command, workspace, workspace) {
            return Err(ToolError::Refused(format!(
                "refused before running: {reason}. If this is really intended, ask the user to run it themselves."
            )));
        }
        let timeout = options
            .timeout
            .unwrap_or(DEFAULT_JOB_TIMEOUT)
            .min(self.inner.max_timeout);
        let mut jobs = lock(&self.inner.jobs);
        let running = jobs.iter().filter(|j| j.is_running()).count();
        if running >= MAX_RUNNING_JOBS {
            return Err(ToolError::Refused(format!(
                "{running} background jobs are already running (the most at once); wait for one \
                 or kill one with kill_background"
            )));
        }
        let runtime = tokio::runtime::Handle::try_current().map_err(|_| {
            ToolError::Failed("background jobs need a tokio runtime".to_string())
        })?;
        let id = fresh_id(&jobs);
        let (output, fd, reader, script) = if options.detached {
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
        let (child, mut group) = spawn_in_group(&script, workspace, fd)?;
        let pipe = reader
            .map(|r| Receiver::from_owned_fd(OwnedFd::from(r)))
            .transpose()
            .map_err(|e| ToolError::io("cannot read the command's output", e))?;
        let pgid = group.pgid();
        if options.detached {
            group.disarm(); // must outlive us; kills go through `pgid`
        }
        let job = Arc::new(Job {
            id: id.clone(),
            command: command.to_string(),
            detached: options.detached,
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
        forget_old_jobs(&mut jobs);
        jobs.push(job.clone());
        drop(jobs);
        let queue = self.inner.queue.clone();
        runtime.spawn(supervise(job, child, group, pipe, timeout, queue));
        Ok(id)
    }

    /// Every finished result not drained before, oldest first. Each result is
    /// returned by exactly one call.
    pub fn drain_finished(&self) -> Vec<JobResult> {
        lock(&self.inner.queue.results).drain(..).collect()
    }

    /// Resolves once at least one finished result waits to be drained
    /// (at once if one already does). Does not drain it.
    pub async fn wait_finished(&self) {
        let queue = &self.inner.queue;
        loop {
            let notified = queue.notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if !lock(&queue.results).is_empty() {
                return;
            }
            notified.await;
        }
    }

    /// The jobs still running, oldest first.
    pub fn running(&self) -> Vec<JobSummary> {
        self.jobs()
            .into_iter()
            .filter(|j| j.status == JobStatus::Running)
            .collect()
    }

    /// Every job remembered (running and recently finished), oldest first.
    pub fn jobs(&self) -> Vec<JobSummary> {
        lock(&self.inner.jobs).iter().map(|j| j.summary()).collect()
    }

    /// Job `id` at a glance.
    pub fn job(&self, id: &str) -> Result<JobSummary, ToolError> {
        self.find(id).map(|job| job.summary())
    }

    /// A report on job `id`: status, exit code, elapsed time and the output
    /// so far; or, with no id, one line per job.
    pub fn check(&self, id: Option<&str>) -> Result<String, ToolError> {
        let Some(id) = id else {
            let jobs = self.jobs();
            if jobs.is_empty() {
                return Ok("No background jobs.".to_string());
            }
            let mut out = String::new();
            for j in jobs {
                out.push_str(&format!("{}\n", summary_line(&j)));
            }
            out.push_str("(check_background with an id shows a job's output)");
            return Ok(out);
        };
        let job = self.find(id)?;
        let summary = job.summary();
        let mut out = format!("{}\n", summary_line(&summary));
        if let Output::File(path) = &job.output {
            out.push_str(&format!("[output file: {}]\n", path.display()));
        }
        let text = job.output_text();
        out.push_str(if text.is_empty() { "(no output yet)" } else { &text });
        Ok(out)
    }

    /// Kills job `id` and its process group, then waits briefly for the end
    /// to be recorded. Killing a finished job says so and changes nothing.
    pub async fn kill(&self, id: &str) -> Result<JobSummary, ToolError> {
        let job = self.find(id)?;
        job.stop.cancel();
        let _ = tokio::time::timeout(KILL_WAIT, job.done.cancelled()).await;
        Ok(job.summary())
    }

    /// Kills every running job that is not detached. The manager stays usable.
    pub fn shutdown(&self) {
        for job in lock(&self.inner.jobs).iter() {
            job.kill_now_unless_detached();
        }
    }

    fn find(&self, id: &str) -> Result<Arc<Job>, ToolError> {
        let jobs = lock(&self.inner.jobs);
        let id = id.trim();
        if let Some(job) = jobs.iter().find(|j| j.id == id) {
            return Ok(job.clone());
        }
        let known: Vec<&str> = jobs.iter().map(|j| j.id.as_str()).collect();
        Err(ToolError::InvalidArguments(format!(
            "no background job {id:?}; known jobs: {}",
            if known.is_empty() {
                "(none)".to_string()
            } else {
                known.join(", ")
            }
        )))
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        for job in lock(&self.jobs).iter() {
            job.kill_now_unless_detached();
        }
    }
}

impl Job {
    fn is_running(&self) -> bool {
        lock(&self.state).status == JobStatus::Running
    }

    fn summary(&self) -> JobSummary {
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
    fn kill_now_unless_detached(&self) {
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
    fn output_text(&self) -> String {
        match &self.output {
            Output::Pipe(capture) => lock(capture).render(),
            Output::File(path) => match capture_file(path) {
                Ok(capture) => capture.render(),
                Err(e) => format!("[cannot read {}: {e}]", path.display()),
            },
        }
    }
}

/// Waits for the job to end (exit, timeout or kill), records how, and queues
/// its result.
async fn supervise(
    job: Arc<Job>,
    mut child: tokio::process::Child,
    mut group: GroupKill,
    mut pipe: Option<Receiver>,
    timeout: Duration,
    queue: Arc<Queue>,
) {
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
    // Children a finished shell left behind keep running, as with `bash`.
    group.disarm();
    let (status, exit_code, signal) = match end {
        // Our own SIGKILL (shutdown) may be seen as an exit before the stop.
        End::Exited(status) if status.code().is_none() && job.stop.is_cancelled() => {
            (JobStatus::Killed, None, None)
        }
        End::Exited(status) => match (
            status.code(),
            std::os::unix::process::ExitStatusExt::signal(&status),
        ) {
            (Some(code), _) => (JobStatus::Completed, Some(code), None),
            (None, signal) => (JobStatus::Error, None, signal),
        },
        End::WaitFailed => (JobStatus::Error, None, None),
        End::TimedOut => (JobStatus::Timeout, None, None),
        End::Killed => (JobStatus::Killed, None, None),
    };
    let ended = Instant::now();
    {
        let mut state = lock(&job.state);
        *state = JobState {
            status,
            exit_code,
            ended: Some(ended),
            pgid: None,
        };
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

impl Job {
    fn push_output(&self, bytes: &[u8]) {
        if let Output::Pipe(capture) = &self.output {
            lock(capture).push(bytes);
        }
    }
}

/// A log file's content through [`Capture`] (bounded memory, any size).
fn capture_file(path: &Path) -> std::io::Result<Capture> {
    let mut file = std::fs::File::open(path)?;
    let mut capture = Capture::default();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match file.read(&mut buf)? {
            0 => return Ok(capture),
            n => capture.push(&buf[..n]),
        }
    }
}

/// Drops the oldest finished jobs beyond [`KEPT_FINISHED_JOBS`].
fn forget_old_jobs(jobs: &mut Vec<Arc<Job>>) {
    let finished = jobs.iter().filter(|j| !j.is_running()).count();
    let mut excess = finished.saturating_sub(KEPT_FINISHED_JOBS - 1);
    jobs.retain(|j| {
        if excess > 0 && !j.is_running() {
            excess -= 1;
            false
        } else {
            true
        }
    });
}

/// A random 8-hex id not used by any job in `jobs`.
fn fresh_id(jobs: &[Arc<Job>]) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    loop {
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let id = format!("{:08x}", std::hash::RandomState::new().hash_one(n) as u32);
        if !jobs.iter().any(|j| j.id == id) {
            return id;
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

/// One line about a job: id, status, exit code, elapsed time, command.
fn summary_line(j: &JobSummary) -> String {
    let code = j
        .exit_code
        .map(|c| format!(" (exit code {c})"))
        .unwrap_or_default();
    let detached = if j.detached { " [detached]" } else { "" };
    let when = if j.status == JobStatus::Running {
        "for"
    } else {
        "after"
    };
    format!(
        "[{}] {}{code} {when} {}{detached}: {}",
        j.id,
        j.status,
        human_elapsed(j.elapsed),
        j.command
    )
}

/// A duration for people: `0.3 s`, `42 s`, `3 min 5 s`, `2 h 10 min`.
fn human_elapsed(d: Duration) -> String {
    let secs = d.as_secs();
    match secs {
        0..10 => format!("{:.1} s", d.as_secs_f64()),
        10..60 => format!("{secs} s"),
        60..3600 => format!("{} min {} s", secs / 60, secs % 60),
        _ => format!("{} h {} min", secs / 3600, secs % 3600 / 60),
    }
}

/// Finished results as the block the agent loop puts before the next model
/// request; empty when there are none.
///
/// ```
/// use ferroclaw_tools::{JobResult, JobStatus, format_results};
/// let block = format_results(&[JobResult {
///     task_id: "a1b2c3d4".into(),
///     status: JobStatus::Completed,
///     exit_code: Some(0),
///     command: "cargo test".into(),
///     result: "test result: ok".into(),
///     elapsed: std::time::Duration::from_secs(42),
/// }]);
/// assert!(block.starts_with("<background-results>\n[bg:a1b2c3d4] completed (exit code 0)"));
/// assert!(block.ends_with("</background-results>"));
/// assert_eq!(format_results(&[]), "");
/// ```
pub fn format_results(results: &[JobResult]) -> String {
    if results.is_empty() {
        return String::new();
    }
    let mut out = String::from("<background-results>\n");
    for r in results {
        let code = r
            .exit_code
            .map(|c| format!(" (exit code {c})"))
            .unwrap_or_default();
        out.push_str(&format!(
            "[bg:{}] {}{code} after {}: {}\n{}\n",
            r.task_id,
            r.status,
            human_elapsed(r.elapsed),
            r.command,
            r.result.trim_end()
        ));
    }
    out.push_str("</background-results>");
    out
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
    fn ids_are_eight_hex_digits_and_distinct() {
        let id = fresh_id(&[]);
        assert_eq!(id.len(), 8);
        assert!(id.chars().all(|c| c.is_ascii_hexdigit()), "{id}");
        assert_ne!(fresh_id(&[]), fresh_id(&[]));
    }

    #[test]
    fn elapsed_reads_naturally() {
        assert_eq!(human_elapsed(Duration::from_millis(300)), "0.3 s");
        assert_eq!(human_elapsed(Duration::from_secs(42)), "42 s");
        assert_eq!(human_elapsed(Duration::from_secs(185)), "3 min 5 s");
        assert_eq!(human_elapsed(Duration::from_secs(7800)), "2 h 10 min");
    }
}
