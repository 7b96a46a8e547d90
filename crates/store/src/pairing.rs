//! Pairing and allow-lists in the database: who may talk to the gateway on
//! each channel, and the codes of senders waiting for approval. Every
//! gateway process reads them here, so a code one process gave out can be
//! approved from anywhere (`ferroclaw pairing approve`, the web app) and
//! is honoured by all of them at once.

use std::time::Duration;

use crate::{PgStore, StoreError};

/// The advisory lock that serialises code requests (any fixed number; "fcpa").
const PAIRING_LOCK: i64 = 0x6663_7061;

/// A sender waiting for the owner's approval.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PairingRequest {
    pub channel: String,
    pub code: String,
    pub sender: String,
    pub chat_id: String,
    pub name: Option<String>,
    /// When it was asked for (milliseconds since the epoch, the database's clock).
    pub created_at_ms: i64,
}

/// A sender on a channel's allow-list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllowedSender {
    pub sender: String,
    pub name: Option<String>,
    /// When it was let in (milliseconds since the epoch).
    pub added_at_ms: i64,
}

/// A new code request: [`PgStore::request_code`].
#[derive(Debug, Clone, Copy)]
pub struct CodeRequest<'a> {
    pub channel: &'a str,
    pub sender: &'a str,
    pub chat_id: &'a str,
    pub name: Option<&'a str>,
    /// The code to give when the sender has none waiting.
    pub new_code: &'a str,
    /// How long a code may be approved.
    pub ttl: Duration,
    /// Codes kept waiting per channel: the oldest go first.
    pub max_pending: i64,
}

const REQUEST_COLUMNS: &str = "channel, code, sender, chat_id, name, \
     (extract(epoch FROM created_at) * 1000)::bigint";

fn request(r: &tokio_postgres::Row) -> PairingRequest {
    PairingRequest {
        channel: r.get(0),
        code: r.get(1),
        sender: r.get(2),
        chat_id: r.get(3),
        name: r.get(4),
        created_at_ms: r.get(5),
    }
}

impl PgStore {
    /// Whether `sender` may talk on `channel`.
    pub async fn is_allowed(&self, channel: &str, sender: &str) -> Result<bool, StoreError> {
        let client = self.pool.get().await?;
        let row = client
            .query_opt(
                "SELECT 1 FROM allow_list WHERE channel = $1 AND sender = $2",
                &[&channel, &sender],
            )
            .await?;
        Ok(row.is_some())
    }

    /// Takes `sender` off `channel`'s allow-list; false when it was not on it.
    pub async fn disallow(&self, channel: &str, sender: &str) -> Result<bool, StoreError> {
        let client = self.pool.get().await?;
        let n = client
            .execute(
                "DELETE FROM allow_list WHERE channel = $1 AND sender = $2",
                &[&channel, &sender],
            )
            .await?;
        Ok(n == 1)
    }

    /// `channel`'s allow-list, oldest first.
    pub async fn allowed_senders(&self, channel: &str) -> Result<Vec<AllowedSender>, StoreError> {
        let client = self.pool.get().await?;
        let rows = client
            .query(
                "SELECT sender, name, (extract(epoch FROM added_at) * 1000)::bigint
                 FROM allow_list WHERE channel = $1 ORDER BY added_at, sender",
                &[&channel],
            )
            .await?;
        Ok(rows
            .into_iter()
            .map(|r| AllowedSender { sender: r.get(0), name: r.get(1), added_at_ms: r.get(2) })
            .collect())
    }

    /// Records that `sender` asked to pair on `channel` with `code`.
    pub async fn request_pairing(
        &self,
        channel: &str,
        code: &str,
        sender: &str,
    ) -> Result<(), StoreError> {
        let client = self.pool.get().await?;
        client
            .execute(
                "INSERT INTO pairing_requests (channel, code, sender, chat_id) VALUES ($1, $2, $3, $3)
                 ON CONFLICT DO NOTHING",
                &[&channel, &code, &sender],
            )
            .await?;
        Ok(())
    }

