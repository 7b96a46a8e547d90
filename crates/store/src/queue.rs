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
use crate::sessions::{SessionHead, SessionStart};

/// How often a worker with nothing to claim looks whether a process
/// holding chats died (its chats are free at once, and nothing notifies
/// that): the most a dead process's chat waits beyond its death.
pub const LIVENESS_CHECK: Duration = Duration::from_secs(1);
use crate::{PgStore, StoreError};

/// What [`PgStore::enqueue`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Enqueued {
    /// Stored as message `id`.
    New(i64),
    /// A message with this idempotency key was stored before; nothing changed.
    Duplicate,
}

/// An inbound message to store ([`PgStore::enqueue_many`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Incoming {
    pub channel: String,
    /// With `channel`, what makes it unique: a message is stored once.
    pub platform_id: String,
    /// The chat (`CHANNEL:CHAT_ID`).
    pub chat: String,
    /// The process that received it, when the answer must go back through it.
    pub origin: Option<String>,
    /// What the gateway stores (only it reads it).
    pub body: Value,
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
    /// The chat's recorded session and how far the database has it, read
    /// by the claim itself, so that the turn starts without a round trip of
    /// its own; `None` when the chat has no recorded session.
    pub start: Option<SessionStart>,
}

/// When to look for messages again when none could be claimed ([`PgStore::look_again`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LookAgain {
    /// When the next chat lease runs out (in this long), unless a
    /// notification comes first.
    LeaseEnds(Duration),
    /// Messages wait and no chat is held: another worker's claim of them is
    /// being committed right now; its lease is seen in a moment.
    Soon,
    /// Nothing waits: a new message comes with a notification.
    OnNotification,
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
        let message = Incoming {
            channel: channel.into(),
            platform_id: platform_id.into(),
            chat: chat.into(),
            origin: origin.map(str::to_string),
            body: body.clone(),
        };
        let stored = self.enqueue_many(std::slice::from_ref(&message)).await?;
        Ok(stored.into_iter().next().unwrap_or(Enqueued::Duplicate))
    }

    /// Stores several inbound messages in arrival order in one round trip
    /// (each unless one with its `(channel, platform_id)` was stored
    /// before), and wakes the workers; what happened to each, in order.
    pub async fn enqueue_many(&self, messages: &[Incoming]) -> Result<Vec<Enqueued>, StoreError> {
        if messages.is_empty() {
            return Ok(Vec::new());
        }
        let column = |f: fn(&Incoming) -> &str| -> Vec<&str> { messages.iter().map(f).collect() };
        let (channels, ids, chats) = (
            column(|m| m.channel.as_str()),
            column(|m| m.platform_id.as_str()),
            column(|m| m.chat.as_str()),
        );
        let origins: Vec<Option<&str>> = messages.iter().map(|m| m.origin.as_deref()).collect();
        let bodies: Vec<&Value> = messages.iter().map(|m| &m.body).collect();
        let client = self.pool.get().await?;
        let statement = client
            .prepare_cached(
                "WITH incoming AS (
                     SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::jsonb[])
                         WITH ORDINALITY AS m(channel, platform_id, chat, origin, body, n)),
                 stored AS (
                     INSERT INTO inbound (channel, platform_id, chat, origin, body)
                     SELECT channel, platform_id, chat, origin, body FROM incoming ORDER BY n
                     ON CONFLICT (channel, platform_id) DO NOTHING
                     RETURNING id, channel, platform_id)
                 SELECT id, channel, platform_id, pg_notify($6, '') FROM stored",
            )
            .await?;
        let rows = client
            .query(&statement, &[&channels, &ids, &chats, &origins, &bodies, &INBOUND_CHANNEL])
            .await?;
        let mut new: std::collections::HashMap<(String, String), i64> = rows
            .into_iter()
            .map(|r| ((r.get::<_, String>(1), r.get::<_, String>(2)), r.get::<_, i64>(0)))
            .collect();
        Ok(messages
            .iter()
            // The first of two with one key in a batch is the one stored.
            .map(|m| match new.remove(&(m.channel.clone(), m.platform_id.clone())) {
                Some(id) => Enqueued::New(id),
                None => Enqueued::Duplicate,
            })
            .collect())
    }

    /// Claims the oldest unfinished message of a chat no live worker holds,
    /// holding the chat for `lease`; `None` when there is none.
    pub async fn claim(&self, lease: Duration) -> Result<Option<Claim>, StoreError> {
        Ok(self.claim_many(lease, 1).await?.into_iter().next())
    }

    /// Claims up to `limit` messages, each the oldest unfinished message of
    /// a chat no live worker holds (so at most one per chat), holding each
    /// chat for `lease`; oldest first. One statement, one round trip: the
    /// messages are picked with `FOR UPDATE SKIP LOCKED` and only those
    /// whose chat lease this worker took (free or expired) are returned.
    pub async fn claim_many(&self, lease: Duration, limit: i64) -> Result<Vec<Claim>, StoreError> {
        self.claim_serving(lease, limit, None).await
    }

    /// [`claim_many`](Self::claim_many) for a gateway whose model config
    /// has the digest `model_digest`: nothing is claimed unless the database
    /// serves that config (`None`: whatever it serves). A chat whose lease
    /// holder is registered and gone (its liveness lock free: the process
    /// died) is taken over at once, without waiting for the lease to run out;
    /// for one `lease` (at most [`RESTART_GRACE_SECS`](crate::RESTART_GRACE_SECS))
    /// after the database server restarts no chat is taken
    /// over (`ferroclaw_lease_held`, see `registry`): its holder may be
    /// alive, reconnecting with an answer it could not store.
    ///
    /// Each claim comes with where its turn starts ([`Claim::start`]): the
    /// chat's recorded session, its head and its last stored line, read in
    /// the claim's own snapshot, in which every earlier message of the chat
    /// is finished (the claim needs that) and with it the session's lines
    /// that message's turn stored; the lease keeps other writers off it
    /// until the turn ends.
    pub async fn claim_serving(
        &self,
        lease: Duration,
        limit: i64,
        model_digest: Option<&str>,
    ) -> Result<Vec<Claim>, StoreError> {
        let client = self.pool.get().await?;
        let statement = client
            .prepare_cached(
                "WITH waiting AS (
                     SELECT i.id, i.chat FROM inbound i
                     WHERE i.done_at IS NULL
                       AND ($4::text IS NULL
                            OR EXISTS (SELECT 1 FROM served_model WHERE model_digest = $4))
                       AND NOT EXISTS (SELECT 1 FROM chat_leases l
                                       WHERE l.chat = i.chat
                                         AND ferroclaw_lease_held(l.expires_at, l.holder, $3))
                       AND NOT EXISTS (SELECT 1 FROM inbound o
                                       WHERE o.chat = i.chat AND o.done_at IS NULL AND o.id < i.id)
                     ORDER BY i.id
                     LIMIT $1
                     FOR UPDATE OF i SKIP LOCKED),
                 leased AS (
                     -- The lease row decides: taken only when free or no longer held.
                     INSERT INTO chat_leases (chat, holder, inbound_id, expires_at)
                     SELECT chat, $2, id, now() + make_interval(secs => $3) FROM waiting
                     ON CONFLICT (chat) DO UPDATE
                        SET holder = excluded.holder, inbound_id = excluded.inbound_id,
                            expires_at = excluded.expires_at
                        WHERE NOT ferroclaw_lease_held(chat_leases.expires_at,
                                                       chat_leases.holder, $3)
                     RETURNING inbound_id),
                 claimed AS (
                     UPDATE inbound i SET attempts = i.attempts + 1
                     FROM leased WHERE i.id = leased.inbound_id
                     RETURNING i.id, i.channel, i.chat, i.origin, i.body, i.attempts - 1 AS before)
                 -- Where each claimed chat's turn starts (see `SessionStart`).
                 SELECT m.id, m.channel, m.chat, m.origin, m.body, m.before,
                        c.session, f.lines, f.bytes,
                        (SELECT l.line FROM session_lines l
                         WHERE l.session = f.session AND l.seq = f.lines - 1 AND l.end_at = f.bytes)
                 FROM claimed m
                 LEFT JOIN chat_sessions c ON c.chat = m.chat
                 LEFT JOIN session_files f ON f.session = c.session",
            )
            .await?;
        let rows = client
            .query(&statement, &[&limit, &self.holder(), &lease.as_secs_f64(), &model_digest])
            .await?;
        let mut claims: Vec<Claim> = rows
            .into_iter()
            .map(|row| Claim {
                id: row.get(0),
                channel: row.get(1),
                chat: row.get(2),
                origin: row.get(3),
                body: row.get(4),
                attempts: row.get(5),
                start: row.get::<_, Option<String>>(6).map(|session| SessionStart {
                    session,
                    head: match (row.get(7), row.get(8)) {
                        (Some(lines), Some(bytes)) => Some(SessionHead { lines, bytes }),
                        _ => None,
                    },
                    last_line: row.get(9),
                }),
            })
            .collect();
        claims.sort_by_key(|c| c.id);
        Ok(claims)
    }

    /// When a worker that found nothing to claim should look again without
    /// a notification ([`LookAgain`]): a message waiting behind a dead
    /// worker's lease becomes free when the lease runs out, and nothing
    /// notifies that. `lease` is the chat lease the claims take (every
    /// lease holds for that long after the database server restarts).
    pub async fn look_again(&self, lease: Duration) -> Result<LookAgain, StoreError> {
        let client = self.pool.get().await?;
        let statement = client
            .prepare_cached(
                "WITH leases AS (
                     SELECT holder, greatest(expires_at, pg_postmaster_start_time()
                                                          + make_interval(secs => least($2::float8, $3::float8)))
                                    AS ends
                     FROM chat_leases)
                 SELECT (SELECT extract(epoch FROM min(ends) - now())::float8
                         FROM leases WHERE ends > now()),
                        EXISTS (SELECT 1 FROM inbound WHERE done_at IS NULL),
                        EXISTS (SELECT 1 FROM leases l JOIN gateways g ON g.holder = l.holder
                                WHERE l.holder <> $1 AND l.ends > now())",
            )
            .await?;
        let grace = f64::from(crate::registry::RESTART_GRACE_SECS);
        let row =
            client.query_one(&statement, &[&self.holder(), &lease.as_secs_f64(), &grace]).await?;
        let lease_end = row.get::<_, Option<f64>>(0).map(|s| Duration::from_secs_f64(s.max(0.0)));
        // A registered process's chats are free the moment it dies, and
        // nothing notifies that: look again soon while another holds any.
        let lease_end = match row.get::<_, bool>(2) {
            true => lease_end.map(|end| end.min(LIVENESS_CHECK)),
            false => lease_end,
        };
        Ok(match (lease_end, row.get::<_, bool>(1)) {
            (Some(end), _) => LookAgain::LeaseEnds(end),
            (None, true) => LookAgain::Soon,
            (None, false) => LookAgain::OnNotification,
        })
    }

    /// Gives `claim`'s chat back without finishing its message (the worker
    /// could not run it: it runs again, here or elsewhere, at once rather
    /// than when the lease would have run out); false when the lease was no
    /// longer this worker's.
    pub async fn release(&self, claim: &Claim) -> Result<bool, StoreError> {
        let client = self.pool.get().await?;
        let statement = client
            .prepare_cached(
                "WITH released AS (
                     DELETE FROM chat_leases WHERE chat = $1 AND holder = $2 AND inbound_id = $3
                     RETURNING 1)
                 SELECT pg_notify($4, '') FROM released",
            )
            .await?;
        let rows = client
            .query(&statement, &[&claim.chat, &self.holder(), &claim.id, &INBOUND_CHANNEL])
            .await?;
        Ok(rows.len() == 1)
    }

    /// Extends the lease on `claim`'s chat; false when it is no longer this
    /// worker's (another took the message over after the lease ran out).
    pub async fn renew(&self, claim: &Claim, lease: Duration) -> Result<bool, StoreError> {
        let client = self.pool.get().await?;
        let statement = client
            .prepare_cached(
                "UPDATE chat_leases SET expires_at = now() + make_interval(secs => $4)
                 WHERE chat = $1 AND holder = $2 AND inbound_id = $3",
            )
            .await?;
        let n = client
            .execute(&statement, &[&claim.chat, &self.holder(), &claim.id, &lease.as_secs_f64()])
            .await?;
        Ok(n == 1)
    }

    /// Finishes `claim`: stores `answer` (when there is one) for delivery,
    /// marks the message done and frees the chat, in one statement. False
    /// (and nothing stored) when the lease is no longer this worker's.
    /// Wakes the workers only when the chat has another message waiting, and
    /// the deliverers only when an answer was stored.
    pub async fn complete(
        &self,
        claim: &Claim,
        answer: Option<&Outbound>,
    ) -> Result<bool, StoreError> {
        let client = self.pool.get().await?;
        self.finish_with(&client, claim, answer, true).await
    }

    /// [`complete`](Self::complete)'s work inside `tx`, which the caller
    /// commits (with more in it: a chat session's new lines); false when the
    /// lease is no longer this worker's (then the caller rolls back).
    /// `notify_answer`: wake the deliverers for the answer (not when its
    /// worker sends it itself, [`crate::sent_here`]).
    pub(crate) async fn finish_claim(
        &self,
        tx: &deadpool_postgres::Transaction<'_>,
        claim: &Claim,
        answer: Option<&Outbound>,
        notify_answer: bool,
    ) -> Result<bool, StoreError> {
        self.finish_with(tx, claim, answer, notify_answer).await
    }

    /// Finishes `claim` through `client` (the pool's connection, or a
    /// transaction) in one statement: the lease released, the message marked
    /// done, the answer stored, and wake-ups sent only where there is work.
    async fn finish_with(
        &self,
        client: &impl deadpool_postgres::GenericClient,
        claim: &Claim,
        answer: Option<&Outbound>,
        notify_answer: bool,
    ) -> Result<bool, StoreError> {
        // The message's row is locked first (`locked` runs before the lease
        // is touched), then the lease's: the order `claim_many` takes them
        // in, so a claim racing this one waits instead of deadlocking.
        let statement = client
            .prepare_cached(
                "WITH locked AS (SELECT id FROM inbound WHERE id = $3 FOR UPDATE),
                 released AS (
                     DELETE FROM chat_leases
                     WHERE chat = $1 AND holder = $2 AND inbound_id = $3
                       AND EXISTS (SELECT 1 FROM locked)
                     RETURNING 1),
                 done AS (
                     UPDATE inbound SET done_at = now()
                     WHERE id = $3 AND EXISTS (SELECT 1 FROM released)
                     RETURNING 1),
                 stored AS (
                     INSERT INTO outbound (key, channel, chat, origin, body)
                     SELECT $4, $5, $1, $6, $7
                     WHERE $4::text IS NOT NULL AND EXISTS (SELECT 1 FROM released)
                     ON CONFLICT (key) DO NOTHING
                     RETURNING 1)
                 SELECT (SELECT count(*) FROM done),
                        CASE WHEN EXISTS (SELECT 1 FROM stored) AND $10 THEN pg_notify($8, '') END,
                        CASE WHEN EXISTS (SELECT 1 FROM released)
                              AND EXISTS (SELECT 1 FROM inbound
                                          WHERE chat = $1 AND done_at IS NULL AND id > $3)
                             THEN pg_notify($9, '') END",
            )
            .await?;
        let (key, channel, origin, body) = match answer {
            Some(a) => {
                (Some(a.key.as_str()), a.channel.as_str(), a.origin.as_deref(), Some(&a.body))
            }
            None => (None, claim.channel.as_str(), None, None),
        };
        let row = client
            .query_one(
                &statement,
                &[
                    &claim.chat,
                    &self.holder(),
                    &claim.id,
                    &key,
                    &channel,
                    &origin,
                    &body,
                    &OUTBOUND_CHANNEL,
                    &INBOUND_CHANNEL,
                    &notify_answer,
                ],
            )
            .await?;
        Ok(row.get::<_, i64>(0) == 1)
    }

    /// Takes up to `limit` undelivered answers this process may send (its
    /// own and those anyone may send), marking them delivered: each is
    /// handed out once, to one process. Answers this process's workers send
    /// themselves ([`PgStore::send_myself`]) are marked and left out.
    pub async fn take_outbound(&self, limit: i64) -> Result<Vec<Outbound>, StoreError> {
        Ok(self.take_outbound_batch(limit).await?.0)
    }

    /// [`take_outbound`](Self::take_outbound), and whether `limit` rows were
    /// taken (more may wait, though some were left out).
    pub async fn take_outbound_batch(
        &self,
        limit: i64,
    ) -> Result<(Vec<Outbound>, bool), StoreError> {
        let client = self.pool.get().await?;
        let statement = client
            .prepare_cached(
                "UPDATE outbound SET delivered_at = now(), delivered_by = $1
                 WHERE key IN (SELECT key FROM outbound
                               WHERE delivered_at IS NULL AND (origin IS NULL OR origin = $1)
                               ORDER BY created_at, key
                               LIMIT $2
                               FOR UPDATE SKIP LOCKED)
                 RETURNING key, channel, chat, origin, body, created_at",
            )
            .await?;
        let rows = client.query(&statement, &[&self.holder(), &limit]).await?;
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
        let full = out.len() as i64 == limit;
        let taken = out.into_iter().map(|(_, a)| a).collect();
        Ok((self.sent_here.for_the_loop(taken, |a: &Outbound| a.key.as_str()), full))
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
