//! The broker in one process: who may answer, what each answer grants, and
//! what a request that nobody answers becomes.

use super::*;
use crate::bus::MessageBus;
use crate::bus::OutboundMessage;
use crate::channel::Channel;

/// A channel that records the prompts and resolutions it is asked to show.
#[derive(Default)]
struct Recorder {
    prompts: Mutex<Vec<(String, ApprovalPrompt)>>,
    resolved: Mutex<Vec<(String, String)>>,
}

#[async_trait]
impl Channel for Recorder {
    fn name(&self) -> &str {
        "rec"
    }
    async fn start(&self, _: MessageBus, _: CancellationToken) -> Result<(), ChannelError> {
        Ok(())
    }
    async fn send(&self, _: OutboundMessage) -> Result<(), ChannelError> {
        Ok(())
    }
    async fn ask_approval(&self, chat_id: &str, p: &ApprovalPrompt) -> Result<(), ChannelError> {
        self.prompts.lock().unwrap().push((chat_id.to_string(), p.clone()));
        Ok(())
    }
    async fn approval_resolved(
        &self,
        _: &str,
        id: &str,
        outcome: &str,
    ) -> Result<(), ChannelError> {
        self.resolved.lock().unwrap().push((id.to_string(), outcome.to_string()));
        Ok(())
    }
}

fn broker(timeout: Duration) -> (Arc<ApprovalBroker>, Arc<Recorder>) {
    let rec = Arc::new(Recorder::default());
    let outbox = Outbox::new([rec.clone() as Arc<dyn Channel>]);
    (Arc::new(ApprovalBroker::new(outbox, timeout, vec!["rec:boss".into()])), rec)
}

pub(super) fn call() -> ToolCall {
    ToolCall {
        id: "c1".into(),
        name: "bash".into(),
        input: serde_json::json!({"command": "rm -rf build"}),
    }
}

/// Starts asking in `rec:chat` for `ann`; returns the task and the request id.
async fn asking(
    b: &Arc<ApprovalBroker>,
    rec: &Recorder,
    chat: &str,
    cancel: CancellationToken,
) -> (tokio::task::JoinHandle<Approval>, String) {
    let before = rec.prompts.lock().unwrap().len();
    let (b2, key) = (b.clone(), SessionKey::new("rec", chat));
    let task = tokio::spawn(async move { b2.ask(&key, "ann", &call(), &cancel).await });
    while rec.prompts.lock().unwrap().len() == before {
        tokio::task::yield_now().await;
    }
    let id = rec.prompts.lock().unwrap()[before].1.id.clone();
    (task, id)
}

/// A request is shown in its chat and listed there once; a stranger
/// changes nothing, the owner's answer lets the turn go on and the chat is
/// told how it ended, and it is answered once; a cancelled turn's request
/// is gone. The same whether requests are recorded for other gateway
/// processes (the database) or not (one gateway).
async fn asks_in_the_chat_and_takes_the_owners_answer(b: Arc<ApprovalBroker>, rec: &Recorder) {
    let (task, id) = asking(&b, rec, "c", CancellationToken::new()).await;
    let listed: Vec<String> = b.waiting_in("rec", "c").await.into_iter().map(|p| p.id).collect();
    assert_eq!(listed, [id.as_str()]);
    let from = |sender: &str, chat: &str| InboundMessage::new("rec", sender, chat, "/approve");
    assert_eq!(b.answer(&from("mallory", "c"), &id, Choice::Once).await, Decided::NotAllowed);
    assert_eq!(b.answer(&from("ann", "d"), &id, Choice::Once).await, Decided::Unknown);
    let done = b.answer(&from("ann", "c"), "", Choice::Once).await;
    assert_eq!(done, Decided::Done { tool: "bash".into(), outcome: "approved once".into() });
    assert_eq!(task.await.unwrap(), Approval::Yes);
    assert!(rec.resolved.lock().unwrap().contains(&(id.clone(), "approved once".to_string())));
    assert_eq!(b.answer(&from("ann", "c"), &id, Choice::Once).await, Decided::Unknown);

    let cancel = CancellationToken::new();
    let (task, id) = asking(&b, rec, "c", cancel.clone()).await;
    cancel.cancel();
    assert!(matches!(task.await.unwrap(), Approval::No(_)));
    assert!(b.waiting_in("rec", "c").await.is_empty());
    assert_eq!(b.answer(&from("ann", "c"), &id, Choice::Once).await, Decided::Unknown);
    assert_eq!(b.waiting(), 0);
}

