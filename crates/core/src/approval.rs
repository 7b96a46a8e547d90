//! Asking the user whether a tool call may run.

use async_trait::async_trait;
use ferroclaw_protocol::ToolCall;

use crate::permission::PermissionMode;

/// The user's answer to an approval request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Approval {
    /// Run this call.
    Yes,
    /// Run this call and, for the rest of the session, calls like it.
    AlwaysForSession,
    /// Run it, and allow calls like it in this project from now on (the rule
    /// is written to `.agent/config.toml`).
    AlwaysForProject,
    /// Do not run it; the text goes to the model.
    No(String),
}

/// The user's answer to a plan presented in plan mode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PlanVerdict {
    /// Carry it out, in this permission mode.
    Approved(PermissionMode),
    /// Revise it; the feedback goes to the model.
    Rejected(String),
}

/// Something that can ask the user: the REPL prompt, a chat channel, ...
#[async_trait]
pub trait Approver: Send + Sync {
    /// Asks whether `call` may run.
    async fn approve(&self, call: &ToolCall) -> Approval;

    /// Asks whether a plan may be carried out. Nobody to ask: rejected.
    async fn approve_plan(&self, _plan: &str) -> PlanVerdict {
        PlanVerdict::Rejected(
            "nobody can approve a plan in this non-interactive run; give the plan as your final answer".into(),
        )
    }
}

/// The approver of non-interactive runs (`-p` without `--yes`): nobody can be
/// asked, so every call that needs approval is refused with advice.
pub struct NoOneToAsk;

#[async_trait]
impl Approver for NoOneToAsk {
    async fn approve(&self, call: &ToolCall) -> Approval {
        Approval::No(format!(
            "{} needs the user's approval, and nobody can be asked in this non-interactive run. \
             Do without it if you can; otherwise tell the user to rerun with --yes, \
             --permission-mode accept-edits, or an --allowedTools rule for it",
            ferroclaw_tools::canonical_tool_name(&call.name)
        ))
    }
}
