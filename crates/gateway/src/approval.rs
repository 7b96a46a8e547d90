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
//! ```
//! use ferroclaw_gateway::approval::Choice;
//! assert_eq!(Choice::parse("chat", ""), Some(Choice::Chat));
//! assert_eq!(Choice::parse("deny", "not now"), Some(Choice::Deny("not now".into())));
//! ```

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use ferroclaw_core::{Approval, Approver};
use ferroclaw_protocol::ToolCall;
use ferroclaw_store::{Answered, ApprovalRequest, Changes, PgStore};
use serde_json::{Value, json};
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use crate::bus::InboundMessage;
use crate::channel::ChannelError;
use crate::outbox::Outbox;
use crate::sessions::SessionKey;

/// How long a request waits for its answer when `approval_timeout` is not
/// set: long enough to pick up a phone, short enough that a forgotten turn
/// does not hold its chat for hours.
pub const DEFAULT_APPROVAL_TIMEOUT: Duration = Duration::from_secs(600);
/// Random bytes in a request id (hex in the id: 24 characters, short enough
/// for Telegram's 64-byte button data).
const ID_BYTES: usize = 12;
/// Characters of a call's summary shown on the request.
const SUMMARY_CHARS: usize = 300;

/// What a channel shows to ask for approval.
#[derive(Debug, Clone, PartialEq)]
pub struct ApprovalPrompt {
    /// The request's id, as `/approve ID` takes it.
    pub id: String,
    /// The tool, by its canonical name (`bash`, `edit`, ...).
    pub tool: String,
    /// The call's arguments.
    pub input: Value,
    /// One line saying what the call would do (`bash: rm -rf build`).
    pub summary: String,
}

impl ApprovalPrompt {
    /// The request as plain text, with the commands that answer it (for
    /// channels without buttons, and under the buttons of those with them).
    pub fn text(&self) -> String {
        format!(
            "Approval needed: {}\nReply /approve {id} (once), /approve {id} chat (always in this chat), \
             /approve {id} project (always in this project) or /deny {id} [reason].",
            self.summary,
            id = self.id
        )
    }
}

/// An answer to a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Choice {
    /// Run this call.
    Once,
    /// Run it, and calls like it in this chat's session.
    Chat,
    /// Run it, and calls like it in this project from now on (written to config).
    Project,
    /// Do not run it; the reason (may be empty) goes to the model.
    Deny(String),
}

impl Choice {
    /// Parses a choice word as buttons and `/approve ID WORD` send it.
    pub fn parse(word: &str, reason: &str) -> Option<Self> {
        Some(match word.trim().to_ascii_lowercase().as_str() {
            "" | "once" | "yes" => Choice::Once,
            "chat" | "session" => Choice::Chat,
            "project" | "always" => Choice::Project,
            "deny" | "no" => Choice::Deny(reason.trim().to_string()),
            _ => return None,
        })
    }

    /// The word buttons carry (`once`, `chat`, `project`, `deny`).
    pub fn word(&self) -> &'static str {
        match self {
            Choice::Once => "once",
            Choice::Chat => "chat",
            Choice::Project => "project",
            Choice::Deny(_) => "deny",
        }
    }

    /// The outcome as people read it.
    pub fn outcome(&self) -> String {
        match self {
            Choice::Once => "approved once".into(),
            Choice::Chat => "approved for this chat".into(),
            Choice::Project => "approved for this project".into(),
            Choice::Deny(r) if r.is_empty() => "denied".into(),
            Choice::Deny(r) => format!("denied: {r}"),
        }
    }

    fn approval(&self) -> Approval {
        match self {
            Choice::Once => Approval::Yes,
            Choice::Chat => Approval::AlwaysForSession,
            Choice::Project => Approval::AlwaysForProject,
            Choice::Deny(r) if r.is_empty() => Approval::No("the user denied this call".into()),
            Choice::Deny(r) => Approval::No(format!("the user denied this call: {r}")),
        }
    }
}

/// The buttons every channel shows, in order: (label, choice word).
pub const BUTTONS: [(&str, &str); 4] = [
    ("Approve once", "once"),
    ("Always in this chat", "chat"),
    ("Always in this project", "project"),
    ("Deny", "deny"),
];

/// The text a button press (or `/approve`) carries: `/approve ID WORD`, or
/// `/deny ID` for the deny button.
pub fn button_command(id: &str, word: &str) -> String {
    if word == "deny" { format!("/deny {id}") } else { format!("/approve {id} {word}") }
}

