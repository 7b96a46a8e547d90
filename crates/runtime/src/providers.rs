//! Provider connections, one per model spec for the whole process: one HTTP
//! client (and its connection pool) per remote model, one loaded local model
//! (`local/NAME`, `local:PATH`) however many agents use it.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};

use ferroclaw_core::Config;
use ferroclaw_llm::Provider;
use ferroclaw_local::{LocalTarget, ModelStore};

use crate::RuntimeError;

/// A provider and the model name it knows.
pub(crate) type Connection = (Arc<dyn Provider>, String);

/// The connections opened so far, by spec.
#[derive(Default)]
pub(crate) struct Providers {
    open: Mutex<HashMap<String, Connection>>,
}

impl Providers {
    /// The connection for `spec`, opened on first use. With `announce` (the
    /// local model was picked because nothing else is configured) says so
    /// once, on stderr.
    pub(crate) fn get(
        &self,
        config: &Config,
        spec: &str,
        announce: bool,
    ) -> Result<Connection, RuntimeError> {
        if let Some(found) = self.lock().get(spec) {
            return Ok(found.clone());
        }
        let opened = match local_provider(config, spec, announce) {
            Some(local) => (local?, spec.to_string()),
            None => {
                let (provider_config, model) = config.resolve_model(spec)?;
                (ferroclaw_llm::connect(provider_config), model)
            }
        };
        // Two first uses at once: the first one kept wins, so all share it.
        Ok(self.lock().entry(spec.to_string()).or_insert(opened).clone())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Connection>> {
        self.open.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The provider for a `local/NAME` or `local:PATH` spec; `None` for any
/// other spec.
fn local_provider(
    config: &Config,
    spec: &str,
    announce: bool,
) -> Option<Result<Arc<dyn Provider>, RuntimeError>> {
    let target = LocalTarget::parse(spec)?;
    Some(open_local(config, &target).inspect(|_| {
        if announce {
            eprintln!(
                "ferroclaw: no provider key set; using the local model {spec} (set a key or pass --model to change)"
            );
        }
    }))
}

#[cfg(feature = "local")]
fn open_local(config: &Config, target: &LocalTarget) -> Result<Arc<dyn Provider>, RuntimeError> {
    let err = |e: ferroclaw_local::LocalError| RuntimeError::Other(e.to_string());
    let path = target.path(&ModelStore::new(&config.home)).map_err(err)?;
    let mut options = ferroclaw_local::LocalOptions::from_env().map_err(|e| err(e.into()))?;
    options.kv_cache_dir = Some(config.home.join(ferroclaw_local::kvcache::KV_CACHE_DIR));
    let provider = ferroclaw_local::LocalProvider::open(&path, &options).map_err(err)?;
    Ok(Arc::new(provider))
}

#[cfg(not(feature = "local"))]
fn open_local(_: &Config, _: &LocalTarget) -> Result<Arc<dyn Provider>, RuntimeError> {
    Err(RuntimeError::Other(
        "this ferroclaw was built without local models (cargo feature `local` of ferroclaw-cli); \
         rebuild with default features, or pass --model PROVIDER/MODEL"
            .into(),
    ))
}

/// The path a spec's model would load from (for `doctor` and `eval`);
/// `None` for a spec that is not a local model.
pub fn local_model_path(config: &Config, spec: &str) -> Option<Result<PathBuf, String>> {
    let target = LocalTarget::parse(spec)?;
    Some(target.path(&ModelStore::new(&config.home)).map_err(|e| e.to_string()))
}
