//! The gateway's subscriber to worktree lifecycle events: each one is
//! logged (target `worktree`) as it happens.

use tokio::sync::broadcast::error::RecvError;
use tokio_util::sync::CancellationToken;

/// Logs worktree events until `stop` is cancelled.
pub(crate) async fn run(stop: CancellationToken) {
    let mut events = ferroclaw_runtime::worktree_events();
    loop {
        tokio::select! {
            _ = stop.cancelled() => break,
            event = events.recv() => match event {
                Ok(event) => tracing::info!(target: "worktree", "{}", event.line()),
                Err(RecvError::Lagged(n)) => {
                    tracing::warn!(target: "worktree", "{n} worktree events not logged");
                }
                Err(RecvError::Closed) => break,
            },
        }
    }
}
