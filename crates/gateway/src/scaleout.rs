//! Several gateway processes on one PostgreSQL database (`[gateway] store =
//! "postgres://..."`): what this process does differently from one gateway
//! on its own files.
//!
//! - A message a channel admits is stored in the database's inbound queue
//!   (once per channel + platform message id) instead of going to a chat
//!   worker here; any process's [`claim_loop`] takes it, one chat at a time,
//!   each chat in order ([`ferroclaw_store::PgStore::claim`]).
//! - The claimed message runs in this process's chat worker as usual; the
//!   agent is reopened from the session file for every message, since the
//!   chat's last turn may have run in another process.
//! - The answer is stored with the message finished, in one transaction;
//!   [`delivery_loop`] takes each answer once and sends it through the
//!   channel here: answers to the web chat and the API go back through the
//!   process that holds the connection, others through any process. An
//!   answer whose connection is in the process that ran its turn is sent by
//!   that worker once stored, in order, without a take of its own
//!   ([`ferroclaw_store::PgStore::send_myself`]).
//! - Channels that must run once (Telegram's long poll, Discord's and
//!   Slack's sockets) run in the process holding their lease ([`hold_channel`]).
//!
//! - A chat's session is kept in the database too ([`crate::shared_sessions`]):
//!   the local file is brought up to the database's copy before the message
//!   runs, and the turn's new lines are stored with its answer, so gateways
//!   need not share `$FERROCLAW_HOME`. What people read (conversation
//!   lists, histories, their pictures, the files the agent sent) is read
//!   from the database too ([`crate::history`], [`crate::shared_media`]).

use crate::backoff::Backoff;
use std::sync::Arc;
use std::time::Duration;

use ferroclaw_store::{Claim, Enqueued, Incoming, LookAgain, Outbound, SendIt};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use crate::bus::{BusError, Failure, InboundMessage, MessageBus, OutboundMessage};
use crate::channel::Channel;
use crate::chats::Chats;
use crate::sessions::SessionKey;
use crate::worker::{Delivery, Work, WorkResult};

/// The turn journal in the database.
pub use crate::pg_journal::PgJournal;
use crate::store_link::{Leases, RETRY_FIRST, RETRY_MAX, STORE_BUFFER, StoreLink, safety_poll};

/// How long after a chat lease's end the claim loop looks again, so that
/// it has ended by the database's clock too.
const LEASE_END_MARGIN: Duration = Duration::from_millis(50);
/// Answers taken for delivery at once.
const DELIVERY_BATCH: i64 = 64;
/// Messages written to the database in one statement, at most.
const STORE_BATCH: usize = 64;

/// The key that makes a message unique: the platform's id where it has one
/// ([`crate::resume::platform_id`]: Telegram's update id, so a button press
/// delivered again after a restart is taken once and two presses are two),
/// within its chat; else this process's own.
fn platform_id(message: &InboundMessage, holder: &str) -> String {
    match crate::resume::platform_id(message) {
        Some(("message_id", id)) => format!("{}/{id}", message.chat_id),
        Some((key, id)) => format!("{}/{key}:{id}", message.chat_id),
        None => format!("{holder}/{}", message.id),
    }
}

/// Writes admitted messages to the database in arrival order (those waiting
/// together in one statement) until `stop`, then writes what is still
/// queued. While the database is away, the messages wait in the bounded
/// queue ([`STORE_BUFFER`]) and are written, in order, once it is back:
/// nothing is answered or acknowledged before it is stored.
pub async fn store_loop(
    chats: Arc<Chats>,
    link: Arc<StoreLink>,
    mut rx: mpsc::Receiver<InboundMessage>,
    stop: CancellationToken,
) {
    let holder = link.store.holder().to_string();
    let mut backoff = Backoff::new(RETRY_FIRST, RETRY_MAX);
    let mut batch: Vec<InboundMessage> = Vec::new();
    loop {
        if batch.is_empty() {
            let first = tokio::select! {
                biased;
                message = rx.recv() => message,
                () = stop.cancelled() => rx.try_recv().ok(),
            };
            let Some(first) = first else { return };
            batch.push(first);
        }
        while batch.len() < STORE_BATCH {
            match rx.try_recv() {
                Ok(m) => batch.push(m),
                Err(_) => break,
            }
        }
        let rows = rows_of(&mut batch, &link, &holder);
        match link.store.enqueue_many(&rows).await {
            Ok(stored) => {
                if !backoff.fresh() {
                    tracing::info!(url = %link.store.url(), "the database is back; messages stored");
                }
                backoff.reset();
                confirm_stored(&link, batch.drain(..).zip(stored));
            }
            // Stopping with the database away: these were never stored, so
            // their senders are told so rather than left waiting.
            Err(e) if stop.is_cancelled() => {
                tracing::error!("{} message(s) not stored before stopping: {e}", batch.len());
                refuse_unstored(&chats, &link, batch.drain(..)).await;
            }
            Err(e) => {
                if backoff.fresh() {
                    tracing::error!(
                        "cannot store messages in the database ({e}); holding up to {STORE_BUFFER} until it is back"
                    );
                }
                backoff.wait(&stop).await;
            }
        }
    }
}

