//! What `ferroclaw gateway export` reads that the other modules have no call
//! for: the whole allow-list.

use crate::{PgStore, StoreError};

impl PgStore {
    /// Every allowed sender: (channel, sender, when added in milliseconds
    /// since the epoch), by channel and sender.
    pub async fn allow_list_entries(&self) -> Result<Vec<(String, String, i64)>, StoreError> {
        let client = self.pool.get().await?;
        let rows = client
            .query(
                "SELECT channel, sender, (extract(epoch FROM added_at) * 1000)::bigint
                 FROM allow_list ORDER BY channel, sender",
                &[],
            )
            .await?;
        Ok(rows.into_iter().map(|r| (r.get(0), r.get(1), r.get(2))).collect())
    }
}