/// What became of a decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decided {
    /// The request is answered; the outcome as people read it.
    Done { tool: String, outcome: String },
    /// No such request waits in this chat (never was, answered, timed out,
    /// or another chat's).
    Unknown,
    /// The request waits, but this sender may not answer it.
    NotAllowed,
    /// No id was given and several requests wait in this chat: their ids
    /// and summaries.
    Which(Vec<(String, String)>),
}

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
    /// Several gateway processes: requests are recorded here, so a page
    /// open on the chat in another process shows them and answers them;
    /// with the notifications of their changes.
    db: Option<(PgStore, Changes)>,
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
            db: None,
        }
    }

    /// The same broker sharing its requests through `db` with the other
    /// gateway processes: a request whose chat is open in another process
    /// (the web chat's page) is shown and answered there. `changes` says
    /// when any process changed a request.
    pub fn with_database(self, db: PgStore, changes: Changes) -> Self {
        ApprovalBroker { db: Some((db, changes)), ..self }
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
        let id = match crate::files::random_hex(ID_BYTES) {
            Ok(id) => id,
            Err(e) => return Approval::No(format!("cannot ask for approval: {e}")),
        };
        let (tx, rx) = oneshot::channel();
        let prompt = ApprovalPrompt {
            id: id.clone(),
            tool: tool.clone(),
            input: call.input.clone(),
            summary: summary(&tool, &call.input),
        };
        let pending = Pending {
            key: key.clone(),
            owner: owner.to_string(),
            tool: tool.clone(),
            prompt: prompt.clone(),
            asked_at: std::time::Instant::now(),
            answer: tx,
        };
        self.lock().insert(id.clone(), pending);
        let _forget = Forget { broker: self, id: &id };
        tracing::info!(chat = %key.address(), %tool, "asking for approval");
        // Several gateways: recorded, so that any process can show and answer it.
        let shared = match &self.db {
            Some((db, changes)) => {
                let request = ApprovalRequest {
                    id: id.clone(),
                    channel: key.channel.clone(),
                    chat_id: key.chat_id.clone(),
                    owner: owner.to_string(),
                    tool: tool.clone(),
                    prompt: json!({"tool": tool, "input": call.input, "summary": prompt.summary}),
                };
                match db.open_approval(&request).await {
                    Ok(()) => {
                        Some(Recorded { db, changes, id: &id, resolved: AtomicBool::new(false) })
                    }
                    Err(e) => {
                        tracing::warn!("approval request not shared with other gateways: {e}");
                        None
                    }
                }
            }
            None => None,
        };
        let mut asked = channel.ask_approval(&key.chat_id, &prompt).await;
        // Another gateway process may hold the chat's page: it shows the request.
        if let (Err(ChannelError::UnknownChat { .. }), Some(s)) = (&asked, &shared)
            && s.is_shown_soon().await
        {
            asked = Ok(());
        }
        match asked {
            Ok(()) => {}
            // The web chat (and the API behind it) with no page open on this chat.
            Err(ChannelError::UnknownChat { .. }) => {
                if let Some(s) = &shared {
                    s.resolve("nobody to ask").await;
                }
                return Approval::No(format!(
                    "{tool} needs the user's approval, and nobody can be asked in this chat now \
                     (no chat page is open on it). Do without it, or tell the user to allow it \
                     with [gateway] permission_mode or an allow rule in [permissions]"
                ));
            }
            Err(e) => {
                tracing::warn!("cannot ask for approval: {e}");
                if let Some(s) = &shared {
                    s.resolve("could not ask").await;
                }
                return Approval::No(format!(
                    "{tool} needs approval, and asking the user failed: {e}"
                ));
            }
        }
        let remote = async {
            match &shared {
                Some(s) => s.answer().await,
                None => std::future::pending().await,
            }
        };
        let (outcome, approval) = tokio::select! {
            answer = rx => match answer {
                Ok(choice) => {
                    if let Some(s) = &shared {
                        s.resolve(&choice.outcome()).await;
                    }
                    return choice.approval();
                }
                Err(_) => ("cancelled".to_string(), Approval::No("the request was withdrawn".into())),
            },
            // Answered through another gateway process (which told its page).
            choice = remote => {
                let outcome = choice.outcome();
                tracing::info!(chat = %key.address(), %tool, "approval: {outcome} (through another gateway)");
                if let Some(s) = &shared {
                    s.resolve(&outcome).await;
                }
                if let Err(e) = channel.approval_resolved(&key.chat_id, &id, &outcome).await {
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
        if let Some(s) = &shared {
            s.resolve(&outcome).await;
        }
        if self.lock().remove(&id).is_some() {
            tracing::info!(chat = %key.address(), %tool, "approval {outcome}");
            if let Err(e) = channel.approval_resolved(&key.chat_id, &id, &outcome).await {
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
        let approver =
            self.approvers.iter().any(|a| a == sender || *a == format!("{channel}:{sender}"));
        if request.owner != sender && !approver {
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
        if let Some((db, _)) = &self.db {
            match db.approvals_to_show(channel, &[]).await {
                Ok(elsewhere) => found.extend(
                    elsewhere
                        .into_iter()
                        .filter(|r| r.chat_id == chat_id)
                        .map(|r| prompt_of(&r))
                        .filter(|p| !found.iter().any(|f| f.id == p.id))
                        .collect::<Vec<_>>(),
                ),
                Err(e) => tracing::warn!("approvals asked by other gateways not read: {e}"),
            }
        }
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
        if decided == Decided::Unknown
            && let Some((db, _)) = &self.db
        {
            decided = self.decide_shared(db, message, id, choice).await;
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

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Pending>> {
        self.pending.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Records the answer to a request another process asked; the process
    /// waiting on it picks it up.
    async fn decide_shared(
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
            let wait = if failing { RETRY } else { crate::scaleout::safety_poll() };
            tokio::select! {
                () = stop.cancelled() => return,
                _ = changes.wait(wait) => {}
            }
        }
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

/// How long to wait before asking an unreachable database again.
const RETRY: Duration = Duration::from_secs(2);
/// How long a request no page here can show waits for another process to
/// show it before it counts as "nobody to ask".
const SHOW_WAIT: Duration = Duration::from_secs(3);

/// A request recorded in the shared database, while its turn waits.
struct Recorded<'a> {
    db: &'a PgStore,
    changes: &'a Changes,
    id: &'a str,
    resolved: AtomicBool,
}

impl Recorded<'_> {
    /// True when another process showed the request within [`SHOW_WAIT`].
    async fn is_shown_soon(&self) -> bool {
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
    async fn answer(&self) -> Choice {
        let mut changes = self.changes.fresh();
        loop {
            if let Ok(Some((word, reason))) = self.db.approval_answer(self.id).await
                && let Some(choice) = Choice::parse(&word, &reason)
            {
                return choice;
            }
            changes.wait(crate::scaleout::safety_poll()).await;
        }
    }

    /// Records how the request ended (once), for the pages showing it elsewhere.
    async fn resolve(&self, outcome: &str) {
        if self.resolved.swap(true, Ordering::Relaxed) {
            return;
        }
        if let Err(e) = self.db.resolve_approval(self.id, outcome).await {
            tracing::warn!("approval outcome not shared: {e}");
        }
    }
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

/// One line saying what a call would do: its command, path or URL when it has one.
pub fn summary(tool: &str, input: &Value) -> String {
    let main = ["command", "file_path", "path", "url", "pattern", "query"]
        .iter()
        .find_map(|k| input[*k].as_str())
        .map(str::to_string)
        .unwrap_or_else(|| input.to_string());
    let mut line = format!("{tool}: {}", main.replace('\n', " "));
    if line.chars().count() > SUMMARY_CHARS {
        line = line.chars().take(SUMMARY_CHARS).collect::<String>() + "…";
    }
    line
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
mod tests {
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
        async fn ask_approval(
            &self,
            chat_id: &str,
            p: &ApprovalPrompt,
        ) -> Result<(), ChannelError> {
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

    fn call() -> ToolCall {
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

    #[test]
    fn choices_parse_from_button_words_and_commands() {
        assert_eq!(describe(DEFAULT_APPROVAL_TIMEOUT), "10 min");
        assert_eq!(Choice::parse("", ""), Some(Choice::Once));
        assert_eq!(Choice::parse("Project", ""), Some(Choice::Project));
        assert_eq!(Choice::parse("maybe", ""), None);
        assert_eq!(button_command("ab", "deny"), "/deny ab");
        assert_eq!(button_command("ab", "chat"), "/approve ab chat");
    }
}
