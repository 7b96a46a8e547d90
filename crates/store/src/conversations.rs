//! What people read of their conversations, read from the database every
//! gateway writes, so that every gateway shows the same: the list of
//! conversations (newest first, each with its metadata line, its first
//! request and the title given to it), the titles given in the web app, and
//! the table of files the agent sent to a chat (kept, served and pruned by
//! `media.rs`).
//!
//! The lines themselves are read with [`PgStore::session_lines_after`].

use crate::{PgStore, StoreError};

/// The tables this reads beyond the sessions' own: `session_titles`, names
/// people gave conversations in the web app; `media`, files the agent sent,
/// by their path in the workspace, so any process serves them; and an index
/// to list conversations newest first.
pub(crate) const CONVERSATIONS_MIGRATION: &str = r#"
CREATE TABLE session_titles (
    session    text PRIMARY KEY,
    title      text NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE media (
    id         text PRIMARY KEY,
    media_type text NOT NULL,
    name       text NOT NULL,
    bytes      bytea NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX session_files_recent ON session_files (updated_at DESC, session DESC);
"#;

/// The first request is read from this many lines after the metadata line
/// at most (as the files' summaries do).
const FIRST_REQUEST_LINES: i32 = 50;

/// A stored conversation as a list shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredConversation {
    pub session: String,
    /// Bytes of its file.
    pub bytes: i64,
    /// When it last changed, in seconds since 1970 (the database's clock).
    pub modified: i64,
    /// Its metadata line (`None`: missing or too long to be one).
    pub meta: Option<String>,
    /// The start of its first request's text, as a JSON string's inside
    /// (escapes kept; cut after about 200 characters).
    pub first_request: Option<String>,
    /// The title given to it in the web app.
    pub title: Option<String>,
}

/// The start of a first request's text in its line (`"role":"user"` with a
/// text block first): at most 200 characters of the JSON string (the
/// regular expression engine counts no further), whole escapes only.
/// The columns of a listed conversation; `$1` is [`FIRST_TEXT`], `$2`
/// [`FIRST_REQUEST_LINES`]. The first request is found without parsing
/// lines as JSON: they are the files' own text, and a line a person damaged
/// must not fail the list.
const LISTED: &str = "SELECT f.session, f.bytes, extract(epoch FROM f.updated_at)::bigint,
        (SELECT l.line FROM session_lines l
          WHERE l.session = f.session AND l.seq = 0 AND length(l.line) <= 65536),
        (SELECT substring(left(l.line, 4096) FROM $1) FROM session_lines l
          WHERE l.session = f.session AND l.seq BETWEEN 1 AND $2
            AND l.line LIKE '{\"type\":\"message\",\"ts\":%,\"message\":{\"role\":\"user\",%'
            AND l.line NOT LIKE '{\"type\":\"message\",\"ts\":%,\"message\":{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\"%'
          ORDER BY l.seq LIMIT 1),
        t.title
     FROM session_files f LEFT JOIN session_titles t ON t.session = f.session";

const FIRST_TEXT: &str = r#"^\{"type":"message","ts":[0-9]+,"message":\{"role":"user","content":\[\{"type":"text","text":"((?:[^"\\]|\\.){0,200})"#;

impl PgStore {
    /// The stored conversations whose ids start with `prefix`, newest
    /// first, at most `limit`.
    pub async fn conversations(
        &self,
        prefix: &str,
        limit: i64,
    ) -> Result<Vec<StoredConversation>, StoreError> {
        let sql = format!(
            "{LISTED} WHERE starts_with(f.session, $3)
             ORDER BY f.updated_at DESC, f.session DESC LIMIT $4"
        );
        self.listed(&sql, &[&prefix, &limit]).await
    }

    /// Stored conversation `session` as a list shows it.
    pub async fn conversation(
        &self,
        session: &str,
    ) -> Result<Option<StoredConversation>, StoreError> {
        let sql = format!("{LISTED} WHERE f.session = $3");
        Ok(self.listed(&sql, &[&session]).await?.pop())
    }

    async fn listed(
        &self,
        sql: &str,
        params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
    ) -> Result<Vec<StoredConversation>, StoreError> {
        let client = self.pool.get().await?;
        let mut all: Vec<&(dyn tokio_postgres::types::ToSql + Sync)> =
            vec![&FIRST_TEXT, &FIRST_REQUEST_LINES];
        all.extend_from_slice(params);
        let rows = client.query(sql, &all).await?;
        Ok(rows
            .into_iter()
            .map(|r| StoredConversation {
                session: r.get(0),
                bytes: r.get(1),
                modified: r.get(2),
                meta: r.get(3),
                first_request: r.get(4),
                title: r.get(5),
            })
            .collect())
    }

    /// Message lines of conversations whose ids start with `prefix` that
    /// hold `words` (any case; in the line's text, so the caller checks
    /// the message's own text), newest conversations first, at most
    /// `limit`: (session, line).
    pub async fn lines_holding(
        &self,
        prefix: &str,
        words: &str,
        limit: i64,
    ) -> Result<Vec<(String, String)>, StoreError> {
        let client = self.pool.get().await?;
        let rows = client
            .query(
                "SELECT l.session, l.line FROM session_lines l
                 JOIN session_files f ON f.session = l.session
                 WHERE starts_with(l.session, $1)
                   AND l.line LIKE '{\"type\":\"message\",%'
                   AND strpos(lower(l.line), lower($2)) > 0
                 ORDER BY f.updated_at DESC, l.session DESC, l.seq
                 LIMIT $3",
                &[&prefix, &words, &limit],
            )
            .await?;
        Ok(rows.into_iter().map(|r| (r.get(0), r.get(1))).collect())
    }

    /// The title given to `session`, if any.
    pub async fn session_title(&self, session: &str) -> Result<Option<String>, StoreError> {
        let client = self.pool.get().await?;
        let row = client
            .query_opt("SELECT title FROM session_titles WHERE session = $1", &[&session])
            .await?;
        Ok(row.map(|r| r.get(0)))
    }

    /// Every title given, by session.
    pub async fn session_titles(&self) -> Result<Vec<(String, String)>, StoreError> {
        let client = self.pool.get().await?;
        let rows =
            client.query("SELECT session, title FROM session_titles ORDER BY session", &[]).await?;
        Ok(rows.into_iter().map(|r| (r.get(0), r.get(1))).collect())
    }

    /// Names `session` (`None`: takes the name away).
    pub async fn set_session_title(
        &self,
        session: &str,
        title: Option<&str>,
    ) -> Result<(), StoreError> {
        let client = self.pool.get().await?;
        match title {
            Some(title) => {
                client
                    .execute(
                        "INSERT INTO session_titles (session, title) VALUES ($1, $2)
                         ON CONFLICT (session) DO UPDATE
                            SET title = excluded.title, updated_at = now()",
                        &[&session, &title],
                    )
                    .await?
            }
            None => {
                client.execute("DELETE FROM session_titles WHERE session = $1", &[&session]).await?
            }
        };
        Ok(())
    }
}
