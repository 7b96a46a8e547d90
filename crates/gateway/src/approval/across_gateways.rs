//! Approvals across gateway processes on one database ([`ApprovalTable`]):
//! the asking process records each request; a process whose web page is
//! open on the chat shows it
//! ([`ApprovalBroker::show_asked_elsewhere`](super::ApprovalBroker::show_asked_elsewhere)) and
//! records the answer given there, which the asking process picks up; how
//! it ended goes back to the pages that showed it. Each change is announced
//! with `LISTEN/NOTIFY`.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use ferroclaw_store::{Answered, ApprovalRequest, Changes, PgStore, StoreError};
use tokio_util::sync::CancellationToken;

use super::records::ApprovalRecords;
use super::{ApprovalPrompt, Choice, Decided};
use crate::bus::InboundMessage;
use crate::channel::Channel;

/// How long to wait before asking an unreachable database again.
const RETRY: Duration = Duration::from_secs(2);
/// How long a request no page here can show waits for another process to
/// show it before it counts as "nobody to ask".
const SHOW_WAIT: Duration = Duration::from_secs(3);

/// The `approvals` table, with the notifications of its changes.
pub(super) struct ApprovalTable {
    db: PgStore,
    changes: Changes,
}

impl ApprovalTable {
    /// The requests in `db`, whose changes `changes` announces.
    pub(super) fn new(db: PgStore, changes: Changes) -> Self {
        ApprovalTable { db, changes }
    }
}

#[async_trait]
impl ApprovalRecords for ApprovalTable {
    async fn open(&self, request: &ApprovalRequest) -> bool {
        match self.db.open_approval(request).await {
            Ok(()) => true,
            Err(e) => {
                tracing::warn!("approval request not shared with other gateways: {e}");
                false
            }
        }
    }

    async fn shown_elsewhere(&self, id: &str) -> bool {
        let deadline = tokio::time::Instant::now() + SHOW_WAIT;
        let mut changes = self.changes.fresh();
        loop {
            if self.db.approval_shown(id).await.unwrap_or(false) {
                return true;
            }
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            if left.is_zero() {
                return false;
            }
            changes.wait(left).await;
        }
    }

    async fn answered_elsewhere(&self, id: &str) -> Choice {
        let mut changes = self.changes.fresh();
        loop {
            if let Ok(Some((word, reason))) = self.db.approval_answer(id).await
                && let Some(choice) = Choice::parse(&word, &reason)
            {
                return choice;
            }
            changes.wait(crate::store_link::safety_poll()).await;
        }
    }

    async fn resolve(&self, id: &str, outcome: &str) {
        if let Err(e) = self.db.resolve_approval(id, outcome).await {
            tracing::warn!("approval outcome not shared: {e}");
        }
    }

    async fn asked_elsewhere(&self, channel: &str, chat_id: &str) -> Vec<ApprovalPrompt> {
        match self.db.approvals_to_show(channel, &[]).await {
            Ok(elsewhere) => {
                elsewhere.iter().filter(|r| r.chat_id == chat_id).map(prompt_of).collect()
            }
            Err(e) => {
                tracing::warn!("approvals asked by other gateways not read: {e}");
                Vec::new()
            }
        }
    }

    async fn answer_asked_elsewhere(
        &self,
        message: &InboundMessage,
        id: &str,
        choice: &Choice,
        approver: bool,
    ) -> Decided {
        let sender = &message.sender;
        let reason = match choice {
            Choice::Deny(r) => r.as_str(),
            _ => "",
        };
        let answered = self
            .db
            .answer_approval(
                id,
                &message.channel,
                &message.chat_id,
                |owner| owner == sender || approver,
                choice.word(),
                reason,
            )
            .await;
        match answered {
            Ok(Answered::Done { tool }) => {
                let outcome = choice.outcome();
                tracing::info!(chat = %message.chat_id, %tool, "approval: {outcome} (for another gateway)");
                Decided::Done { tool, outcome }
            }
            Ok(Answered::NotAllowed) => Decided::NotAllowed,
            Ok(Answered::Unknown) => Decided::Unknown,
            Err(e) => {
                tracing::warn!("approval answer not recorded: {e}");
                Decided::Unknown
            }
        }
    }

