//! Which gateway processes are alive, and which model config the database serves.
//!
//! Each gateway registers itself ([`PgStore::register`]: its holder name,
//! version and a digest of its model config) and holds a session-level
//! advisory lock on a connection of its own for as long as it lives. The
//! server releases that lock the moment the connection ends: a process
//! killed with `kill -9` (its socket closed by the kernel) is seen dead at
//! once, without waiting for its chat leases to run out. A machine that
//! vanishes without closing its sockets is found by TCP keepalives within
//! [`KEEPALIVE_SECS`]' worth of probes; a process that hangs keeps its lock,
//! and its leases still run out as before.
//!
//! The claim takes a chat over from a holder that is registered and whose
//! lock is free (the SQL function `ferroclaw_holder_gone`): leases of
//! processes that never registered (older binaries, tests playing several
//! processes with one store) are honoured until they run out.
//!
//! The database serves one model config (`served_model`), set by the first
//! gateway that registers, and changed only by a gateway told to adopt its
//! own. A gateway with another config takes no turns unless told to take
//! them anyway: a staging box pointed at the production database by mistake
//! leaves production's chats alone.

use std::time::Duration;

use tokio::sync::watch;

use crate::tls::StoreTls;
use crate::{PgStore, StoreError};

/// The advisory-lock namespace of gateway liveness locks ("fcgw"); the
/// second key is `hashtext(holder)`.
pub(crate) const LIVENESS_LOCK_SPACE: i32 = 0x6663_6777;
/// Seconds of silence before the server probes a gateway's liveness
/// connection, and between probes (3 unanswered probes end it): a machine
/// that disappears without closing its sockets is seen dead within about
/// `KEEPALIVE_SECS * 4` seconds.
pub const KEEPALIVE_SECS: i32 = 3;
/// The longest wait between tries to open the liveness connection again.
const RELOCK_MAX: Duration = Duration::from_secs(1);

/// What a gateway says about itself when it registers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Registration {
    /// The ferroclaw version.
    pub version: String,
    /// The model config in words (`anthropic/claude-sonnet-4-5 via https://...`).
    pub model: String,
    /// A digest of the model config: gateways that share it answer alike.
    pub model_digest: String,
    /// Make this gateway's model config the one the database serves.
    pub adopt: bool,
}

/// A registered gateway, as `ferroclaw gateway status` lists it.
#[derive(Debug, Clone, PartialEq)]
pub struct GatewayRow {
    pub holder: String,
    pub version: String,
    pub model: String,
    pub model_digest: String,
    /// Seconds since it registered.
    pub up_secs: f64,
    /// Chats it holds now.
    pub chats: i64,
    /// Whether it serves the database's model config (it takes turns).
    pub serves: bool,
}

/// The model config the database serves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServedModel {
    pub model: String,
    pub model_digest: String,
    /// The gateway that set it.
    pub set_by: String,
}

