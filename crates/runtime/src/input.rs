//! A line the user typed, as the turn it asks for: a custom command
//! (`/name ARGS`), a shell command (`!cmd`, where the front end has one) or
//! a message to the model (whose `@path` mentions attach files where the
//! front end allows it). Every front end (the REPL, `-p`, the gateway's
//! chats, ACP) reads its input here, so a line means the same everywhere.

use ferroclaw_core::commands::{self, CustomCommand};

use crate::Runtime;

/// What a front end lets a line of input do, besides being a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InputRules {
    /// `/name ARGS` runs the custom command `name`, when there is one.
    pub custom_commands: bool,
    /// `!cmd` runs `cmd` in the shell, its output kept for the next message.
    pub shell: bool,
    /// `@path` in a message attaches the file.
    pub files: bool,
}

impl InputRules {
    /// The terminal's REPL: custom commands, `!cmd` and `@file`.
    pub const REPL: Self = Self { custom_commands: true, shell: true, files: true };
    /// `-p` and editors (ACP): custom commands and `@file`.
    pub const PROMPT: Self = Self { custom_commands: true, shell: false, files: true };
    /// A chat message to the gateway: custom commands only (a chat's
    /// sender does not name files on the gateway's disk).
    pub const CHAT: Self = Self { custom_commands: true, shell: false, files: false };
    /// The gateway's own messages (cron, jobs): plain messages.
    pub const SYSTEM: Self = Self { custom_commands: false, shell: false, files: false };
}

/// What a line of input asks for.
#[derive(Debug, Clone, PartialEq)]
pub enum Turn<'a> {
    /// `/name ARGS`: the custom command `name` with `ARGS`.
    Command { command: CustomCommand, args: &'a str },
    /// `!cmd`: the shell command `cmd` (trimmed; may be empty).
    Shell(&'a str),
    /// A message to the model; `files` says whether its `@path` mentions
    /// attach files.
    Message { text: &'a str, files: bool },
}

impl Runtime {
    /// The turn `line` asks for under `rules`; custom commands are read
    /// only for a line that starts with `/`.
    pub fn turn<'a>(&self, line: &'a str, rules: InputRules) -> Turn<'a> {
        turn_of(line, rules, || self.custom_commands())
    }
}

/// The turn `line` asks for, with `commands` loading the custom commands.
fn turn_of<'a>(
    line: &'a str,
    rules: InputRules,
    commands: impl FnOnce() -> Vec<CustomCommand>,
) -> Turn<'a> {
    if rules.custom_commands && line.trim_start().starts_with('/') {
        let custom = commands();
        if let Some((command, args)) = commands::find(&custom, line) {
            return Turn::Command { command: command.clone(), args };
        }
    }
    if rules.shell
        && let Some(command) = line.trim_start().strip_prefix('!')
    {
        return Turn::Shell(command.trim());
    }
    Turn::Message { text: line, files: rules.files }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn review() -> Vec<CustomCommand> {
        let command = CustomCommand::parse("review", "Review $ARGUMENTS");
        vec![command.expect("a command without frontmatter reads")]
    }

    fn kind(turn: &Turn<'_>) -> String {
        match turn {
            Turn::Command { command, args } => format!("command {} [{args}]", command.name),
            Turn::Shell(cmd) => format!("shell [{cmd}]"),
            Turn::Message { text, files } => format!("message [{text}] files={files}"),
        }
    }

    #[test]
    fn a_slash_line_naming_a_custom_command_runs_it_with_its_arguments() {
        let turn = turn_of("  /review src/main.rs ", InputRules::PROMPT, review);
        assert_eq!(kind(&turn), "command review [src/main.rs]");
        assert_eq!(kind(&turn_of("/review", InputRules::CHAT, review)), "command review []");
    }

    #[test]
    fn an_unknown_slash_line_is_a_message_and_commands_load_only_for_slash_lines() {
        let turn = turn_of("/unknown x", InputRules::REPL, review);
        assert_eq!(kind(&turn), "message [/unknown x] files=true");
        let turn = turn_of("review @a.rs", InputRules::REPL, || panic!("loaded for a plain line"));
        assert_eq!(kind(&turn), "message [review @a.rs] files=true");
    }

    #[test]
    fn each_front_end_gets_only_what_its_rules_allow() {
        assert_eq!(kind(&turn_of("!git status ", InputRules::REPL, review)), "shell [git status]");
        assert_eq!(kind(&turn_of("!ls", InputRules::PROMPT, review)), "message [!ls] files=true");
        assert_eq!(
            kind(&turn_of("/review", InputRules::SYSTEM, review)),
            "message [/review] files=false"
        );
        assert_eq!(
            kind(&turn_of("@a.rs", InputRules::CHAT, review)),
            "message [@a.rs] files=false"
        );
    }
}