/// The database rows of `batch`; a message that cannot be written as one is
/// dropped from it (and logged).
fn rows_of(batch: &mut Vec<InboundMessage>, link: &StoreLink, holder: &str) -> Vec<Incoming> {
    let mut rows = Vec::with_capacity(batch.len());
    batch.retain(|message| match serde_json::to_value(message) {
        Ok(body) => {
            let key = SessionKey::new(message.channel.clone(), message.chat_id.clone());
            rows.push(Incoming {
                channel: message.channel.clone(),
                platform_id: platform_id(message, holder),
                chat: key.address(),
                origin: Some(holder.to_string()),
                body,
            });
            true
        }
        Err(e) => {
            tracing::error!("message not stored: {e}");
            link.live().remove(&message.id);
            false
        }
    });
    rows
}

/// Stored: each channel may confirm its message to its platform now; a
/// message received again is answered once (its first copy's turn).
fn confirm_stored(link: &StoreLink, stored: impl Iterator<Item = (InboundMessage, Enqueued)>) {
    for (mut message, stored) in stored {
        if let Some(receipt) = message.receipt.take() {
            receipt.confirm();
        }
        if stored == Enqueued::Duplicate {
            tracing::info!(channel = %message.channel, "message received again; answered once");
            link.live().remove(&message.id);
        }
    }
}

/// Tells the senders of messages that were never stored to try again.
async fn refuse_unstored(
    chats: &Chats,
    link: &StoreLink,
    messages: impl Iterator<Item = InboundMessage>,
) {
    for message in messages {
        link.live().remove(&message.id);
        let reply = OutboundMessage::reply(
            &message,
            "I can't take messages right now (my database is unreachable); try again shortly.",
        )
        .failed(Failure::Busy);
        if let Err(e) = chats.outbox.send(reply).await {
            tracing::warn!("reply not delivered: {e}");
        }
    }
}

/// Claims waiting messages (as many at once as this process has turns
/// free, in one statement) and runs each in its chat's worker, until `stop`.
/// An unreachable database is asked again with a growing wait; the work
/// resumes by itself when it is back.
pub async fn claim_loop(chats: Arc<Chats>, link: Arc<StoreLink>, stop: CancellationToken) {
    let check = chats.settings.model_config_check;
    let config = chats.runtime.config();
    let Some(registered) = crate::liveness::register(&link, config, check, &stop).await else {
        return;
    };
    let registered = link.registered.get_or_init(|| registered);
    let gate = registered.gate.as_deref();
    let permits = Arc::new(Semaphore::new(chats.settings.max_concurrent_turns));
    let mut backoff = Backoff::new(RETRY_FIRST, RETRY_MAX);
    loop {
        // Claims are taken only while this process is seen alive (its
        // liveness lock is held): else others would take them over at once.
        if !registered.liveness.is_alive() {
            tokio::select! {
                () = stop.cancelled() => return,
                () = registered.liveness.wait_alive() => {}
            }
        }
        let Some(free) = free_turns(&permits, &stop).await else { return };
        let wanted = free.len();
        let got = match link.store.claim_serving(link.leases.chat, wanted as i64, gate).await {
            Ok(claims) => {
                if !backoff.fresh() {
                    tracing::info!(url = %link.store.url(), "the database is back; taking messages again");
                }
                backoff.reset();
                let got = claims.len();
                start_claims(&chats, &link, claims, free);
                got
            }
            Err(e) => {
                drop(free);
                if backoff.fresh() {
                    tracing::error!("cannot take messages from the database: {e}; trying again");
                }
                backoff.wait(&stop).await;
                continue;
            }
        };
        // As many as asked for: there may be more waiting.
        let go_on = match got {
            _ if got == wanted => true,
            // Some taken: their ends notify, and a dead process's chats
            // are looked for again within the liveness check.
            1.. => wait_or_stop(&link, ferroclaw_store::LIVENESS_CHECK, &stop).await,
            0 => wait_for_work(&link, registered.takes_turns, &stop).await,
        };
        if !go_on {
            return;
        }
    }
}

