//! The interactive REPL: line editing with history, multi-line input (end a
//! line with `\` or open a ``` fence), slash commands, approvals, Ctrl-C.

use std::sync::Arc;

use async_trait::async_trait;
use ferroclaw_core::session::{RESUME_TAIL_BYTES, SessionLog};
use ferroclaw_core::{
    Agent, Approval, Approver, Config, PermissionMode, PlanVerdict, SessionStore, pricing,
};
use ferroclaw_protocol::ToolCall;
use rustyline::completion::Completer;
use rustyline::error::ReadlineError;
use rustyline::highlight::Highlighter;
use rustyline::hint::Hinter;
use rustyline::history::FileHistory;
use rustyline::validate::{ValidationContext, ValidationResult, Validator};
use rustyline::{Context, Editor, Helper};
use tokio::sync::mpsc::unbounded_channel;
use tokio_util::sync::CancellationToken;

use crate::args::Cli;
use crate::exit;
use crate::render::{RenderOptions, render};
use crate::setup::{Resume, SetupError, open_agent};

/// Slash commands and what they do, for `/help` and completion.
const COMMANDS: &[(&str, &str)] = &[
    ("/help", "this list"),
    ("/new", "start a new conversation; this one is archived to memory"),
    ("/clear", "same as /new"),
    ("/model", "show the model, or switch: /model PROVIDER/MODEL"),
    ("/sessions", "this project's conversations"),
    ("/resume", "continue a conversation: /resume ID (latest without ID)"),
    ("/usage", "tokens and cost of this session"),
    ("/plan", "plan mode on/off: read-only tools until you approve a plan"),
    ("/todos", "the model's todo list"),
    ("/compact", "summarise the conversation to free context: /compact [what to keep]"),
    ("/jobs", "background jobs and their status"),
    ("/mcp", "MCP servers and prompts: /mcp__SERVER__PROMPT ARGS"),
    ("/exit", "leave (also /quit, Ctrl-D)"),
];

/// Runs the REPL until the user leaves; returns the exit code.
pub async fn run(cli: &Cli, config: Config) -> Result<i32, SetupError> {
    let approver: Arc<dyn Approver> =
        Arc::new(TerminalApprover { workspace: config.workspace.clone(), ..Default::default() });
    let opened = open_agent(&config, &Resume::from_cli(cli), approver.clone())?;
    let mut agent = opened.agent;
    let hooks = crate::mcp_cmd::terminal_hooks(agent.provider.clone(), agent.model.clone());
    let mcp = crate::mcp_cmd::start_hub(&config, hooks).await;
    mcp.register_tools(&mut agent.tools);
    agent.turn_hook = Some(Arc::new(crate::mcp_cmd::McpRefresh(mcp.clone())));
    print_banner(&agent, opened.resumed, opened.skipped_bytes);
    let mut editor = new_editor(&config)?;
    let mut first = cli.prompt.clone();
    let mut interrupts = 0;
    loop {
        let line = match first.take() {
            Some(p) => Ok(p),
            None => {
                show_running_jobs(&agent);
                let (result, ed) = tokio::task::spawn_blocking(move || {
                    let r = editor.readline("\x1b[1m›\x1b[0m ");
                    (r, editor)
                })
                .await
                .map_err(|e| SetupError::Other(format!("line editor crashed: {e}")))?;
                editor = ed;
                result
            }
        };
        let line = match line {
            Ok(line) => line,
            Err(ReadlineError::Interrupted) => {
                interrupts += 1;
                if interrupts >= 2 {
                    break;
                }
                eprintln!("\x1b[2m(press Ctrl-C again or Ctrl-D to exit)\x1b[0m");
                continue;
            }
            Err(ReadlineError::Eof) => break,
            Err(e) => return Err(SetupError::Other(format!("cannot read input: {e}"))),
        };
        interrupts = 0;
        let input = line.replace("\\\n", "\n");
        let input = input.trim();
        if input.is_empty() {
            continue;
        }
        let _ = editor.add_history_entry(input);
        let _ = editor.append_history(&history_path(&config));
        if let Some(result) = crate::mcp_cmd::repl_command(input, &mcp).await {
            match result {
                Ok(Some(prompt)) => run_request(&mut agent, &prompt).await,
                Ok(None) => {}
                Err(e) => eprintln!("\x1b[31m{e}\x1b[0m"),
            }
            continue;
        }
        if let Some(focus) = input.strip_prefix("/compact") {
            compact_now(&mut agent, focus.trim()).await;
            continue;
        }
        if input.starts_with('/') {
            match command(input, &mut agent, &config, &approver) {
                Ok(true) => continue,
                Ok(false) => break,
                Err(e) => {
                    eprintln!("\x1b[31m{e}\x1b[0m");
                    continue;
                }
            }
        }
        run_request(&mut agent, input).await;
    }
    mcp.shutdown().await;
    agent.finish().await;
    Ok(exit::OK)
}

