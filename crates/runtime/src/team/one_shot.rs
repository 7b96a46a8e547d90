//! A team under a one-shot lead (`ferroclaw -p`): the run ends when the lead
//! has answered and no teammate is working. The front end asks
//! [`TeamRunner::working`] who still works (and says so), wakes the lead
//! when [`TeamRunner::lead_must_answer`] (a teammate's plan waits for its
//! approval, as the REPL's lead answers it), and otherwise calls
//! [`TeamRunner::close_when_idle`]: idle teammates shut down at once instead
//! of waiting out `idle_timeout_secs`.

use std::sync::atomic::Ordering;

use ferroclaw_team::{LEAD, MemberStatus};

use super::TeamRunner;

/// Why a teammate shut down when its one-shot lead was done.
pub const CLOSED: &str = "the lead's one-shot run is done";

impl TeamRunner {
    /// Names of running teammates whose status is `working`.
    pub fn working(&self) -> Vec<String> {
        let running = self.running();
        let Ok(Some(config)) = self.team.load() else { return running };
        config
            .members
            .iter()
            .filter(|m| m.status == MemberStatus::Working && running.contains(&m.name))
            .map(|m| m.name.clone())
            .collect()
    }

    /// True when a request to the lead (a teammate's plan) is pending and
    /// its message is unread in the lead's inbox: the lead should run a turn.
    pub fn lead_must_answer(&self) -> bool {
        let pending = self
            .team
            .requests()
            .is_ok_and(|all| all.iter().any(|r| r.to == LEAD && r.status == "pending"));
        pending && self.lead.reader.has_new()
    }

    /// From now on an idle teammate with nothing to do shuts down at once
    /// (its status `shutdown`), a working one when its turn is over.
    pub fn close_when_idle(&self) {
        self.closing.store(true, Ordering::SeqCst);
    }
}
