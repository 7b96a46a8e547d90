//! The model's handles on background jobs: `background_run`,
//! `check_background` and `kill_background`, each holding a [`JobManager`]
//! clone.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use crate::background::{JobManager, JobOptions, JobStatus};
use crate::tool_input::{AtLeastOne, parse, schema_for};
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

/// `background_run`'s input.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct BackgroundRunArgs {
    command: String,
    /// In SECONDS (default 1800).
    timeout: Option<AtLeastOne>,
    /// Outlive the session (default false).
    detached: Option<bool>,
    /// What it does in a few words, shown to the user.
    #[allow(dead_code, reason = "the front ends show it from the call's input")]
    description: Option<String>,
}

/// `check_background`'s input.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct CheckBackgroundArgs {
    id: Option<String>,
}

/// `kill_background`'s input.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct KillBackgroundArgs {
    id: String,
}

#[async_trait]
impl Tool for BackgroundRunTool {
    fn name(&self) -> &str {
        "background_run"
    }

    fn description(&self) -> &str {
        "Starts a long command (build, tests, server) with `bash -c` in the workspace and \
         returns a job id at once. When it ends, its status, exit code and output arrive in a \
         <background-results> block before your next turn: no need to poll. Jobs end with the \
         session unless `detached` (output then goes to .agent/jobs/ID.log). bash's deny list \
         applies."
    }

    fn input_schema(&self) -> Value {
        schema_for::<BackgroundRunArgs>()
    }

    async fn execute(&self, input: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let args: BackgroundRunArgs = parse(input)?;
        let command = args.command.as_str();
        let max = self.0.max_timeout();
        let mut note = String::new();
        let timeout = args.timeout.map(|s| Duration::from_secs(s.get()));
        if let Some(asked) = timeout
            && asked > max
        {
            note = format!(
                "\n[note: timeout {} s is over the maximum; used {} s]",
                asked.as_secs(),
                max.as_secs()
            );
        }
        let detached = args.detached.unwrap_or(false);
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
        "Shows a background job's status, exit code, elapsed time and output so far (start and \
         end of long output); without `id`, lists this session's jobs."
    }

    fn input_schema(&self) -> Value {
        schema_for::<CheckBackgroundArgs>()
    }

    fn read_only(&self) -> bool {
        true
    }

    async fn execute(&self, input: Value, _ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let args: CheckBackgroundArgs = parse(input)?;
        self.0.check(args.id.as_deref()).map(ToolOutput::text)
    }
}

#[async_trait]
impl Tool for KillBackgroundTool {
    fn name(&self) -> &str {
        "kill_background"
    }

    fn description(&self) -> &str {
        "Kills a background job and every process it started; a job that already ended is left \
         as it is."
    }

    fn input_schema(&self) -> Value {
        schema_for::<KillBackgroundArgs>()
    }

    async fn execute(&self, input: Value, _ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let KillBackgroundArgs { id } = parse(input)?;
        let id = id.as_str();
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
