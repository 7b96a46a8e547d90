//! Who may talk to the agent: OpenClaw's DM policy and pairing.
//!
//! With `dm_policy = "pairing"` (the default) an unknown sender gets a
//! one-time code and nothing reaches the model; the owner approves it with
//! `ferroclaw pairing approve CHANNEL CODE`, after which the sender is let in.
//! State lives in `$FERROCLAW_HOME/pairing/CHANNEL.json`, small files written
//! atomically (temp file + rename) and read on every check, so the CLI and a
//! running gateway share them without signalling each other. Several gateway
//! processes on one database keep it in the database's `allow_list` and
//! `pairing_requests` instead, read on every check there: a code one process
//! gave out is approved once and honoured by all. Both keep the same
//! behaviour ([`PairingRecords`]): `pairing/files.rs` holds the files,
//! `pairing/pg.rs` the tables; [`PairingStore`] is opened on one of them.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use ferroclaw_store::PgStore;
use serde::{Deserialize, Serialize};

use crate::bus::InboundMessage;
use crate::config::{ChannelSettings, DmPolicy};

mod files;
mod pg;
#[cfg(test)]
mod store_tests;

/// Characters of a pairing code: no look-alikes (0/O, 1/I/L).
pub const CODE_ALPHABET: &[u8] = b"ABCDEFGHJKMNPQRSTUVWXYZ23456789";
/// Length of a pairing code, as OpenClaw.
pub const CODE_LENGTH: usize = 8;
/// How long a code may be approved, as OpenClaw: one hour.
pub const CODE_TTL_MS: u64 = 60 * 60 * 1000;
/// [`CODE_TTL_MS`] as a duration.
pub(crate) const CODE_TTL: std::time::Duration = std::time::Duration::from_millis(CODE_TTL_MS);
/// Codes kept waiting per channel (one per sender). When more senders ask,
/// the oldest code is dropped rather than the newcomer refused, so a few
/// throwaway accounts cannot block real people from pairing (OpenClaw's
/// global queue of 3 could be filled for an hour); the cap only bounds the file.
pub const MAX_PENDING: usize = 256;

/// Problems with pairing state or requests.
#[derive(Debug, thiserror::Error)]
pub enum PairingError {
    #[error("{path}: {message}")]
    File { path: PathBuf, message: String },
    #[error("no pending pairing code {code:?} on {channel} (codes expire after an hour)")]
    UnknownCode { channel: String, code: String },
    #[error("channel name {0:?} is not valid (letters, digits, - and _)")]
    BadChannel(String),
    #[error("pairing: {0}")]
    Database(String),
}

/// A code waiting for the owner's approval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PendingPairing {
    pub code: String,
    pub sender: String,
    pub chat_id: String,
    /// The sender's display name, when the platform gives one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    pub created_at_ms: u64,
    pub expires_at_ms: u64,
}

/// A sender the owner approved.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ApprovedSender {
    pub sender: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    pub approved_at_ms: u64,
}

/// One channel's pairing file.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PairingState {
    #[serde(default)]
    pub approved: Vec<ApprovedSender>,
    #[serde(default)]
    pub pending: Vec<PendingPairing>,
}

/// What to do with an inbound message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Admission {
    /// Let it reach the agent.
    Allow,
    /// Drop it; tell the sender this text when there is one.
    Refuse(Option<String>),
}

/// Who is let in and who waits, wherever it is kept: the one behaviour
/// both stores have. Channel names reach it checked, codes upper-cased.
#[async_trait]
pub trait PairingRecords: Send + Sync + std::fmt::Debug {
    /// A channel's approved senders and the codes still waiting (expired
    /// ones left out; empty when none).
    async fn load(&self, channel: &str) -> Result<PairingState, PairingError>;

    /// True when the owner approved `sender` on `channel`.
    async fn is_approved(&self, channel: &str, sender: &str) -> Result<bool, PairingError>;

    /// The code for an unknown sender: the one already waiting, else a new
    /// one (the oldest of more than [`MAX_PENDING`] waiting goes).
    async fn request(
        &self,
        channel: &str,
        sender: &str,
        chat_id: &str,
        name: Option<String>,
    ) -> Result<PendingPairing, PairingError>;

    /// Lets in the sender holding the unexpired `code`; `None` when no such
    /// code waits. The code is used up.
    async fn approve(
        &self,
        channel: &str,
        code: &str,
    ) -> Result<Option<ApprovedSender>, PairingError>;