/// This process's registration: alive while held (its liveness lock is
/// kept on a connection of its own, taken again after the database comes
/// back); dropping it ends the connection, and other processes see this one
/// gone at once.
pub struct Liveness {
    alive: watch::Receiver<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl Liveness {
    /// Whether the lock is held now (false while the database is away).
    pub fn is_alive(&self) -> bool {
        *self.alive.borrow()
    }

    /// Waits until the lock is held.
    pub async fn wait_alive(&self) {
        let mut alive = self.alive.clone();
        let _ = alive.wait_for(|a| *a).await;
    }
}

impl Drop for Liveness {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl PgStore {
    /// Registers this process and takes its liveness lock (waiting for it).
    /// Returns the registration to hold for the process's life, and the
    /// model config the database serves (this one's when it was the first,
    /// or told to adopt).
    pub async fn register(&self, me: &Registration) -> Result<(Liveness, ServedModel), StoreError> {
        let client = self.pool.get().await?;
        let statement = client
            .prepare_cached(
                "WITH me AS (
                     INSERT INTO gateways (holder, version, model, model_digest)
                     VALUES ($1, $2, $3, $4)
                     ON CONFLICT (holder) DO UPDATE
                        SET version = excluded.version, model = excluded.model,
                            model_digest = excluded.model_digest
                     RETURNING 1)
                 INSERT INTO served_model (model, model_digest, set_by)
                 SELECT $3, $4, $1 FROM me
                 ON CONFLICT (only_row) DO UPDATE
                    SET model = excluded.model, model_digest = excluded.model_digest,
                        set_by = excluded.set_by, set_at = now()
                    WHERE $5",
            )
            .await?;
        client
            .execute(
                &statement,
                &[&self.holder(), &me.version, &me.model, &me.model_digest, &me.adopt],
            )
            .await?;
        // Gateways gone for a week are forgotten (their leases ran out long ago).
        client
            .execute(
                "DELETE FROM gateways WHERE registered_at < now() - interval '7 days'
                   AND holder <> $1 AND ferroclaw_holder_gone(holder)",
                &[&self.holder()],
            )
            .await?;
        let served = self
            .served_model()
            .await?
            .ok_or_else(|| StoreError::Query("no served model config after registering".into()))?;
        let (tx, alive) = watch::channel(false);
        let (config, tls, holder) = (self.config.clone(), self.tls.clone(), self.holder.clone());
        let task = tokio::spawn(hold_liveness(config, tls, holder, tx));
        let liveness = Liveness { alive, task };
        liveness.wait_alive().await;
        Ok((liveness, served))
    }

    /// The model config the database serves (`None` before any gateway registered).
    pub async fn served_model(&self) -> Result<Option<ServedModel>, StoreError> {
        let client = self.pool.get().await?;
        let row =
            client.query_opt("SELECT model, model_digest, set_by FROM served_model", &[]).await?;
        Ok(row.map(|r| ServedModel { model: r.get(0), model_digest: r.get(1), set_by: r.get(2) }))
    }

