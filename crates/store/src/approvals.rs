//! Approval requests across processes. The process whose turn needs an
//! approval records the request ([`PgStore::open_approval`]); a process
//! with a page open on the chat shows it ([`PgStore::approvals_to_show`],
//! [`PgStore::mark_approval_shown`]); whichever process the answer reaches
//! records it once ([`PgStore::answer_approval`]); the asking process reads
//! it ([`PgStore::approval_answer`]) and records how the request ended
//! ([`PgStore::resolve_approval`]), which the showing processes pass on
//! ([`PgStore::approval_outcomes`]). Each of these changes notifies the
//! other processes ([`crate::Wakeups::approvals`]), so nobody polls.

use serde_json::Value;

use crate::pg::APPROVALS_CHANNEL;
use crate::{PgStore, StoreError};

/// A request as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct ApprovalRequest {
    /// The request's id (what `/approve ID` names).
    pub id: String,
    pub channel: String,
    pub chat_id: String,
    /// Who may answer it (besides the configured approvers).
    pub owner: String,
    pub tool: String,
    /// What the gateway shows (its JSON).
    pub prompt: Value,
}

/// What [`PgStore::answer_approval`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answered {
    /// Recorded; the request's tool.
    Done { tool: String },
    /// No request with that id waits in that chat.
    Unknown,
    /// It waits, and this sender may not answer it; nothing changed.
    NotAllowed,
}

impl PgStore {
    /// Records a request this process waits on.
    pub async fn open_approval(&self, r: &ApprovalRequest) -> Result<(), StoreError> {
        let client = self.pool.get().await?;
        client
            .execute(
                "WITH asked AS (
                     INSERT INTO approvals (id, channel, chat_id, owner, tool, prompt, asked_by)
                     VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING 1)
                 SELECT pg_notify($8, '') FROM asked",
                &[
                    &r.id,
                    &r.channel,
                    &r.chat_id,
                    &r.owner,
                    &r.tool,
                    &r.prompt,
                    &self.holder(),
                    &APPROVALS_CHANNEL,
                ],
            )
            .await?;
        Ok(())
    }

    /// Open requests on `channel` asked by other processes, leaving out `seen`.
    pub async fn approvals_to_show(
        &self,
        channel: &str,
        seen: &[String],
    ) -> Result<Vec<ApprovalRequest>, StoreError> {
        let client = self.pool.get().await?;
        let statement = client
            .prepare_cached(
                "SELECT id, channel, chat_id, owner, tool, prompt FROM approvals
                 WHERE outcome IS NULL AND answer IS NULL AND channel = $1 AND asked_by <> $2
                   AND NOT (id = ANY($3))
                 ORDER BY created_at",
            )
            .await?;
        let rows = client.query(&statement, &[&channel, &self.holder(), &seen]).await?;
        Ok(rows
            .into_iter()
            .map(|r| ApprovalRequest {
                id: r.get(0),
                channel: r.get(1),
                chat_id: r.get(2),
                owner: r.get(3),
                tool: r.get(4),
                prompt: r.get(5),
            })
            .collect())
    }

    /// Says this process showed request `id` to someone.
    pub async fn mark_approval_shown(&self, id: &str) -> Result<(), StoreError> {
        let client = self.pool.get().await?;
        client
            .execute(
                "WITH shown AS (
                     UPDATE approvals SET shown_by = coalesce(shown_by, $2) WHERE id = $1
                     RETURNING 1)
                 SELECT pg_notify($3, '') FROM shown",
                &[&id, &self.holder(), &APPROVALS_CHANNEL],
            )
            .await?;
        Ok(())
    }

    /// Whether any process showed request `id`.
    pub async fn approval_shown(&self, id: &str) -> Result<bool, StoreError> {
        let client = self.pool.get().await?;
        let row = client
            .query_opt("SELECT 1 FROM approvals WHERE id = $1 AND shown_by IS NOT NULL", &[&id])
            .await?;
        Ok(row.is_some())
    }

    /// Records `answer` (with `reason`) to request `id` of chat
    /// `(channel, chat_id)`, once, when `may_answer(owner)` says this sender may.
    pub async fn answer_approval(
        &self,
        id: &str,
        channel: &str,
        chat_id: &str,
        may_answer: impl FnOnce(&str) -> bool,
        answer: &str,
        reason: &str,
    ) -> Result<Answered, StoreError> {
        let mut client = self.pool.get().await?;
        let tx = client.transaction().await?;
        let Some(row) = tx
            .query_opt(
                "SELECT owner, tool FROM approvals
                 WHERE id = $1 AND channel = $2 AND chat_id = $3
                   AND answer IS NULL AND outcome IS NULL
                 FOR UPDATE",
                &[&id, &channel, &chat_id],
            )
            .await?
        else {
            return Ok(Answered::Unknown);
        };
        let (owner, tool): (String, String) = (row.get(0), row.get(1));
        if !may_answer(&owner) {
            return Ok(Answered::NotAllowed);
        }
        tx.execute(
            "UPDATE approvals SET answer = $2, reason = $3, answered_by = $4 WHERE id = $1",
            &[&id, &answer, &reason, &self.holder()],
        )
        .await?;
        tx.execute("SELECT pg_notify($1, '')", &[&APPROVALS_CHANNEL]).await?;
        tx.commit().await?;
        Ok(Answered::Done { tool })
    }

    /// The answer to request `id` (choice word and reason) once there is one.
    pub async fn approval_answer(&self, id: &str) -> Result<Option<(String, String)>, StoreError> {
        let client = self.pool.get().await?;
        let statement = client
            .prepare_cached(
                "SELECT answer, coalesce(reason, '') FROM approvals
                 WHERE id = $1 AND answer IS NOT NULL",
            )
            .await?;
        let row = client.query_opt(&statement, &[&id]).await?;
        Ok(row.map(|r| (r.get(0), r.get(1))))
    }

    /// Records how request `id` ended (approved, denied, timed out, cancelled).
    pub async fn resolve_approval(&self, id: &str, outcome: &str) -> Result<(), StoreError> {
        let client = self.pool.get().await?;
        client
            .execute(
                "WITH ended AS (
                     UPDATE approvals SET outcome = $2, resolved_at = now()
                     WHERE id = $1 AND outcome IS NULL RETURNING 1)
                 SELECT pg_notify($3, '') FROM ended",
                &[&id, &outcome, &APPROVALS_CHANNEL],
            )
            .await?;
        Ok(())
    }

    /// Of the requests `ids`, those that ended, with how: (id, outcome).
    pub async fn approval_outcomes(
        &self,
        ids: &[String],
    ) -> Result<Vec<(String, String)>, StoreError> {
        let client = self.pool.get().await?;
        let statement = client
            .prepare_cached(
                "SELECT id, outcome FROM approvals WHERE id = ANY($1) AND outcome IS NOT NULL",
            )
            .await?;
        let rows = client.query(&statement, &[&ids]).await?;
        Ok(rows.into_iter().map(|r| (r.get(0), r.get(1))).collect())
    }
}
