//! `ferroclaw gateway status`: the gateway processes alive on the shared
//! database (from its registry), what each runs and holds, and the model
//! config the database serves. On files (one process), `ferroclaw status`.

use std::io::Write;

use crate::args::Cli;
use crate::exit;
use crate::gateway_cmd::{database_url, gateway_config};
use crate::setup::SetupError;

/// Prints the live gateways of the shared database.
pub(crate) async fn run(cli: &Cli) -> Result<i32, SetupError> {
    let (_, settings) = gateway_config(cli)?;
    let Some(url) = database_url(&settings)? else {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(
            out,
            "this gateway keeps its state in files (one process); `ferroclaw status` shows it"
        );
        return Ok(exit::OK);
    };
    // Looking changes nothing: no migration, and a holder name of its own.
    let options = ferroclaw_store::PgOptions {
        migrate: false,
        holder: Some(format!("status-{}", std::process::id())),
        pool_size: 2,
    };
    let other = |e: ferroclaw_store::StoreError| SetupError::Other(e.to_string());
    let store = ferroclaw_store::PgStore::connect(&url, options).await.map_err(other)?;
    let served = store.served_model().await.map_err(other)?;
    let live = store.live_gateways().await.map_err(other)?;
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "database: {}", store.url());
    let _ = match &served {
        Some(s) => writeln!(
            out,
            "model config served: {} (digest {}, set by {})",
            s.model, s.model_digest, s.set_by
        ),
        None => writeln!(out, "model config served: none yet (no gateway has registered)"),
    };
    let _ = writeln!(out, "live gateways: {}", live.len());
    if !live.is_empty() {
        let width = live.iter().map(|g| g.holder.len()).max().unwrap_or(6).max(6);
        let _ = writeln!(out, "  {:width$}  VERSION  UP        CHATS  MODEL CONFIG", "HOLDER");
        for g in &live {
            let serves = if g.serves { "" } else { "  (takes no turns: another model config)" };
            let _ = writeln!(
                out,
                "  {:width$}  {:7}  {:8}  {:5}  {} [{}]{serves}",
                g.holder,
                g.version,
                uptime(g.up_secs),
                g.chats,
                g.model,
                g.model_digest
            );
        }
    }
    Ok(exit::OK)
}

/// `3d4h`, `2h5m`, `4m12s`, `9s`.
fn uptime(secs: f64) -> String {
    let s = secs.max(0.0) as u64;
    let (d, h, m) = (s / 86_400, s / 3_600 % 24, s / 60 % 60);
    match (d, h, m) {
        (0, 0, 0) => format!("{s}s"),
        (0, 0, m) => format!("{m}m{}s", s % 60),
        (0, h, m) => format!("{h}h{m}m"),
        (d, h, _) => format!("{d}d{h}h"),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn uptimes_read_at_a_glance() {
        assert_eq!(super::uptime(9.4), "9s");
        assert_eq!(super::uptime(252.0), "4m12s");
        assert_eq!(super::uptime(7_500.0), "2h5m");
        assert_eq!(super::uptime(288_000.0), "3d8h");
    }
}
