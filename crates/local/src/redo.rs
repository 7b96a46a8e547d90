//! When a first answer is redone as a tool call. A small model asked to act
//! ("List the files in this folder.") often does not open a call: it starts
//! writing a tool's result itself (`<tool_response>`, made up), falls into a
//! loop, or says nothing. For the first answer to a user's own message, with
//! tools offered and the model free to choose, the engine holds back the
//! first [`HOLD_TOKENS`] tokens of text; if the answer goes wrong in one of
//! those ways within them, it is thrown away (nothing was shown) and
//! generated again from the same prompt with the tool-call grammar forced,
//! so the model picks a real tool and real arguments, the tool runs, and
//! the next answer is written from its real result. An answer that is plain
//! text and ends well, or that opens a call itself, is kept as it is.
//!
//! A plain text answer that ends by itself also counts as wrong when the
//! user's message is about a file or folder ([`about_files`]: it names
//! one, such as `notes.txt`, or says "file" or "folder"): a small model
//! answers "What is the secret word in notes.txt?" with a word it makes up
//! rather than reading the file, and nothing in its text tells.
//!
//! The forced call is ferroclaw's choice, not the model's, so it is limited
//! to tools that change nothing ([`LOOK_TOOLS`]): a redo may look, never
//! write, edit or run. Without one of them on offer there is no redo.

use ferroclaw_protocol::ToolSpec;

/// ferroclaw's tools that only look (their `read_only` is true): the only
/// ones a forced redo may call.
pub const LOOK_TOOLS: [&str; 4] = ["list_dir", "read", "glob", "grep"];

/// The offered tools a redo may call.
pub fn redo_tools(tools: &[ToolSpec]) -> Vec<ToolSpec> {
    tools.iter().filter(|t| LOOK_TOOLS.contains(&t.name.as_str())).cloned().collect()
}

/// Tokens of a first answer held back while it may still be redone. Long
/// enough for a loop to show (the loop guard needs 32 tokens) and for the
/// opening words of an answer, short enough that a real text answer is
/// delayed by well under a second on SmolLM2-135M (~100 tokens/s).
pub const HOLD_TOKENS: usize = 48;

/// The probability of a token under the raw logits (softmax over the whole
/// vocabulary); 0 for a token out of range.
pub fn probability(logits: &[f32], token: usize) -> f32 {
    let Some(&x) = logits.get(token) else { return 0.0 };
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let sum: f32 = logits.iter().map(|&l| (l - max).exp()).sum();
    (x - max).exp() / sum
}

/// How the held part of a first answer ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// The model ended its turn (or reached its token cap).
    Stopped,
    /// The model began a `<tool_response>` of its own: it is making one up.
    MadeUpResult,
    /// The loop guard stopped the answer.
    Looping,
}

impl Ending {
    /// Words for the log.
    pub fn describe(self) -> &'static str {
        match self {
            Self::Stopped => "it said nothing",
            Self::MadeUpResult => "it began a made-up tool result",
            Self::Looping => "it was looping",
        }
    }
}

/// Whether to throw the held answer away and redo it as a forced tool call:
/// no call was made, and the answer made up a result, looped, or said
/// nothing, or (`about_files`) answered a question about files without
/// looking. Otherwise a short text answer that ends by itself stands.
pub fn redo_as_call(ending: Ending, held_text: &str, calls: usize, about_files: bool) -> bool {
    if calls > 0 {
        return false;
    }
    match ending {
        Ending::MadeUpResult | Ending::Looping => true,
        Ending::Stopped => about_files || held_text.trim().is_empty(),
    }
}

/// Words that make a message about the files in the folder.
const FILE_WORDS: [&str; 6] = ["file", "files", "folder", "folders", "directory", "directories"];