    /// The code of an unknown sender: the one already waiting (younger than
    /// `ttl`), else `new_code`; the oldest codes beyond `max_pending` go.
    pub async fn request_code(&self, r: CodeRequest<'_>) -> Result<PairingRequest, StoreError> {
        let secs = r.ttl.as_secs_f64();
        let mut client = self.pool.get().await?;
        let tx = client.transaction().await?;
        tx.execute("SELECT pg_advisory_xact_lock($1)", &[&PAIRING_LOCK]).await?;
        tx.execute(
            "DELETE FROM pairing_requests
             WHERE channel = $1 AND created_at <= now() - make_interval(secs => $2)",
            &[&r.channel, &secs],
        )
        .await?;
        let sql = format!(
            "SELECT {REQUEST_COLUMNS} FROM pairing_requests WHERE channel = $1 AND sender = $2"
        );
        if let Some(row) = tx.query_opt(&sql, &[&r.channel, &r.sender]).await? {
            tx.commit().await?;
            return Ok(request(&row));
        }
        let sql = format!(
            "INSERT INTO pairing_requests (channel, code, sender, chat_id, name)
             VALUES ($1, $2, $3, $4, $5) RETURNING {REQUEST_COLUMNS}"
        );
        let row =
            tx.query_one(&sql, &[&r.channel, &r.new_code, &r.sender, &r.chat_id, &r.name]).await?;
        tx.execute(
            "DELETE FROM pairing_requests WHERE ctid IN (
                 SELECT ctid FROM pairing_requests WHERE channel = $1
                 ORDER BY created_at DESC, code OFFSET $2)",
            &[&r.channel, &r.max_pending],
        )
        .await?;
        tx.commit().await?;
        Ok(request(&row))
    }

    /// The codes waiting on `channel` (younger than `ttl`), oldest first.
    pub async fn pairing_requests(
        &self,
        channel: &str,
        ttl: Duration,
    ) -> Result<Vec<PairingRequest>, StoreError> {
        let client = self.pool.get().await?;
        let sql = format!(
            "SELECT {REQUEST_COLUMNS} FROM pairing_requests
             WHERE channel = $1 AND created_at > now() - make_interval(secs => $2)
             ORDER BY created_at, code"
        );
        let rows = client.query(&sql, &[&channel, &ttl.as_secs_f64()]).await?;
        Ok(rows.iter().map(request).collect())
    }

    /// Every channel with a code waiting or a sender let in, by name.
    pub async fn pairing_channels(&self) -> Result<Vec<String>, StoreError> {
        let client = self.pool.get().await?;
        let rows = client
            .query(
                "SELECT channel FROM allow_list UNION SELECT channel FROM pairing_requests
                 ORDER BY 1",
                &[],
            )
            .await?;
        Ok(rows.into_iter().map(|r| r.get(0)).collect())
    }

    /// Approves `code` on `channel` (younger than `ttl`): its sender joins the
    /// allow-list, the request goes. Returns the request; `None` for an
    /// unknown or expired code.
    pub async fn approve_code(
        &self,
        channel: &str,
        code: &str,
        ttl: Duration,
    ) -> Result<Option<PairingRequest>, StoreError> {
        let mut client = self.pool.get().await?;
        let tx = client.transaction().await?;
        let sql = format!(
            "DELETE FROM pairing_requests WHERE channel = $1 AND code = $2
               AND created_at > now() - make_interval(secs => $3)
             RETURNING {REQUEST_COLUMNS}"
        );
        let Some(row) = tx.query_opt(&sql, &[&channel, &code, &ttl.as_secs_f64()]).await? else {
            return Ok(None);
        };
        let approved = request(&row);
        tx.execute(
            "INSERT INTO allow_list (channel, sender, name) VALUES ($1, $2, $3)
             ON CONFLICT (channel, sender) DO UPDATE SET name = excluded.name, added_at = now()",
            &[&channel, &approved.sender, &approved.name],
        )
        .await?;
        tx.commit().await?;
        Ok(Some(approved))
    }

    /// Approves `code` on `channel` (at most an hour old); returns its sender.
    pub async fn approve_pairing(
        &self,
        channel: &str,
        code: &str,
    ) -> Result<Option<String>, StoreError> {
        let hour = Duration::from_secs(3600);
        Ok(self.approve_code(channel, code, hour).await?.map(|r| r.sender))
    }

    /// Refuses `code` on `channel`: the request goes, the sender stays out.
    pub async fn deny_code(
        &self,
        channel: &str,
        code: &str,
    ) -> Result<Option<PairingRequest>, StoreError> {
        let client = self.pool.get().await?;
        let sql = format!(
            "DELETE FROM pairing_requests WHERE channel = $1 AND code = $2 RETURNING {REQUEST_COLUMNS}"
        );
        Ok(client.query_opt(&sql, &[&channel, &code]).await?.as_ref().map(request))
    }
}
