//! Chat sessions in the database, line for line as their JSONL files have
//! them, so gateways that share no folder continue the same conversation.
//!
//! A session is its lines in order (`seq` from 0, the metadata line first),
//! each stored as the exact text of the file's line and with the byte offset
//! where it ends (`end_at`, its newline counted), and a head row saying how
//! far it goes ([`SessionHead`]). The local file stays the working copy the
//! agent opens: a worker brings it up to the database's copy before a turn
//! (fetching only the lines after where its copy ends), and stores the
//! turn's new lines in the transaction that finishes the message
//! ([`PgStore::complete_with_session`]): nothing is acknowledged that is
//! not stored, and a session is never rewritten whole for a turn.
//! `chat_sessions` records which session each chat talks in (`/new` moves it on).

use crate::queue::{Claim, Outbound};
use crate::{PgStore, StoreError};

/// How far a stored session goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SessionHead {
    /// Lines stored (the metadata line included).
    pub lines: i32,
    /// Bytes of the file they make, each line's newline included.
    pub bytes: i64,
}

/// Where a claimed chat's turn starts, as the claim read it
/// ([`PgStore::claim_serving`]): enough for a worker to check its copy of
/// the session against the database's without asking again (a copy at least
/// `head.bytes` long agrees when the bytes before there are `last_line`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionStart {
    /// The session the chat talks in, as recorded.
    pub session: String,
    /// How far it goes in the database (`None`: not stored).
    pub head: Option<SessionHead>,
    /// Its last stored line (the one ending at `head.bytes`), without its newline.
    pub last_line: Option<String>,
}

/// New lines for a session: the database keeps its first `keep` lines (what
/// the writer's copy began from) and the `lines` follow them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionWrite {
    pub session: String,
    /// The head the writer saw before its turn (`None`: not stored then);
    /// the write is refused when the session moved on meanwhile.
    pub seen: Option<SessionHead>,
    /// The stored lines kept ([`SessionHead::default`]: none, the session is
    /// stored whole from `lines`).
    pub keep: SessionHead,
    /// The lines that follow, without their newlines.
    pub lines: Vec<String>,
}

impl SessionWrite {
    /// True when it changes nothing.
    pub fn is_empty(&self) -> bool {
        self.lines.is_empty() && Some(self.keep) == self.seen
    }
}

/// A line as the database can hold it: text has no NUL, and a line that is
/// not UTF-8 (damaged by hand; the loader skips it anyway) is kept lossily.
pub fn storable_line(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).replace('\0', "\u{fffd}")
}

impl PgStore {
    /// The session `chat` talks in now, when one was recorded.
    pub async fn chat_session(&self, chat: &str) -> Result<Option<String>, StoreError> {
        let client = self.pool.get().await?;
        let row =
            client.query_opt("SELECT session FROM chat_sessions WHERE chat = $1", &[&chat]).await?;
        Ok(row.map(|r| r.get(0)))
    }

    /// Where a turn of `chat` starts, in one round trip: the session the
    /// chat talks in (`Some` when one was recorded, else `unrecorded` is
    /// the session meant) and how far that session goes in the database
    /// (`None`: not stored).
    pub async fn chat_session_head(
        &self,
        chat: &str,
        unrecorded: &str,
    ) -> Result<(Option<String>, Option<SessionHead>), StoreError> {
        let client = self.pool.get().await?;
        let row = client
            .query_one(
                "SELECT c.session, f.lines, f.bytes
                 FROM (SELECT $1::text AS chat) AS asked
                 LEFT JOIN chat_sessions c ON c.chat = asked.chat
                 LEFT JOIN session_files f ON f.session = coalesce(c.session, $2::text)",
                &[&chat, &unrecorded],
            )
            .await?;
        let head = match (row.get::<_, Option<i32>>(1), row.get::<_, Option<i64>>(2)) {
            (Some(lines), Some(bytes)) => Some(SessionHead { lines, bytes }),
            _ => None,
        };
        Ok((row.get(0), head))
    }

