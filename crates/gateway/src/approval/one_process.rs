//! Approvals of one gateway on its own files: no other process shows or
//! answers its requests, so nothing is recorded beyond the broker's own
//! waiting list. (There is no approvals file: a request lives as long as
//! the turn that waits on it, and a restart ends both.)

use std::sync::Arc;

use async_trait::async_trait;
use ferroclaw_store::ApprovalRequest;
use tokio_util::sync::CancellationToken;

use super::records::ApprovalRecords;
use super::{ApprovalPrompt, Choice, Decided};
use crate::bus::InboundMessage;
use crate::channel::Channel;

/// No other gateway process.
pub(super) struct OneProcess;

#[async_trait]
impl ApprovalRecords for OneProcess {
    async fn open(&self, _: &ApprovalRequest) -> bool {
        true
    }

    async fn shown_elsewhere(&self, _: &str) -> bool {
        false
    }

    async fn answered_elsewhere(&self, _: &str) -> Choice {
        std::future::pending().await
    }

    async fn resolve(&self, _: &str, _: &str) {}

    async fn asked_elsewhere(&self, _: &str, _: &str) -> Vec<ApprovalPrompt> {
        Vec::new()
    }

    async fn answer_asked_elsewhere(
        &self,
        _: &InboundMessage,
        _: &str,
        _: &Choice,
        _: bool,
    ) -> Decided {
        Decided::Unknown
    }

    async fn show_asked_elsewhere(&self, _: Arc<dyn Channel>, _: CancellationToken) {}
}
