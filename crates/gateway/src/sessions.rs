//! Which session file each chat talks in. A chat `(channel, chat_id)` has one
//! current session, id `gw-CHANNEL-CHAT` (sanitised) until `/new` starts
//! another; the current ids are kept in `$FERROCLAW_HOME/gateway/sessions.json`.
//! With several gateways the database's `chat_sessions` is the record every
//! reader goes by, and the titles people gave conversations are in its
//! `session_titles` instead of `gateway/titles.json`. Both stores keep the
//! same behaviour ([`SessionNameRecords`], [`SessionTitleRecords`]):
//! `sessions/files.rs` holds the files, `sessions/pg.rs` the tables.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use ferroclaw_store::PgStore;

mod files;
mod pg;
#[cfg(test)]
mod store_tests;

/// Longest chat part of a session id; longer ids are cut and hashed.
const MAX_CHAT_ID_CHARS: usize = 64;

/// A conversation: one chat on one channel.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SessionKey {
    pub channel: String,
    pub chat_id: String,
}

impl SessionKey {
    /// The key of `chat_id` on `channel`.
    pub fn new(channel: impl Into<String>, chat_id: impl Into<String>) -> Self {
        SessionKey { channel: channel.into(), chat_id: chat_id.into() }
    }

    /// The session id a chat starts with: `gw-CHANNEL-CHAT`, safe as a file name.
    pub fn base_session_id(&self) -> String {
        let clean = |s: &str| -> String {
            s.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' { c } else { '-' }).collect()
        };
        let mut chat = clean(&self.chat_id);
        // Cleaning or cutting could make two chats one: tell them apart by a hash.
        if chat.len() > MAX_CHAT_ID_CHARS || chat != self.chat_id {
            chat.truncate(MAX_CHAT_ID_CHARS);
            chat.push_str(&format!("-{:08x}", fnv(&self.chat_id)));
        }
        format!("gw-{}-{chat}", clean(&self.channel))
    }

    /// `CHANNEL:CHAT_ID`, the form used in config and system messages.
    pub fn address(&self) -> String {
        format!("{}:{}", self.channel, self.chat_id)
    }

    /// Parses `CHANNEL:CHAT_ID`.
    pub fn parse_address(text: &str) -> Option<Self> {
        let (channel, chat) = text.split_once(':')?;
        (!channel.is_empty() && !chat.is_empty()).then(|| SessionKey::new(channel, chat))
    }
}

/// A small stable hash, so long chat ids still map to distinct files.
fn fnv(s: &str) -> u32 {
    s.bytes().fold(0x811c_9dc5u32, |h, b| (h ^ u32::from(b)).wrapping_mul(0x0100_0193))
}

/// Why the record of chats' sessions or of titles could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum SessionRecordError {
    #[error("{path}: {message}")]
    File { path: PathBuf, message: String },
    #[error("{0}")]
    Database(String),
}

/// The record of which session each chat talks in, wherever it is kept:
/// the one behaviour both stores have. A chat with no record talks in its
/// base session.
#[async_trait]
pub trait SessionNameRecords: Send + Sync + std::fmt::Debug {
    /// The session recorded for chat `key`, if any.
    async fn session_of(&self, key: &SessionKey) -> Result<Option<String>, SessionRecordError>;

    /// Every recorded chat: address → session.
    async fn all(&self) -> Result<BTreeMap<String, String>, SessionRecordError>;

    /// Records that chat `key` talks in session `id`.
    async fn record(&self, key: &SessionKey, id: &str) -> Result<(), SessionRecordError>;
}

/// Which session each chat talks in: this process's working names (the
/// session a chat's worker opens, kept in `$FERROCLAW_HOME/gateway/sessions.json`;
/// a chat that never ran `/new` uses its base id), and the record every
/// reader goes by: that same file for one gateway ([`SessionNames::load`]),
/// the database's `chat_sessions` for several ([`SessionNames::database`]),
/// which each turn brings the working names up to
/// (the `shared_sessions` module) and stores their changes to.
#[derive(Debug, Clone)]
pub struct SessionNames {
    here: files::NamesFile,
    records: Arc<dyn SessionNameRecords>,
}