    /// [`chat_session_head`](Self::chat_session_head) and, in the same
    /// round trip, the stored line of `unrecorded` that ends at byte
    /// `min(local_len, stored bytes)` (how a worker whose copy of that
    /// session is `local_len` bytes long checks that the two agree): `Some`
    /// when the chat talks in `unrecorded` (the line itself `None` when
    /// none ends there, or at byte 0), `None` when it talks in another one.
    pub async fn chat_session_start(
        &self,
        chat: &str,
        unrecorded: &str,
        local_len: i64,
    ) -> Result<(Option<String>, Option<SessionHead>, Option<Option<String>>), StoreError> {
        let client = self.pool.get().await?;
        let statement = client
            .prepare_cached(
                "SELECT c.session, f.lines, f.bytes,
                        coalesce(c.session, $2::text) = $2::text,
                        (SELECT l.line FROM session_lines l
                         WHERE l.session = $2::text AND l.end_at = least($3::int8, f.bytes)
                           AND least($3::int8, f.bytes) > 0)
                 FROM (SELECT $1::text AS chat) AS asked
                 LEFT JOIN chat_sessions c ON c.chat = asked.chat
                 LEFT JOIN session_files f ON f.session = coalesce(c.session, $2::text)",
            )
            .await?;
        let row = client.query_one(&statement, &[&chat, &unrecorded, &local_len]).await?;
        let head = match (row.get::<_, Option<i32>>(1), row.get::<_, Option<i64>>(2)) {
            (Some(lines), Some(bytes)) => Some(SessionHead { lines, bytes }),
            _ => None,
        };
        let line = row.get::<_, bool>(3).then(|| row.get::<_, Option<String>>(4));
        Ok((row.get(0), head, line))
    }

    /// Records that `chat` talks in `session` now.
    pub async fn set_chat_session(&self, chat: &str, session: &str) -> Result<(), StoreError> {
        let client = self.pool.get().await?;
        set_chat_session(&client, chat, session).await
    }

    /// Every chat's current session: (chat, session), by chat.
    pub async fn chat_sessions(&self) -> Result<Vec<(String, String)>, StoreError> {
        let client = self.pool.get().await?;
        let rows =
            client.query("SELECT chat, session FROM chat_sessions ORDER BY chat", &[]).await?;
        Ok(rows.into_iter().map(|r| (r.get(0), r.get(1))).collect())
    }

    /// How far `session` goes; `None` when it is not stored.
    pub async fn session_head(&self, session: &str) -> Result<Option<SessionHead>, StoreError> {
        let client = self.pool.get().await?;
        let row = client
            .query_opt("SELECT lines, bytes FROM session_files WHERE session = $1", &[&session])
            .await?;
        Ok(row.map(|r| SessionHead { lines: r.get(0), bytes: r.get(1) }))
    }

    /// The stored line of `session` that ends at byte `end_at` (newline
    /// counted), if one does.
    pub async fn session_line_ending_at(
        &self,
        session: &str,
        end_at: i64,
    ) -> Result<Option<String>, StoreError> {
        let client = self.pool.get().await?;
        let row = client
            .query_opt(
                "SELECT line FROM session_lines WHERE session = $1 AND end_at = $2",
                &[&session, &end_at],
            )
            .await?;
        Ok(row.map(|r| r.get(0)))
    }

    /// The stored lines of `session` that end after byte `after`, in order
    /// (`after` = 0: all of it).
    pub async fn session_lines_after(
        &self,
        session: &str,
        after: i64,
    ) -> Result<Vec<String>, StoreError> {
        let client = self.pool.get().await?;
        let rows = client
            .query(
                "SELECT line FROM session_lines WHERE session = $1 AND end_at > $2 ORDER BY seq",
                &[&session, &after],
            )
            .await?;
        Ok(rows.into_iter().map(|r| r.get(0)).collect())
    }

    /// The stored lines of `session` that end at byte `at` or after, in
    /// order, each with where it ends: how a worker whose copy stops at `at`
    /// gets, in one round trip, the line to check its copy against (the
    /// first, when it ends at `at`) and the lines that follow it.
    pub async fn session_lines_from(
        &self,
        session: &str,
        at: i64,
    ) -> Result<Vec<(i64, String)>, StoreError> {
        let client = self.pool.get().await?;
        let statement = client
            .prepare_cached(
                "SELECT end_at, line FROM session_lines
                 WHERE session = $1 AND end_at >= $2 ORDER BY seq",
            )
            .await?;
        let rows = client.query(&statement, &[&session, &at]).await?;
        Ok(rows.into_iter().map(|r| (r.get(0), r.get(1))).collect())
    }

    /// Every stored session's id, in order.
    pub async fn session_ids(&self) -> Result<Vec<String>, StoreError> {
        let client = self.pool.get().await?;
        let rows = client.query("SELECT session FROM session_files ORDER BY session", &[]).await?;
        Ok(rows.into_iter().map(|r| r.get(0)).collect())
    }

