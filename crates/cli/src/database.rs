//! The shared database of several gateway processes, for the commands that
//! read or change what they share (`ferroclaw pairing`, `ferroclaw cron`,
//! `ferroclaw status`): with `[gateway] store = "postgres://..."` or
//! `FERROCLAW_DATABASE_URL`, they work on the database instead of files.

use ferroclaw_core::{Config, Overrides};
use ferroclaw_gateway::config::GatewaySettings;
use ferroclaw_store::{Backend, DATABASE_URL_ENV, PgOptions, PgStore};

use crate::setup::SetupError;

/// The configured database, connected (and migrated unless `store_migrate
/// = false`); `None` when the gateway runs on files.
pub(crate) async fn shared_store(home: &std::path::Path) -> Result<Option<PgStore>, SetupError> {
    let config = Config::load(home.to_path_buf(), home.join("workspace"), &Overrides::default())?;
    let settings = GatewaySettings::parse(config.file.gateway.as_ref())
        .map_err(|e| SetupError::Other(e.to_string()))?;
    store_of(&settings).await
}

/// The database `settings` (and the environment) name, connected.
pub(crate) async fn store_of(settings: &GatewaySettings) -> Result<Option<PgStore>, SetupError> {
    let env = std::env::var(DATABASE_URL_ENV).ok();
    let other = |e: ferroclaw_store::StoreError| SetupError::Other(e.to_string());
    let Some(url) = Backend::choose(settings.store.as_deref(), env.as_deref()).map_err(other)?
    else {
        return Ok(None);
    };
    let options = PgOptions { migrate: settings.store_migrate, ..Default::default() };
    Ok(Some(PgStore::connect(&url, options).await.map_err(other)?))
}