/// True when `message` is about files: it says "file", "folder" or
/// "directory", or names a file (a word with an extension of 1 to 5
/// letters or digits after its last dot, such as `notes.txt` or
/// `src/main.rs`; not a number such as 1.5, nor a sentence's full stop).
pub fn about_files(message: &str) -> bool {
    message.split(|c: char| c.is_whitespace() || "`'\"(),;:?!".contains(c)).any(|word| {
        let word = word.trim_end_matches('.');
        if FILE_WORDS.contains(&word.to_lowercase().as_str()) {
            return true;
        }
        let Some((stem, ext)) = word.rsplit_once('.') else { return false };
        let stem = stem.rsplit('/').next().unwrap_or(stem);
        !stem.is_empty()
            && (1..=5).contains(&ext.len())
            && ext.chars().all(|c| c.is_ascii_alphanumeric())
            && ext.chars().any(|c| c.is_ascii_alphabetic())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_made_up_result_or_a_loop_is_redone_whatever_was_said_before() {
        assert!(redo_as_call(Ending::MadeUpResult, "", 0, false));
        assert!(redo_as_call(Ending::MadeUpResult, "The files are:", 0, false));
        assert!(redo_as_call(Ending::Looping, "http://x http://x http://x", 0, false));
    }

    #[test]
    fn an_empty_answer_is_redone_but_a_short_text_answer_stands() {
        assert!(redo_as_call(Ending::Stopped, "", 0, false));
        assert!(redo_as_call(Ending::Stopped, " \n ", 0, false));
        assert!(!redo_as_call(Ending::Stopped, "Hello! How can I help?", 0, false));
    }

    #[test]
    fn a_text_answer_to_a_question_about_files_is_redone_as_a_look() {
        let made_up = "The secret word in notes.txt is \"SELF\".";
        assert!(redo_as_call(Ending::Stopped, made_up, 0, true));
        assert!(!redo_as_call(Ending::Stopped, made_up, 1, true), "it looked");
    }

    #[test]
    fn a_message_is_about_files_when_it_names_one_or_says_file_or_folder() {
        for yes in [
            "What is the secret word in notes.txt?",
            "Which port is set in server.ini?",
            "What is the first line of `poem.txt`?",
            "Look at src/main.rs.",
            "List the files in this folder.",
            "Which File contains TODO?",
            "what is in the assets directory",
        ] {
            assert!(about_files(yes), "{yes}");
        }
        for no in [
            "What is the capital of France?",
            "Hello!",
            "Is 1.5 more than 1.25?",
            "Run `echo hi` and tell me its output.",
            "Write a haiku. Then stop.",
            "profile...",
        ] {
            assert!(!about_files(no), "{no}");
        }
    }

    #[test]
    fn a_redo_may_only_call_tools_that_change_nothing() {
        let spec = |name: &str| ToolSpec {
            name: name.into(),
            description: String::new(),
            input_schema: serde_json::json!({"type": "object"}),
        };
        let offered = ["bash", "read", "write", "edit", "list_dir", "grep", "glob", "web_fetch"];
        let offered: Vec<ToolSpec> = offered.iter().map(|n| spec(n)).collect();
        let names: Vec<String> = redo_tools(&offered).into_iter().map(|t| t.name).collect();
        assert_eq!(names, ["read", "list_dir", "grep", "glob"]);
        assert!(redo_tools(&[spec("bash"), spec("write")]).is_empty());
    }

    #[test]
    fn probability_is_the_softmax_of_the_logits() {
        let logits = [0.0, (3.0f32).ln(), f32::NEG_INFINITY];
        assert!((probability(&logits, 1) - 0.75).abs() < 1e-6);
        assert!((probability(&logits, 0) - 0.25).abs() < 1e-6);
        assert_eq!(probability(&logits, 2), 0.0);
        assert_eq!(probability(&logits, 9), 0.0);
    }

    #[test]
    fn an_answer_that_called_a_tool_is_never_redone() {
        assert!(!redo_as_call(Ending::MadeUpResult, "", 1, false));
        assert!(!redo_as_call(Ending::Stopped, "", 1, true));
        assert!(!redo_as_call(Ending::Looping, "", 2, false));
    }
}
