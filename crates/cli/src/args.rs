//! Command-line arguments.

use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};
use ferroclaw_core::PermissionMode;

/// ferroclaw: a personal AI agent in one binary.
///
/// Without a subcommand it opens a REPL in the current project; with -p it
/// runs one request and prints the answer.
#[derive(Debug, Parser)]
#[command(name = "ferroclaw", version, about, long_about = None)]
pub(crate) struct Cli {
    /// The request. With -p, read from stdin when absent or "-".
    pub prompt: Option<String>,

    /// Run one request, print the answer, exit (non-interactive).
    #[arg(short = 'p', long = "print")]
    pub print: bool,

    /// Output of -p: the answer as text, a JSON result, or one JSON event per line.
    #[arg(long, value_enum, default_value_t = OutputFormat::Text)]
    pub output_format: OutputFormat,

    /// Input of -p: the prompt as text, or Claude Code's (and its Agent SDK's)
    /// stream-json on stdin: one `{"type":"user","message":{...}}` per line.
    #[arg(long, value_enum, default_value_t = InputFormat::Text)]
    pub input_format: InputFormat,

    /// Event schema of `--output-format stream-json`: ferroclaw's own events,
    /// or Claude Code's (system/init, assistant, user, result) for tools built on it.
    /// Default: ferroclaw's, or Claude Code's with `--input-format stream-json`.
    #[arg(long, value_enum)]
    pub stream_format: Option<StreamFormat>,

    /// Who answers permission prompts: `stdio` sends each one to the program
    /// on stdin/stdout as a `can_use_tool` control request (the Agent SDK's
    /// `canUseTool`); needs `--input-format stream-json`.
    #[arg(long, value_name = "TOOL")]
    pub permission_prompt_tool: Option<String>,

    /// Model as PROVIDER/MODEL, e.g. anthropic/claude-sonnet-4-5, openai/gpt-5, ollama/qwen3;
    /// or an alias: sonnet, opus, haiku, gpt-5, gpt-5-mini, o3.
    #[arg(short = 'm', long)]
    pub model: Option<String>,

    /// Allow rules for this run, comma or space separated: `bash(git status:*)`, `edit`, `read`.
    #[arg(long = "allowedTools", alias = "allowed-tools", value_name = "RULES", num_args = 1..)]
    pub allowed_tools: Vec<String>,

    /// Deny rules for this run, comma or space separated: `bash(rm:*)`, `web_fetch`.
    #[arg(long = "disallowedTools", alias = "disallowed-tools", value_name = "RULES", num_args = 1..)]
    pub disallowed_tools: Vec<String>,

    /// Text added to the end of the system prompt for this run.
    #[arg(long, value_name = "TEXT")]
    pub append_system_prompt: Option<String>,

    /// A further folder the file tools may touch (repeatable).
    #[arg(long, value_name = "DIR", num_args = 1..)]
    pub add_dir: Vec<PathBuf>,

    /// A Claude Code plugin folder whose hooks run, as `claude --plugin-dir`
    /// (repeatable).
    #[arg(long, value_name = "DIR")]
    pub plugin_dir: Vec<PathBuf>,

    /// MCP servers for this run, as `claude --mcp-config`: a JSON file or
    /// JSON text with `mcpServers` (repeat the flag for more; the Agent SDK's
    /// `mcpServers`).
    #[arg(long, value_name = "FILE|JSON")]
    pub mcp_config: Vec<String>,

    /// Start only the servers of --mcp-config, none from config.toml or .mcp.json.
    #[arg(long)]
    pub strict_mcp_config: bool,

    /// Continue the most recent conversation in this project.
    #[arg(short = 'c', long = "continue")]
    pub continue_: bool,

    /// Resume a conversation by id (or unique id prefix); without an id, pick
    /// one from a list of recent conversations.
    #[arg(short = 'r', long, value_name = "ID", num_args = 0..=1, default_missing_value = "")]
    pub resume: Option<String>,

    /// Stop after this many model round-trips for one request.
    #[arg(long, value_name = "N")]
    pub max_turns: Option<u32>,

    /// Work in this folder instead of the current one.
    #[arg(long, value_name = "DIR")]
    pub cwd: Option<PathBuf>,

    /// default | accept-edits | bypass | plan.
    #[arg(long, value_name = "MODE")]
    pub permission_mode: Option<PermissionMode>,

    /// Run every tool call without asking (deny rules still apply); Claude
    /// Code's `--dangerously-skip-permissions` is the same flag.
    #[arg(short = 'y', long, alias = "dangerously-skip-permissions")]
    pub yes: bool,

    /// More logging on stderr (-v info, -vv debug); or set FERROCLAW_LOG.
    #[arg(short = 'v', long, action = clap::ArgAction::Count)]
    pub verbose: u8,

