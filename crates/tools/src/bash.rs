//! `bash`: runs a shell command in the workspace, in its own process group,
//! with a timeout, cancellation, a deny list and a working directory that
//! persists between calls.

use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;
use tokio::io::AsyncReadExt;
use tokio::time::Instant;

use crate::bash_output::Capture;
use crate::deny::dangerous_command;
use crate::landlock::WriteConfinement;
use crate::tool_input::{AtLeastOne, parse, schema_for};
use crate::{Sandbox, Tool, ToolContext, ToolError, ToolOutput};

/// Timeout when none is given, in milliseconds (Claude Code's Bash default).
pub const DEFAULT_TIMEOUT_MS: u64 = 120_000;
/// The longest timeout a call may ask for, in milliseconds (Claude Code's cap).
pub const MAX_TIMEOUT_MS: u64 = 600_000;
/// After the shell exits, how long to keep reading output that background
/// children still write to the shared pipe.
const DRAIN_AFTER_EXIT: Duration = Duration::from_millis(250);

/// `bash`'s input.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct BashArgs {
    command: String,
    /// In MILLISECONDS (default 120000).
    #[schemars(range(max = MAX_TIMEOUT_MS))]
    timeout: Option<AtLeastOne>,
    /// What it does in a few words, shown to the user.
    #[allow(dead_code, reason = "the front ends show it from the call's input")]
    description: Option<String>,
}

/// Runs shell commands; `cd` in one call carries over to the next.
#[derive(Debug, Default)]
pub struct BashTool {
    /// The shell's working directory after the last call; `None` = the workspace.
    cwd: Mutex<Option<PathBuf>>,
}

impl BashTool {
    /// A bash tool starting in the workspace.
    pub fn new() -> Self {
        Self::default()
    }
}

/// How a run ended.
enum End {
    Exited(std::process::ExitStatus),
    TimedOut,
    Cancelled,
}

#[async_trait]
impl Tool for BashTool {
    fn name(&self) -> &str {
        "bash"
    }

    fn description(&self) -> &str {
        "Runs a command with `bash -c` in the workspace; returns stdout and stderr merged, and \
         the exit code. `cd` persists between calls (within the workspace). On timeout the \
         command and all it started are killed. Output over 30000 characters keeps its start \
         and end. Catastrophic commands (rm -rf /, mkfs, ...) are refused. Prefer read, grep, \
         glob and edit to cat, grep, find and sed; no interactive programs."
    }

    fn input_schema(&self) -> Value {
        schema_for::<BashArgs>()
    }

    async fn execute(&self, input: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let args: BashArgs = parse(input)?;
        let command = args.command.as_str();
        if command.trim().is_empty() {
            return Err(ToolError::InvalidArguments("command is empty".to_string()));
        }
        let mut notes = Vec::new();
        let timeout_ms = match args.timeout.map_or(DEFAULT_TIMEOUT_MS, AtLeastOne::get) {
            ms if ms > MAX_TIMEOUT_MS => {
                notes
                    .push(format!("timeout {ms} ms is over the maximum; used {MAX_TIMEOUT_MS} ms"));
                MAX_TIMEOUT_MS
            }
            ms => ms,
        };
        let sandbox = Sandbox::from_context(ctx);
        let workspace = sandbox.workspace().to_path_buf();
        let cwd = self.current_dir(&sandbox, &mut notes);
        if let Some(reason) = dangerous_command(command, &workspace, &cwd) {
            return Err(ToolError::Refused(format!(
                "refused before running: {reason}. If this is really intended, ask the user to run it themselves."
            )));
        }

        let cwd_file = tempfile::NamedTempFile::new().map_err(|e| {
            ToolError::io("cannot create a temp file for the shell's working directory", e)
        })?;
        let script = format!(
            "trap 'pwd -P > {} 2>/dev/null' EXIT\n{command}",
            shell_quote(&cwd_file.path().to_string_lossy())
        );
        let (end, output) =
            run(command, &script, &cwd, Duration::from_millis(timeout_ms), ctx).await?;

        if let End::Exited(_) = end {
            self.remember_cwd(cwd_file.path(), &sandbox, &mut notes);
        }
        let mut text = output.render();
        if text.is_empty() {
            text.push_str("(no output)");
        }
        if !text.ends_with('\n') {
            text.push('\n');
        }
        let (status, is_error) = match end {
            End::Exited(status) => {
                match (status.code(), std::os::unix::process::ExitStatusExt::signal(&status)) {
                    (Some(code), _) => (format!("[exit code {code}]"), code != 0),
                    (None, Some(signal)) => (format!("[killed by signal {signal}]"), true),
                    (None, None) => ("[exited]".to_string(), true),
                }
            }
            End::TimedOut => (
                format!(
                    "[timed out after {}; the command and every process it started were killed]",
                    human_duration(timeout_ms)
                ),
                true,
            ),
            End::Cancelled => (
                "[cancelled by the user; the command and every process it started were killed]"
                    .to_string(),
                true,
            ),
        };
        text.push_str(&status);
        for note in notes {
            text.push_str(&format!("\n[note: {note}]"));
        }
        Ok(ToolOutput { is_error, ..ToolOutput::text(text) })
    }
}