/// Every turn this process has free now, waiting for the first; `None` when stopped.
async fn free_turns(
    permits: &Arc<Semaphore>,
    stop: &CancellationToken,
) -> Option<Vec<OwnedSemaphorePermit>> {
    let first = tokio::select! {
        () = stop.cancelled() => return None,
        permit = permits.clone().acquire_owned() => permit.ok()?,
    };
    let mut free = vec![first];
    while let Ok(p) = permits.clone().try_acquire_owned() {
        free.push(p);
    }
    Some(free)
}

/// Runs each claim in its chat's worker, holding one of `free` while it runs.
fn start_claims(
    chats: &Arc<Chats>,
    link: &Arc<StoreLink>,
    claims: Vec<Claim>,
    free: Vec<OwnedSemaphorePermit>,
) {
    for (claim, permit) in claims.into_iter().zip(free) {
        let (chats, running) = (chats.clone(), link.clone());
        link.claims.spawn(async move {
            run_claim(&chats, &running, claim).await;
            drop(permit);
        });
    }
}

/// Waits for a notification of a waiting message, or `wait`; false when stopped.
async fn wait_or_stop(link: &StoreLink, wait: Duration, stop: &CancellationToken) -> bool {
    tokio::select! {
        () = stop.cancelled() => false,
        () = link.wakeups.inbound() => true,
        () = tokio::time::sleep(wait) => true,
    }
}

/// Nothing to claim: waits until there may be. A gateway that does not
/// serve the database's model config only looks now and then (another
/// gateway may adopt its config); else a message behind a dead worker's
/// lease can be taken once the lease runs out, and nothing notifies that:
/// it looks again then. False when stopped.
async fn wait_for_work(link: &StoreLink, takes_turns: bool, stop: &CancellationToken) -> bool {
    if !takes_turns {
        return tokio::select! {
            () = stop.cancelled() => false,
            () = tokio::time::sleep(safety_poll()) => true,
        };
    }
    let wait = match link.store.look_again(link.leases.chat).await {
        Ok(LookAgain::LeaseEnds(end)) => (end + LEASE_END_MARGIN).min(safety_poll()),
        Ok(LookAgain::Soon) => RETRY_FIRST,
        Ok(LookAgain::OnNotification) => safety_poll(),
        Err(_) => RETRY_MAX,
    };
    wait_or_stop(link, wait, stop).await
}

/// Finishes `claim` with `answer`, trying again for as long as the
/// database is away: the message counts as answered only once this is
/// stored (until then it stays unfinished, and a worker that takes it over
/// replays the turn from its journal). Only the database says whether the
/// answer is still this worker's to store: nobody can take the chat over
/// while it is away, nor for a grace after it restarts (see
/// `ferroclaw_store::RESTART_GRACE_SECS`), so an answer held through an
/// outage is stored once it is back, however long the outage lasted, and
/// the message is not run twice. A stopping gateway waits for this within
/// its shutdown grace.
async fn finish_claim(
    link: &StoreLink,
    claim: &Claim,
    answer: Option<&Outbound>,
    session: Option<&ferroclaw_store::SessionWrite>,
    current: Option<(&str, &str)>,
) {
    let mut backoff = Backoff::new(RETRY_FIRST, RETRY_MAX);
    let never = CancellationToken::new();
    let mut back = link.wakeups.connected();
    loop {
        match link.store.complete_with_session(claim, answer, session, current).await {
            Ok(true) => {
                if !backoff.fresh() {
                    tracing::info!(chat = %claim.chat, "answer stored now that the database is back");
                }
                return;
            }
            Ok(false) => {
                tracing::warn!(chat = %claim.chat, "answer dropped: another process took the message over");
                return;
            }
            Err(e) => {
                if backoff.fresh() {
                    tracing::warn!(chat = %claim.chat, "answer not stored yet ({e}); trying again");
                }
                // Tried again at the next backoff, or at once when the
                // database is seen back (within its restart grace).
                tokio::select! {
                    () = backoff.wait(&never) => {}
                    _ = back.wait(RETRY_MAX) => {}
                }
            }
        }
    }
}