    /// Stores `write` on its own (`ferroclaw gateway import`); false when the
    /// session moved on since the writer looked (nothing stored then).
    pub async fn write_session(&self, write: &SessionWrite) -> Result<bool, StoreError> {
        let mut client = self.pool.get().await?;
        let tx = client.transaction().await?;
        if !write_session(&tx, write).await? {
            tx.rollback().await?;
            return Ok(false);
        }
        tx.commit().await?;
        Ok(true)
    }

    /// [`complete`](PgStore::complete) with the turn's session lines, and the
    /// chat's session when it changed (`(chat, session)`), in the same
    /// transaction: the answer is stored only with the lines that led to it.
    /// False (nothing stored) when the lease is no longer this worker's or
    /// the session moved on meanwhile.
    ///
    /// One transaction, its statements sent together (one round trip between
    /// `BEGIN` and `COMMIT`): the finish, the session's lines, and, where this
    /// process's workers send answers themselves ([`PgStore::send_myself`]),
    /// the answers they sent marked delivered and whether this one may be
    /// sent at once (nothing of its chat waits before it).
    pub async fn complete_with_session(
        &self,
        claim: &Claim,
        answer: Option<&Outbound>,
        write: Option<&SessionWrite>,
        current: Option<(&str, &str)>,
    ) -> Result<bool, StoreError> {
        let mine = answer.filter(|a| self.sent_here.reserved(&a.key));
        let turn = TurnEnd { claim, answer, write: write.filter(|w| !w.is_empty()), current };
        let (mark, sent) = self.sent_here.to_mark();
        let done = self.end_turn(&turn, mine, &mark, &sent).await;
        match &done {
            Ok(Some(_)) => self.sent_here.marked(&mark),
            Ok(None) | Err(_) => self.sent_here.not_marked(&mark),
        }
        if let (Ok(Some(Some(in_order))), Some(answer)) = (&done, mine) {
            self.sent_here.stored(&answer.key, *in_order);
        }
        Ok(done?.is_some())
    }

    /// [`complete_with_session`](Self::complete_with_session)'s transaction:
    /// `None` when nothing was stored, else whether `mine` (an answer its
    /// worker sends) may be sent at once. `mark`: answers sent by their
    /// workers, to mark delivered; `sent`: every answer sent and not known
    /// to be marked.
    async fn end_turn(
        &self,
        turn: &TurnEnd<'_>,
        mine: Option<&Outbound>,
        mark: &[String],
        sent: &[String],
    ) -> Result<Option<Option<bool>>, StoreError> {
        let mut client = self.pool.get().await?;
        let tx = client.transaction().await?;
        let (finished, written, in_order) = tokio::try_join!(
            self.finish_claim(&tx, turn.claim, turn.answer, mine.is_none()),
            async {
                match turn.write {
                    Some(write) => write_session(&tx, write).await,
                    None => Ok(true),
                }
            },
            async {
                if mine.is_none() && mark.is_empty() {
                    return Ok(None);
                }
                let mine = mine.map(|a| a.key.as_str());
                self.mark_sent(&tx, &turn.claim.chat, mine, mark, sent).await
            },
        )?;
        if !finished {
            tx.rollback().await?;
            return Ok(None);
        }
        if !written {
            if let Some(write) = turn.write {
                tracing::warn!(session = %write.session, "the stored session moved on during the turn; its lines were not stored");
            }
            tx.rollback().await?;
            return Ok(None);
        }
        if let Some((chat, session)) = turn.current {
            set_chat_session(&tx, chat, session).await?;
        }
        tx.commit().await?;
        Ok(Some(in_order))
    }

    /// In `tx`: marks the answers in `mark` delivered (their workers sent
    /// them), and, for the answer keyed `mine` (its worker sends it), whether
    /// nothing of `chat` for this process waits before it (those in `sent`
    /// were sent already).
    async fn mark_sent(
        &self,
        tx: &deadpool_postgres::Transaction<'_>,
        chat: &str,
        mine: Option<&str>,
        mark: &[String],
        sent: &[String],
    ) -> Result<Option<bool>, StoreError> {
        let statement = tx
            .prepare_cached(
                "WITH marked AS (
                     UPDATE outbound SET delivered_at = now(), delivered_by = $1
                     WHERE key = ANY($2) AND delivered_at IS NULL
                     RETURNING 1)
                 SELECT (SELECT count(*) FROM marked),
                        NOT EXISTS (SELECT 1 FROM outbound
                                    WHERE chat = $3 AND origin = $1 AND delivered_at IS NULL
                                      AND key <> $4 AND NOT key = ANY($5))",
            )
            .await?;
        let mine_key = mine.unwrap_or_default();
        let row =
            tx.query_one(&statement, &[&self.holder(), &mark, &chat, &mine_key, &sent]).await?;
        Ok(mine.map(|_| row.get::<_, bool>(1)))
    }
}