    /// Forgets the request holding `code`; `None` when no such code waits.
    async fn deny(&self, channel: &str, code: &str)
    -> Result<Option<PendingPairing>, PairingError>;

    /// Removes an approved sender; true when there was one.
    async fn revoke(&self, channel: &str, sender: &str) -> Result<bool, PairingError>;

    /// Every channel with pairing state, by name.
    async fn channels(&self) -> Result<Vec<String>, PairingError>;

    /// [`is_approved`](Self::is_approved) without waiting on anything, by a
    /// store that can (small local files); `None` by one that must be asked.
    fn is_approved_now(&self, _channel: &str, _sender: &str) -> Option<bool> {
        None
    }

    /// [`request`](Self::request) without waiting on anything, by a store
    /// that can; `None` by one that must be asked.
    fn request_now(
        &self,
        _channel: &str,
        _sender: &str,
        _chat_id: &str,
        _name: Option<String>,
    ) -> Option<Result<PendingPairing, PairingError>> {
        None
    }
}

/// Pairing state, wherever it is kept: the files of one home
/// ([`PairingStore::new`]), or, for several gateway processes, the
/// database's `allow_list` and `pairing_requests` ([`PairingStore::database`]).
/// The choice is made once, where the store is opened.
#[derive(Debug, Clone)]
pub struct PairingStore {
    records: Arc<dyn PairingRecords>,
}

impl PairingStore {
    /// The store in `home/pairing`.
    pub fn new(home: &Path) -> Self {
        PairingStore { records: Arc::new(files::PairingFiles::new(home)) }
    }

    /// The store in `db`'s `allow_list` and `pairing_requests`.
    pub fn database(db: PgStore) -> Self {
        PairingStore { records: Arc::new(pg::PairingTables::new(db)) }
    }

    /// A channel's state (empty when there is none).
    pub async fn load(&self, channel: &str) -> Result<PairingState, PairingError> {
        self.records.load(checked(channel)?).await
    }

    /// True when the owner approved `sender` on `channel`.
    pub async fn is_approved(&self, channel: &str, sender: &str) -> bool {
        let approved = match checked(channel) {
            Ok(channel) => self.records.is_approved(channel, sender).await,
            Err(e) => Err(e),
        };
        approved.unwrap_or_else(|e| {
            tracing::warn!("pairing: {e}");
            false
        })
    }

    /// The code for an unknown sender: the one already waiting, else a new
    /// one (the oldest of more than [`MAX_PENDING`] waiting goes).
    pub async fn request(
        &self,
        channel: &str,
        sender: &str,
        chat_id: &str,
        name: Option<String>,
    ) -> Result<PendingPairing, PairingError> {
        self.records.request(checked(channel)?, sender, chat_id, name).await
    }

    /// Approves the sender holding `code` (any case); returns who it was.
    pub async fn approve(&self, channel: &str, code: &str) -> Result<ApprovedSender, PairingError> {
        let approved = self.records.approve(checked(channel)?, &normal_code(code)).await?;
        approved.ok_or_else(|| unknown_code(channel, code))
    }

    /// Refuses the request holding `code`: it is forgotten, and the sender
    /// stays out (a later message asks again, with a new code).
    pub async fn deny(&self, channel: &str, code: &str) -> Result<PendingPairing, PairingError> {
        let denied = self.records.deny(checked(channel)?, &normal_code(code)).await?;
        denied.ok_or_else(|| unknown_code(channel, code))
    }

    /// Removes an approved sender; true when there was one.
    pub async fn revoke(&self, channel: &str, sender: &str) -> Result<bool, PairingError> {
        self.records.revoke(checked(channel)?, sender).await
    }

    /// Every channel with pairing state, by name.
    pub async fn channels(&self) -> Result<Vec<String>, PairingError> {
        self.records.channels().await
    }

