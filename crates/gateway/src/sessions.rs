//! Which session file each chat talks in. A chat `(channel, chat_id)` has one
//! current session, id `gw-CHANNEL-CHAT` (sanitised) until `/new` starts
//! another; the current ids are kept in `$FERROCLAW_HOME/gateway/sessions.json`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use crate::files::{read_json, write_json_atomically};

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

/// The current session id of every chat that ran `/new`; others use their base id.
#[derive(Debug, Clone)]
pub struct SessionNames {
    path: PathBuf,
    current: Arc<Mutex<BTreeMap<String, String>>>,
}

impl SessionNames {
    /// Loads `home/gateway/sessions.json` (a bad file is logged and ignored).
    pub fn load(home: &Path) -> Self {
        let path = home.join("gateway").join("sessions.json");
        let current = read_json(&path).unwrap_or_else(|e| {
            tracing::warn!("{}: {e}; chats start from their base sessions", path.display());
            BTreeMap::new()
        });
        SessionNames { path, current: Arc::new(Mutex::new(current)) }
    }

    /// The session id `key` talks in now.
    pub fn current(&self, key: &SessionKey) -> String {
        let map = self.current.lock().unwrap_or_else(PoisonError::into_inner);
        map.get(&key.address()).cloned().unwrap_or_else(|| key.base_session_id())
    }

    /// Makes `id` the session `key` talks in (several gateways: the one the
    /// database names); written only when it changes.
    pub fn set(&self, key: &SessionKey, id: &str) {
        let mut map = self.current.lock().unwrap_or_else(PoisonError::into_inner);
        let address = key.address();
        let unchanged = match map.get(&address) {
            Some(current) => current == id,
            None => id == key.base_session_id(),
        };
        if unchanged {
            return;
        }
        map.insert(address, id.to_string());
        if let Err(e) = write_json_atomically(&self.path, &*map) {
            tracing::warn!("{}: {e}", self.path.display());
        }
    }

    /// Every chat that moved on from its base session: (address, session id).
    pub fn moved(&self) -> Vec<(String, String)> {
        let map = self.current.lock().unwrap_or_else(PoisonError::into_inner);
        map.iter().map(|(a, id)| (a.clone(), id.clone())).collect()
    }

    /// Starts a new session for `key`; returns its id.
    pub fn rotate(&self, key: &SessionKey) -> String {
        let id = format!("{}-{}", key.base_session_id(), crate::files::now_ms());
        let mut map = self.current.lock().unwrap_or_else(PoisonError::into_inner);
        map.insert(key.address(), id.clone());
        if let Err(e) = write_json_atomically(&self.path, &*map) {
            tracing::warn!("{}: {e}", self.path.display());
        }
        id
    }
}

impl SessionNames {
    /// The chat whose current session is `id`, if any (a chat that ran
    /// `/new` has moved on; its old sessions are read-only).
    pub fn chat_of(&self, id: &str) -> Option<SessionKey> {
        let map = self.current.lock().unwrap_or_else(PoisonError::into_inner);
        chat_of_in(&map, id)
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

/// Names people gave their conversations in the web app, by session id, in
/// `$FERROCLAW_HOME/gateway/titles.json` (a session without one is shown by
/// its first request).
#[derive(Debug, Clone)]
pub struct SessionTitles {
    path: PathBuf,
    titles: Arc<Mutex<BTreeMap<String, String>>>,
}

/// Longest title kept, in characters.
pub const MAX_TITLE_CHARS: usize = 120;

impl SessionTitles {
    /// Loads `home/gateway/titles.json` (a bad file is logged and ignored).
    pub fn load(home: &Path) -> Self {
        let path = home.join("gateway").join("titles.json");
        let titles = read_json(&path).unwrap_or_else(|e| {
            tracing::warn!("{}: {e}; sessions show their first request", path.display());
            BTreeMap::new()
        });
        SessionTitles { path, titles: Arc::new(Mutex::new(titles)) }
    }

    /// The title given to `id`.
    pub fn get(&self, id: &str) -> Option<String> {
        self.titles.lock().unwrap_or_else(PoisonError::into_inner).get(id).cloned()
    }

    /// Every title given, by session id.
    pub fn all(&self) -> BTreeMap<String, String> {
        self.titles.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// Names `id` (an empty title removes the name); written at once.
    pub fn set(&self, id: &str, title: &str) -> Result<(), String> {
        let title: String = title.trim().chars().take(MAX_TITLE_CHARS).collect();
        let mut map = self.titles.lock().unwrap_or_else(PoisonError::into_inner);
        if title.is_empty() {
            map.remove(id);
        } else {
            map.insert(id.to_string(), title);
        }
        write_json_atomically(&self.path, &*map)
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

    #[test]
    fn titles_survive_a_restart_and_an_empty_one_removes_the_name() {
        let home = tempfile::tempdir().unwrap();
        let titles = SessionTitles::load(home.path());
        titles.set("gw-web-a", "  Trip to Lisbon ").unwrap();
        assert_eq!(
            SessionTitles::load(home.path()).get("gw-web-a").as_deref(),
            Some("Trip to Lisbon")
        );
        titles.set("gw-web-a", "").unwrap();
        assert_eq!(SessionTitles::load(home.path()).get("gw-web-a"), None);
    }
}
