//! One chat's worker: it owns the chat's [`Agent`], takes the chat's
//! messages in order, and runs each as a turn (holding one of the gateway's
//! turn permits). It reports background jobs that finish while the chat is
//! idle, and goes away after a quiet spell (the agent is reopened from its
//! session file when the chat speaks again).

use std::sync::Arc;

use ferroclaw_core::Agent;
use ferroclaw_protocol::{AgentEvent, Message};
use ferroclaw_runtime::{InputRules, Resume, SessionOptions, Turn};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use crate::api_turn::{ApiTurn, is_stateless_chat};
use crate::approval::{ChatApprover, TurnSlot};
use crate::bus::{Failure, InboundMessage, OutboundMessage, SYSTEM_CHANNEL};
use crate::chats::Chats;
use crate::commands::{ChatCommand, HELP};
use crate::handover;
use crate::heartbeat;
use crate::media;
use crate::resume::{self, Claim, JournalledTurn};
use crate::sessions::SessionKey;
use crate::tools::{CronTool, MessageTool};

/// Where the answer of a piece of work goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Delivery {
    /// Back to the chat the message came from, as a reply.
    Reply,
    /// To this chat.
    To(SessionKey),
    /// Nowhere (a cron job without delivery).
    Nowhere,
}

/// How a piece of work ended, for whoever waits on it (cron).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WorkResult {
    Answered(String),
    Failed(String),
}

/// One message for a chat's worker.
pub struct Work {
    pub message: InboundMessage,
    pub delivery: Delivery,
    /// Drop a heartbeat answer that means "nothing to report".
    pub quiet_if_ok: bool,
    /// Told the result once the turn is over.
    pub done: Option<oneshot::Sender<WorkResult>>,
}

impl Work {
    /// A message answered in its own chat.
    pub fn reply(message: InboundMessage) -> Self {
        Work { message, delivery: Delivery::Reply, quiet_if_ok: false, done: None }
    }
}

/// The text that tells the agent a background job finished while the chat was idle.
const JOB_FINISHED_PROMPT: &str = "[System: a background job you started has finished; its \
result is above. Tell the user what came of it, briefly.]";

