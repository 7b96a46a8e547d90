//! This gateway among the others on one database: it registers itself
//! (holder name, version, model config), stays visibly alive while it runs
//! (a liveness lock on a connection of its own, see
//! [`ferroclaw_store::Liveness`]), and takes turns only for the model config
//! the database serves.
//!
//! The rule, in one sentence: the database serves one model config (the
//! first gateway's, until a gateway with `[gateway] model_config_check =
//! "adopt"` makes its own the database's), and a gateway with another one
//! takes no turns (no chat messages, no cron runs, no heartbeats) unless
//! `model_config_check = "off"`. Its channels still take messages, which
//! the gateways that serve the database's config answer. The model config
//! is the `model`, its provider's wire format and base URL (as resolved:
//! config, environment, preset), and `max_tokens`.

use ferroclaw_core::Config;
use ferroclaw_store::{Claim, Liveness, Registration};
use serde::Deserialize;
use sha2::{Digest, Sha256};
use tokio_util::sync::CancellationToken;

use crate::backoff::Backoff;
use crate::store_link::{RETRY_FIRST, RETRY_MAX, StoreLink};

/// What a gateway does when the database serves another model config
/// (`[gateway] model_config_check`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ModelConfigCheck {
    /// Takes no turns (a staging box pointed at production by mistake
    /// leaves production's chats alone).
    #[default]
    Match,
    /// Makes its own config the database's; gateways with the old one stop
    /// taking turns.
    Adopt,
    /// Takes turns whatever the database serves.
    Off,
}

/// Hex digits of the model config's digest that are stored and shown.
const DIGEST_CHARS: usize = 16;

/// This process's registration, held for its life.
pub struct Registered {
    /// Dropped with the process: the others see it gone at once.
    pub liveness: Liveness,
    /// The model config digest the claims are limited to (`None`: any).
    pub gate: Option<String>,
    /// Whether it takes turns (cron runs and heartbeats too).
    pub takes_turns: bool,
}

/// The model config in words and its digest.
pub fn model_config(config: &Config) -> (String, String) {
    let model = config.model_spec().unwrap_or_default();
    // Where the model is asked, as this process resolves it (config, then
    // the environment's `*_BASE_URL`, then the preset).
    let (wire, base_url) = match config.resolve_model(&model) {
        Ok((provider, _)) => (format!("{:?}", provider.wire).to_lowercase(), provider.base_url),
        Err(_) => (String::new(), String::new()),
    };
    let max_tokens = config.file.max_tokens.map(|n| n.to_string()).unwrap_or_default();
    // Field by field, so that the digest stays the same across versions.
    let canonical =
        format!("model={model}\nwire={wire}\nbase_url={base_url}\nmax_tokens={max_tokens}\n");
    let digest: String = Sha256::digest(canonical.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect::<String>()
        .chars()
        .take(DIGEST_CHARS)
        .collect();
    let words = match base_url.as_str() {
        "" => model,
        url => format!("{model} via {url}"),
    };
    (words, digest)
}

/// Registers this process (trying again while the database is away, until
/// `stop`) and says whether it takes turns, logging why when it does not.
pub async fn register(
    link: &StoreLink,
    config: &Config,
    check: ModelConfigCheck,
    stop: &CancellationToken,
) -> Option<Registered> {
    let (model, model_digest) = model_config(config);
    let me = Registration {
        version: env!("CARGO_PKG_VERSION").to_string(),
        model: model.clone(),
        model_digest: model_digest.clone(),
        adopt: check == ModelConfigCheck::Adopt,
    };
    let mut backoff = Backoff::new(RETRY_FIRST, RETRY_MAX);
    let (liveness, served) = loop {
        match link.store.register(&me).await {
            Ok(done) => break done,
            Err(e) => {
                tracing::warn!("cannot register this gateway in the database ({e}); trying again");
                backoff.wait(stop).await;
                if stop.is_cancelled() {
                    return None;
                }
            }
        }
    };
    let same = served.model_digest == model_digest;
    let takes_turns = same || check == ModelConfigCheck::Off;
    if !same && check == ModelConfigCheck::Match {
        tracing::error!(
            "this gateway's model config ({model}) is not the one the database serves ({}, \
             registered by {}): it takes no turns (set [gateway] model_config_check = \"adopt\" \
             to make its config the database's, or \"off\" to take turns anyway)",
            served.model,
            served.set_by
        );
    } else if !same {
        tracing::warn!(
            "this gateway's model config ({model}) is not the one the database serves ({}); \
             taking turns anyway (model_config_check = \"off\")",
            served.model
        );
    } else if check == ModelConfigCheck::Adopt && served.set_by == link.store.holder() {
        tracing::info!("the database serves this gateway's model config ({model}) from now on");
    }
    tracing::info!(holder = link.store.holder(), model = %model, digest = %model_digest, takes_turns, "registered in the database");
    let gate = match check {
        ModelConfigCheck::Off => None,
        _ => Some(model_digest),
    };
    Some(Registered { liveness, gate, takes_turns })
}

/// Gives `claim`'s chat back after this worker could not run its message
/// (the database was away), trying again until it is done or the lease
/// would have run out: the message runs again at once, here or elsewhere,
/// instead of when the lease runs out.
pub async fn give_back(link: &StoreLink, claim: &Claim) {
    let give_up = tokio::time::Instant::now() + link.leases.chat;
    let mut backoff = Backoff::new(RETRY_FIRST, RETRY_MAX);
    let never = CancellationToken::new();
    while tokio::time::Instant::now() < give_up {
        match link.store.release(claim).await {
            Ok(_) => return,
            Err(_) => backoff.wait(&never).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_digest_follows_the_model_and_its_endpoint_not_the_rest() {
        let dir = tempfile::tempdir().unwrap();
        let load = |text: &str| {
            std::fs::write(dir.path().join("config.toml"), text).unwrap();
            let overrides = ferroclaw_core::Overrides::default();
            Config::load(dir.path().into(), dir.path().into(), &overrides).unwrap()
        };
        let prod = model_config(&load("model = \"anthropic/claude-sonnet-4-5\"\n"));
        let same = model_config(&load("model = \"anthropic/claude-sonnet-4-5\"\nmax_turns = 7\n"));
        let other = model_config(&load("model = \"openai/gpt-5\"\n"));
        let at = |url: &str| {
            model_config(&load(&format!(
                "model = \"own/m\"\n[providers.own]\nwire = \"openai\"\nbase_url = \"{url}\"\n"
            )))
        };
        let (staging, production) = (at("http://staging:8080/v1"), at("http://prod:8080/v1"));
        assert_eq!(prod, same, "max_turns is not part of the model config");
        assert_ne!(prod.1, other.1);
        assert_ne!(staging.1, production.1, "the same model at another endpoint");
        assert_eq!(staging.0, "own/m via http://staging:8080/v1");
        assert_eq!(prod.1.len(), DIGEST_CHARS);
    }
}
