//! Interruptions. Ctrl-C: the first press cancels the request in flight, a
//! second one exits. SIGTERM and SIGHUP (what `timeout`, systemd, docker and
//! a closed terminal send) cancel the request in flight the same way, so that
//! the running tool's process group is killed and the session records what
//! happened; then the process exits with 128 + the signal's number (143,
//! 129). With no request in flight they exit at once.

use std::sync::Mutex;
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};
use std::time::Duration;

use tokio::signal::unix::{SignalKind, signal};
use tokio_util::sync::CancellationToken;

use crate::exit;

/// How long a request may take to wind down after SIGTERM/SIGHUP before the
/// process exits anyway (systemd and docker send SIGKILL after 10 s).
const TERMINATION_GRACE: Duration = Duration::from_secs(5);

/// The request in flight (with its registration number), cancelled by a
/// termination signal.
static IN_FLIGHT: Mutex<Option<(u64, CancellationToken)>> = Mutex::new(None);
/// Numbers the registrations, so a late-dropped watcher clears only its own.
static REGISTRATIONS: AtomicU64 = AtomicU64::new(0);
/// The exit code a termination signal asked for (0: none came).
static TERMINATED: AtomicI32 = AtomicI32::new(0);

/// The exit code a SIGTERM/SIGHUP asked for, once one came.
pub fn terminated() -> Option<i32> {
    Some(TERMINATED.load(Ordering::SeqCst)).filter(|c| *c != 0)
}

/// Handles SIGTERM and SIGHUP for the life of the process (call once, inside
/// the runtime, before anything long runs).
pub fn install_termination_handler() {
    let (Ok(mut term), Ok(mut hup)) =
        (signal(SignalKind::terminate()), signal(SignalKind::hangup()))
    else {
        tracing::warn!("cannot handle SIGTERM/SIGHUP; they will end ferroclaw at once");
        return;
    };
    tokio::spawn(async move {
        loop {
            let (name, code) = tokio::select! {
                _ = term.recv() => ("SIGTERM", exit::TERMINATED),
                _ = hup.recv() => ("SIGHUP", exit::HANGUP),
            };
            if TERMINATED.swap(code, Ordering::SeqCst) != 0 {
                std::process::exit(code); // a second signal: no more waiting
            }
            let in_flight =
                IN_FLIGHT.lock().map(|slot| slot.as_ref().map(|(_, c)| c.clone())).unwrap_or(None);
            let Some(cancel) = in_flight else {
                std::process::exit(code);
            };
            eprintln!("\nferroclaw: {name}: stopping the request and saving the session");
            cancel.cancel();
            tokio::spawn(async move {
                tokio::time::sleep(TERMINATION_GRACE).await;
                std::process::exit(code);
            });
        }
    });
}

/// Watches for Ctrl-C while `cancel` is live. The first press cancels it; a
/// second press (before the request ends) exits the process at once. Abort
/// the returned handle when the request is over: if a termination signal
/// came meanwhile, the process then exits with its code.
pub fn watch(cancel: CancellationToken) -> tokio::task::JoinHandle<()> {
    let number = REGISTRATIONS.fetch_add(1, Ordering::SeqCst);
    if let Ok(mut slot) = IN_FLIGHT.lock() {
        *slot = Some((number, cancel.clone()));
    }
    let guard = InFlight(number);
    tokio::spawn(async move {
        let _guard = guard;
        if tokio::signal::ctrl_c().await.is_err() {
            return std::future::pending().await;
        }
        let style = crate::style::Style::for_stderr();
        eprintln!("\n{}", style.yellow("interrupted; press Ctrl-C again to exit"));
        cancel.cancel();
        if tokio::signal::ctrl_c().await.is_ok() {
            std::process::exit(exit::INTERRUPTED);
        }
        std::future::pending::<()>().await;
    })
}

/// Marks the end of the request in flight when dropped (its watcher was
/// aborted); a termination signal that came during it ends the process now.
struct InFlight(u64);

impl Drop for InFlight {
    fn drop(&mut self) {
        if let Ok(mut slot) = IN_FLIGHT.lock()
            && slot.as_ref().is_some_and(|(n, _)| *n == self.0)
        {
            *slot = None;
        }
        if let Some(code) = terminated() {
            std::process::exit(code);
        }
    }
}