/// What a turn's end stores ([`PgStore::complete_with_session`]).
struct TurnEnd<'a> {
    claim: &'a Claim,
    answer: Option<&'a Outbound>,
    write: Option<&'a SessionWrite>,
    current: Option<(&'a str, &'a str)>,
}

async fn set_chat_session(
    client: &impl deadpool_postgres::GenericClient,
    chat: &str,
    session: &str,
) -> Result<(), StoreError> {
    client
        .execute(
            "INSERT INTO chat_sessions (chat, session) VALUES ($1, $2)
             ON CONFLICT (chat) DO UPDATE SET session = excluded.session, updated_at = now()",
            &[&chat, &session],
        )
        .await?;
    Ok(())
}

/// Writes `write` in `tx`; false when the session's head is not what the
/// writer saw.
async fn write_session(
    tx: &deadpool_postgres::Transaction<'_>,
    write: &SessionWrite,
) -> Result<bool, StoreError> {
    let session = write.session.as_str();
    let mut seqs = Vec::with_capacity(write.lines.len());
    let mut ends = Vec::with_capacity(write.lines.len());
    let (mut seq, mut end) = (write.keep.lines, write.keep.bytes);
    for line in &write.lines {
        end += line.len() as i64 + 1;
        seqs.push(seq);
        ends.push(end);
        seq += 1;
    }
    // A turn's usual write (lines after all the writer saw): one statement.
    if write.seen.unwrap_or_default() == write.keep {
        let statement = tx
            .prepare_cached(
                "WITH head AS (
                     SELECT lines, bytes FROM session_files WHERE session = $1 FOR UPDATE),
                 seen AS (
                     SELECT 1 WHERE CASE WHEN $2::int4 IS NULL THEN NOT EXISTS (SELECT 1 FROM head)
                                         ELSE EXISTS (SELECT 1 FROM head
                                                      WHERE lines = $2 AND bytes = $3) END),
                 head_written AS (
                     INSERT INTO session_files (session, lines, bytes) SELECT $1, $4, $5 FROM seen
                     ON CONFLICT (session) DO UPDATE
                        SET lines = excluded.lines, bytes = excluded.bytes, updated_at = now()
                     RETURNING 1),
                 lines_written AS (
                     INSERT INTO session_lines (session, seq, end_at, line)
                     SELECT $1, l.seq, l.end_at, l.line
                     FROM seen, unnest($6::int4[], $7::int8[], $8::text[]) AS l(seq, end_at, line)
                     RETURNING 1)
                 SELECT EXISTS (SELECT 1 FROM seen)",
            )
            .await?;
        let (seen_lines, seen_bytes) = (write.seen.map(|h| h.lines), write.seen.map(|h| h.bytes));
        let row = tx
            .query_one(
                &statement,
                &[&session, &seen_lines, &seen_bytes, &seq, &end, &seqs, &ends, &write.lines],
            )
            .await?;
        return Ok(row.get(0));
    }
    let head = tx
        .query_opt(
            "SELECT lines, bytes FROM session_files WHERE session = $1 FOR UPDATE",
            &[&session],
        )
        .await?
        .map(|r| SessionHead { lines: r.get(0), bytes: r.get(1) });
    // Only lines the database has can be kept.
    if head != write.seen || write.keep.lines > head.map_or(0, |h| h.lines) {
        return Ok(false);
    }
    tx.execute(
        "INSERT INTO session_files (session, lines, bytes) VALUES ($1, $2, $3)
         ON CONFLICT (session) DO UPDATE
            SET lines = excluded.lines, bytes = excluded.bytes, updated_at = now()",
        &[&session, &seq, &end],
    )
    .await?;
    tx.execute(
        "DELETE FROM session_lines WHERE session = $1 AND seq >= $2",
        &[&session, &write.keep.lines],
    )
    .await?;
    if !write.lines.is_empty() {
        tx.execute(
            "INSERT INTO session_lines (session, seq, end_at, line)
             SELECT $1, * FROM unnest($2::int[], $3::bigint[], $4::text[])",
            &[&session, &seqs, &ends, &write.lines],
        )
        .await?;
    }
    Ok(true)
}
