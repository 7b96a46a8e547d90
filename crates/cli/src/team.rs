//! The lead's team in the front ends: attaching it to the lead agent,
//! finishing a one-shot run with it, and the REPL's lead waking up for its
//! teammates' messages.

use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use ferroclaw_core::{Agent, EventSink, Report};
use ferroclaw_runtime::Runtime;
use ferroclaw_runtime::team::TeamRunner;
use rustyline::ExternalPrinter;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::setup::SetupError;

/// Makes `agent` the team's lead when teams are on (`[team]` in the config,
/// or a team already in the workspace); reattaches its teammates.
pub(crate) fn attach(
    runtime: &Arc<Runtime>,
    agent: &mut Agent,
) -> Result<Option<Arc<TeamRunner>>, SetupError> {
    if !TeamRunner::wanted(runtime) {
        return Ok(None);
    }
    let team = TeamRunner::new(runtime);
    team.attach_lead(agent).map_err(|e| SetupError::Other(format!("team: {e}")))?;
    Ok(Some(team))
}

/// How often a one-shot lead looks at its team while teammates work.
const TEAM_POLL: Duration = Duration::from_millis(50);

/// The end of a one-shot run with a team: the lead answers what waits for
/// it (a teammate's plan, as the REPL's lead does), teammates still working
/// are waited for with a line on stderr naming them, and idle ones are shut
/// down at once. Returns the lead's last report. An interrupt stops every
/// teammate at once (their status stays on disk for `--continue`).
pub(crate) async fn finish_one_shot(
    team: &TeamRunner,
    agent: &mut Agent,
    events: &EventSink,
    cancel: &CancellationToken,
    mut report: Report,
) -> Report {
    let mut announced = Vec::new();
    loop {
        if cancel.is_cancelled() {
            team.stop_all().await;
            return report;
        }
        if team.lead_must_answer()
            && let Some((text, shown)) = take_inbox(team)
        {
            for line in shown {
                eprintln!("{line}");
            }
            report = agent.run(ferroclaw_protocol::Message::user(text), events, cancel).await;
            continue;
        }
        if team.running().is_empty() {
            return report;
        }
        let working = team.working();
        if working.is_empty() {
            team.close_when_idle();
        } else if working != announced {
            eprintln!("waiting for teammates still working: {}", working.join(", "));
            announced = working;
        }
        tokio::select! {
            () = tokio::time::sleep(TEAM_POLL) => {}
            () = cancel.cancelled() => {}
        }
    }
}

/// How often the REPL, waiting at its prompt, looks at the lead's inbox
/// (one `stat`): a teammate's report starts the lead's turn within this.
const INBOX_POLL: Duration = Duration::from_millis(250);

/// The REPL's lead answers its teammates by itself. While the REPL waits at
/// an empty prompt, a message arriving in the lead's inbox ends the wait and
/// the REPL runs a turn on it, as if the user had typed it (Claude Code's
/// agent teams do the same). The wait is ended by a SIGINT to this process,
/// which the line editor reports as `Interrupted`, like Ctrl-C; the flag
/// [`InboxWake::take_woken`] tells the two apart. Only on a terminal, and
/// never while the user is typing: a half-typed line waits, and the
/// messages go with it.
pub(crate) struct InboxWake {
    /// The line being typed, kept up to date by the line editor's hinter.
    pub line: Arc<Mutex<String>>,
    wait: Arc<Wait>,
    watcher: JoinHandle<()>,
    /// Makes the line editor watch its signal pipe while it waits.
    _printer: Box<dyn ExternalPrinter + Send>,
    /// Keeps a SIGINT handler installed between waits, so that a wake-up
    /// sent just as a wait ended is dropped instead of ending the process.
    _sigint: tokio::signal::unix::Signal,
}

/// One wait at the prompt, shared by the waiting thread and the watcher.
#[derive(Default)]
pub(crate) struct Wait {
    /// True while the line editor waits (its SIGINT handler is installed
    /// only then).
    reading: Mutex<bool>,
    /// Set when the watcher ended this wait.
    woke: AtomicBool,
}

impl Wait {
    /// Call on the waiting thread right before the line editor's call.
    pub(crate) fn begin(&self) {
        let mut reading = self.reading.lock().unwrap_or_else(PoisonError::into_inner);
        self.woke.store(false, Ordering::SeqCst);
        *reading = true;
    }

    /// Call on the waiting thread right after it.
    pub(crate) fn end(&self) {
        *self.reading.lock().unwrap_or_else(PoisonError::into_inner) = false;
    }
}

impl InboxWake {
    /// Starts watching the lead's inbox; `None` when there is no team or no
    /// terminal (piped input: the messages go with the next request).
    pub(crate) fn start<H: rustyline::Helper, I: rustyline::history::History>(
        team: &Option<Arc<TeamRunner>>,
        editor: &mut rustyline::Editor<H, I>,
        line: Arc<Mutex<String>>,
    ) -> Option<InboxWake> {
        let team = team.clone()?;
        if !std::io::stdin().is_terminal() || !std::io::stdout().is_terminal() {
            return None;
        }
        let printer = editor.create_external_printer().ok()?;
        let sigint =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt()).ok()?;
        let wait = Arc::new(Wait::default());
        let watcher = {
            let (wait, line) = (wait.clone(), line.clone());
            tokio::spawn(async move {
                loop {
                    tokio::time::sleep(INBOX_POLL).await;
                    let idle = line.lock().unwrap_or_else(PoisonError::into_inner).is_empty();
                    if !idle || wait.woke.load(Ordering::SeqCst) {
                        continue;
                    }
                    if !team.lead_seat().reader.has_new() {
                        continue;
                    }
                    let reading = wait.reading.lock().unwrap_or_else(PoisonError::into_inner);
                    if *reading {
                        wait.woke.store(true, Ordering::SeqCst);
                        // SAFETY: kill(2) on this process; SIGINT's handler
                        // is the line editor's now, tokio's otherwise.
                        unsafe {
                            libc::kill(libc::getpid(), libc::SIGINT);
                        }
                    }
                }
            })
        };
        Some(InboxWake { line, wait, watcher, _printer: Box::new(printer), _sigint: sigint })
    }

    /// The wait to [`Wait::begin`] and [`Wait::end`] around the line
    /// editor's call.
    pub(crate) fn wait(&self) -> Arc<Wait> {
        self.wait.clone()
    }

    /// True when the last wait was ended by a message, not by Ctrl-C.
    pub(crate) fn take_woken(&self) -> bool {
        self.wait.woke.swap(false, Ordering::SeqCst)
    }
}

impl Drop for InboxWake {
    fn drop(&mut self) {
        self.watcher.abort();
    }
}

/// The lead's unread messages, marked handed out (its session records them
/// with the turn they start), and the lines that show them to the user.
pub(crate) fn take_inbox(team: &TeamRunner) -> Option<(String, Vec<String>)> {
    let batch = match team.lead_seat().reader.read() {
        Ok(batch) if !batch.messages.is_empty() => batch,
        Ok(_) => return None,
        Err(e) => {
            tracing::warn!("the lead's inbox: {e}");
            return None;
        }
    };
    let shown = batch
        .messages
        .iter()
        .map(|m| {
            let from = crate::render::shorten(&m.from, 40);
            format!(
                "⚑ {} from {from}: {}",
                m.kind.as_str(),
                crate::render::shorten(&m.content, 100)
            )
        })
        .collect();
    Some((batch.render(), shown))
}