impl SessionNames {
    /// Loads `home/gateway/sessions.json` (a bad file is logged and
    /// ignored): the working names and the record.
    pub fn load(home: &Path) -> Self {
        let here = files::NamesFile::load(Some(home));
        SessionNames { records: Arc::new(here.clone()), here }
    }

    /// The names recorded in `db`'s `chat_sessions`, with this process's
    /// working names in `home` (a gateway's; `None` for a command beside
    /// the gateways, which opens no session).
    pub fn database(db: PgStore, home: Option<&Path>) -> Self {
        let here = files::NamesFile::load(home);
        SessionNames { here, records: Arc::new(pg::ChatSessionsTable::new(db)) }
    }

    /// The session id `key` talks in now, in this process.
    pub fn current(&self, key: &SessionKey) -> String {
        self.here.current(key)
    }

    /// Makes `id` the session `key` talks in here (several gateways: the
    /// one the database names); written only when it changes.
    pub fn set(&self, key: &SessionKey, id: &str) {
        self.here.set(key, id);
    }

    /// Every chat that moved on from its base session here: (address, session id).
    pub fn moved(&self) -> Vec<(String, String)> {
        self.here.moved()
    }

    /// Starts a new session for `key`; returns its id.
    pub fn rotate(&self, key: &SessionKey) -> String {
        self.here.rotate(key)
    }

    /// The chat whose current session here is `id`, if any (a chat that
    /// ran `/new` has moved on; its old sessions are read-only).
    pub fn chat_of(&self, id: &str) -> Option<SessionKey> {
        self.here.chat_of(id)
    }

    /// The session `key` talks in by the record (a chat the record does not
    /// have yet: the one it talks in here).
    pub async fn recorded(&self, key: &SessionKey) -> Result<String, SessionRecordError> {
        Ok(self.records.session_of(key).await?.unwrap_or_else(|| self.current(key)))
    }

    /// Every chat that moved on from its base session, by the record: address → session.
    pub async fn all_recorded(&self) -> Result<BTreeMap<String, String>, SessionRecordError> {
        self.records.all().await
    }

    /// Records that `key` talks in `id`, for every reader (a turn does it
    /// with its answer; this is for moving records).
    pub async fn record(&self, key: &SessionKey, id: &str) -> Result<(), SessionRecordError> {
        self.records.record(key, id).await
    }
}

/// The chat whose current session is `id`, by `current` (address → session
/// of every chat that moved on from its base session, or every chat).
pub fn chat_of_in(current: &BTreeMap<String, String>, id: &str) -> Option<SessionKey> {
    if let Some((address, _)) = current.iter().find(|(_, session)| *session == id) {
        return SessionKey::parse_address(address);
    }
    // A chat still on its base session: `gw-CHANNEL-CHAT` (channel names have no `-`).
    let (channel, chat) = id.strip_prefix("gw-")?.split_once('-')?;
    let key = SessionKey::new(channel, chat);
    (key.base_session_id() == id && !current.contains_key(&key.address())).then_some(key)
}

/// Names people gave their conversations in the web app, by session id,
/// wherever they are kept: the one behaviour both stores have.
#[async_trait]
pub trait SessionTitleRecords: Send + Sync + std::fmt::Debug {
    /// The title given to session `id`.
    async fn get(&self, id: &str) -> Result<Option<String>, SessionRecordError>;

    /// Every title given, by session id.
    async fn all(&self) -> Result<BTreeMap<String, String>, SessionRecordError>;

    /// Names session `id` (`None` removes the name).
    async fn set(&self, id: &str, title: Option<&str>) -> Result<(), SessionRecordError>;
}

