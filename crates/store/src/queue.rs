//! The inbound queue, the chat leases and the outbound deliveries.
//!
//! A message is stored once by `(channel, platform_id)` ([`PgStore::enqueue`]).
//! A worker claims the oldest unfinished message of a chat that nobody
//! holds ([`PgStore::claim`]): the row is picked with `FOR UPDATE SKIP LOCKED`
//! and the chat's lease row is taken in the same transaction, so a chat has
//! one worker at a time and its messages go in order, while other chats go
//! to other workers. [`PgStore::complete`] stores the answer and finishes the
//! message in one transaction, only while the lease is still the worker's:
//! a worker that lost its lease (it stalled past the lease; another took the
//! message over) stores nothing, so the answer exists once. Deliveries are
//! taken once ([`PgStore::take_outbound`]) by the process that may send them.

use std::time::Duration;

use serde_json::Value;

use crate::pg::{INBOUND_CHANNEL, OUTBOUND_CHANNEL};
use crate::{PgStore, StoreError};

/// What [`PgStore::enqueue`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Enqueued {
    /// Stored as message `id`.
    New(i64),
    /// A message with this idempotency key was stored before; nothing changed.
    Duplicate,
}

/// A message this worker holds, with its chat's lease.
#[derive(Debug, Clone, PartialEq)]
pub struct Claim {
    /// The message's row.
    pub id: i64,
    pub channel: String,
    /// The chat (`CHANNEL:CHAT_ID`): what the lease is held on.
    pub chat: String,
    /// The process that received it, when the answer must go back through it.
    pub origin: Option<String>,
    /// What the gateway stored.
    pub body: Value,
    /// How many times it was claimed before (0 the first time; more after a
    /// worker died holding it).
    pub attempts: i32,
}

/// An answer waiting for delivery, or delivered.
#[derive(Debug, Clone, PartialEq)]
pub struct Outbound {
    /// What makes it unique: an answer is stored and sent once per key.
    pub key: String,
    pub channel: String,
    pub chat: String,
    /// Only this process may send it (the web chat's socket, an API
    /// request waiting on it); `None`: any process.
    pub origin: Option<String>,
    pub body: Value,
}

