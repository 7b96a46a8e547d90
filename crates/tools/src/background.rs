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
//! ferroclaw runs, and its result is then never collected). Other jobs' groups
//! are recorded ([`crate::child_groups`]): after a kill -9 they are killed
//! when the session opens again, and reported to the model as lost.

use std::fmt;
use std::hash::BuildHasher;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Serialize;

use crate::ToolError;
use crate::background_job::{Job, Queue, human_elapsed, lock};
use crate::child_groups::ChildGroups;
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
/// How long `kill` waits for the supervisor to record the end.
const KILL_WAIT: Duration = Duration::from_secs(3);
/// What the model is told of a job lost with an earlier process.
const LOST_NOTE: &str = "[lost: ferroclaw stopped (killed or crashed) while this job ran; its \
result was never collected, and whatever it still ran was killed when the session was opened \
again. Run it again if it is still needed.]";

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
    /// Still running when ferroclaw was killed or crashed: killed, with
    /// what it started, when the session was opened again.
    Lost,
}

impl fmt::Display for JobStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            JobStatus::Running => "running",
            JobStatus::Completed => "completed",
            JobStatus::Timeout => "timeout",
            JobStatus::Error => "error",
            JobStatus::Killed => "killed",
            JobStatus::Lost => "lost",
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
    /// Landlock write confinement for the job (see [`ToolContext::write_confinement`](crate::ToolContext::write_confinement)).
    pub confinement: Option<Arc<crate::landlock::WriteConfinement>>,
    /// The job's whole environment (see [`crate::SandboxPolicy::child_env`]);
    /// `None` = the allow-list of [`crate::child_env::PASSED_ENV`] alone.
    pub env: Option<Vec<(std::ffi::OsString, std::ffi::OsString)>>,
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
    children: ChildGroups,
}

impl Default for JobManager {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for JobManager {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JobManager").field("jobs", &self.jobs().len()).finish()
    }
}

impl JobManager {
    /// A manager with no jobs and the default limits.
    pub fn new() -> Self {
        Self::with_max_timeout(MAX_JOB_TIMEOUT)
    }

    /// A manager whose jobs may ask for timeouts up to `max_timeout`.
    pub fn with_max_timeout(max_timeout: Duration) -> Self {
        Self::build(max_timeout, ChildGroups::default())
    }

    /// A manager recording its jobs' process groups in `children` (the
    /// session's record; see [`crate::child_groups`]).
    pub fn recording(children: ChildGroups) -> Self {
        Self::build(MAX_JOB_TIMEOUT, children)
    }

    fn build(max_timeout: Duration, children: ChildGroups) -> Self {
        Self {
            inner: Arc::new(Inner {
                jobs: Mutex::new(Vec::new()),
                queue: Arc::new(Queue::default()),
                max_timeout,
                children,
            }),
        }
    }

    /// The session's record of process groups, shared with the `bash` calls.
    pub fn children(&self) -> &ChildGroups {
        &self.inner.children
    }

    /// Queues, for the model, the jobs an earlier process of this session
    /// lost (see [`crate::child_groups::reap`]): each reported once as
    /// [`JobStatus::Lost`].
    pub fn report_lost(&self, lost: Vec<crate::child_groups::Group>) {
        if lost.is_empty() {
            return;
        }
        let mut results = lock(&self.inner.queue.results);
        for group in lost {
            results.push_back(JobResult {
                task_id: group.job.unwrap_or_default(),
                status: JobStatus::Lost,
                exit_code: None,
                command: group.command,
                result: LOST_NOTE.to_string(),
                elapsed: Duration::ZERO,
            });
        }
        drop(results);
        self.inner.queue.notify.notify_waiters();
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
        let timeout = options.timeout.unwrap_or(DEFAULT_JOB_TIMEOUT).min(self.inner.max_timeout);
        let mut jobs = lock(&self.inner.jobs);
        let running = jobs.iter().filter(|j| j.is_running()).count();
        if running >= MAX_RUNNING_JOBS {
            return Err(ToolError::Refused(format!(
                "{running} background jobs are already running (the most at once); wait for one \
                 or kill one with kill_background"
            )));
        }
        let runtime = tokio::runtime::Handle::try_current()
            .map_err(|_| ToolError::Failed("background jobs need a tokio runtime".to_string()))?;
        let id = fresh_id(&jobs);
        let env = options.env.clone().unwrap_or_else(|| crate::child_env::current_child_env(&[]));
        let (job, run) = Job::spawn(
            &id,
            command,
            workspace,
            options.detached,
            options.confinement.clone(),
            &env,
            &self.inner.children,
        )?;
        forget_old_jobs(&mut jobs);
        jobs.push(job.clone());
        drop(jobs);
        runtime.spawn(run.supervise(job, timeout, self.inner.queue.clone()));
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
        self.jobs().into_iter().filter(|j| j.status == JobStatus::Running).collect()
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
        if let Some(path) = job.log_file() {
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

    /// Kills every running job that is not detached, and what the session's
    /// commands left running (see [`crate::child_groups`]). The manager
    /// stays usable.
    pub fn shutdown(&self) {
        for job in lock(&self.inner.jobs).iter() {
            job.kill_now_unless_detached();
        }
        self.inner.children.kill_all();
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
            if known.is_empty() { "(none)".to_string() } else { known.join(", ") }
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

/// One line about a job: id, status, exit code, elapsed time, command.
fn summary_line(j: &JobSummary) -> String {
    let code = j.exit_code.map(|c| format!(" (exit code {c})")).unwrap_or_default();
    let detached = if j.detached { " [detached]" } else { "" };
    let when = if j.status == JobStatus::Running { "for" } else { "after" };
    format!(
        "[{}] {}{code} {when} {}{detached}: {}",
        j.id,
        j.status,
        human_elapsed(j.elapsed),
        j.command
    )
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
        let code = r.exit_code.map(|c| format!(" (exit code {c})")).unwrap_or_default();
        let after = match r.status {
            JobStatus::Lost => String::new(),
            _ => format!(" after {}", human_elapsed(r.elapsed)),
        };
        out.push_str(&format!(
            "[bg:{}] {}{code}{after}: {}\n{}\n",
            r.task_id,
            r.status,
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
    fn ids_are_eight_hex_digits_and_distinct() {
        let id = fresh_id(&[]);
        assert_eq!(id.len(), 8);
        assert!(id.chars().all(|c| c.is_ascii_hexdigit()), "{id}");
        assert_ne!(fresh_id(&[]), fresh_id(&[]));
    }
}
