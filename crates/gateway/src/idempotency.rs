//! `Idempotency-Key` for the OpenAI API: the first request with a key is
//! recorded, and the answer of its turn is recorded under the key by the
//! worker that ran it (whichever gateway that was), before the answer goes
//! out. A request with a key seen before is answered from the record: the
//! same answer, no second turn; while the first is still running, the
//! retry waits for it. A key sent again with another body is refused.
//!
//! Kept where every gateway sharing the work sees it: in files mode under
//! `$FERROCLAW_HOME/gateway/api-requests/` (one file per key), with a
//! shared database in its `api_requests` table. Records are forgotten
//! after [`KEEP`]; a turn that failed forgets its key, so a retry runs again.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use ferroclaw_store::{PgStore, RecordedRequest, StoreError};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::api_turn::ApiTurn;
use crate::bus::{Failure, InboundMessage};
use crate::files::{now_ms, read_json, write_json_atomically};

/// How long a key is remembered (as Stripe's API keeps them).
pub const KEEP: Duration = Duration::from_secs(24 * 3600);
/// How often old records are looked for.
const PRUNE_EVERY: Duration = Duration::from_secs(3600);
/// The longest key taken.
pub const MAX_KEY_CHARS: usize = 255;

/// What the first request with a key recorded about itself, so a retry's
/// answer carries the same completion id, model and time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FirstRequest {
    pub completion_id: String,
    pub model: String,
    pub created: u64,
}

/// The recorded answer of a request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RecordedAnswer {
    pub content: String,
}

/// What a request with a key finds.
#[derive(Debug, Clone, PartialEq)]
pub enum Begun {
    /// The first with this key: run its turn.
    New,
    /// A request with this key is running: wait for its answer. `orphaned`:
    /// the process that took it is gone (or a database's queue takes the
    /// message once whoever sends it), so the message is to be sent again.
    Running { first: FirstRequest, orphaned: bool },
    /// Answered before: send this again.
    Answered { first: FirstRequest, answer: RecordedAnswer },
    /// The key came before with another body.
    Reused,
}

/// Where a request that is waited for stands.
#[derive(Debug, Clone, PartialEq)]
pub enum Waited {
    Running,
    Answered(RecordedAnswer),
    /// Its turn failed and the key was let go: the request is to be sent again.
    Gone,
}

/// Why the record could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum IdempotencyError {
    #[error("{0}")]
    Store(#[from] StoreError),
    #[error("{path}: {message}")]
    File { path: PathBuf, message: String },
}

/// The fingerprint of a request body (its JSON as received, parsed).
pub fn fingerprint(body: &Value) -> String {
    hex(&Sha256::digest(body.to_string().as_bytes()))
}

/// The digest of a key: the name of its record file.
pub fn key_digest(key: &str) -> String {
    hex(&Sha256::digest(key.as_bytes()))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// This process, as a files-mode record names who took a request.
fn this_process() -> String {
    static STARTED: AtomicU64 = AtomicU64::new(0);
    let started = match STARTED.load(Ordering::Relaxed) {
        0 => {
            let now = now_ms();
            match STARTED.compare_exchange(0, now, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => now,
                Err(earlier) => earlier,
            }
        }
        t => t,
    };
    format!("{}-{started}", std::process::id())
}

/// A files-mode record.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct FileRecord {
    key: String,
    fingerprint: String,
    holder: String,
    first: Option<FirstRequest>,
    answer: Option<RecordedAnswer>,
}

/// Files-mode records are read and written under this lock.
static FILES_LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// The records, where this gateway keeps them.
#[derive(Clone)]
pub enum Requests {
    Files(PathBuf),
    Database(Box<PgStore>),
}

impl Requests {
    /// A gateway's records: its database's (`store`), else its home's.
    pub fn of(store: Option<&PgStore>, home: &std::path::Path) -> Requests {
        match store {
            Some(store) => Requests::Database(Box::new(store.clone())),
            None => Requests::Files(home.join("gateway").join("api-requests")),
        }
    }

