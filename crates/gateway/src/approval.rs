//! Approvals from any chat: a tool call that needs approval pauses its turn
//! and asks the chat's owner on the chat's own channel (buttons where the
//! platform has them, `/approve ID` and `/deny ID [reason]` everywhere).
//!
//! The [`ApprovalBroker`] holds the requests waiting for an answer. Each has
//! an unguessable id (96 bits from the OS random source), belongs to one chat
//! and one owner, and is answered at most once: by the owner (or someone in
//! `[gateway] approvers`) writing in that same chat, by the timeout
//! (`[gateway] approval_timeout`, denied and the model told so), or by the
//! turn going away (cancelled: the request is forgotten with it).
//!
//! Several gateway processes on one database: the asking process records
//! each request in the database too. A web chat's page may be open in
//! another process: that one shows the request, and the answer, given
//! wherever the page is, is recorded there once and picked up by the asking
//! process; how the request ended is passed back to the pages that showed
//! it. Each change is announced with `LISTEN/NOTIFY`, so every step is seen
//! at once and nobody polls (beyond a slow safety poll).
//!
//! What is asked and the answers are in `approval/prompt.rs`; how requests
//! travel between gateway processes in `approval/across_gateways.rs`.
//!
//! ```
//! use ferroclaw_gateway::approval::Choice;
//! assert_eq!(Choice::parse("chat", ""), Some(Choice::Chat));
//! assert_eq!(Choice::parse("deny", "not now"), Some(Choice::Deny("not now".into())));
//! ```

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use ferroclaw_core::{Approval, Approver};
use ferroclaw_protocol::ToolCall;
use ferroclaw_store::{ApprovalRequest, Changes, PgStore};
use serde_json::json;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

mod across_gateways;
mod one_process;
pub mod prompt;
mod records;

pub use prompt::{ApprovalPrompt, BUTTONS, Choice, Decided, button_command, summary};
pub use records::ApprovalRecords;
use records::Recorded;

use crate::bus::InboundMessage;
use crate::channel::{Channel, ChannelError};
use crate::outbox::Outbox;
use crate::sessions::SessionKey;

/// How long a request waits for its answer when `approval_timeout` is not
/// set: long enough to pick up a phone, short enough that a forgotten turn
/// does not hold its chat for hours.
pub const DEFAULT_APPROVAL_TIMEOUT: Duration = Duration::from_secs(600);
/// Random bytes in a request id (hex in the id: 24 characters, short enough
/// for Telegram's 64-byte button data).
const ID_BYTES: usize = 12;

struct Pending {
    key: SessionKey,
    owner: String,
    tool: String,
    /// What the chat was shown, to show it again (a page that reconnects).
    prompt: ApprovalPrompt,
    asked_at: std::time::Instant,
    answer: oneshot::Sender<Choice>,
}

/// The requests waiting for an answer, across all chats.
pub struct ApprovalBroker {
    outbox: Outbox,
    timeout: Duration,
    /// Who may answer any chat's requests besides its owner: sender ids, or
    /// `CHANNEL:SENDER` for one channel.
    approvers: Vec<String>,
    pending: Mutex<HashMap<String, Pending>>,
    /// Cancelled when the gateway stops: nobody waits for answers then.
    closing: CancellationToken,
    /// Where requests are recorded for other gateway processes: nowhere
    /// (one gateway), or the shared database, so that a page open on the
    /// chat in another process shows them and answers them.
    records: Arc<dyn ApprovalRecords>,
}

impl ApprovalBroker {
    /// A broker asking through `outbox`'s channels.
    pub fn new(outbox: Outbox, timeout: Duration, approvers: Vec<String>) -> Self {
        ApprovalBroker {
            outbox,
            timeout,
            approvers,
            pending: Mutex::new(HashMap::new()),
            closing: CancellationToken::new(),
            records: Arc::new(one_process::OneProcess),
        }
    }

    /// The same broker sharing its requests through `db` with the other
    /// gateway processes: a request whose chat is open in another process
    /// (the web chat's page) is shown and answered there. `changes` says
    /// when any process changed a request.
    pub fn with_database(self, db: PgStore, changes: Changes) -> Self {
        let records = Arc::new(across_gateways::ApprovalTable::new(db, changes));
        ApprovalBroker { records, ..self }
    }

    /// Denies every waiting request (the gateway is stopping) and every later one.
    pub fn close(&self) {
        self.closing.cancel();
    }

    /// Requests waiting now.
    pub fn waiting(&self) -> usize {
        self.lock().len()
    }