/// Runs one claimed message in its chat's worker, keeping the chat's lease,
/// then stores the answer and finishes the message.
async fn run_claim(chats: &Arc<Chats>, link: &StoreLink, claim: Claim) {
    let message = match claimed_message(link, &claim) {
        Ok(m) => m,
        Err(e) => {
            tracing::error!(id = claim.id, "stored message does not parse ({e}); dropped");
            let _ = link.store.complete(&claim, None).await;
            return;
        }
    };
    let key = SessionKey::new(message.channel.clone(), message.chat_id.clone());
    // The session as the database has it (the claim read where it starts),
    // before the agent opens it. When that cannot be done the message is
    // left to run again (its lease runs out).
    let (first, start) = (claim.attempts == 0, claim.start.as_ref());
    let synced = match crate::shared_sessions::before_turn(chats, &link.store, &key, start, first)
        .await
    {
        Ok(s) => s,
        Err(e) => {
            tracing::error!(chat = %claim.chat, "session not brought up to date ({e}); the message will run again");
            crate::liveness::give_back(link, &claim).await;
            return;
        }
    };
    let outcome = run_in_worker(chats, link, &claim, &message, &key).await;
    let answer = stored_answer(&claim, &message, outcome);
    let mine = claim.origin.as_deref() == Some(link.store.holder());
    if answer.is_none() && mine {
        link.live().remove(&message.id);
    }
    // The turn's lines are stored with its answer, or neither is.
    let added = match crate::shared_sessions::after_turn(chats, &key, &synced) {
        Ok(added) => added,
        Err(e) => {
            tracing::error!(chat = %claim.chat, "session not read ({e}); the message will run again");
            crate::liveness::give_back(link, &claim).await;
            return;
        }
    };
    let current = added.current.as_ref().map(|(chat, session)| (chat.as_str(), session.as_str()));
    // An answer to a connection this process holds is sent from here once
    // stored, without a round trip through the delivery loop's take.
    let here = answer.as_ref().filter(|a| a.origin.as_deref() == Some(link.store.holder()));
    if let Some(answer) = here {
        link.store.send_myself(&answer.key);
    }
    let here = here.is_some();
    finish_claim(link, &claim, answer.as_ref(), added.write.as_ref(), current).await;
    if here && let Some(answer) = answer {
        match link.store.sent_by_worker(&answer.key) {
            SendIt::Now => {
                let _in_order = link.sending.lock().await;
                deliver(chats, link, answer).await;
            }
            SendIt::ByTheLoop => link.wakeups.wake_outbound(),
        }
    }
}

/// The message `claim` holds, with its live parts when it was received here.
fn claimed_message(link: &StoreLink, claim: &Claim) -> Result<InboundMessage, serde_json::Error> {
    let mut message: InboundMessage = serde_json::from_value(claim.body.clone())?;
    if claim.attempts == 0 {
        message.metadata.insert(crate::resume::FIRST_CLAIM_KEY.into(), true.into());
    }
    let mine = claim.origin.as_deref() == Some(link.store.holder());
    if mine && let Some((tap, cancel)) = link.live().get(&message.id).cloned() {
        message.tap = tap;
        message.cancel = cancel;
    }
    Ok(message)
}

/// Runs `message` in its chat's worker, renewing the chat's lease while it runs.
async fn run_in_worker(
    chats: &Arc<Chats>,
    link: &StoreLink,
    claim: &Claim,
    message: &InboundMessage,
    key: &SessionKey,
) -> Result<WorkResult, BusError> {
    let (done, result) = oneshot::channel();
    let work = Work {
        message: message.clone(),
        delivery: Delivery::Nowhere,
        quiet_if_ok: false,
        done: Some(done),
    };
    chats.enqueue(key.clone(), work)?;
    tokio::pin!(result);
    loop {
        tokio::select! {
            r = &mut result => return Ok(r.unwrap_or(WorkResult::Failed("the gateway stopped".into()))),
            () = tokio::time::sleep(link.leases.chat / 3) => {
                match link.store.renew(claim, link.leases.chat).await {
                    Ok(true) => {}
                    Ok(false) => tracing::warn!(chat = %claim.chat, "lost the chat's lease; another process took the message over"),
                    Err(e) => tracing::warn!(chat = %claim.chat, "cannot renew the chat's lease: {e}"),
                }
            }
        }
    }
}