    async fn show_asked_elsewhere(&self, web: Arc<dyn Channel>, stop: CancellationToken) {
        let mut changes = self.changes.fresh();
        let mut shown = Shown::default();
        let mut failing = false;
        loop {
            match shown.round(&self.db, web.as_ref()).await {
                Ok(()) => failing = false,
                Err(e) if !failing => {
                    tracing::warn!("approvals from other gateways: {e}");
                    failing = true;
                }
                Err(_) => {}
            }
            let wait = if failing { RETRY } else { crate::store_link::safety_poll() };
            tokio::select! {
                () = stop.cancelled() => return,
                _ = changes.wait(wait) => {}
            }
        }
    }
}

/// What this process's web pages were shown of the requests other
/// processes asked.
#[derive(Default)]
struct Shown {
    /// Requests looked at (shown here or not).
    seen: Vec<String>,
    /// Those shown: id → chat.
    chats: HashMap<String, String>,
}

impl Shown {
    /// Shows the requests asked since the last round, and tells the pages
    /// that showed one how it ended.
    async fn round(&mut self, db: &PgStore, web: &dyn Channel) -> Result<(), StoreError> {
        for request in db.approvals_to_show("web", &self.seen).await? {
            self.seen.push(request.id.clone());
            if web.ask_approval(&request.chat_id, &prompt_of(&request)).await.is_ok() {
                db.mark_approval_shown(&request.id).await?;
            }
            // A page that opens later is shown it on connecting: it is told
            // how it ended too.
            self.chats.insert(request.id, request.chat_id);
        }
        if self.seen.is_empty() {
            return Ok(());
        }
        for (id, outcome) in db.approval_outcomes(&self.seen).await? {
            self.seen.retain(|s| *s != id);
            if let Some(chat) = self.chats.remove(&id)
                && let Err(e) = web.approval_resolved(&chat, &id, &outcome).await
            {
                tracing::debug!("{e}");
            }
        }
        Ok(())
    }
}