#[tokio::test]
async fn one_gateway_asks_in_the_chat_and_takes_the_owners_answer() {
    let (b, rec) = broker(DEFAULT_APPROVAL_TIMEOUT);
    asks_in_the_chat_and_takes_the_owners_answer(b, &rec).await;
}

#[tokio::test]
async fn gateways_on_a_database_ask_in_the_chat_and_take_the_owners_answer() {
    let Some(pg) = ferroclaw_testkit::PgCluster::shared() else { return };
    let url = pg.database("approvals_store");
    let db = PgStore::connect(&url, Default::default()).await.unwrap();
    let wakeups = db.listen();
    let rec = Arc::new(Recorder::default());
    let outbox = Outbox::new([rec.clone() as Arc<dyn Channel>]);
    let b = ApprovalBroker::new(outbox, DEFAULT_APPROVAL_TIMEOUT, vec!["rec:boss".into()])
        .with_database(db, wakeups.approvals());
    asks_in_the_chat_and_takes_the_owners_answer(Arc::new(b), &rec).await;
}

#[tokio::test]
async fn the_owner_approves_once_and_the_id_is_single_use() {
    let (b, rec) = broker(DEFAULT_APPROVAL_TIMEOUT);
    let (task, id) = asking(&b, &rec, "c", CancellationToken::new()).await;
    let prompt = rec.prompts.lock().unwrap()[0].1.clone();
    assert_eq!(prompt.summary, "bash: rm -rf build");
    assert!(prompt.text().contains(&format!("/approve {id}")));
    let done = b.decide(&id, "rec", "c", "ann", Choice::Once);
    assert_eq!(done, Decided::Done { tool: "bash".into(), outcome: "approved once".into() });
    assert_eq!(task.await.unwrap(), Approval::Yes);
    assert_eq!(b.decide(&id, "rec", "c", "ann", Choice::Once), Decided::Unknown, "single use");
    assert_eq!(b.waiting(), 0);
}

#[tokio::test]
async fn a_stranger_changes_nothing_and_another_chat_cannot_answer() {
    let (b, rec) = broker(DEFAULT_APPROVAL_TIMEOUT);
    let (task, id) = asking(&b, &rec, "c", CancellationToken::new()).await;
    assert_eq!(b.decide(&id, "rec", "c", "mallory", Choice::Once), Decided::NotAllowed);
    assert_eq!(b.decide(&id, "rec", "other", "ann", Choice::Once), Decided::Unknown);
    assert_eq!(b.decide(&id, "web", "c", "ann", Choice::Once), Decided::Unknown);
    assert_eq!(
        b.decide("0123456789abcdef01234567", "rec", "c", "ann", Choice::Once),
        Decided::Unknown
    );
    assert_eq!(b.waiting(), 1, "still waiting for the owner");
    let denied = b.decide(&id, "rec", "c", "boss", Choice::Deny("not on Fridays".into()));
    assert!(matches!(denied, Decided::Done { .. }), "an approver may answer");
    assert_eq!(
        task.await.unwrap(),
        Approval::No("the user denied this call: not on Fridays".into())
    );
}

#[tokio::test]
async fn chat_and_project_choices_become_the_lasting_approvals() {
    let (b, rec) = broker(DEFAULT_APPROVAL_TIMEOUT);
    let (task, id) = asking(&b, &rec, "c", CancellationToken::new()).await;
    b.decide(&id, "rec", "c", "ann", Choice::Chat);
    assert_eq!(task.await.unwrap(), Approval::AlwaysForSession);
    let (task, id) = asking(&b, &rec, "c", CancellationToken::new()).await;
    b.decide(&id, "rec", "c", "ann", Choice::Project);
    assert_eq!(task.await.unwrap(), Approval::AlwaysForProject);
}

