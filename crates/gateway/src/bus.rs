//! The message bus: INBOUND messages from channels (and from the gateway's
//! own sub-systems: background jobs, cron) on their way to an agent.
//!
//! Outbound messages do not travel on the bus: the agent's answer and the
//! `message` tool go straight to a channel's [`Channel::send`](crate::Channel::send).
//!
//! As in the seed design, `publish` hands a message to the subscriber of its
//! channel when there is one and queues it otherwise; `drain` takes queued
//! messages. Unlike the seed, every queue is bounded: a full queue answers
//! [`BusError::Busy`] (the channel tells its user to try again) instead of
//! growing without limit.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};

use ferroclaw_protocol::AgentEvent;
use serde::{Deserialize, Serialize};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

/// Messages a subscriber's queue holds before publishers get [`BusError::Busy`]:
/// a few seconds of a busy day for one person's assistant.
pub const DEFAULT_QUEUE_CAPACITY: usize = 256;

/// The subscription that receives messages of every channel without its own.
pub const ANY_CHANNEL: &str = "*";

/// The channel of the gateway's own messages (finished background jobs and
/// sub-agents); their `chat_id` is `CHANNEL:CHAT_ID` of the chat to report to.
pub const SYSTEM_CHANNEL: &str = "system";
/// The sender id of whoever holds the web token (the web chat's owner).
pub const OWNER: &str = "owner";

/// Where the events of the turn that answers a message are copied, for
/// channels that show the answer as it is written (web chat, streamed API).
///
/// The worker calls it for each event, in order, and only then delivers the
/// answer; a channel whose tap writes into the same ordered queue as its
/// answers (the web chat's socket) therefore shows the events before the
/// answer, never after it.
#[derive(Clone)]
pub struct EventTap(Arc<dyn Fn(&AgentEvent) + Send + Sync>);

impl EventTap {
    /// A tap calling `f` with each event.
    pub fn new(f: impl Fn(&AgentEvent) + Send + Sync + 'static) -> Self {
        EventTap(Arc::new(f))
    }

    /// A tap that queues each event on `tx` (a closed receiver drops them).
    pub fn channel(tx: mpsc::UnboundedSender<AgentEvent>) -> Self {
        EventTap::new(move |event| {
            let _ = tx.send(event.clone());
        })
    }

    /// Hands `event` to the tap.
    pub fn send(&self, event: &AgentEvent) {
        (self.0)(event);
    }
}

impl std::fmt::Debug for EventTap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("EventTap")
    }
}

/// A message from a person (or a sub-system) to the agent.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct InboundMessage {
    /// Unique id, echoed in the answer's [`OutboundMessage::reply_to`].
    pub id: String,
    /// The channel it came from (`telegram`, `web`, `system`, ...).
    pub channel: String,
    /// Who sent it, as the platform identifies them (checked against the allow-list).
    pub sender: String,
    /// The conversation: one session per (channel, chat_id).
    pub chat_id: String,
    /// The text.
    pub content: String,
    /// Attachments as URLs or local paths.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub media: Vec<String>,
    /// Platform details (user name, message id, ...).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub metadata: BTreeMap<String, serde_json::Value>,
    /// Streams the answering turn's events, when the channel shows them live.
    #[serde(skip)]
    pub tap: Option<EventTap>,
    /// Stops the answering turn when cancelled (the web chat's stop button).
    #[serde(skip)]
    pub cancel: Option<CancellationToken>,
    /// Told when the gateway has the message for good (Telegram confirms an
    /// update to the platform only then).
    #[serde(skip)]
    pub receipt: Option<Receipt>,
}

/// Says when the gateway has a message for good, so a channel whose
/// platform delivers again what was not confirmed (Telegram's `getUpdates`
/// offset) confirms only then: with a shared database, once the message is
/// stored there; otherwise once it is queued for its chat, refused, or
/// handled on the spot. Dropped without [`confirm`](Receipt::confirm) (every
/// copy of the message gone), the waiter hears that too: the message was
/// dealt with without being kept (refused, or the sender told "busy").
#[derive(Clone)]
pub struct Receipt(Arc<Mutex<Option<oneshot::Sender<()>>>>);

impl Receipt {
    /// A receipt, and what resolves when it is confirmed or dropped.
    pub fn new() -> (Receipt, oneshot::Receiver<()>) {
        let (tx, rx) = oneshot::channel();
        (Receipt(Arc::new(Mutex::new(Some(tx)))), rx)
    }

