//! API requests sent with an `Idempotency-Key`: the first request with a
//! key is recorded (with a fingerprint of its body and what its answer will
//! be named), and once its turn is answered, the answer too, so a client
//! that retries (on this gateway or another) gets that answer again instead
//! of a second turn. Rows are deleted a while after they were made
//! ([`PgStore::prune_api_requests`]).

use std::time::Duration;

use serde_json::Value;

use crate::{PgStore, StoreError};

/// A request recorded before under the same key.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordedRequest {
    /// The fingerprint of the body it came with.
    pub fingerprint: String,
    /// What the first request recorded about itself (its completion id, ...).
    pub body: Value,
    /// Its answer, once its turn was answered.
    pub answer: Option<Value>,
}

impl PgStore {
    /// Records a request under `key`, unless one was recorded before: `None`
    /// when this one is the first (the caller runs its turn), else the
    /// earlier one. One statement: the insert and the look-up share a snapshot.
    pub async fn begin_api_request(
        &self,
        key: &str,
        fingerprint: &str,
        body: &Value,
    ) -> Result<Option<RecordedRequest>, StoreError> {
        let client = self.pool.get().await?;
        let statement = client
            .prepare_cached(
                "WITH made AS (
                     INSERT INTO api_requests (key, fingerprint, body) VALUES ($1, $2, $3)
                     ON CONFLICT (key) DO NOTHING RETURNING key)
                 SELECT fingerprint, body, answer FROM api_requests
                 WHERE key = $1 AND NOT EXISTS (SELECT 1 FROM made)",
            )
            .await?;
        let row = client.query_opt(&statement, &[&key, &fingerprint, body]).await?;
        Ok(row.map(|r| RecordedRequest { fingerprint: r.get(0), body: r.get(1), answer: r.get(2) }))
    }

    /// The request recorded under `key`, if any.
    pub async fn api_request(&self, key: &str) -> Result<Option<RecordedRequest>, StoreError> {
        let client = self.pool.get().await?;
        let statement = client
            .prepare_cached("SELECT fingerprint, body, answer FROM api_requests WHERE key = $1")
            .await?;
        let row = client.query_opt(&statement, &[&key]).await?;
        Ok(row.map(|r| RecordedRequest { fingerprint: r.get(0), body: r.get(1), answer: r.get(2) }))
    }

    /// Records the answer of the request under `key` (the first answer wins).
    pub async fn answer_api_request(&self, key: &str, answer: &Value) -> Result<(), StoreError> {
        let client = self.pool.get().await?;
        let statement = client
            .prepare_cached(
                "UPDATE api_requests SET answer = $2, answered_at = now()
                 WHERE key = $1 AND answer IS NULL",
            )
            .await?;
        client.execute(&statement, &[&key, answer]).await?;
        Ok(())
    }

    /// Forgets the request under `key` while it has no answer (its turn
    /// failed: a retry runs it again).
    pub async fn forget_api_request(&self, key: &str) -> Result<(), StoreError> {
        let client = self.pool.get().await?;
        let statement = client
            .prepare_cached("DELETE FROM api_requests WHERE key = $1 AND answer IS NULL")
            .await?;
        client.execute(&statement, &[&key]).await?;
        Ok(())
    }

    /// Deletes requests recorded more than `older_than` ago; how many.
    pub async fn prune_api_requests(&self, older_than: Duration) -> Result<u64, StoreError> {
        let client = self.pool.get().await?;
        let secs = older_than.as_secs_f64();
        let n = client
            .execute(
                "DELETE FROM api_requests WHERE created_at < now() - make_interval(secs => $1)",
                &[&secs],
            )
            .await?;
        Ok(n)
    }
}
