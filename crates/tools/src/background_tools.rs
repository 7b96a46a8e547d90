//! The model's handles on background jobs: `background_run`,
//! `check_background` and `kill_background`, each holding a [`JobManager`]
//! clone.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Value, json};

use crate::args::{flag, optional_positive, optional_str, required_str};
use crate::background::{JobManager, JobOptions, JobStatus};
use crate::{Sandbox, Tool, ToolContext, ToolError, ToolOutput};

/// The three background-job tools sharing `manager`: `background_run`,
/// `check_background`, `kill_background`.
pub fn background_tools(manager: &JobManager) -> Vec<Arc<dyn Tool>> {
    vec![
        Arc::new(BackgroundRunTool(manager.clone())),
        Arc::new(CheckBackgroundTool(manager.clone())),
        Arc::new(KillBackgroundTool(manager.clone())),
    ]
}

/// `background_run`: starts a command and returns its job id at once.
#[derive(Debug, Clone)]
pub struct BackgroundRunTool(pub JobManager);

/// `check_background`: one job's status and output, or all jobs.
#[derive(Debug, Clone)]
pub struct CheckBackgroundTool(pub JobManager);

/// `kill_background`: kills a job and everything it started.
#[derive(Debug, Clone)]
pub struct KillBackgroundTool(pub JobManager);

#[async_trait]
impl Tool for BackgroundRunTool {
    fn name(&self) -> &str {
        "background_run"
    }

    fn description(&self) -> &str {
        "Starts a long command (build, test suite, server, download) with `bash -c` in the \
         workspace and returns a job id at once, so you can keep working meanwhile. When the \
         job ends, its status, exit code and the start and end of its output are given to you \
         in a <background-results> block before your next turn; you do not need to poll. Use \
         check_background(id) to see output so far, kill_background(id) to stop it. `timeout` \
         is in SECONDS (default 1800 = 30 minutes); on timeout the command and everything it \
         started are killed. Jobs are killed when the session ends unless `detached` is true \
         (then output goes to .agent/jobs/<id>.log and the job outlives the session). The same \
         deny list as bash applies. Use bash for quick commands.\n\
         Example: {\"command\": \"cargo test --workspace 2>&1\", \"timeout\": 1200, \
         \"description\": \"Run the whole test suite\"}"
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "command": {"type": "string", "description": "The command line, run with bash -c."},
                "timeout": {"type": "integer", "minimum": 1, "description": "Timeout in SECONDS (default 1800)."},
                "detached": {"type": "boolean", "description": "Keep running after the session ends (default false)."},
                "description": {"type": "string", "description": "A few words saying what the command does, shown to the user."}
            },
            "required": ["command"],
            "additionalProperties": false
        })
    }

    async fn execute(&self, input: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let command = required_str(&input, "command")?;
        let max = self.0.max_timeout();
        let mut note = String::new();
        let timeout = optional_positive(&input, "timeout")?.map(Duration::from_secs);
        if let Some(asked) = timeout
            && asked > max
        {
            note = format!(
                "\n[note: timeout {} s is over the maximum; used {} s]",
                asked.as_secs(),
                max.as_secs()
            );
        }
        let detached = flag(&input, "detached", false);
        let sandbox = Sandbox::from_context(ctx);
        let id = self.0.start(
            command,
            sandbox.workspace(),
            JobOptions {
                timeout,
                detached,
                confinement: ctx.write_confinement()?,
                env: Some(ctx.sandbox.child_env()),
            },
        )?;
        let survives = if detached {
            format!(
                " It is detached: it keeps running after the session; output in .agent/jobs/{id}.log."
            )
        } else {
            String::new()
        };
        Ok(ToolOutput::text(format!(
            "Started background job {id}.{survives} Its result will be reported when it ends; \
             check_background(\"{id}\") shows its output so far.{note}"
        )))
    }
}

#[async_trait]
impl Tool for CheckBackgroundTool {
    fn name(&self) -> &str {
        "check_background"
    }

    fn description(&self) -> &str {
        "Shows a background job's status (running, completed, timeout, error, killed), exit \
         code, elapsed time and its output so far (long output keeps its start and end). \
         Without `id`, lists every job of this session, one line each.\n\
         Example: {\"id\": \"a1b2c3d4\"}"
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "id": {"type": "string", "description": "The job id from background_run; omit to list all jobs."}
            },
            "additionalProperties": false
        })
    }

    fn read_only(&self) -> bool {
        true
    }

    async fn execute(&self, input: Value, _ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        self.0.check(optional_str(&input, "id")).map(ToolOutput::text)
    }
}

#[async_trait]
impl Tool for KillBackgroundTool {
    fn name(&self) -> &str {
        "kill_background"
    }

    fn description(&self) -> &str {
        "Kills a background job and every process it started (its whole process group). \
         Killing a job that already ended changes nothing.\n\
         Example: {\"id\": \"a1b2c3d4\"}"
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "id": {"type": "string", "description": "The job id from background_run."}
            },
            "required": ["id"],
            "additionalProperties": false
        })
    }

    async fn execute(&self, input: Value, _ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let id = required_str(&input, "id")?;
        let before = self.0.job(id)?;
        let job = self.0.kill(id).await?;
        let text = match job.status {
            JobStatus::Killed if before.status == JobStatus::Running => {
                format!("Killed background job {id} and every process it started.")
            }
            JobStatus::Running => format!(
                "Asked job {id} to stop; it has not ended yet. check_background(\"{id}\") shows it."
            ),
            status => format!("Background job {id} had already ended ({status}); nothing to kill."),
        };
        Ok(ToolOutput::text(text))
    }
}
