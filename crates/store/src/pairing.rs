//! Pairing and allow-lists in the database: who may talk to the gateway on
//! each channel, and the codes of senders waiting for approval.

use crate::{PgStore, StoreError};

impl PgStore {
    /// Lets `sender` talk on `channel`.
    pub async fn allow(&self, channel: &str, sender: &str) -> Result<(), StoreError> {
        let client = self.pool.get().await?;
        client
            .execute(
                "INSERT INTO allow_list (channel, sender) VALUES ($1, $2) ON CONFLICT DO NOTHING",
                &[&channel, &sender],
            )
            .await?;
        Ok(())
    }

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
                "INSERT INTO pairing_requests (channel, code, sender) VALUES ($1, $2, $3)
                 ON CONFLICT (channel, code) DO NOTHING",
                &[&channel, &code, &sender],
            )
            .await?;
        Ok(())
    }

    /// Approves `code` on `channel`: its sender joins the allow-list, the
    /// request goes. Returns the sender; `None` for an unknown code.
    pub async fn approve_pairing(
        &self,
        channel: &str,
        code: &str,
    ) -> Result<Option<String>, StoreError> {
        let mut client = self.pool.get().await?;
        let tx = client.transaction().await?;
        let Some(row) = tx
            .query_opt(
                "DELETE FROM pairing_requests WHERE channel = $1 AND code = $2 RETURNING sender",
                &[&channel, &code],
            )
            .await?
        else {
            return Ok(None);
        };
        let sender: String = row.get(0);
        tx.execute(
            "INSERT INTO allow_list (channel, sender) VALUES ($1, $2) ON CONFLICT DO NOTHING",
            &[&channel, &sender],
        )
        .await?;
        tx.commit().await?;
        Ok(Some(sender))
    }
}