    /// The registered gateways that are alive now (their liveness lock held), oldest first.
    pub async fn live_gateways(&self) -> Result<Vec<GatewayRow>, StoreError> {
        let client = self.pool.get().await?;
        let rows = client
            .query(
                "SELECT g.holder, g.version, g.model, g.model_digest,
                        extract(epoch FROM now() - g.registered_at)::float8,
                        (SELECT count(*) FROM chat_leases l WHERE l.holder = g.holder),
                        g.model_digest = coalesce((SELECT model_digest FROM served_model), '')
                 FROM gateways g
                 WHERE NOT ferroclaw_holder_gone(g.holder)
                 ORDER BY g.registered_at, g.holder",
                &[],
            )
            .await?;
        Ok(rows
            .into_iter()
            .map(|r| GatewayRow {
                holder: r.get(0),
                version: r.get(1),
                model: r.get(2),
                model_digest: r.get(3),
                up_secs: r.get(4),
                chats: r.get(5),
                serves: r.get(6),
            })
            .collect())
    }
}

/// Keeps `holder`'s liveness lock on a connection of its own, opening it
/// again (and taking the lock again) whenever it is lost; `alive` says
/// whether it is held.
async fn hold_liveness(
    config: tokio_postgres::Config,
    tls: StoreTls,
    holder: String,
    alive: watch::Sender<bool>,
) {
    let mut wait = Duration::from_millis(50);
    loop {
        if let Ok((client, connection)) = config.connect(tls.clone()).await {
            let driver = tokio::spawn(connection);
            let locked = client
                .query_one(
                    &format!(
                        "SELECT set_config('tcp_keepalives_idle', '{KEEPALIVE_SECS}', false),
                                set_config('tcp_keepalives_interval', '{KEEPALIVE_SECS}', false),
                                set_config('tcp_keepalives_count', '3', false),
                                pg_try_advisory_lock($1, hashtext($2))"
                    ),
                    &[&LIVENESS_LOCK_SPACE, &holder],
                )
                .await
                .map(|row| row.get::<_, bool>(3));
            match locked {
                Ok(true) => {
                    wait = Duration::from_millis(50);
                    alive.send_replace(true);
                    // Held until the connection ends.
                    let _ = driver.await;
                    alive.send_replace(false);
                    tracing::warn!(holder = %holder, "lost the liveness connection; taking it again");
                }
                // Another connection of ours (not yet ended by the server) holds it.
                Ok(false) => {
                    drop(client);
                    driver.abort();
                }
                Err(_) => driver.abort(),
            }
        }
        tokio::time::sleep(wait).await;
        wait = (wait * 2).min(RELOCK_MAX);
    }
}

/// The migration that adds the registry (`gateways`, `served_model`) and
/// `ferroclaw_holder_gone(holder)`: true when `holder` registered and its
/// liveness lock is free (its process is gone). The check takes the lock
/// for the rest of the asking transaction, which ends with the statement.
pub(crate) const REGISTRY_MIGRATION: &str = r#"
CREATE TABLE gateways (
    holder        text PRIMARY KEY,
    version       text NOT NULL,
    model         text NOT NULL,
    model_digest  text NOT NULL,
    registered_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE served_model (
    only_row     boolean PRIMARY KEY DEFAULT true CHECK (only_row),
    model        text NOT NULL,
    model_digest text NOT NULL,
    set_by       text NOT NULL,
    set_at       timestamptz NOT NULL DEFAULT now()
);

CREATE FUNCTION ferroclaw_holder_gone(who text) RETURNS boolean
LANGUAGE sql VOLATILE AS $$
    SELECT CASE WHEN EXISTS (SELECT 1 FROM gateways WHERE holder = who)
                THEN pg_try_advisory_xact_lock(1717790583, hashtext(who))
                ELSE false END
$$;
"#;

/// How long after the database server (re)starts every lease holds, at
/// most (less when the lease itself is shorter): time for a live gateway to
/// take its liveness lock again (at most a second between tries) and store
/// what it held (at most two seconds between tries), with room to spare.
pub const RESTART_GRACE_SECS: u32 = 10;

/// The migration that adds `ferroclaw_lease_held(expires_at, holder,
/// length)`, the one rule every lease (chats, single-holder channels) is
/// judged by: a lease holds until it runs out or its holder is seen gone
/// (registered, liveness lock free), and every lease holds for one lease
/// `length` (seconds, at most [`RESTART_GRACE_SECS`]) after the database
/// server (re)starts. A restart ends every liveness connection and may
/// outlast any lease: without that grace the first process back would take
/// over the chats of the others, which are alive, hold finished answers
/// they could not store, and are reconnecting.
pub(crate) const LEASE_RULE_MIGRATION: &str = r#"
CREATE FUNCTION ferroclaw_lease_held(expires timestamptz, who text, length float8)
RETURNS boolean LANGUAGE sql VOLATILE AS $$
    SELECT CASE
        WHEN now() < pg_postmaster_start_time() + make_interval(secs => least(length, 10))
            THEN true
        WHEN expires <= now() THEN false
        ELSE NOT ferroclaw_holder_gone(who)
    END
$$;
"#;

#[cfg(test)]
mod tests {
    use ferroclaw_testkit::PgCluster;
    use serde_json::json;

    use super::*;
    use crate::PgOptions;

    /// A lease no test waits for.
    const LONG: Duration = Duration::from_secs(600);

    async fn store(url: &str, holder: &str) -> PgStore {
        let options = PgOptions { holder: Some(holder.into()), ..Default::default() };
        PgStore::connect(url, options).await.unwrap()
    }

    fn config(digest: &str, adopt: bool) -> Registration {
        Registration {
            version: "0.1.0".into(),
            model: format!("test/{digest}"),
            model_digest: digest.into(),
            adopt,
        }
    }

    async fn message(s: &PgStore, id: &str, chat: &str) {
        s.enqueue("web", id, chat, None, &json!({"text": id})).await.unwrap();
    }

    #[tokio::test]
    async fn a_dead_gateways_chat_is_taken_over_at_once_and_an_unregistered_holders_lease_is_honoured()
     {
        let Some(pg) = PgCluster::shared() else { return };
        let url = pg.database("liveness_takeover");
        let (a, b, old) =
            (store(&url, "gw-a").await, store(&url, "gw-b").await, store(&url, "gw-old").await);
        let (alive_a, _) = a.register(&config("prod", false)).await.unwrap();
        let (_alive_b, _) = b.register(&config("prod", false)).await.unwrap();
        message(&a, "1", "web:one").await;
        message(&a, "2", "web:two").await;
        assert_eq!(a.claim(LONG).await.unwrap().map(|c| c.chat).as_deref(), Some("web:one"));
        // A process that never registered (an older binary) holds the other chat.
        assert_eq!(old.claim(LONG).await.unwrap().map(|c| c.chat).as_deref(), Some("web:two"));
        assert_eq!(b.claim(LONG).await.unwrap(), None, "both holders are alive");
        let live: Vec<String> =
            b.live_gateways().await.unwrap().into_iter().map(|g| g.holder).collect();
        assert_eq!(live, ["gw-a", "gw-b"]);

        // gw-a dies: its liveness connection ends, and its chat is free at
        // once although its lease has ten minutes to run.
        drop(alive_a);
        let taken = loop {
            if let Some(claim) = b.claim(LONG).await.unwrap() {
                break claim;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        assert_eq!((taken.chat.as_str(), taken.attempts), ("web:one", 1));
        let live: Vec<String> =
            b.live_gateways().await.unwrap().into_iter().map(|g| g.holder).collect();
        assert_eq!(live, ["gw-b"]);
        // The unregistered holder's chat waits for its lease as before.
        assert_eq!(b.claim(LONG).await.unwrap(), None);
    }

    #[tokio::test]
    async fn a_gateway_with_another_model_config_takes_no_turns_until_told_to_adopt_its_own() {
        let Some(pg) = PgCluster::shared() else { return };
        let url = pg.database("liveness_model");
        let (prod, staging) = (store(&url, "gw-prod").await, store(&url, "gw-staging").await);
        let (_p, served) = prod.register(&config("prod", false)).await.unwrap();
        assert_eq!((served.model_digest.as_str(), served.set_by.as_str()), ("prod", "gw-prod"));
        let (first, served) = staging.register(&config("staging", false)).await.unwrap();
        assert_eq!(served.model_digest, "prod", "the first gateway's config stays the database's");
        message(&prod, "1", "telegram:42").await;
        assert!(staging.claim_serving(LONG, 8, Some("staging")).await.unwrap().is_empty());
        let status = staging.live_gateways().await.unwrap();
        let serves: Vec<(&str, bool)> =
            status.iter().map(|g| (g.holder.as_str(), g.serves)).collect();
        assert_eq!(serves, [("gw-prod", true), ("gw-staging", false)]);

        // Restarted and told to adopt its own config, the database serves it from now on.
        drop(first);
        let (_s, served) = staging.register(&config("staging", true)).await.unwrap();
        assert_eq!(served.model_digest, "staging");
        assert!(prod.claim_serving(LONG, 8, Some("prod")).await.unwrap().is_empty());
        let claims = staging.claim_serving(LONG, 8, Some("staging")).await.unwrap();
        assert_eq!(claims.len(), 1);
    }

    #[test]
    fn the_sql_checks_the_lock_the_gateways_hold_and_the_grace_after_a_restart() {
        assert!(REGISTRY_MIGRATION.contains(&format!("({LIVENESS_LOCK_SPACE}, hashtext(who))")));
        assert!(LEASE_RULE_MIGRATION.contains(&format!("least(length, {RESTART_GRACE_SECS})")));
    }

    #[tokio::test]
    async fn a_chat_given_back_without_an_answer_is_claimed_again_at_once() {
        let Some(pg) = PgCluster::shared() else { return };
        let url = pg.database("liveness_release");
        let (a, b) = (store(&url, "gw-a").await, store(&url, "gw-b").await);
        message(&a, "1", "web:one").await;
        let claim = a.claim(LONG).await.unwrap().unwrap();
        assert_eq!(b.claim(LONG).await.unwrap(), None);
        assert!(a.release(&claim).await.unwrap());
        let again = b.claim(LONG).await.unwrap().unwrap();
        assert_eq!((again.id, again.attempts), (claim.id, 1));
        assert!(!a.release(&claim).await.unwrap(), "no longer a's to give back");
    }
}
