//! What `ferroclaw gateway export` reads that the other modules have no call
//! for: the whole allow-list.

use crate::{PgStore, StoreError};

/// One allow-list row: (channel, sender, name, added in ms since the epoch).
pub type AllowListEntry = (String, String, Option<String>, i64);

impl PgStore {
    /// Every allowed sender: (channel, sender, name, when added in
    /// milliseconds since the epoch), by channel and sender.
    pub async fn allow_list_entries(&self) -> Result<Vec<AllowListEntry>, StoreError> {
        let client = self.pool.get().await?;
        let rows = client
            .query(
                "SELECT channel, sender, name, (extract(epoch FROM added_at) * 1000)::bigint
                 FROM allow_list ORDER BY channel, sender",
                &[],
            )
            .await?;
        Ok(rows.into_iter().map(|r| (r.get(0), r.get(1), r.get(2), r.get(3))).collect())
    }

    /// Lets `sender` (called `name`) talk on `channel`, as an imported
    /// allow-list has it; a sender already there is left as it is.
    pub async fn allow_named(
        &self,
        channel: &str,
        sender: &str,
        name: Option<&str>,
    ) -> Result<(), StoreError> {
        let client = self.pool.get().await?;
        client
            .execute(
                "INSERT INTO allow_list (channel, sender, name) VALUES ($1, $2, $3)
                 ON CONFLICT DO NOTHING",
                &[&channel, &sender, &name],
            )
            .await?;
        Ok(())
    }
}
