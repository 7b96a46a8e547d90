//! Where the gateway keeps what several gateway processes must agree on.
//!
//! One gateway on one box keeps everything in files under
//! `$FERROCLAW_HOME` (the [`Backend::Files`] backend: the gateway's own
//! JSON and JSONL files, unchanged). Several gateway processes, on one or
//! several machines, share a PostgreSQL database instead ([`PgStore`]):
//!
//! - an inbound queue, each message once by its idempotency key
//!   (channel + platform message id), claimed with `FOR UPDATE SKIP LOCKED`;
//! - one lease row per chat: a chat's oldest unfinished message is handled
//!   by one worker at a time, so every chat stays in order while chats run
//!   in parallel across processes;
//! - outbound deliveries keyed by what they answer, taken once, so an
//!   answer is never sent twice (an answer to a connection the worker's own
//!   process holds is sent by that worker once stored, without a take of
//!   its own: [`PgStore::send_myself`]);
//! - single-holder channel leases (a Telegram long poll), taken over within
//!   seconds when the holder stops renewing;
//! - cron slots claimed once however many gateways run, with run records,
//!   each run leased like a chat's turn (taken over when its process dies);
//! - pairing allow-lists and codes, cron job definitions, approval requests
//!   answered from any process, and the turn journal's steps;
//! - OpenAI API requests by their `Idempotency-Key`, with their answers;
//! - chat sessions, line for line as their JSONL files (so gateways on
//!   machines that share no folder continue the same conversations), and
//!   what people read of them: lists, titles and the files the agent sent
//!   ([`StoredConversation`], [`StoredMedia`]);
//! - a registry of the live gateway processes, each holding an advisory
//!   lock the server drops when its connection ends, so a dead process's
//!   chats are taken over at once; and the one model config the database
//!   serves ([`PgStore::register`]);
//! - housekeeping: finished rows pruned after a while ([`PgStore::prune`]).
//!
//! `LISTEN/NOTIFY` only wakes workers and watchers ([`Wakeups`], [`Changes`]):
//! the tables are the record.
//! Times are the database's clock (`now()`), so machines need not agree.
//!
//! It does not run agents or talk to chat platforms: the gateway does, and
//! stores JSON bodies here that only it reads.
//!
//! ```
//! use ferroclaw_store::{Backend, redact_url};
//!
//! // No URL: files, as one gateway on one box has always done.
//! assert!(matches!(Backend::choose(None, None), Ok(None)));
//! // A URL is shown with its password hidden.
//! assert_eq!(redact_url("postgres://bot:s3cret@db:5432/claw"), "postgres://bot:***@db:5432/claw");
//! // Something that is not a PostgreSQL URL is refused, with the reason.
//! assert!(Backend::choose(Some("mysql://x"), None).is_err());
//! ```

mod approvals;
mod conversations;
mod cron;
mod error;
mod idempotency;
mod journal;
mod lease;
mod media;
mod migrate;
mod pairing;
mod pg;
mod prune;
mod queue;
mod registry;
mod sent_here;
mod sessions;
mod tls;
mod transfer;

pub use approvals::{Answered, ApprovalRequest};
pub use conversations::StoredConversation;
pub use cron::{CRON_RUN_ATTEMPTS, CronClaim, TakenOver};
pub use error::StoreError;
pub use idempotency::RecordedRequest;
pub use journal::TurnStep;
pub use media::{MAX_MEDIA_BYTES, StoredMedia};
pub use migrate::{MIGRATIONS, SCHEMA_VERSION};
pub use pairing::{AllowedSender, CodeRequest, PairingRequest};
pub use pg::{Changes, PgOptions, PgStore, Wakeups};
pub use prune::Pruned;
pub use queue::{Claim, Enqueued, Incoming, LIVENESS_CHECK, LookAgain, Outbound};
pub use registry::{
    GatewayRow, KEEPALIVE_SECS, Liveness, RESTART_GRACE_SECS, Registration, ServedModel,
};
pub use sent_here::SendIt;
pub use sessions::{SessionHead, SessionStart, SessionWrite, storable_line};
pub use transfer::AllowListEntry;

/// The environment variable that names the database (wins over `[gateway] store`).
pub const DATABASE_URL_ENV: &str = "FERROCLAW_DATABASE_URL";

/// Which backend the gateway keeps its shared state in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Backend {
    /// Files under `$FERROCLAW_HOME`: one gateway process (the default).
    Files,
    /// A PostgreSQL database at this URL: any number of gateway processes.
    Postgres(String),
}

impl Backend {
    /// The backend named by `FERROCLAW_DATABASE_URL` (`env`) or `[gateway]
    /// store` (`configured`), the environment first; `Ok(None)` is files.
    /// `"files"` (or an empty value) asks for files explicitly.
    pub fn choose(
        configured: Option<&str>,
        env: Option<&str>,
    ) -> Result<Option<String>, StoreError> {
        let chosen = env.filter(|v| !v.trim().is_empty()).or(configured);
        match chosen.map(str::trim) {
            None | Some("" | "files") => Ok(None),
            Some(url) if url.starts_with("postgres://") || url.starts_with("postgresql://") => {
                Ok(Some(url.to_string()))
            }
            Some(other) => Err(StoreError::BadUrl {
                url: redact_url(other),
                reason: "the store is \"files\" or a postgres:// URL".into(),
            }),
        }
    }
}

/// `url` with its password replaced by `***`, for messages and logs.
pub fn redact_url(url: &str) -> String {
    let mut out = url.to_string();
    if let Some((scheme, rest)) = url.split_once("://") {
        let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
        if let Some((userinfo, host)) = authority.rsplit_once('@') {
            let user = match userinfo.split_once(':') {
                Some((user, _password)) => format!("{user}:***"),
                None => userinfo.to_string(),
            };
            out = format!("{scheme}://{user}@{host}{path}");
        }
    }
    // `password=` in the query string too.
    if let Some(i) = out.find("password=") {
        let end = out[i..].find('&').map_or(out.len(), |e| i + e);
        out.replace_range(i..end, "password=***");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_environment_wins_and_files_is_the_default() {
        let cfg = Some("postgres://a@h/db");
        assert_eq!(Backend::choose(cfg, None).unwrap().as_deref(), cfg);
        assert_eq!(
            Backend::choose(cfg, Some("postgresql://b@h/db")).unwrap().as_deref(),
            Some("postgresql://b@h/db")
        );
        assert_eq!(Backend::choose(Some("files"), None).unwrap(), None);
        assert_eq!(Backend::choose(None, Some("")).unwrap(), None);
    }

    #[test]
    fn passwords_never_show() {
        assert_eq!(redact_url("postgres://u:pw@h/db"), "postgres://u:***@h/db");
        assert_eq!(redact_url("postgres://u@h/db"), "postgres://u@h/db");
        assert_eq!(
            redact_url("postgres://h/db?password=pw&x=1"),
            "postgres://h/db?password=***&x=1"
        );
        assert_eq!(redact_url("postgres://u:p@ss@h"), "postgres://u:***@h");
    }
}