    /// Asks `owner` in chat `key` whether `call` may run, and waits for the
    /// answer, the timeout, or `cancel`. Dropping the future forgets the request.
    pub async fn ask(
        &self,
        key: &SessionKey,
        owner: &str,
        call: &ToolCall,
        cancel: &CancellationToken,
    ) -> Approval {
        let tool = ferroclaw_tools::canonical_tool_name(&call.name).to_string();
        let Some(channel) = self.outbox.channel(&key.channel).cloned() else {
            return Approval::No(format!(
                "{tool} needs the user's approval, and this chat ({}) cannot be asked. Do without it, \
                 or tell the user to approve it from a chat, or to allow it with [gateway] \
                 permission_mode or an allow rule in [permissions]",
                key.address()
            ));
        };
        let (prompt, answer) = match self.open(key, owner, &tool, call) {
            Ok(opened) => opened,
            Err(e) => return Approval::No(format!("cannot ask for approval: {e}")),
        };
        let _forget = Forget { broker: self, id: &prompt.id };
        tracing::info!(chat = %key.address(), %tool, "asking for approval");
        let recorded = self.record(key, owner, &prompt).await;
        if let Err(refused) = show(channel.as_ref(), &key.chat_id, &prompt, &recorded).await {
            return refused;
        }
        let waiting =
            Waiting { channel: channel.as_ref(), key, prompt: &prompt, recorded: &recorded };
        self.wait_for_answer(waiting, answer, cancel).await
    }

    /// A new request of `owner` in chat `key` to run `call` of `tool`,
    /// waiting here: what the chat is shown, and where its answer comes.
    fn open(
        &self,
        key: &SessionKey,
        owner: &str,
        tool: &str,
        call: &ToolCall,
    ) -> std::io::Result<(ApprovalPrompt, oneshot::Receiver<Choice>)> {
        let id = crate::files::random_hex(ID_BYTES)?;
        let (tx, rx) = oneshot::channel();
        let prompt = ApprovalPrompt {
            id: id.clone(),
            tool: tool.to_string(),
            input: call.input.clone(),
            summary: summary(tool, &call.input),
        };
        let pending = Pending {
            key: key.clone(),
            owner: owner.to_string(),
            tool: tool.to_string(),
            prompt: prompt.clone(),
            asked_at: std::time::Instant::now(),
            answer: tx,
        };
        self.lock().insert(id, pending);
        Ok((prompt, rx))
    }