    /// Says the message is kept.
    pub fn confirm(&self) {
        if let Some(tx) = self.0.lock().unwrap_or_else(PoisonError::into_inner).take() {
            let _ = tx.send(());
        }
    }
}

impl std::fmt::Debug for Receipt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Receipt")
    }
}

impl InboundMessage {
    /// A message with a fresh id and no media, metadata or tap.
    pub fn new(
        channel: impl Into<String>,
        sender: impl Into<String>,
        chat_id: impl Into<String>,
        content: impl Into<String>,
    ) -> Self {
        InboundMessage {
            id: new_message_id(),
            channel: channel.into(),
            sender: sender.into(),
            chat_id: chat_id.into(),
            content: content.into(),
            media: Vec::new(),
            metadata: BTreeMap::new(),
            tap: None,
            cancel: None,
            receipt: None,
        }
    }

    /// Copies the answering turn's events to `tap`.
    pub fn with_tap(mut self, tap: EventTap) -> Self {
        self.tap = Some(tap);
        self
    }

    /// Tells `receipt` when the gateway has the message for good.
    pub fn with_receipt(mut self, receipt: Receipt) -> Self {
        self.receipt = Some(receipt);
        self
    }

    /// Lets `cancel` stop the answering turn.
    pub fn with_cancel(mut self, cancel: CancellationToken) -> Self {
        self.cancel = Some(cancel);
        self
    }
}

/// A message from the agent to a chat.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OutboundMessage {
    /// The channel to deliver through.
    pub channel: String,
    /// The chat to deliver to.
    pub chat_id: String,
    /// The text, in Markdown; channels convert it to what the platform shows.
    pub content: String,
    /// Attachments as URLs or local paths.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub media: Vec<String>,
    /// The id of the inbound message this answers; `None` for messages the
    /// agent sends on its own (the `message` tool, cron, heartbeat).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply_to: Option<String>,
    /// Set when this answers that the message could not be handled, so
    /// channels with status codes (the API) can say so; `content` is the
    /// text a person reads.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<Failure>,
}

/// Why a message got no real answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Failure {
    /// The chat's queue was full: try again shortly.
    Busy,
    /// The gateway is stopping.
    Closed,
    /// The turn failed (model, tools, session files).
    Failed,
}

impl OutboundMessage {
    /// The answer to `inbound`, to where it came from.
    pub fn reply(inbound: &InboundMessage, content: impl Into<String>) -> Self {
        OutboundMessage {
            channel: inbound.channel.clone(),
            chat_id: inbound.chat_id.clone(),
            content: content.into(),
            media: Vec::new(),
            reply_to: Some(inbound.id.clone()),
            failure: None,
        }
    }

    /// This reply marked as a failure of kind `failure`.
    pub fn failed(mut self, failure: Failure) -> Self {
        self.failure = Some(failure);
        self
    }
}

impl From<&BusError> for Failure {
    fn from(e: &BusError) -> Self {
        match e {
            BusError::Busy => Failure::Busy,
            BusError::Closed => Failure::Closed,
        }
    }
}

/// Why a message was not taken.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BusError {
    /// The queue is full: tell the sender to try again shortly.
    #[error("busy, try again in a moment")]
    Busy,
    /// The gateway is shutting down and takes no new messages.
    #[error("the assistant is shutting down; try again later")]
    Closed,
}

/// The inbound bus; cheap to clone (all clones share one bus).
#[derive(Clone)]
pub struct MessageBus {
    inner: Arc<Mutex<State>>,
    capacity: usize,
    connections: crate::connection::Connections,
}

struct State {
    subscribers: HashMap<String, mpsc::Sender<InboundMessage>>,
    queue: VecDeque<InboundMessage>,
    closed: bool,
}

impl Default for MessageBus {
    fn default() -> Self {
        Self::new(DEFAULT_QUEUE_CAPACITY)
    }
}

impl MessageBus {
    /// A bus whose queues hold at most `capacity` messages each.
    pub fn new(capacity: usize) -> Self {
        let state = State { subscribers: HashMap::new(), queue: VecDeque::new(), closed: false };
        MessageBus {
            inner: Arc::new(Mutex::new(state)),
            capacity: capacity.max(1),
            connections: Default::default(),
        }
    }

    /// Where the channels publishing on this bus report their connection.
    pub fn connections(&self) -> &crate::connection::Connections {
        &self.connections
    }