impl BashTool {
    /// The folder the next command runs in: the remembered one if it still
    /// exists inside the sandbox, else the workspace.
    fn current_dir(&self, sandbox: &Sandbox, notes: &mut Vec<String>) -> PathBuf {
        let workspace = sandbox.workspace().to_path_buf();
        let mut slot = self.cwd.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        match slot.as_ref() {
            Some(dir) if dir.is_dir() && sandbox.contains(dir) => dir.clone(),
            Some(dir) => {
                notes.push(format!(
                    "the previous working directory {} is gone or outside the sandbox; running in the workspace {}",
                    dir.display(),
                    workspace.display()
                ));
                *slot = None;
                workspace
            }
            None => workspace,
        }
    }

    /// Stores the shell's final directory, or resets to the workspace when it
    /// is outside the sandbox or inside a folder holding protected files
    /// (`.git`, `.agent`, ...): the permission gate judges a command's paths
    /// from the workspace, and from there `config` is not `.git/config`.
    fn remember_cwd(&self, cwd_file: &Path, sandbox: &Sandbox, notes: &mut Vec<String>) {
        let Ok(written) =
            crate::own_file::read_text(cwd_file, crate::repo_file::MAX_REPO_FILE_BYTES)
        else {
            return;
        };
        let dir = PathBuf::from(written.trim_end_matches('\n'));
        if dir.as_os_str().is_empty() {
            return;
        }
        let mut slot = self.cwd.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let protected = sandbox.roots().iter().find_map(|root| {
            let rel = dir.strip_prefix(root).ok()?;
            rel.components().find(|c| {
                crate::PROTECTED_FOLDERS.iter().any(|f| c.as_os_str() == std::ffi::OsStr::new(f))
            })
        });
        if let Some(folder) = protected {
            notes.push(format!(
                "the shell ended in {}, inside {}, which holds files the agent may not write; the next command runs in the workspace {}",
                dir.display(),
                folder.as_os_str().to_string_lossy(),
                sandbox.workspace().display()
            ));
            *slot = None;
        } else if sandbox.contains(&dir) {
            *slot = (dir != sandbox.workspace()).then_some(dir);
        } else {
            notes.push(format!(
                "the shell ended in {}, outside the workspace; the next command runs in {}",
                dir.display(),
                sandbox.workspace().display()
            ));
            *slot = None;
        }
    }
}

/// Kills a process group when dropped while armed, so an abandoned call
/// (its future dropped) leaves no processes behind.
pub(crate) struct GroupKill(Option<i32>);

impl GroupKill {
    /// The process group id while armed.
    pub(crate) fn pgid(&self) -> Option<i32> {
        self.0
    }

    /// Leaves the group alone from now on (it ended, or must outlive us).
    pub(crate) fn disarm(&mut self) {
        self.0 = None;
    }

    /// Sends SIGKILL to the whole group, once.
    pub(crate) fn kill(&mut self) {
        if let Some(pgid) = self.0.take() {
            kill_group(pgid);
        }
    }
}

/// Sends SIGKILL to every process in group `pgid`.
pub(crate) fn kill_group(pgid: i32) {
    // SAFETY: killpg only sends a signal; pgid is a group we created.
    unsafe {
        libc::killpg(pgid, libc::SIGKILL);
    }
}