    /// Decides whether `message` may reach the agent under `settings`
    /// without waiting on anything: always with files; with a database
    /// `None` when it must be asked ([`PairingStore::admit`]).
    pub fn admit_now(
        &self,
        settings: &ChannelSettings,
        message: &InboundMessage,
    ) -> Option<Admission> {
        // Stable sender ids only: a user name can be taken by anyone.
        let listed = settings.allow_from.iter().any(|a| a == "*" || *a == message.sender);
        match settings.dm_policy {
            DmPolicy::Disabled => return Some(Admission::Refuse(None)),
            DmPolicy::Open => return Some(Admission::Allow),
            _ if listed => return Some(Admission::Allow),
            _ => {}
        }
        let channel = checked(&settings.name).ok()?;
        if self.records.is_approved_now(channel, &message.sender)? {
            return Some(Admission::Allow);
        }
        match settings.dm_policy {
            DmPolicy::Pairing => {
                let name = sender_name(message);
                let request =
                    self.records.request_now(channel, &message.sender, &message.chat_id, name)?;
                Some(pairing_reply(settings, request))
            }
            _ => Some(refuse_unlisted()),
        }
    }

    /// Decides whether `message` may reach the agent under `settings`.
    pub async fn admit(&self, settings: &ChannelSettings, message: &InboundMessage) -> Admission {
        if let Some(admission) = self.admit_now(settings, message) {
            return admission;
        }
        if self.is_approved(&settings.name, &message.sender).await {
            return Admission::Allow;
        }
        match settings.dm_policy {
            DmPolicy::Pairing => {
                let name = sender_name(message);
                let request =
                    self.request(&settings.name, &message.sender, &message.chat_id, name).await;
                pairing_reply(settings, request)
            }
            _ => refuse_unlisted(),
        }
    }
}

/// `channel`, when it is a name a channel can have (letters, digits, - and _).
fn checked(channel: &str) -> Result<&str, PairingError> {
    let ok = !channel.is_empty()
        && channel.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if ok { Ok(channel) } else { Err(PairingError::BadChannel(channel.to_string())) }
}

/// A code as it is stored: trimmed, upper case.
fn normal_code(code: &str) -> String {
    code.trim().to_ascii_uppercase()
}

fn unknown_code(channel: &str, code: &str) -> PairingError {
    PairingError::UnknownCode { channel: channel.to_string(), code: code.to_string() }
}

fn sender_name(message: &InboundMessage) -> Option<String> {
    message.metadata.get("name").and_then(|n| n.as_str()).map(str::to_string)
}

fn refuse_unlisted() -> Admission {
    Admission::Refuse(Some("Sorry, this assistant only answers people on its allow-list.".into()))
}

fn pairing_reply(
    settings: &ChannelSettings,
    request: Result<PendingPairing, PairingError>,
) -> Admission {
    match request {
        Ok(p) => Admission::Refuse(Some(format!(
            "I don't know you yet. Your pairing code is {code}. Ask my owner to run:\n\
             ferroclaw pairing approve {channel} {code}\n(the code expires in an hour)",
            code = p.code,
            channel = settings.name
        ))),
        Err(e) => {
            tracing::warn!("pairing: {e}");
            Admission::Refuse(Some(
                "I can't take new pairing requests right now; try again later.".into(),
            ))
        }
    }
}

