//! Approvals in the REPL: the renderer prints the question (with the diff
//! or command it is about); the approver here reads the answer, from the key
//! watcher on a terminal or a line of stdin otherwise.

use std::sync::Arc;

use async_trait::async_trait;
use ferroclaw_core::{Approval, Approver, PermissionMode, PlanVerdict};
use ferroclaw_protocol::ToolCall;

use crate::keys::{self, Answer};

/// Longest wait for the renderer to show a question before reading its
/// answer anyway (the renderer shows it at once; this only guards a bug).
const QUESTION_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// Asks on the terminal: yes, no (with an optional reason; Enter alone is
/// no), or always. The renderer prints the question (it arrives as an event,
/// in order with the tool lines); this only reads the answer. One question at
/// a time: parallel sub-agents wait their turn. Esc or Ctrl-C at a question
/// cancels the request.
pub(crate) struct TerminalApprover {
    asking: tokio::sync::Mutex<()>,
    answers: Arc<keys::Answers>,
    /// Where "always" rules are scoped (the file's folder for edits).
    workspace: std::path::PathBuf,
}

impl TerminalApprover {
    /// An approver reading answers from `answers` when a key watcher runs.
    pub(crate) fn new(answers: Arc<keys::Answers>, workspace: std::path::PathBuf) -> Self {
        TerminalApprover { asking: Default::default(), answers, workspace }
    }
}

/// What the user answered: from the key watcher on a terminal, else a line
/// of stdin; read once the question is on screen.
async fn answer(answers: &keys::Answers) -> Option<String> {
    let shown = answers.shown.notified();
    let _ = tokio::time::timeout(QUESTION_WAIT, shown).await;
    if answers.watched() {
        return match answers.next().await {
            Answer::Line(line) => Some(line.trim().to_string()),
            Answer::Cancelled => None,
        };
    }
    Some(read_answer().await)
}

/// One line from stdin, trimmed; empty on end of input.
async fn read_answer() -> String {
    let line = tokio::task::spawn_blocking(|| {
        let mut line = String::new();
        std::io::stdin().read_line(&mut line).map(|_| line)
    })
    .await;
    match line {
        Ok(Ok(line)) => line.trim().to_string(),
        _ => String::new(),
    }
}

/// Splits `n, because` into the word and the reason.
fn word_and_reason(answer: &str) -> (String, String) {
    let (word, reason) = answer.split_once(',').unwrap_or((answer, ""));
    (word.trim().to_lowercase(), reason.trim().to_string())
}

#[async_trait]
impl Approver for TerminalApprover {
    async fn approve(&self, call: &ToolCall) -> Approval {
        let _turn = self.asking.lock().await;
        let Some(answer) = answer(&self.answers).await else {
            return Approval::No("the user interrupted the request".into());
        };
        let (word, reason) = word_and_reason(&answer);
        // Say what an "always" answer covers: the same rule the loop adds.
        let covers = || {
            let rules =
                ferroclaw_core::permission::always_rules(&self.workspace, &call.name, &call.input);
            ferroclaw_core::permission::describe_rules(&rules)
        };
        match word.as_str() {
            "y" | "yes" => Approval::Yes,
            "a" | "always" => {
                eprintln!("  allowed for this session: {}", covers());
                Approval::AlwaysForSession
            }
            "p" | "project" => {
                eprintln!("  allowed in this project (.agent/config.toml): {}", covers());
                Approval::AlwaysForProject
            }
            _ if reason.is_empty() => Approval::No("the user declined this call".into()),
            _ => Approval::No(format!("the user declined this call: {reason}")),
        }
    }

    async fn approve_plan(&self, _plan: &str) -> PlanVerdict {
        let _turn = self.asking.lock().await;
        let Some(answer) = answer(&self.answers).await else {
            return PlanVerdict::Rejected("the user interrupted the request".into());
        };
        let (word, reason) = word_and_reason(&answer);
        match word.as_str() {
            "y" | "yes" => PlanVerdict::Approved(PermissionMode::Default),
            "e" => PlanVerdict::Approved(PermissionMode::AcceptEdits),
            _ if reason.is_empty() => {
                PlanVerdict::Rejected("the user wants a different plan".into())
            }
            _ => PlanVerdict::Rejected(reason),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_answer_is_no() {
        assert_eq!(word_and_reason(""), (String::new(), String::new()));
        assert_eq!(word_and_reason("n, too risky"), ("n".to_string(), "too risky".to_string()));
    }
}