    #[command(subcommand)]
    pub command: Option<Command>,
}

/// Formats of `-p` output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum OutputFormat {
    Text,
    Json,
    StreamJson,
}

/// Formats of `-p` input.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum InputFormat {
    Text,
    StreamJson,
}

/// Event schemas of `--output-format stream-json`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum StreamFormat {
    /// One `AgentEvent` per line (`text_delta`, `tool_call_started`, ...).
    Ferroclaw,
    /// Claude Code's schema: `system`/`init`, `assistant`, `user`, `result`.
    Claude,
}

impl Cli {
    /// Parses the command line. With `-p`, what follows is the prompt, never a
    /// subcommand: `ferroclaw -p status` asks the model about "status".
    pub(crate) fn parse_args() -> Cli {
        Cli::parse_from_args(
            std::env::args_os().map(|a| a.to_string_lossy().into_owned()).collect(),
        )
    }

    /// [`Cli::parse_args`] for given arguments (the first is the program name).
    pub(crate) fn parse_from_args(args: Vec<String>) -> Cli {
        // Claude Code's flags ferroclaw lacks: left out with a warning, or
        // the run stops saying why (see `claude_flags`).
        let args = match crate::claude_flags::screen(args) {
            Ok((args, warnings)) => {
                for warning in warnings {
                    eprintln!("ferroclaw: {warning}");
                }
                args
            }
            Err(why) => {
                eprintln!("ferroclaw: {why}");
                std::process::exit(2);
            }
        };
        let first = Cli::try_parse_from(&args);
        if let Ok(cli) = &first
            && !(cli.print && cli.prompt.is_none() && cli.command.is_some())
        {
            return first.unwrap_or_else(|e| e.exit());
        }
        if args.iter().skip(1).any(|a| a == "-p" || a == "--print") {
            let command = <Cli as clap::CommandFactory>::command();
            let names: Vec<String> =
                command.get_subcommands().map(|c| c.get_name().to_string()).collect();
            // Move the word read as a subcommand behind `--`, where it is the prompt.
            for (i, arg) in args.iter().enumerate().skip(1) {
                if !names.contains(arg) {
                    continue;
                }
                let mut moved = args.clone();
                let word = moved.remove(i);
                moved.extend(["--".to_string(), word]);
                if let Ok(reparsed) = Cli::try_parse_from(&moved)
                    && reparsed.command.is_none()
                {
                    return reparsed;
                }
            }
        }
        first.unwrap_or_else(|e| e.exit())
    }

    /// The event schema in force: as given, else Claude Code's when stdin
    /// speaks Claude Code's stream-json (the Agent SDK reads only that).
    pub(crate) fn stream_format(&self) -> StreamFormat {
        match (self.stream_format, self.input_format) {
            (Some(format), _) => format,
            (None, InputFormat::StreamJson) => StreamFormat::Claude,
            (None, InputFormat::Text) => StreamFormat::Ferroclaw,
        }
    }

    /// Allow and deny rules given with `--allowedTools` / `--disallowedTools`.
    pub(crate) fn rules(&self) -> (Vec<String>, Vec<String>) {
        (split_rules(&self.allowed_tools), split_rules(&self.disallowed_tools))
    }
}

