//! The lead's team in the front ends: attaching it to the lead agent, and
//! waiting for it at the end of a one-shot run.

use std::sync::Arc;

use ferroclaw_core::Agent;
use ferroclaw_runtime::Runtime;
use ferroclaw_runtime::team::TeamRunner;
use tokio_util::sync::CancellationToken;

use crate::setup::SetupError;

/// Makes `agent` the team's lead when teams are on (`[team]` in the config,
/// or a team already in the workspace); reattaches its teammates.
pub fn attach(
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

/// Waits for every teammate to stop; an interrupt stops them at once (their
/// status stays on disk for `--continue`).
pub async fn wait(team: &TeamRunner, cancel: &CancellationToken) {
    tokio::select! {
        () = team.wait_all() => {}
        () = cancel.cancelled() => team.stop_all().await,
    }
}