    /// Records the request where other gateway processes can show and
    /// answer it (with one gateway: nowhere).
    async fn record(&self, key: &SessionKey, owner: &str, prompt: &ApprovalPrompt) -> Recorded<'_> {
        let request = ApprovalRequest {
            id: prompt.id.clone(),
            channel: key.channel.clone(),
            chat_id: key.chat_id.clone(),
            owner: owner.to_string(),
            tool: prompt.tool.clone(),
            prompt: json!({"tool": prompt.tool, "input": prompt.input, "summary": prompt.summary}),
        };
        Recorded::open(self.records.as_ref(), &request).await
    }

    /// Waits for the answer to a request shown in its chat: given here,
    /// given through another gateway process, or none (timeout, the gateway
    /// stopping, the turn cancelled); tells the chat how it ended.
    async fn wait_for_answer(
        &self,
        waiting: Waiting<'_>,
        answer: oneshot::Receiver<Choice>,
        cancel: &CancellationToken,
    ) -> Approval {
        let Waiting { channel, key, prompt, recorded } = waiting;
        let tool = &prompt.tool;
        let (outcome, approval) = tokio::select! {
            answer = answer => match answer {
                Ok(choice) => {
                    recorded.resolve(&choice.outcome()).await;
                    return choice.approval();
                }
                Err(_) => ("cancelled".to_string(), Approval::No("the request was withdrawn".into())),
            },
            // Answered through another gateway process (which told its page).
            choice = recorded.answer() => {
                let outcome = choice.outcome();
                tracing::info!(chat = %key.address(), %tool, "approval: {outcome} (through another gateway)");
                recorded.resolve(&outcome).await;
                if let Err(e) = channel.approval_resolved(&key.chat_id, &prompt.id, &outcome).await {
                    tracing::debug!("{e}");
                }
                return choice.approval();
            },
            () = tokio::time::sleep(self.timeout) => (
                "timed out (denied)".to_string(),
                Approval::No(format!(
                    "nobody answered the approval request for this {tool} call within {}, so it did not run \
                     (denied). Do without it, or ask the user to approve it when they are around",
                    describe(self.timeout)
                )),
            ),
            () = self.closing.cancelled() => (
                "cancelled".to_string(),
                Approval::No("the assistant is shutting down, so nobody can approve this call now".into()),
            ),
            () = cancel.cancelled() => (
                "cancelled".to_string(),
                Approval::No("cancelled by the user before it ran".into()),
            ),
        };
        recorded.resolve(&outcome).await;
        if self.lock().remove(&prompt.id).is_some() {
            tracing::info!(chat = %key.address(), %tool, "approval {outcome}");
            if let Err(e) = channel.approval_resolved(&key.chat_id, &prompt.id, &outcome).await {
                tracing::debug!("{e}");
            }
        }
        approval
    }

    /// `sender` in chat `(channel, chat_id)` answers request `id`. Only the
    /// request's own chat can answer it, and there only its owner or an
    /// approver; an answered request is gone.
    pub fn decide(
        &self,
        id: &str,
        channel: &str,
        chat_id: &str,
        sender: &str,
        choice: Choice,
    ) -> Decided {
        let mut pending = self.lock();
        let Some(request) = pending.get(id) else { return Decided::Unknown };
        if request.key.channel != channel || request.key.chat_id != chat_id {
            return Decided::Unknown;
        }
        if request.owner != sender && !self.is_approver(channel, sender) {
            return Decided::NotAllowed;
        }
        let Some(request) = pending.remove(id) else { return Decided::Unknown };
        drop(pending);
        let outcome = choice.outcome();
        tracing::info!(chat = %request.key.address(), tool = %request.tool, "approval: {outcome}");
        // The turn may have gone meanwhile: then nobody waits, and that is fine.
        let _ = request.answer.send(choice);
        Decided::Done { tool: request.tool, outcome }
    }

    /// The requests waiting in chat `(channel, chat_id)`, oldest first: those
    /// asked here and, with a shared database, those other gateway processes
    /// asked (shown again to a page that connects, and what `/approve`
    /// without an id picks from).
    pub async fn waiting_in(&self, channel: &str, chat_id: &str) -> Vec<ApprovalPrompt> {
        let mut found: Vec<(std::time::Instant, ApprovalPrompt)> = self
            .lock()
            .values()
            .filter(|p| p.key.channel == channel && p.key.chat_id == chat_id)
            .map(|p| (p.asked_at, p.prompt.clone()))
            .collect();
        found.sort_by_key(|(at, _)| *at);
        let mut found: Vec<ApprovalPrompt> = found.into_iter().map(|(_, p)| p).collect();
        let elsewhere = self.records.asked_elsewhere(channel, chat_id).await;
        let new: Vec<ApprovalPrompt> =
            elsewhere.into_iter().filter(|p| !found.iter().any(|f| f.id == p.id)).collect();
        found.extend(new);
        found
    }

    /// Takes `message` (an `/approve`, `/deny` or a button press: its sender,
    /// in its chat) as the answer to request `id` (empty: the only request
    /// waiting in the chat), and tells the sender what came of it on the
    /// message's channel.
    pub async fn answer(&self, message: &InboundMessage, id: &str, choice: Choice) -> Decided {
        let id = if id.is_empty() {
            let mut waiting = self.waiting_in(&message.channel, &message.chat_id).await;
            match waiting.len() {
                1 => waiting.remove(0).id,
                0 => String::new(),
                _ => {
                    let which = waiting.into_iter().map(|p| (p.id, p.summary)).collect();
                    return self.tell(message, "", Decided::Which(which)).await;
                }
            }
        } else {
            id.to_string()
        };
        let id = id.as_str();
        if id.is_empty() {
            return self.tell(message, id, Decided::Unknown).await;
        }
        let mut decided =
            self.decide(id, &message.channel, &message.chat_id, &message.sender, choice.clone());
        // Not asked here: maybe by another gateway process sharing the database.
        if decided == Decided::Unknown {
            let approver = self.is_approver(&message.channel, &message.sender);
            decided = self.records.answer_asked_elsewhere(message, id, &choice, approver).await;
        }
        self.tell(message, id, decided).await
    }

    /// Tells the sender of `message` what came of their answer to `id`.
    async fn tell(&self, message: &InboundMessage, id: &str, decided: Decided) -> Decided {
        let text = match &decided {
            Decided::Done { tool, outcome } => format!("{tool}: {outcome}."),
            Decided::Unknown if id.is_empty() => {
                "No approval request is waiting in this chat.".to_string()
            }
            Decided::Unknown => "No approval request with that id is waiting in this chat \
                 (answered already, timed out, or never asked here)."
                .to_string(),
            Decided::NotAllowed => "Only the person whose message started this (or an approver) \
                 can answer this request; nothing changed."
                .to_string(),
            Decided::Which(waiting) => {
                let list: Vec<String> =
                    waiting.iter().map(|(id, summary)| format!("{id} ({summary})")).collect();
                format!(
                    "{} requests wait in this chat; say which: /approve ID or /deny ID, with ID one of: {}.",
                    waiting.len(),
                    list.join(", ")
                )
            }
        };
        let Some(channel) = self.outbox.channel(&message.channel).cloned() else { return decided };
        if let Decided::Done { outcome, .. } = &decided
            && let Err(e) = channel.approval_resolved(&message.chat_id, id, outcome).await
        {
            tracing::debug!("{e}");
        }
        if let Err(e) = channel.answer_decision(message, &decided, &text).await {
            tracing::warn!("decision not acknowledged: {e}");
        }
        decided
    }

    /// True when `sender` on `channel` may answer any chat's requests.
    fn is_approver(&self, channel: &str, sender: &str) -> bool {
        self.approvers.iter().any(|a| a == sender || *a == format!("{channel}:{sender}"))
    }

    /// Shows, on this process's web pages, the requests other gateway
    /// processes asked in chats whose page is open here, and tells those
    /// pages how each ended, until `stop` (nothing to do with one gateway).
    pub async fn show_asked_elsewhere(self: Arc<Self>, stop: CancellationToken) {
        let Some(web) = self.outbox.channel("web").cloned() else { return };
        self.records.show_asked_elsewhere(web, stop).await;
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Pending>> {
        self.pending.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Shows `prompt` in chat `chat_id` of `channel`; the refusal the model
/// gets when nobody can be asked there. A web chat with no page open here
/// may have one in another gateway process, which then shows it.
async fn show(
    channel: &dyn Channel,
    chat_id: &str,
    prompt: &ApprovalPrompt,
    recorded: &Recorded<'_>,
) -> Result<(), Approval> {
    let tool = &prompt.tool;
    match channel.ask_approval(chat_id, prompt).await {
        Ok(()) => Ok(()),
        Err(ChannelError::UnknownChat { .. }) if recorded.is_shown_soon().await => Ok(()),
        // The web chat (and the API behind it) with no page open on this chat.
        Err(ChannelError::UnknownChat { .. }) => {
            recorded.resolve("nobody to ask").await;
            Err(Approval::No(format!(
                "{tool} needs the user's approval, and nobody can be asked in this chat now \
                 (no chat page is open on it). Do without it, or tell the user to allow it \
                 with [gateway] permission_mode or an allow rule in [permissions]"
            )))
        }
        Err(e) => {
            tracing::warn!("cannot ask for approval: {e}");
            recorded.resolve("could not ask").await;
            Err(Approval::No(format!("{tool} needs approval, and asking the user failed: {e}")))
        }
    }
}

/// A request shown in its chat, waiting for its answer.
struct Waiting<'a> {
    channel: &'a dyn Channel,
    key: &'a SessionKey,
    prompt: &'a ApprovalPrompt,
    recorded: &'a Recorded<'a>,
}

/// Forgets a request when its turn stops waiting, however it stops.
struct Forget<'a> {
    broker: &'a ApprovalBroker,
    id: &'a str,
}