    fn path(dir: &std::path::Path, key: &str) -> PathBuf {
        dir.join(format!("{}.json", key_digest(key)))
    }

    /// Records a request with `key` unless one came before; what it finds.
    pub async fn begin(
        &self,
        key: &str,
        fingerprint: &str,
        first: &FirstRequest,
    ) -> Result<Begun, IdempotencyError> {
        self.prune_now_and_then().await;
        let body = serde_json::to_value(first).unwrap_or_default();
        match self {
            Requests::Database(store) => {
                let found = store.begin_api_request(key, fingerprint, &body).await?;
                Ok(found.map_or(Begun::New, |r| begun_from(r, fingerprint)))
            }
            Requests::Files(dir) => {
                // One look and write at a time (one gateway per home).
                let _one = FILES_LOCK.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                let path = Self::path(dir, key);
                let fail = |message: String| IdempotencyError::File { path: path.clone(), message };
                let found: Option<FileRecord> = match std::fs::metadata(&path) {
                    Ok(_) => Some(read_json(&path).map_err(fail)?),
                    Err(_) => None,
                };
                let record = match found {
                    Some(r) if r.key == key => r,
                    _ => {
                        let record = FileRecord {
                            key: key.into(),
                            fingerprint: fingerprint.into(),
                            holder: this_process(),
                            first: Some(first.clone()),
                            answer: None,
                        };
                        write_json_atomically(&path, &record).map_err(fail)?;
                        return Ok(Begun::New);
                    }
                };
                if record.fingerprint != fingerprint {
                    return Ok(Begun::Reused);
                }
                let first = record.first.clone().unwrap_or_else(|| first.clone());
                if let Some(answer) = record.answer {
                    return Ok(Begun::Answered { first, answer });
                }
                // One gateway per home: a record another process took is
                // one whose process died; this one takes it over.
                let orphaned = record.holder != this_process();
                if orphaned {
                    let record = FileRecord { holder: this_process(), ..record };
                    write_json_atomically(&path, &record).map_err(fail)?;
                }
                Ok(Begun::Running { first, orphaned })
            }
        }
    }

    /// Where the request under `key` stands.
    pub async fn answer(&self, key: &str) -> Result<Waited, IdempotencyError> {
        let (found, answer) = match self {
            Requests::Database(store) => match store.api_request(key).await? {
                None => (false, None),
                Some(r) => (true, r.answer.and_then(|a| serde_json::from_value(a).ok())),
            },
            Requests::Files(dir) => {
                let path = Self::path(dir, key);
                let record: FileRecord = read_json(&path)
                    .map_err(|message| IdempotencyError::File { path: path.clone(), message })?;
                (record.key == key, record.answer)
            }
        };
        Ok(match (found, answer) {
            (_, Some(answer)) => Waited::Answered(answer),
            (true, None) => Waited::Running,
            (false, None) => Waited::Gone,
        })
    }

    /// Records `answer` under `key` (the first answer wins).
    pub async fn record(&self, key: &str, answer: &RecordedAnswer) -> Result<(), IdempotencyError> {
        match self {
            Requests::Database(store) => {
                let body = serde_json::to_value(answer).unwrap_or_default();
                Ok(store.answer_api_request(key, &body).await?)
            }
            Requests::Files(dir) => {
                let _one = FILES_LOCK.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                let path = Self::path(dir, key);
                let fail = |message: String| IdempotencyError::File { path: path.clone(), message };
                let record: FileRecord = read_json(&path).map_err(fail)?;
                if record.answer.is_some() {
                    return Ok(());
                }
                let record = FileRecord { key: key.into(), answer: Some(answer.clone()), ..record };
                write_json_atomically(&path, &record).map_err(fail)
            }
        }
    }

    /// Forgets `key` while it has no answer: a retry runs its turn again.
    pub async fn forget(&self, key: &str) -> Result<(), IdempotencyError> {
        match self {
            Requests::Database(store) => Ok(store.forget_api_request(key).await?),
            Requests::Files(dir) => {
                let _one = FILES_LOCK.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                let path = Self::path(dir, key);
                let record: FileRecord = read_json(&path).unwrap_or_default();
                if record.answer.is_none() {
                    let _ = std::fs::remove_file(&path);
                }
                Ok(())
            }
        }
    }

