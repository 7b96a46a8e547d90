//! What a teammate's call that needs the user's approval gets: a refusal
//! that names the call, the rule that would allow it and where to put it,
//! told to the teammate (the model) and to the lead's inbox, so that the
//! user hears of it instead of the call vanishing.
//!
//! Teammates run in the background, with no terminal of their own; routing
//! the question to the lead's prompt is not done yet.

use std::path::PathBuf;

use async_trait::async_trait;
use ferroclaw_core::{Approval, Approver};
use ferroclaw_protocol::ToolCall;
use ferroclaw_team::{InboxMessage, LEAD, MessageType, Team};

/// The approver of a teammate: refuses with advice, and tells the lead.
pub(super) struct TeammateApprover {
    pub(super) name: String,
    pub(super) team: Team,
    pub(super) workspace: PathBuf,
    /// The ferroclaw home whose config.toml the refusal names.
    pub(super) home: PathBuf,
}

#[async_trait]
impl Approver for TeammateApprover {
    async fn approve(&self, call: &ToolCall) -> Approval {
        let tool = ferroclaw_tools::canonical_tool_name(&call.name);
        let subject = ferroclaw_core::permission::call_subject(&call.input)
            .map(|s| shorten(s, 80))
            .unwrap_or_default();
        let rules: Vec<String> =
            ferroclaw_core::permission::always_rules(&self.workspace, &call.name, &call.input)
                .iter()
                .map(|r| format!("\"{r}\""))
                .collect();
        let how = match rules.is_empty() {
            true => {
                "The user can allow it by running the lead with --permission-mode accept-edits \
                     (edits) or bypass, or by doing it themselves."
                    .to_string()
            }
            false => format!(
                "The user can allow calls like it with allow = [{}] under [permissions] in \
                 {} or a trusted project's .agent/config.toml.",
                rules.join(", "),
                ferroclaw_core::Config::user_config_shown(&self.home)
            ),
        };
        let note = format!(
            "{}'s call {tool}({subject}) was refused: it needs the user's approval, and a \
             teammate cannot ask yet. {how}",
            self.name
        );
        let message = InboxMessage::new(MessageType::Message, &self.name, LEAD, &note);
        if let Err(e) = self.team.send(&message) {
            tracing::warn!("team: cannot tell the lead about {}'s refused call: {e}", self.name);
        }
        Approval::No(format!(
            "{tool}({subject}) needs the user's approval, and a teammate cannot ask the user: \
             it was refused, and the lead was told. Do without it if you can; otherwise \
             send_message the lead what you need it for. {how}"
        ))
    }
}

/// `text` cut to `max` characters, marked with `…` when cut.
fn shorten(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_string(),
    }
}
