//! Files the agent sent to a chat, kept in the database (`media`, made by
//! the conversations migration) by their path in the workspace, so that
//! every gateway serves them; and pruned once older than the time media is
//! kept (`[gateway] media_keep_days`), in small rounds.

use std::time::Duration;

use crate::{PgStore, StoreError};

/// The largest file kept in `media`: what a person may send a gateway
/// (20 MB, Telegram's download limit too), so anything that came in can go
/// out again.
pub const MAX_MEDIA_BYTES: usize = 20 * 1024 * 1024;

/// A file the agent sent, as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredMedia {
    pub media_type: String,
    /// The name it was sent under.
    pub name: String,
    pub bytes: Vec<u8>,
}

impl PgStore {
    /// Keeps a file the agent sent under `id` (the gateway names it: its
    /// path in the workspace), replacing what was kept there. Refused over
    /// [`MAX_MEDIA_BYTES`].
    pub async fn put_media(&self, id: &str, media: &StoredMedia) -> Result<(), StoreError> {
        if media.bytes.len() > MAX_MEDIA_BYTES {
            return Err(StoreError::MediaTooBig {
                bytes: media.bytes.len(),
                limit: MAX_MEDIA_BYTES,
            });
        }
        let client = self.pool.get().await?;
        client
            .execute(
                "INSERT INTO media (id, media_type, name, bytes) VALUES ($1, $2, $3, $4)
                 ON CONFLICT (id) DO UPDATE SET media_type = excluded.media_type,
                    name = excluded.name, bytes = excluded.bytes, created_at = now()",
                &[&id, &media.media_type, &media.name, &media.bytes],
            )
            .await?;
        Ok(())
    }

    /// The file kept under `id`, if any.
    pub async fn media(&self, id: &str) -> Result<Option<StoredMedia>, StoreError> {
        let client = self.pool.get().await?;
        let row = client
            .query_opt("SELECT media_type, name, bytes FROM media WHERE id = $1", &[&id])
            .await?;
        Ok(row.map(|r| StoredMedia { media_type: r.get(0), name: r.get(1), bytes: r.get(2) }))
    }

    /// The ids of every kept file (no bytes), in order.
    pub async fn media_ids(&self) -> Result<Vec<String>, StoreError> {
        let client = self.pool.get().await?;
        let rows = client.query("SELECT id FROM media ORDER BY id", &[]).await?;
        Ok(rows.into_iter().map(|r| r.get(0)).collect())
    }

    /// Deletes the files kept (or last sent again) longer than `keep` ago,
    /// at most `batch` rows per transaction; how many went.
    pub async fn prune_media(&self, keep: Duration, batch: i64) -> Result<u64, StoreError> {
        let client = self.pool.get().await?;
        let statement = client
            .prepare_cached(
                "DELETE FROM media WHERE ctid IN (SELECT ctid FROM media
                     WHERE created_at < now() - make_interval(secs => $1) LIMIT $2)",
            )
            .await?;
        let (secs, batch) = (keep.as_secs_f64(), batch.max(1));
        let mut gone = 0;
        loop {
            let round = client.execute(&statement, &[&secs, &batch]).await?;
            gone += round;
            if round < batch as u64 {
                return Ok(gone);
            }
        }
    }
}
