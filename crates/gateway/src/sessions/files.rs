//! The chats' sessions and the conversations' titles of one home:
//! `$FERROCLAW_HOME/gateway/sessions.json` (address → session, for every
//! chat that ran `/new`) and `gateway/titles.json` (session → title), read
//! once, held in memory and written atomically at each change.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use async_trait::async_trait;

use super::{SessionKey, SessionNameRecords, SessionRecordError, SessionTitleRecords, chat_of_in};
use crate::files::{read_json, write_json_atomically};

/// A JSON map kept in memory and in a file (none: in memory only).
#[derive(Debug, Clone)]
struct JsonMap {
    path: Option<PathBuf>,
    map: Arc<Mutex<BTreeMap<String, String>>>,
}

impl JsonMap {
    /// The map in `path` (a bad file is logged, with `then` saying what
    /// follows, and ignored).
    fn load(path: Option<PathBuf>, then: &str) -> Self {
        let map = match &path {
            Some(path) => read_json(path).unwrap_or_else(|e| {
                tracing::warn!("{}: {e}; {then}", path.display());
                BTreeMap::new()
            }),
            None => BTreeMap::new(),
        };
        JsonMap { path, map: Arc::new(Mutex::new(map)) }
    }

    fn lock(&self) -> MutexGuard<'_, BTreeMap<String, String>> {
        self.map.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Writes `map` (this map, locked) to the file.
    fn write(&self, map: &BTreeMap<String, String>) -> Result<(), SessionRecordError> {
        let Some(path) = &self.path else { return Ok(()) };
        write_json_atomically(path, map)
            .map_err(|message| SessionRecordError::File { path: path.clone(), message })
    }
}

/// `gateway/sessions.json`: a gateway's working names, and one gateway's record.
#[derive(Debug, Clone)]
pub(super) struct NamesFile(JsonMap);

impl NamesFile {
    /// The names of `home` (`None`: in memory only, nothing moved yet).
    pub(super) fn load(home: Option<&Path>) -> Self {
        let path = home.map(|h| h.join("gateway").join("sessions.json"));
        NamesFile(JsonMap::load(path, "chats start from their base sessions"))
    }

    pub(super) fn current(&self, key: &SessionKey) -> String {
        self.0.lock().get(&key.address()).cloned().unwrap_or_else(|| key.base_session_id())
    }

    /// Makes `id` the session of `key`; written only when it changes.
    fn name(&self, key: &SessionKey, id: &str) -> Result<(), SessionRecordError> {
        let mut map = self.0.lock();
        let address = key.address();
        let unchanged = match map.get(&address) {
            Some(current) => current == id,
            None => id == key.base_session_id(),
        };
        if unchanged {
            return Ok(());
        }
        map.insert(address, id.to_string());
        self.0.write(&map)
    }

    pub(super) fn set(&self, key: &SessionKey, id: &str) {
        if let Err(e) = self.name(key, id) {
            tracing::warn!("{e}");
        }
    }

    pub(super) fn moved(&self) -> Vec<(String, String)> {
        self.0.lock().iter().map(|(a, id)| (a.clone(), id.clone())).collect()
    }

    pub(super) fn rotate(&self, key: &SessionKey) -> String {
        let id = format!("{}-{}", key.base_session_id(), crate::files::now_ms());
        let mut map = self.0.lock();
        map.insert(key.address(), id.clone());
        if let Err(e) = self.0.write(&map) {
            tracing::warn!("{e}");
        }
        id
    }

    pub(super) fn chat_of(&self, id: &str) -> Option<SessionKey> {
        chat_of_in(&self.0.lock(), id)
    }
}

#[async_trait]
impl SessionNameRecords for NamesFile {
    async fn session_of(&self, key: &SessionKey) -> Result<Option<String>, SessionRecordError> {
        Ok(self.0.lock().get(&key.address()).cloned())
    }

    async fn all(&self) -> Result<BTreeMap<String, String>, SessionRecordError> {
        Ok(self.0.lock().clone())
    }

    async fn record(&self, key: &SessionKey, id: &str) -> Result<(), SessionRecordError> {
        self.name(key, id)
    }
}

/// `gateway/titles.json`.
#[derive(Debug)]
pub(super) struct TitlesFile(JsonMap);

impl TitlesFile {
    /// The titles of `home`.
    pub(super) fn load(home: &Path) -> Self {
        let path = home.join("gateway").join("titles.json");
        TitlesFile(JsonMap::load(Some(path), "sessions show their first request"))
    }
}

#[async_trait]
impl SessionTitleRecords for TitlesFile {
    async fn get(&self, id: &str) -> Result<Option<String>, SessionRecordError> {
        Ok(self.0.lock().get(id).cloned())
    }

    async fn all(&self) -> Result<BTreeMap<String, String>, SessionRecordError> {
        Ok(self.0.lock().clone())
    }

    async fn set(&self, id: &str, title: Option<&str>) -> Result<(), SessionRecordError> {
        let mut map = self.0.lock();
        match title {
            Some(title) => map.insert(id.to_string(), title.to_string()),
            None => map.remove(id),
        };
        self.0.write(&map)
    }
}
