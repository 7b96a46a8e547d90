//! The chats' sessions and the conversations' titles of several gateway
//! processes: the database's `chat_sessions` (chat address → session) and
//! `session_titles` (session → title), which every process reads.

use std::collections::BTreeMap;

use async_trait::async_trait;
use ferroclaw_store::{PgStore, StoreError};

use super::{SessionKey, SessionNameRecords, SessionRecordError, SessionTitleRecords};

/// The `chat_sessions` table.
#[derive(Debug)]
pub(super) struct ChatSessionsTable {
    db: PgStore,
}

impl ChatSessionsTable {
    /// The table of `db`.
    pub(super) fn new(db: PgStore) -> Self {
        ChatSessionsTable { db }
    }
}

#[async_trait]
impl SessionNameRecords for ChatSessionsTable {
    async fn session_of(&self, key: &SessionKey) -> Result<Option<String>, SessionRecordError> {
        self.db.chat_session(&key.address()).await.map_err(database)
    }

    async fn all(&self) -> Result<BTreeMap<String, String>, SessionRecordError> {
        Ok(self.db.chat_sessions().await.map_err(database)?.into_iter().collect())
    }

    async fn record(&self, key: &SessionKey, id: &str) -> Result<(), SessionRecordError> {
        self.db.set_chat_session(&key.address(), id).await.map_err(database)
    }
}

/// The `session_titles` table.
#[derive(Debug)]
pub(super) struct TitlesTable {
    db: PgStore,
}

impl TitlesTable {
    /// The table of `db`.
    pub(super) fn new(db: PgStore) -> Self {
        TitlesTable { db }
    }
}

#[async_trait]
impl SessionTitleRecords for TitlesTable {
    async fn get(&self, id: &str) -> Result<Option<String>, SessionRecordError> {
        self.db.session_title(id).await.map_err(database)
    }

    async fn all(&self) -> Result<BTreeMap<String, String>, SessionRecordError> {
        Ok(self.db.session_titles().await.map_err(database)?.into_iter().collect())
    }

    async fn set(&self, id: &str, title: Option<&str>) -> Result<(), SessionRecordError> {
        self.db.set_session_title(id, title).await.map_err(database)
    }
}

fn database(e: StoreError) -> SessionRecordError {
    SessionRecordError::Database(e.to_string())
}
