//! Approvals asked of the editor: `session/request_permission`, its four
//! option kinds mapped onto [`Approval`].

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;
use ferroclaw_core::{Approval, Approver, PermissionMode, PlanVerdict};
use ferroclaw_protocol::ToolCall;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::rpc::Peer;
use crate::wire;

/// Asks the client whether a call may run. A cancelled prompt (or a client
/// answering `cancelled`) refuses the call.
pub struct ClientApprover {
    peer: Arc<Peer>,
    session_id: Mutex<String>,
    workspace: PathBuf,
    /// The running prompt's cancel token.
    cancel: Arc<Mutex<CancellationToken>>,
    /// Calls shown by a permission request (their start is an update).
    announced: Arc<Mutex<HashSet<String>>>,
}

impl ClientApprover {
    /// An approver for the session opened next (its id is set once known).
    pub fn new(
        peer: Arc<Peer>,
        workspace: PathBuf,
        cancel: Arc<Mutex<CancellationToken>>,
        announced: Arc<Mutex<HashSet<String>>>,
    ) -> ClientApprover {
        ClientApprover { peer, session_id: Default::default(), workspace, cancel, announced }
    }

    /// Sets the session the requests name.
    pub fn set_session(&self, id: &str) {
        *self.session_id.lock().unwrap_or_else(PoisonError::into_inner) = id.to_string();
    }

    /// Sends a permission request; the chosen option id, or `None` when the
    /// prompt was cancelled or the client could not answer.
    async fn ask(&self, tool_call: Value) -> Option<String> {
        let session = self.session_id.lock().unwrap_or_else(PoisonError::into_inner).clone();
        let cancel = self.cancel.lock().unwrap_or_else(PoisonError::into_inner).clone();
        let request = self
            .peer
            .request("session/request_permission", wire::permission_request(&session, tool_call));
        tokio::select! {
            answer = request => match answer {
                Ok(result) => wire::permission_outcome(&result),
                Err(e) => {
                    tracing::warn!("acp: session/request_permission failed: {e}");
                    None
                }
            },
            // The client answers `cancelled` after `session/cancel`; do not
            // wait for it.
            () = cancel.cancelled() => None,
        }
    }
}

/// What each option means for a tool call.
pub fn approval_for(option: Option<&str>) -> Approval {
    match option {
        Some("allow_once") => Approval::Yes,
        Some("allow_always") => Approval::AlwaysForSession,
        Some("reject_always") => {
            Approval::No("the user declined this call and calls like it; do not retry them".into())
        }
        Some(_) => Approval::No("the user declined this call".into()),
        None => Approval::No("the user cancelled the request".into()),
    }
}

#[async_trait]
impl Approver for ClientApprover {
    async fn approve(&self, call: &ToolCall) -> Approval {
        // The call is shown first (pending), then the question about it.
        let tool_call =
            wire::tool_call(&self.workspace, &call.id, &call.name, &call.input, "pending");
        let mut shown = tool_call.clone();
        shown["sessionUpdate"] = json!("tool_call");
        let session = self.session_id.lock().unwrap_or_else(PoisonError::into_inner).clone();
        self.peer.notify("session/update", wire::update(&session, shown));
        self.announced.lock().unwrap_or_else(PoisonError::into_inner).insert(call.id.clone());
        let question = json!({"toolCallId": call.id});
        approval_for(self.ask(question).await.as_deref())
    }

    async fn approve_plan(&self, plan: &str) -> PlanVerdict {
        let tool_call = json!({
            "toolCallId": format!("plan-{}", plan.len()),
            "title": "Carry out this plan (always: accept edits while doing so)",
            "kind": "think",
            "status": "pending",
            "content": [wire::text_content(plan)],
        });
        match self.ask(tool_call).await.as_deref() {
            Some("allow_once") => PlanVerdict::Approved(PermissionMode::Default),
            Some("allow_always") => PlanVerdict::Approved(PermissionMode::AcceptEdits),
            Some(_) => PlanVerdict::Rejected("the user wants a different plan".into()),
            None => PlanVerdict::Rejected("the user cancelled the request".into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_option_kind_maps_onto_an_approval() {
        assert_eq!(approval_for(Some("allow_once")), Approval::Yes);
        assert_eq!(approval_for(Some("allow_always")), Approval::AlwaysForSession);
        assert!(
            matches!(approval_for(Some("reject_once")), Approval::No(r) if r.contains("declined"))
        );
        assert!(
            matches!(approval_for(Some("reject_always")), Approval::No(r) if r.contains("do not retry"))
        );
        assert!(matches!(approval_for(None), Approval::No(r) if r.contains("cancelled")));
    }
}