impl Drop for Forget<'_> {
    fn drop(&mut self) {
        self.broker.lock().remove(self.id);
    }
}

/// "10 min", "90 s".
fn describe(d: Duration) -> String {
    let secs = d.as_secs();
    if secs >= 60 && secs.is_multiple_of(60) {
        format!("{} min", secs / 60)
    } else {
        format!("{secs} s")
    }
}

/// Who started the turn now running in a chat, and how to cancel it: set by
/// the chat's worker before each turn, read when a call needs approval.
#[derive(Clone, Default)]
pub struct TurnSlot(Arc<Mutex<(String, CancellationToken)>>);

impl TurnSlot {
    /// The turn started by `owner`, cancelled by `cancel`.
    pub fn set(&self, owner: &str, cancel: CancellationToken) {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = (owner.to_string(), cancel);
    }

    fn get(&self) -> (String, CancellationToken) {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }
}

/// The approver of one chat's agent: asks through the broker in the chat its
/// answers go to.
pub struct ChatApprover {
    pub broker: Arc<ApprovalBroker>,
    pub chat: SessionKey,
    pub turn: TurnSlot,
}

#[async_trait]
impl Approver for ChatApprover {
    async fn approve(&self, call: &ToolCall) -> Approval {
        let (owner, cancel) = self.turn.get();
        self.broker.ask(&self.chat, &owner, call, &cancel).await
    }
}

#[cfg(test)]
mod tests;
