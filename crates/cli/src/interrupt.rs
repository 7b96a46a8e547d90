//! Ctrl-C: the first press cancels the request in flight, a second one exits.

use tokio_util::sync::CancellationToken;

use crate::exit;

/// Watches for Ctrl-C while `cancel` is live. The first press cancels it; a
/// second press (before the request ends) exits the process at once. Abort
/// the returned handle when the request is over.
pub fn watch(cancel: CancellationToken) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_err() {
            return;
        }
        eprintln!("\n\x1b[33minterrupted; press Ctrl-C again to exit\x1b[0m");
        cancel.cancel();
        if tokio::signal::ctrl_c().await.is_ok() {
            std::process::exit(exit::INTERRUPTED);
        }
    })
}
