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
pub struct Cli {
    /// The request. With -p, read from stdin when absent or "-".
    pub prompt: Option<String>,

    /// Run one request, print the answer, exit (non-interactive).
    #[arg(short = 'p', long = "print")]
    pub print: bool,

    /// Output of -p: the answer as text, a JSON result, or one JSON event per line.
    #[arg(long, value_enum, default_value_t = OutputFormat::Text)]
    pub output_format: OutputFormat,

    /// Model as PROVIDER/MODEL, e.g. anthropic/claude-sonnet-4-5, openai/gpt-5, ollama/qwen3.
    #[arg(short = 'm', long)]
    pub model: Option<String>,

    /// Continue the most recent conversation in this project.
    #[arg(short = 'c', long = "continue")]
    pub continue_: bool,

    /// Resume a conversation by id (or unique id prefix).
    #[arg(short = 'r', long, value_name = "ID")]
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

    /// Run every tool call without asking (deny rules still apply).
    #[arg(short = 'y', long)]
    pub yes: bool,

    /// More logging on stderr (-v info, -vv debug); or set FERROCLAW_LOG.
    #[arg(short = 'v', long, action = clap::ArgAction::Count)]
    pub verbose: u8,

    #[command(subcommand)]
    pub command: Option<Command>,
}

/// Formats of `-p` output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OutputFormat {
    Text,
    Json,
    StreamJson,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Write a commented config to $FERROCLAW_HOME/config.toml.
    Init {
        /// Overwrite an existing config.
        #[arg(long)]
        force: bool,
    },
    /// Check the setup: config, provider keys, sandbox support.
    Doctor,
    /// List or show saved conversations.
    Sessions {
        #[command(subcommand)]
        action: SessionsAction,
    },
    /// Print this project's task board (.agent/tasks/).
    Tasks,
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
    /// Measure a model: `eval tools` runs twenty small tool-use tasks.
    Eval {
        #[command(subcommand)]
        action: crate::eval_cmd::EvalAction,
    },
}

#[derive(Debug, Subcommand)]
pub enum SessionsAction {
    /// This project's conversations, newest first.
    List,
    /// Print a conversation.
    Show {
        /// Session id or unique prefix.
        id: String,
    },
}