/// One request with live rendering; Ctrl-C cancels it and keeps the REPL.
async fn run_request(agent: &mut Agent, input: &str) {
    let (tx, rx) = unbounded_channel();
    let renderer = tokio::spawn(render(
        rx,
        agent.model_spec.clone(),
        RenderOptions { answer: true, status: true },
    ));
    let cancel = CancellationToken::new();
    let watcher = crate::interrupt::watch(cancel.clone());
    let message = ferroclaw_core::mentions::user_message(input, &agent.workspace);
    agent.run(message, &tx, &cancel).await;
    watcher.abort();
    drop(tx);
    let _ = renderer.await;
    println!();
}

/// Handles a slash command; `Ok(false)` means leave.
fn command(
    input: &str,
    agent: &mut Agent,
    config: &Config,
    approver: &Arc<dyn Approver>,
) -> Result<bool, String> {
    let (name, arg) = input.split_once(char::is_whitespace).unwrap_or((input, ""));
    let arg = arg.trim();
    let store = SessionStore::new(&config.home);
    match name {
        "/exit" | "/quit" => return Ok(false),
        "/help" => {
            for (c, what) in COMMANDS {
                println!("  {c:<10} {what}");
            }
            println!(
                "  End a line with \\ to continue it; Ctrl-C interrupts a request, twice exits."
            );
        }
        "/clear" | "/new" => {
            crate::archive::spawn(agent, config);
            agent.session =
                store.create(&config.workspace, &agent.model_spec).map_err(|e| e.to_string())?;
            agent.messages.clear();
            println!("new conversation {}", agent.session.meta().id);
        }
        "/model" if arg.is_empty() => println!("{}", agent.model_spec),
        "/model" => {
            let (provider, model) = config.resolve_model(arg).map_err(|e| e.to_string())?;
            agent.provider = ferroclaw_llm::connect(provider);
            agent.model = model;
            agent.model_spec = arg.to_string();
            println!("model: {arg}");
        }
        "/sessions" => crate::sessions::print_list(&store.list(&config.workspace)),
        "/resume" => {
            let path = if arg.is_empty() {
                store.latest(&config.workspace).ok_or("no conversation to resume")?
            } else {
                store.find(&config.workspace, arg).map_err(|e| e.to_string())?
            };
            let r = SessionLog::resume(&path, RESUME_TAIL_BYTES).map_err(|e| e.to_string())?;
            println!("resumed {} ({} messages)", r.log.meta().id, r.messages.len());
            agent.session = r.log;
            agent.messages = r.messages;
            let _ = approver;
        }
        "/plan" => {
            let now = if agent.permissions.mode() == PermissionMode::Plan {
                PermissionMode::Default
            } else {
                PermissionMode::Plan
            };
            agent.permissions.set_mode(now);
            println!("permission mode: {}", ferroclaw_core::plan::mode_name(now));
        }
        "/jobs" => {
            let jobs = agent.jobs.as_ref().map(|j| j.jobs()).unwrap_or_default();
            if jobs.is_empty() {
                println!("no background jobs");
            }
            for j in jobs {
                println!(
                    "{}  {:<9} {:>6.1}s  {}",
                    j.id,
                    format!("{:?}", j.status).to_lowercase(),
                    j.elapsed.as_secs_f64(),
                    j.command
                );
            }
        }
        "/todos" => {
            let list = agent.todos.render();
            println!("{}", if list.is_empty() { "no todos" } else { &list });
        }
        "/usage" => {
            let u = agent.total_usage;
            let cost = pricing::cost(&agent.model_spec, &u)
                .map(|c| format!(", ${c:.4}"))
                .unwrap_or_default();
            println!(
                "{} input, {} output, {} cache read, {} cache write tokens{cost}",
                u.input_tokens, u.output_tokens, u.cache_read_tokens, u.cache_write_tokens
            );
        }
        other => {
            let names: Vec<&str> = COMMANDS.iter().map(|(c, _)| *c).collect();
            return Err(format!("unknown command {other}; commands: {}", names.join(" ")));
        }
    }
    Ok(true)
}

