//! Interruptions. Ctrl-C: the first press cancels the request in flight, a
//! second one exits. SIGTERM and SIGHUP (what `timeout`, systemd, docker and
//! a closed terminal send) cancel the request in flight the same way, so that
//! the running tool's process group is killed and the session records what
//! happened; then the process exits with 128 + the signal's number (143,
//! 129). With no request in flight they exit at once. The handler has a
//! thread of its own: no blocking read makes ferroclaw deaf to them.
//!
//! `ferroclaw gateway` handles its signals apart ([`drain_on_signals`]).

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
pub(crate) fn terminated() -> Option<i32> {
    Some(TERMINATED.load(Ordering::SeqCst)).filter(|c| *c != 0)
}

/// Handles SIGTERM and SIGHUP for the life of the process (call once, before
/// anything long runs). The handler runs on a thread of its own, so a main
/// thread stuck in a blocking read (a pipe on stdin that never ends, a hung
/// network file system) still hears the signal and ends the process.
pub(crate) fn install_termination_handler() {
    let (installed, told) = std::sync::mpsc::channel();
    let spawned = std::thread::Builder::new().name("ferroclaw-signals".into()).spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build();
        let Ok(runtime) = runtime else {
            let _ = installed.send(false);
            return;
        };
        runtime.block_on(async move {
            let (Ok(term), Ok(hup)) =
                (signal(SignalKind::terminate()), signal(SignalKind::hangup()))
            else {
                let _ = installed.send(false);
                return;
            };
            let _ = installed.send(true);
            handle_termination(term, hup).await;
        });
    });
    // Returns once the signals are ours: none comes in between and kills at once.
    if spawned.is_err() || !told.recv().unwrap_or(false) {
        tracing::warn!("cannot handle SIGTERM/SIGHUP; they will end ferroclaw at once");
    }
}

/// The first termination signal cancels the request in flight (or exits when
/// there is none) and exits after [`TERMINATION_GRACE`]; a second exits at once.
async fn handle_termination(
    mut term: tokio::signal::unix::Signal,
    mut hup: tokio::signal::unix::Signal,
) {
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
}

/// Watches for Ctrl-C while `cancel` is live. The first press cancels it; a
/// second press (before the request ends) exits the process at once. Abort
/// the returned handle when the request is over: if a termination signal
/// came meanwhile, the process then exits with its code.
pub(crate) fn watch(cancel: CancellationToken) -> tokio::task::JoinHandle<()> {
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

/// The gateway's signals: SIGTERM, SIGHUP (a closed terminal, `kill -HUP`)
/// and Ctrl-C all cancel `shutdown`, which drains: no new messages, turns
/// in flight finish, exit 0. Signals during the drain are noted and change
/// nothing. Call inside the runtime, before anything long runs.
pub(crate) fn drain_on_signals(shutdown: CancellationToken) {
    let signals = [
        (SignalKind::terminate(), "SIGTERM"),
        (SignalKind::hangup(), "SIGHUP"),
        (SignalKind::interrupt(), "SIGINT"),
    ];
    for (kind, name) in signals {
        let mut incoming = match signal(kind) {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!("cannot handle {name} ({e}); it will end the gateway at once");
                continue;
            }
        };
        let shutdown = shutdown.clone();
        tokio::spawn(async move {
            while incoming.recv().await.is_some() {
                if shutdown.is_cancelled() {
                    tracing::info!("{name}: already stopping; turns in flight still finish");
                } else {
                    tracing::info!("{name}: stopping; turns in flight finish first");
                    shutdown.cancel();
                }
            }
        });
    }
}