/// A fresh code of [`CODE_LENGTH`] characters from [`CODE_ALPHABET`], drawn
/// from the operating system's random source (rejection sampling: no bias).
pub fn new_code() -> std::io::Result<String> {
    let limit = 256 - 256 % CODE_ALPHABET.len();
    let mut code = String::with_capacity(CODE_LENGTH);
    while code.len() < CODE_LENGTH {
        for b in crate::files::os_random(CODE_LENGTH * 2)? {
            if (b as usize) < limit && code.len() < CODE_LENGTH {
                code.push(CODE_ALPHABET[b as usize % CODE_ALPHABET.len()] as char);
            }
        }
    }
    Ok(code)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(policy: DmPolicy) -> ChannelSettings {
        ChannelSettings {
            name: "telegram".into(),
            enabled: true,
            dm_policy: policy,
            ..Default::default()
        }
    }

    #[test]
    fn codes_have_eight_characters_without_look_alikes() {
        for _ in 0..200 {
            let code = new_code().unwrap();
            assert_eq!(code.len(), 8);
            assert!(!code.contains(['0', 'O', '1', 'I', 'L']), "{code}");
        }
    }

    #[tokio::test]
    async fn an_unknown_sender_gets_a_code_and_is_let_in_once_approved() {
        let home = tempfile::tempdir().unwrap();
        let store = PairingStore::new(home.path());
        let msg = InboundMessage::new("telegram", "42", "42", "hi");
        let Admission::Refuse(Some(text)) = store.admit(&settings(DmPolicy::Pairing), &msg).await
        else {
            panic!("an unknown sender must be refused");
        };
        let code = store.load("telegram").await.unwrap().pending[0].code.clone();
        assert!(text.contains(&code), "{text}");
        let again = store.request("telegram", "42", "42", None).await.unwrap();
        assert_eq!(again.code, code, "the same sender keeps the same code");
        assert_eq!(store.approve("telegram", &code.to_lowercase()).await.unwrap().sender, "42");
        assert_eq!(store.admit(&settings(DmPolicy::Pairing), &msg).await, Admission::Allow);
        assert!(store.approve("telegram", &code).await.is_err(), "a code works once");
    }

    #[tokio::test]
    async fn a_denied_request_is_forgotten_and_the_sender_stays_out() {
        let home = tempfile::tempdir().unwrap();
        let store = PairingStore::new(home.path());
        let p = store.request("telegram", "99", "99", None).await.unwrap();
        assert_eq!(store.deny("telegram", &p.code).await.unwrap().sender, "99");
        assert!(store.load("telegram").await.unwrap().pending.is_empty());
        assert!(!store.is_approved("telegram", "99").await);
        assert!(
            store.approve("telegram", &p.code).await.is_err(),
            "a denied code cannot be approved"
        );
    }

    #[tokio::test]
    async fn redteam_gateway_throwaway_accounts_cannot_fill_the_pairing_queue() {
        let home = tempfile::tempdir().unwrap();
        let store = PairingStore::new(home.path());
        for sender in ["spam1", "spam2", "spam3", "spam4"] {
            store.request("telegram", sender, sender, None).await.unwrap();
        }
        // A real person still gets a code, and the owner can approve it.
        let p = store.request("telegram", "alice", "alice", None).await.unwrap();
        assert_eq!(store.approve("telegram", &p.code).await.unwrap().sender, "alice");
        // The file stays bounded: the oldest codes make room.
        for i in 0..MAX_PENDING + 10 {
            store.request("telegram", &format!("s{i}"), "c", None).await.unwrap();
        }
        assert_eq!(store.load("telegram").await.unwrap().pending.len(), MAX_PENDING);
    }

    #[tokio::test]
    async fn redteam_gateway_allow_from_matches_ids_not_user_names() {
        let home = tempfile::tempdir().unwrap();
        let store = PairingStore::new(home.path());
        let mut listed = settings(DmPolicy::Allowlist);
        listed.allow_from = vec!["alice".into(), "42".into()];
        let mut impostor = InboundMessage::new("telegram", "666", "666", "hi");
        impostor.metadata.insert("username".into(), "alice".into());
        assert!(matches!(store.admit(&listed, &impostor).await, Admission::Refuse(_)));
        let owner = InboundMessage::new("telegram", "42", "42", "hi");
        assert_eq!(store.admit(&listed, &owner).await, Admission::Allow);
    }

    #[tokio::test]
    async fn an_expired_code_cannot_be_approved() {
        let home = tempfile::tempdir().unwrap();
        let store = PairingStore::new(home.path());
        let p = store.request("telegram", "a", "a", None).await.unwrap();
        let mut state = store.load("telegram").await.unwrap();
        state.pending[0].expires_at_ms = 1;
        let file = home.path().join("pairing").join("telegram.json");
        crate::files::write_json_atomically(&file, &state).unwrap();
        let listed = store.load("telegram").await.unwrap();
        assert!(listed.pending.is_empty(), "an expired code is not listed, as in the database");
        assert!(matches!(
            store.approve("telegram", &p.code).await,
            Err(PairingError::UnknownCode { .. })
        ));
    }

    #[tokio::test]
    async fn allowlist_and_disabled_policies_never_pair() {
        let home = tempfile::tempdir().unwrap();
        let store = PairingStore::new(home.path());
        let msg = InboundMessage::new("telegram", "42", "42", "hi");
        assert!(matches!(
            store.admit(&settings(DmPolicy::Allowlist), &msg).await,
            Admission::Refuse(Some(_))
        ));
        assert_eq!(store.admit(&settings(DmPolicy::Disabled), &msg).await, Admission::Refuse(None));
        assert!(store.load("telegram").await.unwrap().pending.is_empty());
        let mut listed = settings(DmPolicy::Allowlist);
        listed.allow_from = vec!["42".into()];
        assert_eq!(store.admit(&listed, &msg).await, Admission::Allow);
    }
}