#[tokio::test]
async fn without_an_id_the_only_request_is_answered_and_several_are_listed() {
    let (b, rec) = broker(DEFAULT_APPROVAL_TIMEOUT);
    let from = |chat: &str| InboundMessage::new("rec", "ann", chat, "/approve");
    assert_eq!(b.answer(&from("c"), "", Choice::Once).await, Decided::Unknown);
    let (first, a) = asking(&b, &rec, "c", CancellationToken::new()).await;
    let (_other_chat, _) = asking(&b, &rec, "d", CancellationToken::new()).await;
    let (second, z) = asking(&b, &rec, "c", CancellationToken::new()).await;
    let shown: Vec<String> = b.waiting_in("rec", "c").await.into_iter().map(|p| p.id).collect();
    assert_eq!(shown, [a.clone(), z.clone()], "the chat's requests, oldest first");
    let Decided::Which(which) = b.answer(&from("c"), "", Choice::Once).await else {
        panic!("not listed")
    };
    let ids: Vec<&str> = which.iter().map(|(id, _)| id.as_str()).collect();
    assert_eq!(ids, [a.as_str(), z.as_str()]);
    assert_eq!(b.waiting(), 3, "nothing was answered");
    b.decide(&a, "rec", "c", "ann", Choice::Once);
    assert_eq!(first.await.unwrap(), Approval::Yes);
    let done = b.answer(&from("c"), "", Choice::Deny("no".into())).await;
    assert!(matches!(done, Decided::Done { .. }), "{done:?}");
    assert_eq!(second.await.unwrap(), Approval::No("the user denied this call: no".into()));
}

#[tokio::test]
async fn ids_are_long_random_and_distinct() {
    let (b, rec) = broker(DEFAULT_APPROVAL_TIMEOUT);
    let (_t1, a) = asking(&b, &rec, "c", CancellationToken::new()).await;
    let (_t2, z) = asking(&b, &rec, "c", CancellationToken::new()).await;
    assert_eq!(a.len(), 24);
    assert!(a.chars().all(|c| c.is_ascii_hexdigit()));
    assert_ne!(a, z);
}

#[tokio::test]
async fn an_unanswered_request_is_denied_after_the_timeout_and_the_model_told_why() {
    let (b, rec) = broker(Duration::from_secs(1));
    let (task, id) = asking(&b, &rec, "c", CancellationToken::new()).await;
    let Approval::No(reason) = task.await.unwrap() else { panic!("not denied") };
    assert!(reason.contains("within 1 s") && reason.contains("denied"), "{reason}");
    assert_eq!(
        rec.resolved.lock().unwrap().as_slice(),
        [(id.clone(), "timed out (denied)".to_string())]
    );
    assert_eq!(b.decide(&id, "rec", "c", "ann", Choice::Once), Decided::Unknown);
}

#[tokio::test]
async fn a_cancelled_turn_forgets_its_request() {
    let (b, rec) = broker(DEFAULT_APPROVAL_TIMEOUT);
    let cancel = CancellationToken::new();
    let (task, id) = asking(&b, &rec, "c", cancel.clone()).await;
    cancel.cancel();
    assert!(matches!(task.await.unwrap(), Approval::No(_)));
    assert_eq!(b.waiting(), 0);
    assert_eq!(rec.resolved.lock().unwrap()[0], (id.clone(), "cancelled".to_string()));
    // A turn dropped while waiting forgets it too.
    let (task, _) = asking(&b, &rec, "c", CancellationToken::new()).await;
    task.abort();
    let _ = task.await;
    assert_eq!(b.waiting(), 0);
}

#[test]
fn choices_parse_from_button_words_and_commands() {
    assert_eq!(describe(DEFAULT_APPROVAL_TIMEOUT), "10 min");
    assert_eq!(Choice::parse("", ""), Some(Choice::Once));
    assert_eq!(Choice::parse("Project", ""), Some(Choice::Project));
    assert_eq!(Choice::parse("maybe", ""), None);
    assert_eq!(button_command("ab", "deny"), "/deny ab");
    assert_eq!(button_command("ab", "chat"), "/approve ab chat");
}
