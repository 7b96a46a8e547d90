//! The gateway's door: every message a channel publishes comes through
//! [`Intake::dispatch`], which lets in only what the chat's channel admits
//! (its `dm_policy` and allow-list, [`crate::pairing`]) and what the
//! per-sender rate limit allows, answers `/help` and approval decisions at
//! once, and hands the rest to the chat's worker ([`Chats::enqueue`]) or,
//! with several gateways, to the shared queue.

use std::collections::HashMap;
use std::sync::Arc;

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::approval::Choice;
use crate::bus::{Failure, InboundMessage, OWNER, OutboundMessage, SYSTEM_CHANNEL};
use crate::chats::Chats;
use crate::commands::{ChatCommand, HELP};
use crate::config::ChannelSettings;
use crate::pairing::{Admission, PairingStore};
use crate::sessions::SessionKey;
use crate::web::limits::{Rate, RateLimiter};
use crate::worker::{Delivery, Work};

/// What decides whether a message gets in.
pub struct Intake {
    chats: Arc<Chats>,
    pairing: PairingStore,
    /// Each channel's settings (its `dm_policy` and `allow_from`), by name.
    channels: HashMap<String, ChannelSettings>,
    /// Messages by `CHANNEL:SENDER`.
    per_sender: RateLimiter,
    /// Messages whose admission the shared database decides, in arrival order.
    admissions: mpsc::Sender<InboundMessage>,
}

impl Intake {
    /// The door to `chats` for `channels`; and the messages the shared
    /// database must admit, for [`Intake::admit_in_order`].
    pub fn new(
        chats: Arc<Chats>,
        pairing: PairingStore,
        channels: &[ChannelSettings],
    ) -> (Arc<Intake>, mpsc::Receiver<InboundMessage>) {
        let (admissions, rx) = mpsc::channel(crate::bus::DEFAULT_QUEUE_CAPACITY);
        let per_sender = RateLimiter::new(chats.settings.messages_per_minute);
        let channels = channels.iter().map(|s| (s.name.clone(), s.clone())).collect();
        (Arc::new(Intake { chats, pairing, channels, per_sender, admissions }), rx)
    }

    /// Takes one message off the bus: admission, `/help`, then the chat's queue.
    pub fn dispatch(&self, message: InboundMessage) {
        if message.channel == SYSTEM_CHANNEL {
            self.gateway_own(message);
            return;
        }
        let Some(settings) = self.channels.get(&message.channel) else {
            tracing::warn!("message from unknown channel {:?} dropped", message.channel);
            return;
        };
        let Some(admission) = self.pairing.admit_now(settings, &message) else {
            // The shared database decides: asked off this loop, in arrival order.
            if let Err(e) = self.admissions.try_send(message) {
                tracing::warn!("message dropped: too many waiting for admission ({e})");
            }
            return;
        };
        self.admitted(message, admission);
    }

    /// Admits the messages the shared database must decide on (pairing and
    /// allow-lists), one at a time so a sender's messages keep their order,
    /// then goes on as [`Intake::dispatch`] does, until `stop`.
    pub async fn admit_in_order(
        self: Arc<Self>,
        mut rx: mpsc::Receiver<InboundMessage>,
        stop: CancellationToken,
    ) {
        loop {
            let message = tokio::select! {
                () = stop.cancelled() => return,
                message = rx.recv() => match message {
                    Some(m) => m,
                    None => return,
                },
            };
            let Some(settings) = self.channels.get(&message.channel) else { continue };
            let admission = self.pairing.admit(settings, &message).await;
            self.admitted(message, admission);
        }
    }

