//! Pairing of several gateway processes: the database's `allow_list` and
//! `pairing_requests`, read on every check, so a code one process gave out
//! is approved once and honoured by all.

use async_trait::async_trait;
use ferroclaw_store::{CodeRequest, PairingRequest, PgStore, StoreError};

use super::{
    ApprovedSender, CODE_TTL, CODE_TTL_MS, MAX_PENDING, PairingError, PairingRecords, PairingState,
    PendingPairing, new_code,
};
use crate::files::now_ms;

/// The pairing tables.
#[derive(Debug)]
pub(super) struct PairingTables {
    db: PgStore,
}

impl PairingTables {
    /// The tables of `db`.
    pub(super) fn new(db: PgStore) -> Self {
        PairingTables { db }
    }
}

#[async_trait]
impl PairingRecords for PairingTables {
    async fn load(&self, channel: &str) -> Result<PairingState, PairingError> {
        let pending = self.db.pairing_requests(channel, CODE_TTL).await.map_err(database)?;
        let approved = self.db.allowed_senders(channel).await.map_err(database)?;
        Ok(PairingState {
            approved: approved
                .into_iter()
                .map(|a| ApprovedSender {
                    sender: a.sender,
                    name: a.name,
                    approved_at_ms: a.added_at_ms.max(0) as u64,
                })
                .collect(),
            pending: pending.into_iter().map(pending_of).collect(),
        })
    }

    async fn is_approved(&self, channel: &str, sender: &str) -> Result<bool, PairingError> {
        self.db.is_allowed(channel, sender).await.map_err(database)
    }

    async fn request(
        &self,
        channel: &str,
        sender: &str,
        chat_id: &str,
        name: Option<String>,
    ) -> Result<PendingPairing, PairingError> {
        let code = new_code()
            .map_err(|e| PairingError::Database(format!("no random source for a code: {e}")))?;
        let request = CodeRequest {
            channel,
            sender,
            chat_id,
            name: name.as_deref(),
            new_code: &code,
            ttl: CODE_TTL,
            max_pending: MAX_PENDING as i64,
        };
        Ok(pending_of(self.db.request_code(request).await.map_err(database)?))
    }

    async fn approve(
        &self,
        channel: &str,
        code: &str,
    ) -> Result<Option<ApprovedSender>, PairingError> {
        let approved = self.db.approve_code(channel, code, CODE_TTL).await.map_err(database)?;
        Ok(approved.map(|a| ApprovedSender {
            sender: a.sender,
            name: a.name,
            approved_at_ms: now_ms(),
        }))
    }

    async fn deny(
        &self,
        channel: &str,
        code: &str,
    ) -> Result<Option<PendingPairing>, PairingError> {
        Ok(self.db.deny_code(channel, code).await.map_err(database)?.map(pending_of))
    }

    async fn revoke(&self, channel: &str, sender: &str) -> Result<bool, PairingError> {
        self.db.disallow(channel, sender).await.map_err(database)
    }

    async fn channels(&self) -> Result<Vec<String>, PairingError> {
        self.db.pairing_channels().await.map_err(database)
    }
}

/// A code waiting in the database, as the files show it.
fn pending_of(r: PairingRequest) -> PendingPairing {
    let created = r.created_at_ms.max(0) as u64;
    PendingPairing {
        code: r.code,
        sender: r.sender,
        chat_id: r.chat_id,
        name: r.name,
        created_at_ms: created,
        expires_at_ms: created + CODE_TTL_MS,
    }
}

fn database(e: StoreError) -> PairingError {
    PairingError::Database(e.to_string())
}