/// The answer to store with the finished message (none for an empty one).
fn stored_answer(
    claim: &Claim,
    message: &InboundMessage,
    outcome: Result<WorkResult, BusError>,
) -> Option<Outbound> {
    let reply = match outcome {
        Ok(WorkResult::Answered(text)) if text.trim().is_empty() => return None,
        // What a cron job or the heartbeat said goes out as a message of its own.
        Ok(WorkResult::Answered(text)) if crate::handover::handed(message).is_some() => {
            OutboundMessage { reply_to: None, ..OutboundMessage::reply(message, text) }
        }
        Ok(WorkResult::Answered(text)) => OutboundMessage::reply(message, text),
        Ok(WorkResult::Failed(e)) => {
            OutboundMessage::reply(message, format!("Sorry, that failed: {e}"))
                .failed(Failure::Failed)
        }
        Err(e) => OutboundMessage::reply(message, e.to_string()).failed(Failure::from(&e)),
    };
    match serde_json::to_value(&reply) {
        Ok(body) => Some(Outbound {
            key: format!("reply:{}", claim.id),
            channel: claim.channel.clone(),
            chat: claim.chat.clone(),
            // Web chats and API requests are answered through their connection.
            origin: if claim.channel == "web" { claim.origin.clone() } else { None },
            body,
        }),
        Err(e) => {
            tracing::error!("answer not stored: {e}");
            None
        }
    }
}

/// Sends the answers this process may send, each once, until `stop`.
pub async fn delivery_loop(chats: Arc<Chats>, link: Arc<StoreLink>, stop: CancellationToken) {
    let mut backoff = Backoff::new(RETRY_FIRST, RETRY_MAX);
    loop {
        let sending = link.sending.lock().await;
        let taken = link.store.take_outbound_batch(DELIVERY_BATCH).await;
        let full = match taken {
            Ok((batch, full)) => {
                backoff.reset();
                for answer in batch {
                    deliver(&chats, &link, answer).await;
                }
                drop(sending);
                full
            }
            Err(e) => {
                drop(sending);
                if backoff.fresh() {
                    tracing::error!("cannot take answers from the database: {e}; trying again");
                }
                if stop.is_cancelled() {
                    return;
                }
                backoff.wait(&stop).await;
                continue;
            }
        };
        if full {
            continue;
        }
        if stop.is_cancelled() {
            return;
        }
        tokio::select! {
            // One more round for the turns that finished just before.
            () = stop.cancelled() => {}
            () = link.wakeups.outbound() => {}
            () = tokio::time::sleep(safety_poll()) => {}
        }
    }
}

async fn deliver(chats: &Chats, link: &StoreLink, answer: Outbound) {
    let message: OutboundMessage = match serde_json::from_value(answer.body) {
        Ok(m) => m,
        Err(e) => {
            tracing::error!(key = %answer.key, "stored answer does not parse ({e}); dropped");
            return;
        }
    };
    if let Some(id) = &message.reply_to {
        link.live().remove(id);
    }
    if let Err(e) = chats.outbox.send(message).await {
        tracing::warn!(key = %answer.key, "answer not delivered: {e}");
    }
}

