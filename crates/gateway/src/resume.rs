//! Turns that outlive their process. Every message a person sends is
//! answered in a journalled turn ([`ferroclaw_core::journal`]), named by a
//! turn id that anyone holding the message computes alike ([`turn_id`]):
//! the first step of the journal keeps the message itself. When a gateway
//! is killed mid-turn, the next one to start takes up each unfinished turn
//! ([`interrupted`]) and its agent replays the finished steps
//! instead of asking the model again (tools whose result was not recorded
//! run again: at-least-once for tools, exactly-once for the model).
//!
//! A turn is marked finished just before its answer is handed to the
//! channel, so an answer goes out at most once: a message that arrives
//! again for a finished turn (a platform redelivering it) is dropped as a
//! duplicate.

use std::sync::Arc;

use ferroclaw_core::journal::TurnJournal;

use crate::bus::{InboundMessage, SYSTEM_CHANNEL};
use crate::sessions::{SessionKey, SessionNames};

/// The metadata key under which a message carries its turn id once named.
pub const TURN_KEY: &str = "turn";

/// Platform ids, by metadata key, that name a message for good, first
/// found wins: Telegram's `update_id` (an edited message and a button press
/// are updates of their own), Discord's `message_id` and a button press's
/// `interaction_id`, Slack's `ts` and a button press's `press_id` (the
/// presser and the action's `action_ts`).
const PLATFORM_IDS: [&str; 5] = ["update_id", "message_id", "interaction_id", "ts", "press_id"];

/// The id the platform gave `message` (the same when it delivers the
/// message again, another for every other message or button press of the
/// chat), with the metadata key it came from; `None` when it has none.
pub fn platform_id(message: &InboundMessage) -> Option<(&'static str, String)> {
    PLATFORM_IDS.iter().find_map(|&k| match message.metadata.get(k)? {
        serde_json::Value::String(s) => Some((k, s.clone())),
        serde_json::Value::Number(n) => Some((k, n.to_string())),
        _ => None,
    })
}

/// The turn id of `message`: `CHANNEL-CHAT-PLATFORM_ID` when the platform
/// names the message (so a message delivered again maps to the same turn),
/// else one drawn now and kept in its metadata (which the journal keeps).
pub fn turn_id(message: &mut InboundMessage) -> String {
    if let Some(id) = message.metadata.get(TURN_KEY).and_then(|v| v.as_str()) {
        return id.to_string();
    }
    let id = match platform_id(message) {
        Some((_, p)) => format!("{}-{}-{p}", message.channel, message.chat_id),
        // Message ids are unique within a process only: add when.
        None => {
            format!("{}-{}-{}", message.channel, message.id, ferroclaw_core::clock::unix_seconds())
        }
    };
    message.metadata.insert(TURN_KEY.into(), serde_json::Value::String(id.clone()));
    id
}

/// Metadata of a message the database hands out for the first time (set
/// by the claim, taken off before the turn): its journal is not looked up.
pub const FIRST_CLAIM_KEY: &str = "first_claim";

/// What the journal says of a message about to be answered.
pub enum Claim {
    /// Not journalled (no journal, or the gateway's own messages).
    Off,
    /// Its turn was finished already: drop it.
    Duplicate,
    /// Answer it in this turn (resumed when the journal holds steps of it).
    Turn(JournalledTurn),
}

/// A turn being answered under the journal.
pub struct JournalledTurn {
    journal: Arc<dyn TurnJournal>,
    pub session: String,
    pub turn: String,
}

impl JournalledTurn {
    /// Marks the turn finished (before its answer is sent: at most once).
    pub async fn finish(&self) {
        if let Err(e) = self.journal.finish(&self.session, &self.turn).await {
            tracing::error!(session = %self.session, turn = %self.turn, "turn not marked finished: {e}");
        }
    }
}

/// Names `message`'s turn and looks it up in the journal.
pub async fn claim(
    key: &SessionKey,
    message: &mut InboundMessage,
    journal: Option<&Arc<dyn TurnJournal>>,
    names: &SessionNames,
) -> Claim {
    let Some(journal) = journal.cloned() else { return Claim::Off };
    if message.channel == SYSTEM_CHANNEL {
        return Claim::Off;
    }
    let turn = turn_id(message);
    let session = names.current(key);
    // Several gateways: a message claimed for the first time has nothing
    // in the journal (one round trip fewer).
    if message.metadata.remove(FIRST_CLAIM_KEY).is_some() {
        journal.never_started(&session, &turn);
        return Claim::Turn(JournalledTurn { journal, session, turn });
    }
    match journal.load(&session, &turn).await {
        Ok(record) if record.finished => {
            tracing::info!(%session, %turn, "message already answered; dropped as a duplicate");
            Claim::Duplicate
        }
        Ok(_) => Claim::Turn(JournalledTurn { journal, session, turn }),
        Err(e) => {
            tracing::error!(%session, %turn, "journal unreadable; the turn runs unjournalled: {e}");
            Claim::Off
        }
    }
}

/// The messages of every turn the journal holds unfinished (its gateway
/// died), each with its chat, to be queued before any new message: the
/// chat's worker replays it.
pub async fn interrupted(journal: &dyn TurnJournal) -> Vec<(SessionKey, InboundMessage)> {
    let turns = match journal.unfinished().await {
        Ok(turns) => turns,
        Err(e) => {
            tracing::error!("cannot read the turn journal: {e}");
            return Vec::new();
        }
    };
    let mut found = Vec::new();
    for turn in turns {
        let message: InboundMessage = match serde_json::from_value(turn.origin) {
            Ok(m) => m,
            Err(e) => {
                tracing::warn!(session = %turn.session, turn = %turn.turn, "unfinished turn not resumed: {e}");
                continue;
            }
        };
        let key = SessionKey::new(message.channel.clone(), message.chat_id.clone());
        tracing::info!(session = %turn.session, turn = %turn.turn, chat = %key.address(), "resuming an interrupted turn");
        found.push((key, message));
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_platform_message_id_names_the_turn_whoever_receives_it() {
        let mut first = InboundMessage::new("telegram", "42", "42", "hi");
        first.metadata.insert("message_id".into(), serde_json::json!(7));
        let mut again = first.clone();
        again.id = "another-process-id".into();
        assert_eq!(turn_id(&mut first), "telegram-42-7");
        assert_eq!(turn_id(&mut again), "telegram-42-7");
    }

    #[test]
    fn a_message_without_one_keeps_the_id_it_was_given() {
        let mut message = InboundMessage::new("web", "owner", "c1", "hi");
        let id = turn_id(&mut message);
        let mut stored: InboundMessage =
            serde_json::from_value(serde_json::to_value(&message).unwrap()).unwrap();
        assert_eq!(turn_id(&mut stored), id);
    }
}