/// `/compact [focus]`: summarise the history now.
async fn compact_now(agent: &mut Agent, focus: &str) {
    let (tx, rx) = unbounded_channel();
    let renderer = tokio::spawn(render(
        rx,
        agent.model_spec.clone(),
        RenderOptions { answer: false, status: true },
    ));
    let cancel = CancellationToken::new();
    let watcher = crate::interrupt::watch(cancel.clone());
    let focus = (!focus.is_empty()).then_some(focus);
    match agent.compact(focus, &tx, &cancel).await {
        Ok(()) => eprintln!(
            "compacted: {} messages now, the full transcript stays in {}",
            agent.messages.len(),
            agent.session.path().display()
        ),
        Err(e) => eprintln!("\x1b[31m{e}\x1b[0m"),
    }
    watcher.abort();
    drop(tx);
    let _ = renderer.await;
}

/// One line above the prompt while background jobs run.
fn show_running_jobs(agent: &Agent) {
    let running = agent.jobs.as_ref().map(|j| j.running()).unwrap_or_default();
    if !running.is_empty() {
        let names: Vec<String> = running
            .iter()
            .map(|j| format!("{} {}", j.id, crate::render::shorten(&j.command, 30)))
            .collect();
        eprintln!(
            "\x1b[2m⧗ {} background job{} running: {} (/jobs)\x1b[0m",
            running.len(),
            if running.len() == 1 { "" } else { "s" },
            names.join(", ")
        );
    }
}

fn print_banner(agent: &Agent, resumed: bool, skipped_bytes: u64) {
    let what = if resumed { "resumed" } else { "session" };
    eprintln!(
        "\x1b[1mferroclaw\x1b[0m {} · {} · {what} {} · /help for commands",
        env!("CARGO_PKG_VERSION"),
        agent.model_spec,
        agent.session.meta().id
    );
    if resumed {
        eprintln!(
            "\x1b[2m{} messages loaded{}\x1b[0m",
            agent.messages.len(),
            if skipped_bytes > 0 {
                format!(
                    "; {:.1} MB of older transcript left out of the context (still on disk)",
                    skipped_bytes as f64 / 1e6
                )
            } else {
                String::new()
            }
        );
    }
}

fn history_path(config: &Config) -> std::path::PathBuf {
    config.home.join("history.txt")
}

fn new_editor(config: &Config) -> Result<Editor<ReplHelper, FileHistory>, SetupError> {
    let mut editor = Editor::<ReplHelper, FileHistory>::new()
        .map_err(|e| SetupError::Other(format!("cannot open the terminal: {e}")))?;
    editor.set_helper(Some(ReplHelper));
    let _ = std::fs::create_dir_all(&config.home);
    let _ = editor.load_history(&history_path(config));
    Ok(editor)
}

/// Line-editor behaviour: multi-line input and slash-command completion.
struct ReplHelper;

impl Validator for ReplHelper {
    fn validate(&self, ctx: &mut ValidationContext) -> rustyline::Result<ValidationResult> {
        let input = ctx.input();
        let open_fence = input.matches("```").count() % 2 == 1;
        Ok(if input.ends_with('\\') || open_fence {
            ValidationResult::Incomplete
        } else {
            ValidationResult::Valid(None)
        })
    }
}

impl Completer for ReplHelper {
    type Candidate = String;
    fn complete(
        &self,
        line: &str,
        pos: usize,
        _ctx: &Context<'_>,
    ) -> rustyline::Result<(usize, Vec<String>)> {
        if !line.starts_with('/') || line[..pos].contains(' ') {
            return Ok((0, Vec::new()));
        }
        Ok((
            0,
            COMMANDS
                .iter()
                .filter(|(c, _)| c.starts_with(&line[..pos]))
                .map(|(c, _)| c.to_string())
                .collect(),
        ))
    }
}

impl Hinter for ReplHelper {
    type Hint = String;
}
impl Highlighter for ReplHelper {}
impl Helper for ReplHelper {}

/// Asks on the terminal: yes, no (with an optional reason), or always. The
/// renderer prints the question (it arrives as an event, in order with the
/// tool lines); this only reads the answer. One question at a time: parallel
/// sub-agents wait their turn.
#[derive(Default)]
pub struct TerminalApprover {
    asking: tokio::sync::Mutex<()>,
    /// Where "always" rules are scoped (the file's folder for edits).
    pub workspace: std::path::PathBuf,
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
        let (word, reason) = word_and_reason(&read_answer().await);
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
        let (word, reason) = word_and_reason(&read_answer().await);
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