impl PgStore {
    /// Stores an inbound message unless one with the same `(channel,
    /// platform_id)` was stored before, and wakes the workers.
    pub async fn enqueue(
        &self,
        channel: &str,
        platform_id: &str,
        chat: &str,
        origin: Option<&str>,
        body: &Value,
    ) -> Result<Enqueued, StoreError> {
        let client = self.pool.get().await?;
        let row = client
            .query_opt(
                "WITH stored AS (
                     INSERT INTO inbound (channel, platform_id, chat, origin, body)
                     VALUES ($1, $2, $3, $4, $5)
                     ON CONFLICT (channel, platform_id) DO NOTHING
                     RETURNING id)
                 SELECT id, pg_notify($6, '') FROM stored",
                &[&channel, &platform_id, &chat, &origin, body, &INBOUND_CHANNEL],
            )
            .await?;
        Ok(row.map_or(Enqueued::Duplicate, |r| Enqueued::New(r.get(0))))
    }

    /// Claims the oldest unfinished message of a chat no live worker holds,
    /// holding the chat for `lease`; `None` when there is none.
    pub async fn claim(&self, lease: Duration) -> Result<Option<Claim>, StoreError> {
        let secs = lease.as_secs_f64();
        let mut client = self.pool.get().await?;
        // A few rounds: losing the race for a chat's lease to another worker
        // is not "no work".
        for _ in 0..4 {
            let tx = client.transaction().await?;
            let Some(row) = tx
                .query_opt(
                    "SELECT i.id, i.channel, i.chat, i.origin, i.body, i.attempts
                     FROM inbound i
                     WHERE i.done_at IS NULL
                       AND NOT EXISTS (SELECT 1 FROM chat_leases l
                                       WHERE l.chat = i.chat AND l.expires_at > now())
                       AND NOT EXISTS (SELECT 1 FROM inbound o
                                       WHERE o.chat = i.chat AND o.done_at IS NULL AND o.id < i.id)
                     ORDER BY i.id
                     LIMIT 1
                     FOR UPDATE OF i SKIP LOCKED",
                    &[],
                )
                .await?
            else {
                return Ok(None);
            };
            let claim = Claim {
                id: row.get(0),
                channel: row.get(1),
                chat: row.get(2),
                origin: row.get(3),
                body: row.get(4),
                attempts: row.get(5),
            };
            // The lease row decides: taken only when free or expired.
            let leased = tx
                .query_opt(
                    "INSERT INTO chat_leases (chat, holder, inbound_id, expires_at)
                     VALUES ($1, $2, $3, now() + make_interval(secs => $4))
                     ON CONFLICT (chat) DO UPDATE
                        SET holder = excluded.holder, inbound_id = excluded.inbound_id,
                            expires_at = excluded.expires_at
                        WHERE chat_leases.expires_at <= now()
                     RETURNING 1",
                    &[&claim.chat, &self.holder(), &claim.id, &secs],
                )
                .await?;
            if leased.is_none() {
                tx.rollback().await?;
                continue;
            }
            tx.execute("UPDATE inbound SET attempts = attempts + 1 WHERE id = $1", &[&claim.id])
                .await?;
            tx.commit().await?;
            return Ok(Some(claim));
        }
        Ok(None)
    }

    /// Extends the lease on `claim`'s chat; false when it is no longer this
    /// worker's (another took the message over after the lease ran out).
    pub async fn renew(&self, claim: &Claim, lease: Duration) -> Result<bool, StoreError> {
        let client = self.pool.get().await?;
        let n = client
            .execute(
                "UPDATE chat_leases SET expires_at = now() + make_interval(secs => $4)
                 WHERE chat = $1 AND holder = $2 AND inbound_id = $3",
                &[&claim.chat, &self.holder(), &claim.id, &lease.as_secs_f64()],
            )
            .await?;
        Ok(n == 1)
    }

    /// Finishes `claim`: stores `answer` (when there is one) for delivery,
    /// marks the message done and frees the chat, in one transaction. False
    /// (and nothing stored) when the lease is no longer this worker's.
    pub async fn complete(
        &self,
        claim: &Claim,
        answer: Option<&Outbound>,
    ) -> Result<bool, StoreError> {
        let mut client = self.pool.get().await?;
        let tx = client.transaction().await?;
        if !self.finish_claim(&tx, claim, answer).await? {
            tx.rollback().await?;
            return Ok(false);
        }
        tx.commit().await?;
        Ok(true)
    }

    /// [`complete`](Self::complete)'s work inside `tx`, which the caller
    /// commits (with more in it: a chat session's new lines); false when the
    /// lease is no longer this worker's (then the caller rolls back).
    pub(crate) async fn finish_claim(
        &self,
        tx: &deadpool_postgres::Transaction<'_>,
        claim: &Claim,
        answer: Option<&Outbound>,
    ) -> Result<bool, StoreError> {
        // The message's row first, then the lease's: the order `claim` takes
        // them in, so a claim racing this one waits instead of deadlocking.
        tx.execute("SELECT 1 FROM inbound WHERE id = $1 FOR UPDATE", &[&claim.id]).await?;
        let released = tx
            .execute(
                "DELETE FROM chat_leases WHERE chat = $1 AND holder = $2 AND inbound_id = $3",
                &[&claim.chat, &self.holder(), &claim.id],
            )
            .await?;
        if released != 1 {
            return Ok(false);
        }
        tx.execute("UPDATE inbound SET done_at = now() WHERE id = $1", &[&claim.id]).await?;
        if let Some(a) = answer {
            tx.execute(
                "INSERT INTO outbound (key, channel, chat, origin, body) VALUES ($1, $2, $3, $4, $5)
                 ON CONFLICT (key) DO NOTHING",
                &[&a.key, &a.channel, &a.chat, &a.origin, &a.body],
            )
            .await?;
            tx.execute("SELECT pg_notify($1, '')", &[&OUTBOUND_CHANNEL]).await?;
        }
        // The chat's next message may be claimed now.
        tx.execute("SELECT pg_notify($1, '')", &[&INBOUND_CHANNEL]).await?;
        Ok(true)
    }

    /// Stores a message the agent sends on its own (the `message` tool,
    /// cron), once per key.
    pub async fn send_later(&self, message: &Outbound) -> Result<bool, StoreError> {
        let client = self.pool.get().await?;
        let n = client
            .execute(
                "WITH stored AS (
                     INSERT INTO outbound (key, channel, chat, origin, body) VALUES ($1, $2, $3, $4, $5)
                     ON CONFLICT (key) DO NOTHING RETURNING 1)
                 SELECT pg_notify($6, '') FROM stored",
                &[
                    &message.key,
                    &message.channel,
                    &message.chat,
                    &message.origin,
                    &message.body,
                    &OUTBOUND_CHANNEL,
                ],
            )
            .await?;
        Ok(n == 1)
    }

    /// Takes up to `limit` undelivered answers this process may send (its
    /// own and those anyone may send), marking them delivered: each is
    /// handed out once, to one process.
    pub async fn take_outbound(&self, limit: i64) -> Result<Vec<Outbound>, StoreError> {
        let client = self.pool.get().await?;
        let rows = client
            .query(
                "UPDATE outbound SET delivered_at = now(), delivered_by = $1
                 WHERE key IN (SELECT key FROM outbound
                               WHERE delivered_at IS NULL AND (origin IS NULL OR origin = $1)
                               ORDER BY created_at, key
                               LIMIT $2
                               FOR UPDATE SKIP LOCKED)
                 RETURNING key, channel, chat, origin, body, created_at",
                &[&self.holder(), &limit],
            )
            .await?;
        let mut out: Vec<(std::time::SystemTime, Outbound)> = rows
            .into_iter()
            .map(|r| {
                let answer = Outbound {
                    key: r.get(0),
                    channel: r.get(1),
                    chat: r.get(2),
                    origin: r.get(3),
                    body: r.get(4),
                };
                (r.get(5), answer)
            })
            .collect();
        // RETURNING has no order: deliver in the order they were stored.
        out.sort_by(|a, b| a.0.cmp(&b.0).then_with(|| a.1.key.cmp(&b.1.key)));
        Ok(out.into_iter().map(|(_, a)| a).collect())
    }

    /// Messages stored and not finished (for status and tests).
    pub async fn unfinished(&self) -> Result<i64, StoreError> {
        let client = self.pool.get().await?;
        Ok(client
            .query_one("SELECT count(*) FROM inbound WHERE done_at IS NULL", &[])
            .await?
            .get(0))
    }
}
