//! Chat commands: `/new`, `/status`, `/compact`, `/usage`, `/help`. They act
//! on the chat's session and never reach the model (except `/compact`, which
//! asks the model for a summary).

/// A command typed in a chat.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChatCommand {
    /// Start a new conversation in this chat.
    New,
    /// Session, model and context use.
    Status,
    /// Summarise the history now, optionally focused.
    Compact(Option<String>),
    /// Tokens (and cost) used.
    Usage,
    /// What the commands are.
    Help,
    /// Answer an approval request: `/approve [ID] [once|chat|project]`,
    /// `/deny [ID] [reason]` (handled at once, even while a turn waits). An
    /// empty id: the only request waiting in the chat.
    Decide { id: String, choice: crate::approval::Choice },
}

/// True for a word that is a request id rather than the start of a reason:
/// hex digits, at least 8 (ids are 24).
fn looks_like_id(word: &str) -> bool {
    word.len() >= 8 && word.chars().all(|c| c.is_ascii_hexdigit())
}

/// The reply to `/help`.
pub const HELP: &str = "Commands:\n\
/new — start a new conversation (the old one stays saved)\n\
/status — session, model and how full the context is\n\
/compact [focus] — summarise the conversation so far to free context\n\
/usage — tokens used since the assistant last started on this chat\n\
/approve [ID] [chat|project] — let a waiting tool call run (once, or always here)\n\
/deny [ID] [reason] — refuse a waiting tool call (ID: needed only when several wait)\n\
/help — this list\n\
Anything else goes to the assistant.";

impl ChatCommand {
    /// Parses a message that is a command (`/new`, `/compact focus`,
    /// `/status@MyBot`); anything else is `None` and goes to the model.
    pub fn parse(text: &str) -> Option<Self> {
        let text = text.trim();
        let rest = text.strip_prefix('/')?;
        let (word, arg) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
        // Telegram appends the bot's name in groups: /status@my_bot.
        let word = word.split('@').next().unwrap_or(word).to_ascii_lowercase();
        let arg = arg.trim();
        Some(match word.as_str() {
            "new" | "reset" => ChatCommand::New,
            "status" => ChatCommand::Status,
            "compact" => ChatCommand::Compact((!arg.is_empty()).then(|| arg.to_string())),
            "usage" => ChatCommand::Usage,
            "help" | "start" => ChatCommand::Help,
            // The id may be left out: the only request waiting in the chat.
            "approve" | "deny" => {
                let (first, rest) = arg.split_once(char::is_whitespace).unwrap_or((arg, ""));
                let (id, choice) = if word == "deny" {
                    match looks_like_id(first) {
                        true => (first, crate::approval::Choice::Deny(rest.trim().to_string())),
                        false => ("", crate::approval::Choice::Deny(arg.to_string())),
                    }
                } else if rest.is_empty()
                    && let Some(choice) = crate::approval::Choice::parse(first, "")
                {
                    ("", choice)
                } else {
                    (first, crate::approval::Choice::parse(rest, "")?)
                };
                ChatCommand::Decide { id: id.to_string(), choice }
            }
            _ => return None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_parse_with_arguments_and_bot_suffixes_and_others_go_to_the_model() {
        assert_eq!(ChatCommand::parse("/new"), Some(ChatCommand::New));
        assert_eq!(ChatCommand::parse(" /status@ferro_bot "), Some(ChatCommand::Status));
        assert_eq!(
            ChatCommand::parse("/compact the API design"),
            Some(ChatCommand::Compact(Some("the API design".into())))
        );
        assert_eq!(ChatCommand::parse("/compact"), Some(ChatCommand::Compact(None)));
        assert_eq!(ChatCommand::parse("/etc/passwd is what?"), None);
        assert_eq!(ChatCommand::parse("hello /new"), None);
        use crate::approval::Choice;
        let decide = |id: &str, choice| Some(ChatCommand::Decide { id: id.into(), choice });
        assert_eq!(ChatCommand::parse("/approve ab12"), decide("ab12", Choice::Once));
        assert_eq!(ChatCommand::parse("/approve ab12 project"), decide("ab12", Choice::Project));
        assert_eq!(
            ChatCommand::parse("/deny 0a1b2c3d4e5f too risky"),
            decide("0a1b2c3d4e5f", Choice::Deny("too risky".into()))
        );
        assert_eq!(ChatCommand::parse("/approve ab12 whenever"), None);
    }

    #[test]
    fn approve_and_deny_without_an_id_answer_the_only_request_waiting() {
        use crate::approval::Choice;
        let only = |choice| Some(ChatCommand::Decide { id: String::new(), choice });
        assert_eq!(ChatCommand::parse("/approve"), only(Choice::Once));
        assert_eq!(ChatCommand::parse("/approve chat"), only(Choice::Chat));
        assert_eq!(ChatCommand::parse("/approve project"), only(Choice::Project));
        assert_eq!(ChatCommand::parse("/deny"), only(Choice::Deny(String::new())));
        assert_eq!(
            ChatCommand::parse("/deny not on a Friday"),
            only(Choice::Deny("not on a Friday".into()))
        );
    }
}