/// Runs a chat's worker until its queue closes (shutdown) or it idles out.
pub async fn run(
    key: SessionKey,
    number: u64,
    mut rx: mpsc::Receiver<Box<Work>>,
    chats: Arc<Chats>,
) {
    let mut agent: Option<Agent> = None;
    let slot = TurnSlot::default();
    loop {
        let jobs = agent.as_ref().and_then(|a| a.jobs().cloned());
        let job_finished = async {
            match jobs {
                Some(j) => j.wait_finished().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            work = rx.recv() => match work {
                // Boxed, here and below: a turn's state is large, and an
                // idle chat's worker should not keep room for it.
                Some(work) => {
                    Box::pin(handle(&key, &mut agent, &slot, *work, &chats)).await;
                    // A stateless API request's chat has nothing more to say.
                    if is_stateless_chat(&key) && chats.retire(&key, number, &rx) {
                        break;
                    }
                    idle(&mut agent);
                }
                None => break,
            },
            () = job_finished => {
                show_jobs(&chats, &key);
                let message = InboundMessage::new(SYSTEM_CHANNEL, "system", key.address(), JOB_FINISHED_PROMPT);
                let delivery = if chats.outbox.channel(&key.channel).is_some() {
                    Delivery::To(key.clone())
                } else {
                    Delivery::Nowhere
                };
                let work = Work { message, delivery, quiet_if_ok: false, done: None };
                Box::pin(handle(&key, &mut agent, &slot, work, &chats)).await;
                idle(&mut agent);
            }
            () = tokio::time::sleep(chats.settings.session_idle()) => {
                // Running jobs, or processes its commands left (`server &`),
                // keep the agent: retiring it would kill them.
                let busy = agent.as_ref().is_some_and(keeps_running);
                if !busy && chats.retire(&key, number, &rx) {
                    break;
                }
            }
        }
    }
    chats.forget_jobs(&key);
    if let Some(mut agent) = agent {
        Box::pin(agent.finish()).await;
    }
}

/// True when the agent's background jobs, or processes its commands left
/// (`server &`), still run.
fn keeps_running(agent: &Agent) -> bool {
    agent.jobs().is_some_and(|j| !j.running().is_empty()) || agent.children().any_alive()
}

/// Between two pieces of work the chat holds no open file: its session file
/// is closed until the next turn writes. An agent whose file another process
/// wrote meanwhile is dropped, to be opened again from the file.
fn idle(agent: &mut Option<Agent>) {
    match agent {
        Some(a) if !a.session().is_current() => *agent = None,
        Some(a) => a.release_session_file(),
        None => {}
    }
}

/// Handles one piece of work: a chat command or a turn.
async fn handle(
    key: &SessionKey,
    agent: &mut Option<Agent>,
    slot: &TurnSlot,
    mut work: Work,
    chats: &Arc<Chats>,
) {
    let handed = handover::handed(&work.message);
    let delivered = handed.is_some();
    let (result, journalled) = match ChatCommand::parse(&work.message.content) {
        // What another session (a cron job, the heartbeat) said to this chat.
        _ if let Some(handed) = &handed => {
            (record_handed(key, agent, slot, &work, handed, chats).await, None)
        }
        Some(command) if work.message.channel != SYSTEM_CHANNEL => {
            (command_reply(key, agent, slot, command, &work, chats).await, None)
        }
        _ => {
            match resume::claim(key, &mut work.message, chats.journal.as_ref(), &chats.names).await
            {
                Claim::Duplicate => return,
                Claim::Off => (turn(key, agent, slot, &work, None, chats).await, None),
                Claim::Turn(journalled) => (
                    turn(key, agent, slot, &work, Some(&journalled), chats).await,
                    Some(journalled),
                ),
            }
        }
    };
    // An API request's answer is kept under its Idempotency-Key before the
    // turn counts as finished: a retry finds one or the other.
    let answered = match &result {
        WorkResult::Answered(text) => Ok(text.as_str()),
        WorkResult::Failed(_) => Err(Failure::Failed),
    };
    crate::idempotency::after_turn(&chats.requests, &work.message, answered).await;
    if let Some(journalled) = journalled {
        // Before the answer goes out: it goes out at most once.
        journalled.finish().await;
    }
    send_answer(key, &work, &result, delivered, chats).await;
    // Several gateways: the chat's next message may run in another process
    // as soon as this answer is handed on, so the session file is let go
    // (its lock released) first. The conversation stays open: the next turn
    // here uses it if nobody wrote the file meanwhile (see `open`). Jobs
    // and processes the turn left running end with it: what they report
    // would reach this process's conversation alone, outside the
    // database's order of the chat's turns.
    if chats.store.is_some() {
        match agent.take() {
            Some(mut done) if keeps_running(&done) => {
                chats.forget_jobs(key);
                Box::pin(done.finish()).await;
            }
            Some(mut kept) => {
                kept.release_session_file();
                *agent = Some(kept);
            }
            None => {}
        }
    }
    if let Some(done) = work.done {
        let _ = done.send(result);
    }
}

/// Sends the answer where the work says (a heartbeat's "nothing to report"
/// stays quiet; another chat's answer is handed over to that chat).
async fn send_answer(
    key: &SessionKey,
    work: &Work,
    result: &WorkResult,
    delivered: bool,
    chats: &Arc<Chats>,
) {
    let text = match &result {
        WorkResult::Answered(t) => t.clone(),
        WorkResult::Failed(e) => {
            tracing::error!(session = %key.address(), "failed: {e}");
            format!("Sorry, that failed: {e}")
        }
    };
    let quiet = work.quiet_if_ok && heartbeat::is_nothing_to_report(&text);
    if !quiet && !text.trim().is_empty() {
        let failure = matches!(result, WorkResult::Failed(_)).then_some(Failure::Failed);
        let message = match &work.delivery {
            Delivery::Reply => {
                Some(OutboundMessage { failure, ..OutboundMessage::reply(&work.message, text) })
            }
            // Another chat: it keeps the answer in its history, and its
            // worker sends it on (after the chat's own turn, if one runs).
            Delivery::To(to) if to != key && !delivered => {
                let from = work.message.channel.clone();
                let handed = handover::Handed { from, text, media: Vec::new(), send: true };
                chats.hand_over(to, handed);
                None
            }
            Delivery::To(to) => Some(OutboundMessage {
                channel: to.channel.clone(),
                chat_id: to.chat_id.clone(),
                content: text,
                media: Vec::new(),
                reply_to: None,
                failure: None,
            }),
            Delivery::Nowhere => None,
        };
        if let Some(message) = message
            && let Err(e) = chats.outbox.send(message).await
        {
            match e {
                // In the chat's history: its page shows it when it opens.
                crate::channel::ChannelError::UnknownChat { .. } if delivered => {
                    tracing::info!(chat = %key.address(), "no page open; the answer waits in the chat's history");
                }
                e => tracing::warn!(session = %key.address(), "answer not delivered: {e}"),
            }
        }
    }
}

/// Records what another session handed over in the chat's conversation
/// (see [`handover`]); an answer is then sent like one.
async fn record_handed(
    key: &SessionKey,
    agent: &mut Option<Agent>,
    slot: &TurnSlot,
    work: &Work,
    handed: &handover::Handed,
    chats: &Arc<Chats>,
) -> WorkResult {
    let text = if handed.send { handed.text.clone() } else { String::new() };
    let agent = match open(key, agent, slot, &work.delivery, &work.message, chats).await {
        Ok(a) => a,
        Err(e) => {
            tracing::warn!(chat = %key.address(), "not kept in the chat's history: {e}");
            return WorkResult::Answered(text);
        }
    };
    for message in handover::conversation(handed, &work.message.id) {
        if let Err(e) = agent.add_message(message).await {
            tracing::warn!(chat = %key.address(), "not kept in the chat's history: {e}");
        }
    }
    WorkResult::Answered(text)
}

/// Runs the model on one message.
async fn turn(
    key: &SessionKey,
    agent: &mut Option<Agent>,
    slot: &TurnSlot,
    work: &Work,
    journalled: Option<&JournalledTurn>,
    chats: &Arc<Chats>,
) -> WorkResult {
    let permit = match chats.turns.acquire().await {
        Ok(p) => p,
        Err(_) => return WorkResult::Failed("the gateway is stopping".into()),
    };
    let agent = match open(key, agent, slot, &work.delivery, &work.message, chats).await {
        Ok(a) => a,
        Err(e) => return WorkResult::Failed(e),
    };
    if let Some(journalled) = journalled {
        let origin = serde_json::to_value(&work.message).unwrap_or_default();
        agent.journal_turn(journalled.turn.clone(), origin);
    }
    // Approval requests of this turn go to whoever started it, and end with
    // it. Turns in flight finish even when the gateway is asked to stop; only
    // the sender's own stop (the web chat's button) cancels one.
    let cancel = work.message.cancel.clone().unwrap_or_default();
    slot.set(&turn_owner(key, &work.message), cancel.clone());
    chats.turn_started();
    let (tx, mut rx) = mpsc::unbounded_channel::<AgentEvent>();
    let tap = work.message.tap.clone();
    let (jobs_of, jobs_chats) = (key.clone(), chats.clone());
    let forward = tokio::spawn(async move {
        while let Some(event) = rx.recv().await {
            if let Some(tap) = &tap {
                tap.send(&event);
            }
            // A tool call may have started, stopped or collected a job.
            if matches!(event, AgentEvent::ToolCallFinished { .. }) {
                show_jobs(&jobs_chats, &jobs_of);
            }
        }
    });
    let rules =
        if work.message.channel == SYSTEM_CHANNEL { InputRules::SYSTEM } else { InputRules::CHAT };
    let report = match chats.runtime.turn(&work.message.content, rules) {
        Turn::Command { command, args } => {
            let message = ferroclaw_core::mentions::user_message;
            chats.runtime.run_command(agent, &command, args, message, &tx, &cancel).await
        }
        // A chat's message: its text and the files it carries, no `@path`.
        Turn::Shell(_) | Turn::Message { .. } => {
            let turn = agent.run_turn(user_input(&work.message, chats).await, &tx, &cancel).await;
            // The wait for the disk (batched with other chats' turns) does
            // not hold a turn slot; the answer still waits for it.
            drop(permit);
            agent.commit_turn(turn, &tx).await
        }
    };
    drop(tx);
    // Every event reaches the tap before the answer is delivered (by the caller).
    let _ = forward.await;
    show_jobs(chats, key);
    chats.turn_finished();
    if report.is_error() {
        WorkResult::Failed(report.text)
    } else {
        WorkResult::Answered(report.text)
    }
}

/// Shows the chat's background jobs live where its channel can (the web app),
/// instead of the page asking for them.
fn show_jobs(chats: &Chats, key: &SessionKey) {
    let jobs = chats.jobs_of(key);
    if let Some(channel) = chats.outbox.channel(&key.channel) {
        channel.show_jobs(&key.chat_id, &jobs);
    }
}

/// The message for the model: the text, with what was attached (images as
/// image blocks, files saved in the workspace's inbox, voice transcribed).
async fn user_input(message: &InboundMessage, chats: &Chats) -> Message {
    let files = media::attachments(message);
    if files.is_empty() {
        return Message::user(message.content.clone());
    }
    let mut transcripts = Vec::new();
    if let Some(settings) = &chats.settings.transcription {
        for (i, file) in files.iter().enumerate().filter(|(_, f)| f.is_audio()) {
            transcripts.push((i, media::transcribe(settings, file).await));
        }
    }
    let workspace = chats.workspace.clone();
    let text = message.content.clone();
    let model = chats.runtime.config().model_spec().unwrap_or_default();
    let limits = media::ImageLimits::for_model(&model);
    // Decoding and scaling pictures is work for a blocking thread.
    tokio::task::block_in_place(|| {
        media::user_message(&text, files, &workspace, &transcripts, limits)
    })
}

/// Who may answer the approval requests of a turn: the sender of its
/// message; for the gateway's own messages (cron, jobs), the chat's person
/// (in a direct chat the chat id is theirs; the web chat's is the token holder).
fn turn_owner(key: &SessionKey, message: &InboundMessage) -> String {
    if message.channel != SYSTEM_CHANNEL {
        return message.sender.clone();
    }
    let target = SessionKey::parse_address(&message.chat_id).unwrap_or_else(|| key.clone());
    if target.channel == "web" { crate::bus::OWNER.to_string() } else { target.chat_id }
}

/// The chat's agent, opened (resumed from its session file) when needed.
async fn open<'a>(
    key: &SessionKey,
    agent: &'a mut Option<Agent>,
    slot: &TurnSlot,
    delivery: &Delivery,
    message: &InboundMessage,
    chats: &Arc<Chats>,
) -> Result<&'a mut Agent, String> {
    let api = ApiTurn::of(message);
    // A conversation kept from an earlier turn is used again only when it is
    // still the chat's session and its file is as it left it: another
    // gateway may have taken turns in it (this one's copy then brought up to
    // the database's before this message came) or started a new one.
    if let Some(kept) = agent.as_ref()
        && (!kept.session().unchanged_on_disk()
            || kept.session().meta().id != chats.names.current(key))
        && let Some(mut stale) = agent.take()
    {
        chats.forget_jobs(key);
        Box::pin(stale.finish()).await;
    }
    if agent.is_none() {
        // Several gateways: another process may have started a new session
        // for this chat (`/new`); the claim set the database's choice here
        // before the message came (see `shared_sessions::before_turn`).
        let id = chats.names.current(key);
        // The message and cron tools default to where this chat's answers go.
        let target = match delivery {
            Delivery::To(to) => to.clone(),
            _ => SessionKey::new(message.channel.clone(), message.chat_id.clone()),
        };
        // Calls that need approval are asked for where this chat's answers go.
        let approver: Arc<dyn ferroclaw_core::Approver> = Arc::new(ChatApprover {
            broker: chats.approvals.clone(),
            chat: target.clone(),
            turn: slot.clone(),
        });
        let options = SessionOptions {
            extra_tools: vec![
                Arc::new(MessageTool {
                    outbox: chats.outbox.clone(),
                    channel: target.channel.clone(),
                    chat_id: target.chat_id.clone(),
                    home: key.clone(),
                    keep: Some(keep_in_history(chats)),
                    store: chats.store.as_ref().map(|link| link.store.clone()),
                }),
                Arc::new(CronTool {
                    store: chats.cron.clone(),
                    channel: target.channel,
                    chat_id: target.chat_id,
                }),
            ],
            journal: chats.journal.clone(),
            ..Default::default()
        };
        let mut options = options;
        if let Some(api) = &api {
            let spec = api.model.clone().or_else(|| chats.runtime.config().model_spec().ok());
            let limits = media::ImageLimits::for_model(&spec.unwrap_or_default());
            (options.append_system_prompt, options.conversation, options.private) =
                api.options(limits);
        }
        // Opening reads files: let other tasks move to other threads meanwhile.
        let resume = Resume::Named(id.clone());
        let opened = tokio::task::block_in_place(|| chats.runtime.open(resume, approver, options))
            .map_err(|e| {
                tracing::error!("cannot open a chat: {e}");
                format!("cannot open the chat: {e}")
            })?
            .agent;
        tracing::info!(session = %id, chat = %key.address(), "agent opened");
        if let Some(jobs) = opened.jobs() {
            chats.watch_jobs(key, jobs.clone());
        }
        *agent = Some(opened);
    }
    let opened = agent.as_mut().ok_or_else(|| "no agent".to_string())?;
    if let Some(api) = &api {
        // The client's latest `system` message, model, sampling and branch.
        api.prepare(opened, &chats.runtime)?;
    }
    Ok(opened)
}

