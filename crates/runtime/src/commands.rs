//! Custom slash commands for every front end: which there are
//! ([`Runtime::custom_commands`], also what ACP clients are offered) and
//! running one ([`Runtime::run_command`]).

use std::path::Path;

use ferroclaw_core::commands::{self, CustomCommand};
use ferroclaw_core::model_alias::{self, Resolved};
use ferroclaw_core::{Agent, EventSink, Report};
use ferroclaw_protocol::Message;
use tokio_util::sync::CancellationToken;

use crate::Runtime;

impl Runtime {
    /// The custom commands of this workspace and home, by name (read anew
    /// each time, so a new file is there at once); files that do not read
    /// are reported once. A project's command grants only while the project
    /// is still trusted as it is now: one changed during the session (by the
    /// agent, by a `git pull`) grants nothing until trusted again.
    pub fn custom_commands(&self) -> Vec<CustomCommand> {
        let config = &self.config;
        let trusted = config.trusted
            && ferroclaw_core::trust::TrustStore::new(&config.home).is_trusted(&config.workspace);
        let (found, problems) = commands::load(&config.workspace, &config.home, trusted);
        for problem in problems {
            self.report(format!("custom command skipped: {problem}"));
        }
        found
    }

    /// Runs `cmd` with `args` as one request of `agent`: its `model` for this
    /// request only, its `allowed-tools` granted until the request ends, its
    /// text turned into the user message by `message` (the front end's
    /// `@file` handling).
    pub async fn run_command(
        &self,
        agent: &mut Agent,
        cmd: &CustomCommand,
        args: &str,
        message: impl FnOnce(&str, &Path) -> Message,
        events: &EventSink,
        cancel: &CancellationToken,
    ) -> Report {
        let wanted = cmd.model.as_deref().map(|m| model_alias::resolve(m, agent.model_spec()));
        let previous = match wanted {
            Some(Ok(Resolved::Use(spec))) if spec != agent.model_spec() => {
                match self.provider(&spec) {
                    Ok((provider, model)) => {
                        let before = (agent.provider().clone(), agent.model().to_string());
                        let before_spec = agent.model_spec().to_string();
                        agent.set_model(provider, model, spec);
                        Some((before.0, before.1, before_spec))
                    }
                    Err(e) => {
                        let message = format!(
                            "/{}: model {spec}: {e}; using {}",
                            cmd.name,
                            agent.model_spec()
                        );
                        warn(events, message);
                        None
                    }
                }
            }
            Some(Err(e)) => {
                warn(events, format!("/{}: {e}", cmd.name));
                None
            }
            _ => None,
        };
        let text = agent.command_prompt(cmd, args, events, cancel).await;
        let input = message(&text, agent.workspace());
        let report = agent.run(input, events, cancel).await;
        if let Some((provider, model, spec)) = previous {
            agent.set_model(provider, model, spec);
        }
        report
    }
}

/// A problem with the command that does not stop it, shown to the user.
fn warn(events: &EventSink, message: String) {
    let _ = events.send(ferroclaw_protocol::AgentEvent::Error { message, fatal: false });
}
