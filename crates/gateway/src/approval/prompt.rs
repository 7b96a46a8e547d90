//! What a chat is shown when a call needs approval ([`ApprovalPrompt`], with
//! the call's one-line [`summary`]), and the answers people give
//! ([`Choice`], from buttons or `/approve ID WORD`), and what became of them
//! ([`Decided`]).

use ferroclaw_core::Approval;
use serde_json::Value;

/// Characters of a call's summary shown on the request.
const SUMMARY_CHARS: usize = 300;

/// What a channel shows to ask for approval.
#[derive(Debug, Clone, PartialEq)]
pub struct ApprovalPrompt {
    /// The request's id, as `/approve ID` takes it.
    pub id: String,
    /// The tool, by its canonical name (`bash`, `edit`, ...).
    pub tool: String,
    /// The call's arguments.
    pub input: Value,
    /// One line saying what the call would do (`bash: rm -rf build`).
    pub summary: String,
}

impl ApprovalPrompt {
    /// The request as plain text, with the commands that answer it (for
    /// channels without buttons, and under the buttons of those with them).
    pub fn text(&self) -> String {
        format!(
            "Approval needed: {}\nReply /approve {id} (once), /approve {id} chat (always in this chat), \
             /approve {id} project (always in this project) or /deny {id} [reason].",
            self.summary,
            id = self.id
        )
    }
}

/// An answer to a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Choice {
    /// Run this call.
    Once,
    /// Run it, and calls like it in this chat's session.
    Chat,
    /// Run it, and calls like it in this project from now on (written to config).
    Project,
    /// Do not run it; the reason (may be empty) goes to the model.
    Deny(String),
}

impl Choice {
    /// Parses a choice word as buttons and `/approve ID WORD` send it.
    pub fn parse(word: &str, reason: &str) -> Option<Self> {
        Some(match word.trim().to_ascii_lowercase().as_str() {
            "" | "once" | "yes" => Choice::Once,
            "chat" | "session" => Choice::Chat,
            "project" | "always" => Choice::Project,
            "deny" | "no" => Choice::Deny(reason.trim().to_string()),
            _ => return None,
        })
    }

    /// The word buttons carry (`once`, `chat`, `project`, `deny`).
    pub fn word(&self) -> &'static str {
        match self {
            Choice::Once => "once",
            Choice::Chat => "chat",
            Choice::Project => "project",
            Choice::Deny(_) => "deny",
        }
    }

    /// The outcome as people read it.
    pub fn outcome(&self) -> String {
        match self {
            Choice::Once => "approved once".into(),
            Choice::Chat => "approved for this chat".into(),
            Choice::Project => "approved for this project".into(),
            Choice::Deny(r) if r.is_empty() => "denied".into(),
            Choice::Deny(r) => format!("denied: {r}"),
        }
    }

    /// The approval the turn goes on with.
    pub(super) fn approval(&self) -> Approval {
        match self {
            Choice::Once => Approval::Yes,
            Choice::Chat => Approval::AlwaysForSession,
            Choice::Project => Approval::AlwaysForProject,
            Choice::Deny(r) if r.is_empty() => Approval::No("the user denied this call".into()),
            Choice::Deny(r) => Approval::No(format!("the user denied this call: {r}")),
        }
    }
}

/// The buttons every channel shows, in order: (label, choice word).
pub const BUTTONS: [(&str, &str); 4] = [
    ("Approve once", "once"),
    ("Always in this chat", "chat"),
    ("Always in this project", "project"),
    ("Deny", "deny"),
];

/// The text a button press (or `/approve`) carries: `/approve ID WORD`, or
/// `/deny ID` for the deny button.
pub fn button_command(id: &str, word: &str) -> String {
    if word == "deny" { format!("/deny {id}") } else { format!("/approve {id} {word}") }
}

/// One line saying what a call would do: its command, path or URL when it has one.
pub fn summary(tool: &str, input: &Value) -> String {
    let main = ["command", "file_path", "path", "url", "pattern", "query"]
        .iter()
        .find_map(|k| input[*k].as_str())
        .map(str::to_string)
        .unwrap_or_else(|| input.to_string());
    let mut line = format!("{tool}: {}", main.replace('\n', " "));
    if line.chars().count() > SUMMARY_CHARS {
        line = line.chars().take(SUMMARY_CHARS).collect::<String>() + "…";
    }
    line
}

/// What became of a decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decided {
    /// The request is answered; the outcome as people read it.
    Done { tool: String, outcome: String },
    /// No such request waits in this chat (never was, answered, timed out,
    /// or another chat's).
    Unknown,
    /// The request waits, but this sender may not answer it.
    NotAllowed,
    /// No id was given and several requests wait in this chat: their ids
    /// and summaries.
    Which(Vec<(String, String)>),
}
