//! Approvals across gateway processes on one database: the asking process
//! records each request ([`Recorded`]); a process whose web page is open on
//! the chat shows it ([`ApprovalBroker::show_asked_elsewhere`]) and records
//! the answer given there ([`ApprovalBroker::decide_shared`]), which the
//! asking process picks up; how it ended goes back to the pages that showed
//! it. Each change is announced with `LISTEN/NOTIFY`.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use ferroclaw_store::{Answered, ApprovalRequest, Changes, PgStore};
use tokio_util::sync::CancellationToken;

use super::{ApprovalBroker, ApprovalPrompt, Choice, Decided};
use crate::bus::InboundMessage;

impl ApprovalBroker {
    /// Records the answer to a request another process asked; the process
    /// waiting on it picks it up.
    pub(super) async fn decide_shared(
        &self,
        db: &PgStore,
        message: &InboundMessage,
        id: &str,
        choice: Choice,
    ) -> Decided {
        let (channel, sender) = (&message.channel, &message.sender);
        let approver =
            self.approvers.iter().any(|a| a == sender || *a == format!("{channel}:{sender}"));
        let reason = match &choice {
            Choice::Deny(r) => r.as_str(),
            _ => "",
        };
        let answered = db
            .answer_approval(
                id,
                channel,
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

    /// Shows, on this process's web pages, the requests other gateway
    /// processes asked in chats whose page is open here, and tells those
    /// pages how each ended, until `stop` (nothing to do without a database).
    pub async fn show_asked_elsewhere(self: Arc<Self>, stop: CancellationToken) {
        let (Some((db, changes)), Some(web)) =
            (self.db.clone(), self.outbox.channel("web").cloned())
        else {
            return;
        };
        let mut changes = changes.fresh();
        // Requests looked at (shown here or not), and those shown: (id, chat).
        let mut seen: Vec<String> = Vec::new();
        let mut shown: HashMap<String, String> = HashMap::new();
        let mut failing = false;
        loop {
            let round = async {
                for request in db.approvals_to_show("web", &seen).await? {
                    seen.push(request.id.clone());
                    if web.ask_approval(&request.chat_id, &prompt_of(&request)).await.is_ok() {
                        db.mark_approval_shown(&request.id).await?;
                    }
                    // A page that opens later is shown it on connecting: it
                    // is told how it ended too.
                    shown.insert(request.id, request.chat_id);
                }
                if !seen.is_empty() {
                    for (id, outcome) in db.approval_outcomes(&seen).await? {
                        seen.retain(|s| *s != id);
                        if let Some(chat) = shown.remove(&id)
                            && let Err(e) = web.approval_resolved(&chat, &id, &outcome).await
                        {
                            tracing::debug!("{e}");
                        }
                    }
                }
                Ok::<(), ferroclaw_store::StoreError>(())
            };
            match round.await {
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

/// A request another process recorded, as a chat shows it.
pub(super) fn prompt_of(request: &ApprovalRequest) -> ApprovalPrompt {
    ApprovalPrompt {
        id: request.id.clone(),
        tool: request.tool.clone(),
        input: request.prompt["input"].clone(),
        summary: request.prompt["summary"].as_str().unwrap_or_default().to_string(),
    }
}

/// How long to wait before asking an unreachable database again.
const RETRY: Duration = Duration::from_secs(2);
/// How long a request no page here can show waits for another process to
/// show it before it counts as "nobody to ask".
const SHOW_WAIT: Duration = Duration::from_secs(3);

/// A request recorded in the shared database, while its turn waits.
pub(super) struct Recorded<'a> {
    db: &'a PgStore,
    changes: &'a Changes,
    id: &'a str,
    resolved: AtomicBool,
}

impl<'a> Recorded<'a> {
    /// Request `id`, recorded in `db`, whose changes `changes` announces.
    pub(super) fn new(db: &'a PgStore, changes: &'a Changes, id: &'a str) -> Self {
        Recorded { db, changes, id, resolved: AtomicBool::new(false) }
    }

    /// True when another process showed the request within [`SHOW_WAIT`].
    pub(super) async fn is_shown_soon(&self) -> bool {
        let deadline = tokio::time::Instant::now() + SHOW_WAIT;
        let mut changes = self.changes.fresh();
        loop {
            if self.db.approval_shown(self.id).await.unwrap_or(false) {
                return true;
            }
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            if left.is_zero() {
                return false;
            }
            changes.wait(left).await;
        }
    }

    /// Resolves with the answer another process recorded.
    pub(super) async fn answer(&self) -> Choice {
        let mut changes = self.changes.fresh();
        loop {
            if let Ok(Some((word, reason))) = self.db.approval_answer(self.id).await
                && let Some(choice) = Choice::parse(&word, &reason)
            {
                return choice;
            }
            changes.wait(crate::store_link::safety_poll()).await;
        }
    }

    /// Records how the request ended (once), for the pages showing it elsewhere.
    pub(super) async fn resolve(&self, outcome: &str) {
        if self.resolved.swap(true, Ordering::Relaxed) {
            return;
        }
        if let Err(e) = self.db.resolve_approval(self.id, outcome).await {
            tracing::warn!("approval outcome not shared: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use async_trait::async_trait;
    use ferroclaw_core::Approval;

    use super::super::tests::call;
    use super::*;
    use crate::approval::DEFAULT_APPROVAL_TIMEOUT;
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
