//! Where a broker records its requests for other gateway processes, and
//! finds theirs ([`ApprovalRecords`]): nowhere with one gateway
//! (`approval/one_process.rs`), the shared database with several
//! (`approval/across_gateways.rs`). The broker is given one when the
//! gateway starts and never asks which.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use async_trait::async_trait;
use ferroclaw_store::ApprovalRequest;
use tokio_util::sync::CancellationToken;

use super::{ApprovalPrompt, Choice, Decided};
use crate::bus::InboundMessage;
use crate::channel::Channel;

/// The part of approvals other gateway processes see: requests recorded
/// where any process can show and answer them, and how each ended.
#[async_trait]
pub trait ApprovalRecords: Send + Sync {
    /// Records a request asked here; false (logged) when it could not be.
    async fn open(&self, request: &ApprovalRequest) -> bool;

    /// True when another process shows request `id` within a short wait.
    async fn shown_elsewhere(&self, id: &str) -> bool;

    /// The answer given to request `id` through another process; waits
    /// until there is one (with no other process: for ever).
    async fn answered_elsewhere(&self, id: &str) -> Choice;

    /// Records how request `id` ended, for the pages showing it elsewhere.
    async fn resolve(&self, id: &str, outcome: &str);

    /// The requests other processes asked in chat `(channel, chat_id)`,
    /// oldest first (shown again to a page that connects).
    async fn asked_elsewhere(&self, channel: &str, chat_id: &str) -> Vec<ApprovalPrompt>;

    /// Records `message`'s sender's answer to request `id`, which another
    /// process asked in the message's chat; the process waiting on it picks
    /// it up. `approver`: the sender may answer any chat's requests.
    async fn answer_asked_elsewhere(
        &self,
        message: &InboundMessage,
        id: &str,
        choice: &Choice,
        approver: bool,
    ) -> Decided;

    /// Shows on `web` the requests other processes asked in chats whose
    /// page is open here, and tells those pages how each ended, until `stop`.
    async fn show_asked_elsewhere(&self, web: Arc<dyn Channel>, stop: CancellationToken);
}

/// One request as recorded, while its turn waits: how it ended is recorded
/// once; a request that could not be recorded is neither shown nor
/// answered elsewhere.
pub(super) struct Recorded<'a> {
    records: Option<&'a dyn ApprovalRecords>,
    id: String,
    resolved: AtomicBool,
}

impl<'a> Recorded<'a> {
    /// Records `request` in `records`.
    pub(super) async fn open(records: &'a dyn ApprovalRecords, request: &ApprovalRequest) -> Self {
        let records = records.open(request).await.then_some(records);
        Recorded { records, id: request.id.clone(), resolved: AtomicBool::new(false) }
    }

    /// True when another process shows the request within a short wait.
    pub(super) async fn is_shown_soon(&self) -> bool {
        match self.records {
            Some(records) => records.shown_elsewhere(&self.id).await,
            None => false,
        }
    }

    /// Resolves with the answer given through another process.
    pub(super) async fn answer(&self) -> Choice {
        match self.records {
            Some(records) => records.answered_elsewhere(&self.id).await,
            None => std::future::pending().await,
        }
    }

    /// Records how the request ended (once).
    pub(super) async fn resolve(&self, outcome: &str) {
        if let Some(records) = self.records
            && !self.resolved.swap(true, Ordering::Relaxed)
        {
            records.resolve(&self.id, outcome).await;
        }
    }
}