/// A request another process recorded, as a chat shows it.
fn prompt_of(request: &ApprovalRequest) -> ApprovalPrompt {
    ApprovalPrompt {
        id: request.id.clone(),
        tool: request.tool.clone(),
        input: request.prompt["input"].clone(),
        summary: request.prompt["summary"].as_str().unwrap_or_default().to_string(),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use async_trait::async_trait;
    use ferroclaw_core::Approval;

    use super::super::tests::call;
    use super::*;
    use crate::approval::{ApprovalBroker, DEFAULT_APPROVAL_TIMEOUT};
    use crate::bus::{MessageBus, OutboundMessage};
    use crate::channel::{Channel, ChannelError};
    use crate::outbox::Outbox;
    use crate::sessions::SessionKey;

    /// A web channel of one process: shows requests only when a page is open.
    struct Page {
        open: bool,
        prompts: Mutex<Vec<(String, ApprovalPrompt)>>,
        resolved: Mutex<Vec<(String, String)>>,
    }

    #[async_trait]
    impl Channel for Page {
        fn name(&self) -> &str {
            "web"
        }
        async fn start(&self, _: MessageBus, _: CancellationToken) -> Result<(), ChannelError> {
            Ok(())
        }
        async fn send(&self, _: OutboundMessage) -> Result<(), ChannelError> {
            Ok(())
        }
        async fn ask_approval(&self, chat: &str, p: &ApprovalPrompt) -> Result<(), ChannelError> {
            if !self.open {
                return Err(ChannelError::UnknownChat {
                    channel: "web".into(),
                    chat_id: chat.into(),
                });
            }
            self.prompts.lock().unwrap().push((chat.to_string(), p.clone()));
            Ok(())
        }
        async fn approval_resolved(&self, _: &str, id: &str, o: &str) -> Result<(), ChannelError> {
            self.resolved.lock().unwrap().push((id.to_string(), o.to_string()));
            Ok(())
        }
    }

    fn page(open: bool) -> Arc<Page> {
        Arc::new(Page { open, prompts: Mutex::default(), resolved: Mutex::default() })
    }

    async fn until(what: &str, mut done: impl FnMut() -> bool) {
        for _ in 0..400 {
            if done() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        panic!("{what}: not within 10 s");
    }

    #[tokio::test]
    async fn a_request_asked_in_one_gateway_is_shown_and_answered_where_the_page_is() {
        let Some(pg) = ferroclaw_testkit::PgCluster::shared() else { return };
        let url = pg.database("approvals_across_gateways");
        let db = PgStore::connect(&url, Default::default()).await.unwrap();
        // No polling to speak of (30 s): each step is seen through its notification.
        let wakeups = db.listen();
        // The turn runs in A, which has no page on the chat; B has it.
        let (a_page, b_page) = (page(false), page(true));
        let broker = |page: &Arc<Page>, holder: &str| {
            let outbox = Outbox::new([page.clone() as Arc<dyn Channel>]);
            let b = ApprovalBroker::new(outbox, DEFAULT_APPROVAL_TIMEOUT, Vec::new());
            Arc::new(b.with_database(db.with_holder(holder), wakeups.approvals()))
        };
        let (a, b) = (broker(&a_page, "a"), broker(&b_page, "b"));
        let stop = CancellationToken::new();
        tokio::spawn(b.clone().show_asked_elsewhere(stop.clone()));
        let asking = tokio::spawn(async move {
            let key = SessionKey::new("web", "c1");
            a.ask(&key, "owner", &call(), &CancellationToken::new()).await
        });
        until("B's page shows the request", || !b_page.prompts.lock().unwrap().is_empty()).await;
        let (chat, prompt) = b_page.prompts.lock().unwrap()[0].clone();
        assert_eq!((chat.as_str(), prompt.summary.as_str()), ("c1", "bash: rm -rf build"));
        let from = |sender: &str| InboundMessage::new("web", sender, "c1", "/approve");
        let stranger = b.answer(&from("mallory"), &prompt.id, Choice::Once).await;
        assert_eq!(stranger, Decided::NotAllowed);
        let done = b.answer(&from("owner"), &prompt.id, Choice::Chat).await;
        assert!(matches!(done, Decided::Done { .. }), "{done:?}");
        assert_eq!(asking.await.unwrap(), Approval::AlwaysForSession, "the turn in A goes on");
        let again = b.answer(&from("owner"), &prompt.id, Choice::Once).await;
        assert_eq!(again, Decided::Unknown, "answered once");
        let told = || b_page.resolved.lock().unwrap().iter().any(|(id, _)| *id == prompt.id);
        until("B's page is told how it ended", told).await;
        assert!(a_page.prompts.lock().unwrap().is_empty());
        stop.cancel();
    }

    #[tokio::test]
    async fn with_no_page_open_in_any_gateway_the_call_is_denied_saying_why() {
        let Some(pg) = ferroclaw_testkit::PgCluster::shared() else { return };
        let url = pg.database("approvals_nobody");
        let db = PgStore::connect(&url, Default::default()).await.unwrap();
        let outbox = Outbox::new([page(false) as Arc<dyn Channel>]);
        let wakeups = db.listen();
        let a = ApprovalBroker::new(outbox, DEFAULT_APPROVAL_TIMEOUT, Vec::new())
            .with_database(db.with_holder("a"), wakeups.approvals());
        let key = SessionKey::new("web", "c1");
        let Approval::No(why) = a.ask(&key, "owner", &call(), &CancellationToken::new()).await
        else {
            panic!("not denied");
        };
        assert!(why.contains("no chat page is open"), "{why}");
    }
}
