//! Plan mode's way out: `exit_plan_mode(plan)` shows the plan to the user,
//! who approves it (the chosen permission mode takes over) or rejects it with
//! feedback (plan mode stays on).

use std::sync::Arc;

use async_trait::async_trait;
use ferroclaw_protocol::AgentEvent;
use ferroclaw_tools::tool_input::{parse, schema_for};
use ferroclaw_tools::{Tool, ToolContext, ToolError, ToolOutput};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use crate::approval::{Approver, PlanVerdict};
use crate::permission::{PermissionMode, Permissions};

/// `exit_plan_mode`'s input.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ExitPlanModeArgs {
    plan: String,
}

/// The `exit_plan_mode` tool.
pub struct ExitPlanModeTool {
    pub permissions: Arc<Permissions>,
    pub approver: Arc<dyn Approver>,
}

#[async_trait]
impl Tool for ExitPlanModeTool {
    fn name(&self) -> &str {
        "exit_plan_mode"
    }

    fn description(&self) -> &str {
        "In plan mode, presents your plan (concise Markdown: steps, files to change, how you \
         will check) for the user's approval. If approved, plan mode ends and you carry it \
         out; if not, you get their feedback and stay in plan mode."
    }

    fn input_schema(&self) -> Value {
        schema_for::<ExitPlanModeArgs>()
    }

    /// Presenting a plan changes nothing, so it runs in plan mode.
    fn read_only(&self) -> bool {
        true
    }

    async fn execute(&self, input: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        if self.permissions.mode() != PermissionMode::Plan {
            return Err(ToolError::Refused(
                "plan mode is not on; go ahead with the work (use todo_write to track steps)"
                    .into(),
            ));
        }
        let ExitPlanModeArgs { plan } = parse(input)?;
        let plan = plan.trim();
        if plan.is_empty() {
            return Err(ToolError::InvalidArguments("the plan is empty".into()));
        }
        ctx.emit(AgentEvent::PlanProposed { plan: plan.to_string() });
        match self.approver.approve_plan(plan).await {
            PlanVerdict::Approved(mode) => {
                self.permissions.set_mode(mode);
                Ok(ToolOutput::text(format!(
                    "The user approved the plan. Plan mode is off (permission mode: {}). Carry the plan out now, tracking its steps with todo_write.",
                    mode_name(mode)
                )))
            }
            PlanVerdict::Rejected(feedback) => Ok(ToolOutput::text(format!(
                "The user did not approve the plan: {feedback}. Plan mode stays on: revise the plan and call exit_plan_mode again."
            ))),
        }
    }
}

/// Claude Code's name of a permission mode (`bypassPermissions`), as hooks
/// and `--stream-format claude` show it.
pub fn claude_mode_name(mode: PermissionMode) -> &'static str {
    match mode {
        PermissionMode::Default => "default",
        PermissionMode::AcceptEdits => "acceptEdits",
        PermissionMode::Bypass => "bypassPermissions",
        PermissionMode::Plan => "plan",
    }
}

/// The mode as written in config.
pub fn mode_name(mode: PermissionMode) -> &'static str {
    match mode {
        PermissionMode::Default => "default",
        PermissionMode::AcceptEdits => "accept-edits",
        PermissionMode::Bypass => "bypass",
        PermissionMode::Plan => "plan",
    }
}