    /// Deletes records older than [`KEEP`], at most once per [`PRUNE_EVERY`] per process.
    async fn prune_now_and_then(&self) {
        static LAST: AtomicU64 = AtomicU64::new(0);
        let now = now_ms();
        let last = LAST.load(Ordering::Relaxed);
        if now.saturating_sub(last) < PRUNE_EVERY.as_millis() as u64
            || LAST.compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed).is_err()
        {
            return;
        }
        match self {
            Requests::Database(store) => {
                if let Err(e) = store.prune_api_requests(KEEP).await {
                    tracing::warn!("old API request records not pruned: {e}");
                }
            }
            Requests::Files(dir) => {
                let Ok(entries) = std::fs::read_dir(dir) else { return };
                for entry in entries.flatten() {
                    let old = entry
                        .metadata()
                        .and_then(|m| m.modified())
                        .is_ok_and(|t| t.elapsed().is_ok_and(|age| age > KEEP));
                    if old {
                        let _ = std::fs::remove_file(entry.path());
                    }
                }
            }
        }
    }
}

fn begun_from(record: RecordedRequest, fingerprint: &str) -> Begun {
    if record.fingerprint != fingerprint {
        return Begun::Reused;
    }
    let Ok(first) = serde_json::from_value::<FirstRequest>(record.body) else {
        return Begun::Reused;
    };
    match record.answer.and_then(|a| serde_json::from_value(a).ok()) {
        Some(answer) => Begun::Answered { first, answer },
        // The database's queue takes a message once however often it is
        // sent: sending it again costs nothing, and covers a gateway that
        // died before storing it.
        None => Begun::Running { first, orphaned: true },
    }
}

/// After the turn that answered `message`: records the answer under the
/// request's key, or forgets the key when the turn failed (so a retry
/// runs again). Called before the answer goes out.
pub async fn after_turn(
    requests: &Requests,
    message: &InboundMessage,
    answer: Result<&str, Failure>,
) {
    let Some(key) = ApiTurn::of(message).and_then(|t| t.idempotency_key) else { return };
    let done = match answer {
        Ok(content) => requests.record(&key, &RecordedAnswer { content: content.into() }).await,
        Err(_) => requests.forget(&key).await,
    };
    if let Err(e) = done {
        tracing::warn!(
            "the answer of an API request was not recorded under its Idempotency-Key: {e}"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn first() -> FirstRequest {
        FirstRequest { completion_id: "chatcmpl-1".into(), model: "ferroclaw".into(), created: 1 }
    }

    #[tokio::test]
    async fn a_key_is_new_then_running_then_answered_and_refused_with_another_body() {
        let home = tempfile::tempdir().unwrap();
        let requests = Requests::Files(home.path().join("api-requests"));
        assert_eq!(requests.begin("k", "f1", &first()).await.unwrap(), Begun::New);
        assert_eq!(
            requests.begin("k", "f1", &first()).await.unwrap(),
            Begun::Running { first: first(), orphaned: false }
        );
        assert_eq!(requests.begin("k", "f2", &first()).await.unwrap(), Begun::Reused);
        let answer = RecordedAnswer { content: "Hello.".into() };
        requests.record("k", &answer).await.unwrap();
        let again = requests.begin("k", "f1", &first()).await.unwrap();
        assert_eq!(again, Begun::Answered { first: first(), answer });
    }

    #[tokio::test]
    async fn a_failed_turn_forgets_its_key_so_a_retry_runs_again() {
        let home = tempfile::tempdir().unwrap();
        let requests = Requests::Files(home.path().join("api-requests"));
        assert_eq!(requests.begin("k", "f", &first()).await.unwrap(), Begun::New);
        requests.forget("k").await.unwrap();
        assert_eq!(requests.begin("k", "f", &first()).await.unwrap(), Begun::New);
    }
}