    /// Receives the messages of `channel` (or of every channel without its
    /// own subscriber, with [`ANY_CHANNEL`]) from now on. A later
    /// subscription to the same channel replaces this one.
    pub fn subscribe(&self, channel: &str) -> mpsc::Receiver<InboundMessage> {
        let (tx, rx) = mpsc::channel(self.capacity);
        self.state().subscribers.insert(channel.to_string(), tx);
        rx
    }

    /// Hands `message` to its channel's subscriber, or queues it when there
    /// is none. Never waits: a full queue is [`BusError::Busy`].
    pub fn publish(&self, message: InboundMessage) -> Result<(), BusError> {
        let mut state = self.state();
        if state.closed {
            return Err(BusError::Closed);
        }
        let subscriber = state
            .subscribers
            .get(&message.channel)
            .or_else(|| state.subscribers.get(ANY_CHANNEL))
            .filter(|tx| !tx.is_closed())
            .cloned();
        match subscriber {
            Some(tx) => tx.try_send(message).map_err(|e| match e {
                mpsc::error::TrySendError::Full(_) => BusError::Busy,
                mpsc::error::TrySendError::Closed(_) => BusError::Closed,
            }),
            None if state.queue.len() >= self.capacity => Err(BusError::Busy),
            None => {
                state.queue.push_back(message);
                Ok(())
            }
        }
    }

    /// Takes the queued messages of `channel` (all of them with `None`), oldest first.
    pub fn drain(&self, channel: Option<&str>) -> Vec<InboundMessage> {
        let mut state = self.state();
        match channel {
            None => state.queue.drain(..).collect(),
            Some(name) => {
                let mut taken = Vec::new();
                state.queue.retain(|m| {
                    if m.channel == name {
                        taken.push(m.clone());
                    }
                    m.channel != name
                });
                taken
            }
        }
    }

    /// Stops taking messages: every later `publish` is [`BusError::Closed`],
    /// and subscribers see their stream end once it is empty.
    pub fn close(&self) {
        let mut state = self.state();
        state.closed = true;
        state.subscribers.clear();
    }

    /// True once [`close`](Self::close) was called.
    pub fn is_closed(&self) -> bool {
        self.state().closed
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A fresh, process-unique message id.
pub fn new_message_id() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(1);
    format!("m{:x}-{}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(channel: &str, text: &str) -> InboundMessage {
        InboundMessage::new(channel, "u", "c", text)
    }

    #[test]
    fn without_a_subscriber_messages_queue_and_drain_by_channel() {
        let bus = MessageBus::new(8);
        bus.publish(msg("a", "1")).unwrap();
        bus.publish(msg("b", "2")).unwrap();
        bus.publish(msg("a", "3")).unwrap();
        let a: Vec<String> = bus.drain(Some("a")).into_iter().map(|m| m.content).collect();
        assert_eq!(a, ["1", "3"]);
        assert_eq!(bus.drain(None).len(), 1);
        assert!(bus.drain(None).is_empty());
    }

    #[tokio::test]
    async fn a_subscriber_gets_its_channel_and_the_catch_all_gets_the_rest() {
        let bus = MessageBus::new(8);
        let mut web = bus.subscribe("web");
        let mut any = bus.subscribe(ANY_CHANNEL);
        bus.publish(msg("web", "w")).unwrap();
        bus.publish(msg("telegram", "t")).unwrap();
        assert_eq!(web.recv().await.unwrap().content, "w");
        assert_eq!(any.recv().await.unwrap().content, "t");
        assert!(bus.drain(None).is_empty(), "a message goes one way only");
    }

    #[test]
    fn a_full_queue_answers_busy_instead_of_growing() {
        let bus = MessageBus::new(2);
        let _rx = bus.subscribe(ANY_CHANNEL);
        bus.publish(msg("x", "1")).unwrap();
        bus.publish(msg("x", "2")).unwrap();
        assert_eq!(bus.publish(msg("x", "3")), Err(BusError::Busy));
        let queued = MessageBus::new(1);
        queued.publish(msg("x", "1")).unwrap();
        assert_eq!(queued.publish(msg("x", "2")), Err(BusError::Busy));
    }

    #[test]
    fn a_closed_bus_refuses_new_messages() {
        let bus = MessageBus::new(2);
        bus.close();
        assert_eq!(bus.publish(msg("x", "1")), Err(BusError::Closed));
    }
}