/// Runs `channel` while this process holds its lease: waits for the lease,
/// runs the channel, renews; stops the channel when the lease is lost (another
/// process runs it then) and gives the lease up when `stop` comes.
pub async fn hold_channel(
    link: Arc<StoreLink>,
    channel: Arc<dyn Channel>,
    bus: MessageBus,
    stop: CancellationToken,
) {
    let name = channel.name().to_string();
    let Leases { channel: lease, channel_renew: renew, .. } = link.leases;
    loop {
        match link.store.hold_channel(&name, lease).await {
            Ok(true) => {}
            Ok(false) => {
                tokio::select! {
                    () = stop.cancelled() => return,
                    () = tokio::time::sleep(renew) => continue,
                }
            }
            Err(e) => {
                tracing::warn!(channel = %name, "channel lease: {e}");
                tokio::select! {
                    () = stop.cancelled() => return,
                    () = tokio::time::sleep(renew) => continue,
                }
            }
        }
        tracing::info!(channel = %name, "this process holds the channel");
        let running = stop.child_token();
        let task = {
            let (channel, bus, running) = (channel.clone(), bus.clone(), running.clone());
            tokio::spawn(async move { channel.start(bus, running).await })
        };
        let mut renewed = std::time::Instant::now();
        loop {
            tokio::select! {
                () = stop.cancelled() => break,
                () = tokio::time::sleep(renew) => {}
            }
            match link.store.hold_channel(&name, lease).await {
                Ok(true) => renewed = std::time::Instant::now(),
                Ok(false) => {
                    tracing::warn!(channel = %name, "another process took the channel over");
                    break;
                }
                // The database is away: run on until the lease would have run
                // out, then stop (another process may hold it by then).
                Err(e) => {
                    tracing::warn!(channel = %name, "cannot renew the channel's lease: {e}");
                    if renewed.elapsed() >= lease {
                        break;
                    }
                }
            }
        }
        running.cancel();
        match task.await {
            Ok(Err(e)) => tracing::error!("{e}"),
            Err(e) => tracing::error!(channel = %name, "channel task failed: {e}"),
            Ok(Ok(())) => {}
        }
        if stop.is_cancelled() {
            let _ = link.store.release_channel(&name).await;
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Telegram sends an update again when the process that took it died
    /// before confirming it: the same button press must be stored once, and
    /// two presses on one approval message (one to approve, one that came
    /// later) are two messages, not a duplicate of each other.
    #[test]
    fn a_telegram_button_press_delivered_again_is_one_message_and_two_presses_are_two() {
        let press = |update_id: i64, query_id: &str, data: &str| {
            serde_json::json!({"update_id": update_id, "callback_query": {
                "id": query_id, "data": data, "from": {"id": 42, "first_name": "Ann"},
                "message": {"message_id": 7, "chat": {"id": 42}}}})
        };
        let key = |update: &serde_json::Value, holder: &str| {
            let message = crate::telegram::TelegramChannel::inbound(update).expect("a press");
            platform_id(&message, holder)
        };
        let first = press(100, "q1", "/approve a1");
        // Delivered again to another process after a restart: the same key.
        assert_eq!(key(&first, "gw-1"), key(&first, "gw-2"));
        // Another press on the same message: another key.
        assert_ne!(key(&first, "gw-1"), key(&press(101, "q2", "/deny a1"), "gw-1"));
        // A text message and a press are never the same message either.
        let text = serde_json::json!({"update_id": 102, "message": {
            "message_id": 100, "text": "hi", "from": {"id": 42}, "chat": {"id": 42}}});
        let text_key = key(&text, "gw-1");
        assert_eq!(text_key, key(&text, "gw-2"));
        assert_ne!(text_key, key(&first, "gw-1"));
    }

    /// Socket Mode sends an `interactive` envelope again (with a new
    /// envelope id) when its acknowledgement came late or the process died
    /// first: the same press must be stored once, while a second press on
    /// the same approval message (the same user, later; or another user at
    /// once) is a message of its own.
    #[test]
    fn a_slack_button_press_delivered_again_is_one_message_and_two_presses_are_two() {
        let press = |user: &str, action_ts: &str, trigger_id: &str, value: &str| {
            serde_json::json!({"type": "block_actions", "trigger_id": trigger_id,
                "user": {"id": user}, "channel": {"id": "C1"},
                "container": {"type": "message", "message_ts": "1700000000.000100", "channel_id": "C1"},
                "actions": [{"type": "button", "action_id": "approve", "value": value,
                    "action_ts": action_ts}]})
        };
        let key = |payload: &serde_json::Value, holder: &str| {
            let message = crate::slack::button_press(payload).expect("a press");
            platform_id(&message, holder)
        };
        let first = press("U1", "1700000001.000200", "t1", "/approve a1");
        // Delivered again to another process after a restart: the same key.
        assert_eq!(key(&first, "gw-1"), key(&first, "gw-2"));
        // The same user pressing again later, and another user pressing at
        // the same moment: other keys.
        let later = press("U1", "1700000002.000300", "t2", "/deny a1");
        let other = press("U2", "1700000001.000200", "t3", "/approve a1");
        assert_ne!(key(&first, "gw-1"), key(&later, "gw-1"));
        assert_ne!(key(&first, "gw-1"), key(&other, "gw-1"));
        // The press is not the approval message it was made on either.
        let message = serde_json::json!({"type": "message", "channel": "C1", "user": "U1",
            "text": "hi", "ts": "1700000000.000100", "channel_type": "im"});
        let message = crate::slack::inbound_message(&message, "UBOT", &[]).expect("a message");
        assert_ne!(platform_id(&message, "gw-1"), key(&first, "gw-1"));
    }
}