/// What the `message` tool of a chat's agent calls for a message it sent
/// to another chat: that chat keeps it in its history.
fn keep_in_history(chats: &Arc<Chats>) -> crate::tools::KeepInHistory {
    let chats = Arc::downgrade(chats);
    Arc::new(move |to: &SessionKey, handed: handover::Handed| {
        if let Some(chats) = chats.upgrade() {
            chats.hand_over(to, handed);
        }
    })
}

/// `/help`: the chat commands, then the custom ones (`.agent/commands/`, ...).
fn help(chats: &Chats) -> String {
    let mut text = HELP.to_string();
    for c in chats.runtime.custom_commands() {
        let hint = c.argument_hint.as_deref().map(|h| format!(" {h}")).unwrap_or_default();
        text.push_str(&format!("\n/{}{hint} — {}", c.name, c.description));
    }
    text
}

/// Runs a chat command.
async fn command_reply(
    key: &SessionKey,
    agent: &mut Option<Agent>,
    slot: &TurnSlot,
    command: ChatCommand,
    work: &Work,
    chats: &Arc<Chats>,
) -> WorkResult {
    match command {
        ChatCommand::Help => WorkResult::Answered(help(chats)),
        // The gateway answers these before they reach a worker.
        ChatCommand::Decide { .. } => WorkResult::Answered(String::new()),
        ChatCommand::New => {
            if let Some(mut old) = agent.take() {
                old.finish().await;
            }
            let id = chats.names.rotate(key);
            WorkResult::Answered(format!("Started a new conversation (session {id})."))
        }
        ChatCommand::Status | ChatCommand::Usage | ChatCommand::Compact(_) => {
            let a = match open(key, agent, slot, &work.delivery, &work.message, chats).await {
                Ok(a) => a,
                Err(e) => return WorkResult::Failed(e),
            };
            match command {
                ChatCommand::Compact(focus) => {
                    let _permit = chats.turns.acquire().await;
                    let before = a.estimated_tokens();
                    let (tx, _rx) = mpsc::unbounded_channel();
                    match a.compact(focus.as_deref(), &tx, &CancellationToken::new()).await {
                        Ok(()) => WorkResult::Answered(format!(
                            "Compacted the conversation: about {before} → {} tokens.",
                            a.estimated_tokens()
                        )),
                        Err(e) => WorkResult::Failed(e),
                    }
                }
                ChatCommand::Usage => {
                    let u = a.total_usage();
                    let cost = ferroclaw_core::pricing::cost(a.model_spec(), &u)
                        .map(|c| format!(", about ${c:.4}"))
                        .unwrap_or_default();
                    WorkResult::Answered(format!(
                        "Since the assistant opened this chat: {} input tokens ({} from cache), {} output tokens{cost}.",
                        u.input_tokens + u.cache_read_tokens + u.cache_write_tokens,
                        u.cache_read_tokens,
                        u.output_tokens
                    ))
                }
                _ => {
                    let used = a.estimated_tokens();
                    let window = a.context_window().max(1);
                    WorkResult::Answered(format!(
                        "Session {}\nModel {}\nMessages {}\nContext about {used} of {window} tokens ({}%)\nTools {}",
                        a.session().meta().id,
                        a.model_spec(),
                        a.messages().len(),
                        used * 100 / window,
                        a.tools().len()
                    ))
                }
            }
        }
    }
}
