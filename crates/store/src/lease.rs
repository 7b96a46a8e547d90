//! Single-holder channel leases: a channel that must run in one process at a
//! time (a Telegram long poll, a Discord gateway socket, a Slack socket) is
//! run by the process holding its lease. The holder renews it well within
//! its length; when the holder dies, another process takes it on its next
//! try: at once when the holder registered (its liveness lock is free, see
//! `registry`), else when the lease runs out; never within one lease of the
//! database server's restart (`ferroclaw_lease_held`).

use std::time::Duration;

use crate::{PgStore, StoreError};

impl PgStore {
    /// Takes or renews the lease on `channel` for `length`; false while
    /// another live process holds it.
    pub async fn hold_channel(&self, channel: &str, length: Duration) -> Result<bool, StoreError> {
        let client = self.pool.get().await?;
        let statement = client
            .prepare_cached(
                "INSERT INTO channel_leases (channel, holder, expires_at)
                 VALUES ($1, $2, now() + make_interval(secs => $3))
                 ON CONFLICT (channel) DO UPDATE
                    SET holder = excluded.holder, expires_at = excluded.expires_at
                    WHERE channel_leases.holder = excluded.holder
                       OR NOT ferroclaw_lease_held(channel_leases.expires_at,
                                                   channel_leases.holder, $3)
                 RETURNING 1",
            )
            .await?;
        let row = client
            .query_opt(&statement, &[&channel, &self.holder(), &length.as_secs_f64()])
            .await?;
        Ok(row.is_some())
    }

    /// Gives up the lease on `channel` (a stopping process), so another
    /// takes it at once instead of waiting for it to run out.
    pub async fn release_channel(&self, channel: &str) -> Result<(), StoreError> {
        let client = self.pool.get().await?;
        client
            .execute(
                "DELETE FROM channel_leases WHERE channel = $1 AND holder = $2",
                &[&channel, &self.holder()],
            )
            .await?;
        Ok(())
    }

    /// Who holds `channel` now (an expired lease counts as nobody).
    pub async fn channel_holder(&self, channel: &str) -> Result<Option<String>, StoreError> {
        let client = self.pool.get().await?;
        let statement = client
            .prepare_cached(
                "SELECT holder FROM channel_leases WHERE channel = $1 AND expires_at > now()",
            )
            .await?;
        let row = client.query_opt(&statement, &[&channel]).await?;
        Ok(row.map(|r| r.get(0)))
    }
}