/// Rule strings from flag values: separated by commas or spaces, except
/// inside parentheses (`bash(git status:*)` stays one rule).
pub(crate) fn split_rules(values: &[String]) -> Vec<String> {
    let mut rules = Vec::new();
    for value in values {
        let mut depth = 0usize;
        let mut current = String::new();
        for c in value.chars() {
            match c {
                '(' => depth += 1,
                ')' => depth = depth.saturating_sub(1),
                _ => {}
            }
            if depth == 0 && (c == ',' || c.is_whitespace()) {
                if !current.trim().is_empty() {
                    rules.push(current.trim().to_string());
                }
                current.clear();
            } else {
                current.push(c);
            }
        }
        if !current.trim().is_empty() {
            rules.push(current.trim().to_string());
        }
    }
    rules
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Write a commented config to $FERROCLAW_HOME/config.toml.
    Init {
        /// Overwrite an existing config.
        #[arg(long)]
        force: bool,
    },
    /// Check the setup: config, provider keys, sandbox support.
    Doctor,
    /// List this project's last session's checkpoints, or rewind its code and/or conversation.
    Rewind(crate::rewind_cmd::RewindArgs),
    /// List or show saved conversations.
    Sessions {
        #[command(subcommand)]
        action: SessionsAction,
    },
    /// Print this project's task board (.agent/tasks/).
    Tasks,
    /// Print this project's git worktrees (.agent/worktrees/) and their latest events.
    Worktrees,
    /// Print this project's agent team (.agent/team/): members, status, unread messages.
    Team,
    /// Serve editors over ACP (Agent Client Protocol) on stdin/stdout, e.g.
    /// Zed: "agent_servers": {"ferroclaw": {"command": "ferroclaw", "args": ["acp"]}}.
    /// Takes the REPL's session flags, before or after `acp` (`--model`,
    /// `--allowedTools`, `--permission-mode`, ...).
    Acp {
        /// Session flags, as the REPL takes them.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, value_name = "FLAGS")]
        flags: Vec<String>,
    },
    /// MCP servers: list, get, add, remove; or serve ferroclaw's tools.
    Mcp {
        #[command(subcommand)]
        action: crate::mcp_cmd::McpAction,
    },
    /// Print the system prompt layer by layer, with each layer's size in tokens.
    Context {
        /// Print only the prompt, exactly as sent.
        #[arg(long)]
        raw: bool,
    },
    /// Skills: list, show one, or check every skill file.
    Skills {
        #[command(subcommand)]
        action: crate::skills_cmd::SkillsAction,
    },
    /// Local models: list, pull from the catalogue or a URL, import a GGUF file, remove.
    Model {
        #[command(subcommand)]
        action: crate::model_cmd::ModelAction,
    },
    /// Run the always-on assistant: web chat, OpenAI API, Telegram, cron, heartbeat.
    Gateway {
        #[command(flatten)]
        serve: crate::gateway_cmd::ServeFlags,
        #[command(subcommand)]
        action: Option<crate::gateway_cmd::GatewayAction>,
    },
    /// Approve or list senders who asked to talk to the gateway (DM pairing).
    Pairing {
        #[command(subcommand)]
        action: crate::pairing_cmd::PairingAction,
    },
    /// Scheduled jobs the gateway runs: list, add, remove, run now.
    Cron {
        #[command(subcommand)]
        action: crate::cron_cmd::CronAction,
    },
    /// The gateway, its chat sessions and cron jobs.
    Status,
    /// Trust this project's own settings (.agent/config.toml, .mcp.json, .claude/settings*.json hooks), or list/revoke trust.
    Trust {
        /// List trusted projects.
        #[arg(long, conflicts_with = "revoke")]
        list: bool,
        /// Stop trusting this project.
        #[arg(long)]
        revoke: bool,
    },
    /// Measure a model: `eval tools` runs twenty small tool-use tasks.
    Eval {
        #[command(subcommand)]
        action: crate::eval_cmd::EvalAction,
    },
    /// Build or update this project's code graph (symbols and calls, tree-sitter into SQLite).
    Index,
    /// Ask the code graph: outline, find, definition, callers, callees, impact.
    Code {
        #[command(subcommand)]
        action: crate::code_cmd::CodeAction,
    },
}

#[derive(Debug, Subcommand)]
pub(crate) enum SessionsAction {
    /// This project's conversations, newest first.
    List,
    /// Print a conversation.
    Show {
        /// Session id or unique prefix.
        id: String,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Cli {
        Cli::parse_from_args(args.iter().map(ToString::to_string).collect())
    }

    #[test]
    fn with_print_a_subcommand_word_is_the_prompt() {
        for word in ["status", "tasks", "doctor", "context"] {
            let cli = parse(&["ferroclaw", "-p", word]);
            assert!(cli.command.is_none(), "{word}");
            assert_eq!(cli.prompt.as_deref(), Some(word));
        }
        let cli = parse(&["ferroclaw", "-p", "status", "--output-format", "json"]);
        assert_eq!(cli.prompt.as_deref(), Some("status"));
        assert_eq!(cli.output_format, OutputFormat::Json);
        assert!(parse(&["ferroclaw", "status"]).command.is_some(), "without -p it is a command");
        assert_eq!(parse(&["ferroclaw", "-p", "why?"]).prompt.as_deref(), Some("why?"));
    }

    #[test]
    fn rules_split_on_commas_and_spaces_but_not_inside_parentheses() {
        let cli = parse(&[
            "ferroclaw",
            "--allowedTools",
            "bash(git status:*),edit",
            "read",
            "--disallowedTools",
            "web_fetch bash(rm -rf:*)",
        ]);
        assert_eq!(cli.rules().0, ["bash(git status:*)", "edit", "read"]);
        assert_eq!(cli.rules().1, ["web_fetch", "bash(rm -rf:*)"]);
    }

    #[test]
    fn resume_without_an_id_asks_for_a_pick() {
        assert_eq!(parse(&["ferroclaw", "-r"]).resume.as_deref(), Some(""));
        assert_eq!(parse(&["ferroclaw", "--resume", "abc"]).resume.as_deref(), Some("abc"));
    }
}