    /// A message of the gateway's own (`CHANNEL:CHAT_ID` in its chat id),
    /// answered in that chat.
    fn gateway_own(&self, message: InboundMessage) {
        let Some(key) = SessionKey::parse_address(&message.chat_id) else {
            tracing::warn!("system message for {:?} dropped: not CHANNEL:CHAT_ID", message.chat_id);
            return;
        };
        let work =
            Work { message, delivery: Delivery::To(key.clone()), quiet_if_ok: false, done: None };
        if let Err(e) = self.chats.enqueue(key, work) {
            tracing::warn!("system message dropped: {e}");
        }
    }

    /// The rest of [`Intake::dispatch`] once the channel's policy decided.
    fn admitted(&self, mut message: InboundMessage, admission: Admission) {
        if let Admission::Refuse(text) = admission {
            tracing::info!(channel = %message.channel, sender = %message.sender, "message refused by dm_policy");
            if let Some(text) = text {
                self.reply_now(&message, text);
            }
            return;
        }
        if self.over_the_limit(&message) {
            return;
        }
        match ChatCommand::parse(&message.content) {
            Some(ChatCommand::Help) => return self.reply_now(&message, HELP.into()),
            // Answered at once: the chat's worker is waiting for it.
            Some(ChatCommand::Decide { id, choice }) => return self.decide(message, id, choice),
            _ => {}
        }
        // Named once, here: whoever answers it (after a restart too) uses this id.
        crate::resume::turn_id(&mut message);
        let key = SessionKey::new(message.channel.clone(), message.chat_id.clone());
        // A stateless API request's one-off chat is no place for heartbeat findings.
        if !crate::api_turn::is_stateless_chat(&key) {
            self.chats.spoke(&key);
        }
        let copy = (message.channel.clone(), message.chat_id.clone(), message.id.clone());
        // Several gateways: into the shared queue, for whichever process is free.
        let queued = match &self.chats.store {
            Some(link) => link.accept(message),
            None => {
                // Queued for its chat is as kept as a message gets on files.
                if let Some(receipt) = message.receipt.take() {
                    receipt.confirm();
                }
                self.chats.enqueue(key, Work::reply(message))
            }
        };
        if let Err(e) = queued {
            let (channel, chat_id, id) = copy;
            let busy = OutboundMessage {
                channel,
                chat_id,
                content: e.to_string(),
                media: Vec::new(),
                reply_to: Some(id),
                failure: Some(Failure::from(&e)),
            };
            let outbox = self.chats.outbox.clone();
            tokio::spawn(async move { outbox.send(busy).await });
        }
    }

    /// True when `message`'s sender is over the rate limit (it is dropped,
    /// and the sender told once per flood). The web token holder is limited
    /// per address by the web channel instead.
    fn over_the_limit(&self, message: &InboundMessage) -> bool {
        if message.channel == "web" && message.sender == OWNER {
            return false;
        }
        let sender = format!("{}:{}", message.channel, message.sender);
        let Rate::Limited { retry_after_secs, first } = self.per_sender.check(&sender) else {
            return false;
        };
        tracing::info!(channel = %message.channel, sender = %message.sender, "message dropped: sender over the rate limit");
        // Told once per flood, so a flood gets no flood of answers.
        if first {
            let text = format!(
                "You're sending messages faster than I can take them; try again in {retry_after_secs} s."
            );
            let reply = OutboundMessage::reply(message, text).failed(Failure::Busy);
            let outbox = self.chats.outbox.clone();
            tokio::spawn(async move { outbox.send(reply).await });
        }
        true
    }

    /// `/approve`, `/deny` or a button press: answers the request and tells the sender.
    fn decide(&self, message: InboundMessage, id: String, choice: Choice) {
        let approvals = self.chats.approvals.clone();
        tokio::spawn(async move { approvals.answer(&message, &id, choice).await });
    }

    fn reply_now(&self, message: &InboundMessage, text: String) {
        let outbox = self.chats.outbox.clone();
        let reply = OutboundMessage::reply(message, text);
        tokio::spawn(async move {
            if let Err(e) = outbox.send(reply).await {
                tracing::warn!("reply not delivered: {e}");
            }
        });
    }
}