impl Drop for GroupKill {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Spawns `bash -c script` in `cwd` in a new process group, stdin closed,
/// stdout and stderr both written to `output` (a pipe or a file), writes
/// confined by `confinement` when given, with exactly the environment `env`
/// (see [`crate::SandboxPolicy::child_env`]) plus pager settings. The shell
/// dies with ferroclaw unless it `outlives` it (a detached job). The guard
/// kills the whole group when dropped while armed.
pub(crate) fn spawn_in_group(
    script: &str,
    cwd: &Path,
    output: OwnedFd,
    confinement: Option<Arc<WriteConfinement>>,
    env: &[(std::ffi::OsString, std::ffi::OsString)],
    outlives: bool,
) -> Result<(tokio::process::Child, GroupKill), ToolError> {
    let output_err = output
        .try_clone()
        .map_err(|e| ToolError::io("cannot duplicate the output descriptor", e))?;
    let mut launch = crate::process::Launch::new("bash", cwd)
        .arg("-c")
        .arg(script)
        .env_policy(crate::process::EnvPolicy::Exact(env.to_vec()))
        .env("PAGER", "cat")
        .env("GIT_PAGER", "cat")
        .env("GIT_TERMINAL_PROMPT", "0")
        .in_own_group()
        .confined(confinement);
    if outlives {
        launch = launch.outlives_ferroclaw();
    }
    let mut command = launch.tokio_command();
    command.stdin(Stdio::null()).stdout(output).stderr(output_err);
    // Spawned where it stays tied to a thread that lives as long as we do;
    // the command (our copies of the output's write end) is dropped there.
    let child = crate::process::spawn(move || command.spawn())
        .map_err(|e| ToolError::io("cannot start bash", e))?;
    let group = GroupKill(child.id().and_then(|id| i32::try_from(id).ok()));
    Ok((child, group))
}

/// Spawns `bash -c script` in its own process group with stdout and stderr
/// on one pipe, and reads it until exit, timeout or cancel.
async fn run(
    command: &str,
    script: &str,
    cwd: &Path,
    timeout: Duration,
    ctx: &ToolContext,
) -> Result<(End, Capture), ToolError> {
    let (reader, writer) = std::io::pipe().map_err(|e| ToolError::io("cannot create a pipe", e))?;
    let env = ctx.sandbox.child_env();
    let (mut child, mut group) =
        spawn_in_group(script, cwd, OwnedFd::from(writer), ctx.write_confinement()?, &env, false)?;
    if let Some(pgid) = group.pgid() {
        ctx.children.record(pgid, None, command);
    }
    let mut pipe = tokio::net::unix::pipe::Receiver::from_owned_fd(OwnedFd::from(reader))
        .map_err(|e| ToolError::io("cannot read the command's output", e))?;

    let mut capture = Capture::default();
    let mut buf = vec![0u8; 64 * 1024];
    let deadline = Instant::now() + timeout;
    let mut exited: Option<std::process::ExitStatus> = None;
    let mut drain_until = deadline;
    let mut eof = false;
    let end = loop {
        tokio::select! {
            read = pipe.read(&mut buf), if !eof => match read {
                Ok(0) | Err(_) => eof = true,
                Ok(n) => capture.push(&buf[..n]),
            },
            status = child.wait(), if exited.is_none() => {
                let status = status.map_err(|e| ToolError::io("cannot wait for bash", e))?;
                exited = Some(status);
                drain_until = deadline.min(Instant::now() + DRAIN_AFTER_EXIT);
            }
            _ = tokio::time::sleep_until(drain_until), if exited.is_some() => {
                capture.note_background();
                break End::Exited(exited.unwrap_or_default());
            }
            _ = tokio::time::sleep_until(deadline), if exited.is_none() => break End::TimedOut,
            _ = ctx.cancel.cancelled() => break End::Cancelled,
        }
        if let (Some(status), true) = (exited, eof) {
            break End::Exited(status);
        }
    };
    let pgid = group.pgid();
    match end {
        // Background children of a finished shell keep running on purpose
        // (`server &`), recorded, until the session ends.
        End::Exited(_) => group.disarm(),
        End::TimedOut | End::Cancelled => {
            group.kill();
            let _ = child.wait().await;
            // Whatever the killed processes had already written.
            let _ = tokio::time::timeout(Duration::from_millis(100), async {
                while let Ok(n) = pipe.read(&mut buf).await {
                    if n == 0 {
                        break;
                    }
                    capture.push(&buf[..n]);
                }
            })
            .await;
        }
    }
    if let Some(pgid) = pgid {
        ctx.children.ended(pgid);
    }
    Ok((end, capture))
}

/// `s` in single quotes for the shell.
fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// `ms` as seconds or minutes for people.
fn human_duration(ms: u64) -> String {
    match ms {
        ms if ms % 60_000 == 0 => format!("{} min", ms / 60_000),
        ms if ms % 1000 == 0 => format!("{} s", ms / 1000),
        ms => format!("{:.1} s", ms as f64 / 1000.0),
    }
}