/// Names people gave their conversations (a session without one is shown
/// by its first request): `$FERROCLAW_HOME/gateway/titles.json` for one
/// gateway ([`SessionTitles::load`]), the database's `session_titles` for
/// several ([`SessionTitles::database`]).
#[derive(Debug, Clone)]
pub struct SessionTitles {
    records: Arc<dyn SessionTitleRecords>,
}

/// Longest title kept, in characters.
pub const MAX_TITLE_CHARS: usize = 120;

impl SessionTitles {
    /// Loads `home/gateway/titles.json` (a bad file is logged and ignored).
    pub fn load(home: &Path) -> Self {
        SessionTitles { records: Arc::new(files::TitlesFile::load(home)) }
    }

    /// The titles in `db`'s `session_titles`.
    pub fn database(db: PgStore) -> Self {
        SessionTitles { records: Arc::new(pg::TitlesTable::new(db)) }
    }

    /// The title given to `id`.
    pub async fn get(&self, id: &str) -> Result<Option<String>, SessionRecordError> {
        self.records.get(id).await
    }

    /// Every title given, by session id.
    pub async fn all(&self) -> Result<BTreeMap<String, String>, SessionRecordError> {
        self.records.all().await
    }

    /// Names `id` (trimmed, at most [`MAX_TITLE_CHARS`]; an empty title
    /// removes the name); written at once.
    pub async fn set(&self, id: &str, title: &str) -> Result<(), SessionRecordError> {
        let title: String = title.trim().chars().take(MAX_TITLE_CHARS).collect();
        self.records.set(id, (!title.is_empty()).then_some(title.as_str())).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_ids_are_file_safe_and_distinct_for_long_chats() {
        assert_eq!(SessionKey::new("telegram", "12345").base_session_id(), "gw-telegram-12345");
        let odd = SessionKey::new("web", "a/b c").base_session_id();
        assert!(odd.starts_with("gw-web-a-b-c-"), "{odd}");
        assert_ne!(odd, SessionKey::new("web", "a-b-c").base_session_id());
        let long_a = SessionKey::new("api", "x".repeat(100) + "a").base_session_id();
        let long_b = SessionKey::new("api", "x".repeat(100) + "b").base_session_id();
        assert_ne!(long_a, long_b);
        assert!(long_a.len() < 90);
    }

    #[test]
    fn new_starts_another_session_that_survives_a_restart() {
        let home = tempfile::tempdir().unwrap();
        let key = SessionKey::new("telegram", "7");
        let names = SessionNames::load(home.path());
        assert_eq!(names.current(&key), "gw-telegram-7");
        let id = names.rotate(&key);
        assert!(id.starts_with("gw-telegram-7-"));
        assert_eq!(SessionNames::load(home.path()).current(&key), id);
    }

    #[test]
    fn a_session_names_its_chat_until_the_chat_moves_on() {
        let home = tempfile::tempdir().unwrap();
        let names = SessionNames::load(home.path());
        let key = SessionKey::new("web", "page-1");
        assert_eq!(names.chat_of("gw-web-page-1"), Some(key.clone()));
        let id = names.rotate(&key);
        assert_eq!(names.chat_of("gw-web-page-1"), None, "the old session is read-only now");
        assert_eq!(names.chat_of(&id), Some(key));
        assert_eq!(names.chat_of("20260101-abcd"), None);
    }

    #[tokio::test]
    async fn titles_survive_a_restart_and_an_empty_one_removes_the_name() {
        let home = tempfile::tempdir().unwrap();
        let titles = SessionTitles::load(home.path());
        titles.set("gw-web-a", "  Trip to Lisbon ").await.unwrap();
        assert_eq!(
            SessionTitles::load(home.path()).get("gw-web-a").await.unwrap().as_deref(),
            Some("Trip to Lisbon")
        );
        titles.set("gw-web-a", "").await.unwrap();
        assert_eq!(SessionTitles::load(home.path()).get("gw-web-a").await.unwrap(), None);
    }
}
