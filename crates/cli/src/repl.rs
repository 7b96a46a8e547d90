//! The interactive REPL: line editing with history, multi-line input (end a
//! line with `\` or open a ``` fence), slash commands, approvals, Esc and
//! Ctrl-C, `!command` to run a shell command, `@file` to include a file.

use std::sync::{Arc, PoisonError};

use ferroclaw_core::commands::{self, CustomCommand};
use ferroclaw_core::session::{RESUME_TAIL_BYTES, SessionError, SessionLog};
use ferroclaw_core::{Agent, Approver, Config, PermissionMode, SessionStore, pricing};
use rustyline::Editor;
use rustyline::error::ReadlineError;
use rustyline::history::FileHistory;
use tokio::sync::mpsc::unbounded_channel;
use tokio_util::sync::CancellationToken;

use crate::args::Cli;
use crate::exit;
use crate::keys::{self, KeyWatch};
use crate::line_editor::ReplHelper;
use crate::render::{RenderOptions, render};
use crate::setup::SetupError;
use crate::tool_log::{self, ToolLog};
use ferroclaw_runtime::team::TeamRunner;
use ferroclaw_runtime::{InputRules, Resume, Runtime, Turn};

/// Slash commands and what they do, for `/help` and completion.
pub(crate) const COMMANDS: &[(&str, &str)] = &[
    ("/help", "this list"),
    ("/new", "start a new conversation; this one is archived to memory"),
    ("/clear", "same as /new"),
    ("/model", "show the model, or switch: /model PROVIDER/MODEL"),
    ("/sessions", "this project's conversations, 20 a page: /sessions [PAGE]"),
    ("/expand", "the whole output of the last tool call"),
    ("/resume", "continue a conversation: /resume ID (latest without ID)"),
    ("/usage", "tokens and cost of this session"),
    ("/cost", "same as /usage (Claude Code's name)"),
    ("/plan", "plan mode on/off: read-only tools until you approve a plan"),
    ("/todos", "the model's todo list"),
    ("/compact", "summarise the conversation to free context: /compact [what to keep]"),
    ("/rewind", "checkpoints of this session; /rewind N [code|conversation|both], /rewind undo"),
    ("/jobs", "background jobs and their status"),
    ("/mcp", "MCP servers and prompts: /mcp__SERVER__PROMPT ARGS"),
    ("/hooks", "the hooks in force, in the order they run"),
    ("/team", "the agent team: teammates, status, unread messages"),
    ("/inbox", "the lead's unread team messages (the model gets them at its next call)"),
    ("/exit", "leave (also /quit, Ctrl-D)"),
];

/// `/hooks`: each hook in force (event, matcher, command, file), and a
/// note when an untrusted project's hooks are skipped.
fn show_hooks(agent: &Agent, config: &Config) {
    let hooks = agent.hooks().list();
    if hooks.is_empty() {
        println!("no hooks (see docs/editors-and-hooks.md)");
    }
    for h in hooks {
        let closed = if h.fail_closed { ", fail_closed" } else { "" };
        println!(
            "  {} [{}] {} (timeout {}s{closed}; {})",
            h.event.name(),
            h.matcher.describe(),
            h.command,
            h.timeout_secs,
            h.source.display()
        );
    }
    for line in config.ignored.iter().filter(|l| l.starts_with("hooks ")) {
        println!("  skipped until you trust this project: {line}");
    }
}

/// True when `line` names a built-in command (they win over custom ones).
fn is_builtin(line: &str) -> bool {
    let name = line.split_whitespace().next().unwrap_or(line);
    name == "/quit" || COMMANDS.iter().any(|(c, _)| *c == name)
}

/// Sessions per page of `/sessions` and of the `--resume` picker.
const SESSIONS_PAGE: usize = 20;
/// Exchanges shown when a conversation is resumed.
const RESUME_SHOWN_EXCHANGES: usize = 3;

/// What the REPL keeps between requests besides the agent.
struct Repl {
    answers: Arc<keys::Answers>,
    tools: Arc<ToolLog>,
    /// Output of `!command`s, given to the model with the next request.
    pending: Vec<String>,
    /// Typed during the last request, put back into the next prompt.
    typed_ahead: String,
    /// The lead's team, when teams are on.
    team: Option<Arc<TeamRunner>>,
}

/// Runs the REPL until the user leaves; returns the exit code.
pub(crate) async fn run(cli: &Cli, config: Config) -> Result<i32, SetupError> {
    let answers = Arc::new(keys::Answers::default());
    let approver: Arc<dyn Approver> =
        Arc::new(crate::approver::TerminalApprover::new(answers.clone(), config.workspace.clone()));
    let typed = Arc::new(std::sync::Mutex::new(String::new()));
    let mut editor = new_editor(&config, typed.clone())?;
    let resume = match crate::setup::resume_from_cli(cli) {
        Resume::Pick => {
            let (picked, ed) = pick_session(&config, editor).await?;
            editor = ed;
            match picked {
                Ok(resume) => resume,
                // Ctrl-C or Ctrl-D at the question: nothing is opened.
                Err(code) => return Ok(code),
            }
        }
        other => other,
    };
    let (hooks, sampling_model) = crate::mcp_cmd::terminal_hooks();
    let runtime = Runtime::load(config.clone(), hooks).await?;
    let opened = runtime.open(resume, approver.clone(), crate::setup::session_options(cli))?;
    let mut agent = opened.agent;
    sampling_model.set(agent.provider().clone(), agent.model().to_string());
    let mcp = runtime.mcp().clone();
    let team = crate::team::attach(&runtime, &mut agent)?;
    let mut repl = Repl {
        answers,
        tools: Arc::new(ToolLog::default()),
        pending: Vec::new(),
        typed_ahead: String::new(),
        team,
    };
    agent.map_tools(|tools| tool_log::observe(tools, &repl.tools));
    let wake = crate::team::InboxWake::start(&repl.team, &mut editor, typed);
    print_banner(&agent, opened.resumed, opened.skipped_bytes);
    mention_drafts(&config);
    tokio::spawn(crate::worktrees_cmd::print_events(ferroclaw_team::worktree::subscribe()));
    let mut first = cli.prompt.clone();
    let mut interrupts = 0;
    loop {
        let line = match first.take() {
            Some(p) => Ok(p),
            // A line typed and ended with Enter while the last request ran.
            None if repl.typed_ahead.contains('\n') => {
                let typed = std::mem::take(&mut repl.typed_ahead);
                let (line, rest) = typed.split_once('\n').unwrap_or((&typed, ""));
                repl.typed_ahead = rest.to_string();
                eprintln!("{}{line}", prompt_marker(&agent));
                Ok(line.to_string())
            }
            None => {
                show_running_jobs(&agent);
                show_team(&repl);
                let prompt = prompt_marker(&agent);
                let initial = std::mem::take(&mut repl.typed_ahead);
                let wait = wake.as_ref().map(|w| {
                    initial.clone_into(&mut w.line.lock().unwrap_or_else(PoisonError::into_inner));
                    w.wait()
                });
                let (result, ed) = tokio::task::spawn_blocking(move || {
                    if let Some(wait) = &wait {
                        wait.begin();
                    }
                    let r = editor.readline_with_initial(&prompt, (&initial, ""));
                    if let Some(wait) = &wait {
                        wait.end();
                    }
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
            Err(ReadlineError::Interrupted)
                if wake.as_ref().is_some_and(super::team::InboxWake::take_woken) =>
            {
                // A teammate's message came while the prompt was empty:
                // the lead answers it now.
                interrupts = 0;
                if let Some(team) = repl.team.clone()
                    && let Some((text, shown)) = crate::team::take_inbox(&team)
                {
                    let style = crate::style::Style::for_stderr();
                    for line in shown {
                        eprintln!("{}", style.bold(&line));
                    }
                    run_request(&mut agent, &mut repl, Request::Inbox(text)).await;
                }
                continue;
            }
            Err(ReadlineError::Interrupted) => {
                interrupts += 1;
                if interrupts >= 2 {
                    break;
                }
                eprintln!(
                    "{}",
                    crate::style::Style::for_stderr().dim("(press Ctrl-C again or Ctrl-D to exit)")
                );
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
                Ok(Some(prompt)) => {
                    run_request(&mut agent, &mut repl, Request::Typed(&prompt)).await;
                }
                Ok(None) => {}
                Err(e) => eprintln!("{}", crate::style::Style::for_stderr().red(&e.clone())),
            }
            continue;
        }
        if let Some(arg) = input.strip_prefix("/rewind") {
            if let Err(e) = crate::rewind_cmd::repl(&mut agent, arg.trim()).await {
                eprintln!("{}", crate::style::Style::for_stderr().red(&e));
            }
            continue;
        }
        if let Some(focus) = input.strip_prefix("/compact") {
            compact_now(&mut agent, &repl, focus.trim()).await;
            continue;
        }
        // A built-in command wins over a custom one of the same name.
        let rules = InputRules { custom_commands: !is_builtin(input), ..InputRules::REPL };
        match runtime.turn(input, rules) {
            Turn::Shell(command) => {
                shell_command(&mut agent, &mut repl, command).await;
                continue;
            }
            Turn::Command { command, args } => {
                let request = Request::Command(&runtime, &command, args);
                run_request(&mut agent, &mut repl, request).await;
                continue;
            }
            Turn::Message { .. } => {}
        }
        if input.starts_with('/') {
            match command(input, &mut agent, &runtime, &repl) {
                Ok(true) => continue,
                Ok(false) => break,
                Err(e) => {
                    eprintln!("{}", crate::style::Style::for_stderr().red(&e.clone()));
                    continue;
                }
            }
        }
        run_request(&mut agent, &mut repl, Request::Typed(input)).await;
    }
    // Teammates stop with the REPL; their status stays for `--continue`.
    if let Some(team) = &repl.team {
        team.stop_all().await;
    }
    runtime.shutdown().await;
    agent.finish().await;
    Ok(exit::OK)
}

/// The prompt: `›`, marked when plan mode (or another mode than default) is on.
fn prompt_marker(agent: &Agent) -> String {
    prompt_for(agent.permissions().mode())
}

fn prompt_for(mode: PermissionMode) -> String {
    match mode {
        PermissionMode::Plan => "\x1b[36m⏸ plan\x1b[0m \x1b[1m›\x1b[0m ".to_string(),
        PermissionMode::AcceptEdits => {
            "\x1b[35m⏵⏵ accept edits\x1b[0m \x1b[1m›\x1b[0m ".to_string()
        }
        PermissionMode::Bypass => "\x1b[31m⏵⏵ bypass\x1b[0m \x1b[1m›\x1b[0m ".to_string(),
        PermissionMode::Default => "\x1b[1m›\x1b[0m ".to_string(),
    }
}

fn render_options(agent: &Agent, repl: &Repl, answer: bool) -> RenderOptions {
    RenderOptions {
        answer,
        status: true,
        notices: true,
        tools: Some(repl.tools.clone()),
        workspace: agent.workspace().to_path_buf(),
        expand_hint: " (/expand)",
        question_shown: Some(repl.answers.shown.clone()),
    }
}

/// What a request runs.
enum Request<'a> {
    /// A line the user typed (`@file`s included, `!command` output before it).
    Typed(&'a str),
    /// A custom command with its arguments.
    Command(&'a Runtime, &'a CustomCommand, &'a str),
    /// The lead's unread team messages, as an `<inbox>` block.
    Inbox(String),
}

/// One request with live rendering; Esc or Ctrl-C cancels it and keeps the REPL.
async fn run_request(agent: &mut Agent, repl: &mut Repl, request: Request<'_>) {
    let (tx, rx) = unbounded_channel();
    let renderer =
        tokio::spawn(render(rx, agent.model_spec().to_string(), render_options(agent, repl, true)));
    let cancel = CancellationToken::new();
    let watcher = crate::interrupt::watch(cancel.clone());
    let keys = KeyWatch::start(cancel.clone(), repl.answers.clone());
    let typed = match &request {
        Request::Typed(input) | Request::Command(_, _, input) => Some(*input),
        Request::Inbox(_) => None,
    };
    if let Some(typed) = typed {
        crate::attach::warn_missing_files(typed, agent.workspace());
    }
    for block in typed.map(|t| crate::attach::text_files(t, agent.workspace())).unwrap_or_default()
    {
        let path = block.split('"').nth(1).unwrap_or_default();
        let lines = block.lines().count().saturating_sub(2);
        eprintln!(
            "{}",
            crate::style::Style::for_stderr()
                .dim(&format!("⎘ {path} ({lines} line{})", if lines == 1 { "" } else { "s" }))
        );
    }
    if let Some(team) = &repl.team {
        team.set_events(Some(tx.clone()));
    }
    match request {
        Request::Typed(input) => {
            let mut text = input.to_string();
            if !repl.pending.is_empty() {
                text = format!("{}\n\n{input}", repl.pending.join("\n\n"));
                repl.pending.clear();
            }
            let message = crate::attach::user_message(&text, agent.workspace());
            agent.run(message, &tx, &cancel).await;
        }
        Request::Command(runtime, cmd, args) => {
            let user_message = crate::attach::user_message;
            runtime.run_command(agent, cmd, args, user_message, &tx, &cancel).await;
        }
        // Not `@file`-expanded: the text is the teammates', not the user's.
        Request::Inbox(text) => {
            agent.run(ferroclaw_protocol::Message::user(text), &tx, &cancel).await;
        }
    }
    if let Some(team) = &repl.team {
        team.set_events(None);
    }
    watcher.abort();
    drop(tx);
    let _ = renderer.await;
    if let Some(keys) = keys {
        repl.typed_ahead = keys.stop();
    }
    println!();
}

/// `!command`: runs a shell command as the bash tool would (sandbox, deny
/// rules, timeout), shows its output, and hands it to the model with the
/// next request. Typed by the user, so it is not asked about.
async fn shell_command(agent: &mut Agent, repl: &mut Repl, command: &str) {
    if command.is_empty() {
        eprintln!("usage: !COMMAND, e.g. !git status");
        return;
    }
    let input = serde_json::json!({ "command": command });
    if let ferroclaw_core::Decision::Deny(reason) =
        agent.permissions().decide("bash", false, &input)
    {
        eprintln!("{}", crate::style::Style::for_stderr().red(&format!("refused: {reason}")));
        return;
    }
    let Some(bash) = agent.tools().get("bash").cloned() else {
        eprintln!("{}", crate::style::Style::for_stderr().red("the bash tool is not available"));
        return;
    };
    let cancel = CancellationToken::new();
    let watcher = crate::interrupt::watch(cancel.clone());
    let ctx = ferroclaw_tools::ToolContext {
        workspace: agent.workspace().to_path_buf(),
        allowed_dirs: agent.allowed_dirs().to_vec(),
        cancel: cancel.clone(),
        call_id: format!("bang-{}", fastrand::u64(..)),
        events: None,
        sandbox: agent.sandbox().clone(),
        reads: Default::default(),
        children: agent.children(),
        open_rules: Default::default(),
    };
    let started = std::time::Instant::now();
    let output = bash.execute(input, &ctx).await;
    watcher.abort();
    let (text, is_error) = match output {
        Ok(out) => (out.joined_text(), out.is_error),
        Err(e) => (e.to_string(), true),
    };
    let head = crate::render::output_head(
        &text,
        is_error,
        started.elapsed().as_millis() as u64,
        " (/expand)",
        crate::style::Style::for_stderr(),
    );
    eprint!("{head}");
    let record = tool_log::Record { output: text.clone(), ..Default::default() };
    repl.tools.put(&ctx.call_id, record);
    repl.pending.push(format!(
        "<bash-input>{command}</bash-input>\n<bash-output>{}</bash-output>",
        text.trim_end()
    ));
}

/// `--resume` without an id: recent sessions, numbered; the user picks one
/// (Enter: the first). A number not listed asks again; Ctrl-C (exit code
/// 130) or Ctrl-D (0) leaves without opening any.
async fn pick_session(
    config: &Config,
    mut editor: Editor<ReplHelper, FileHistory>,
) -> Result<(Result<Resume, i32>, Editor<ReplHelper, FileHistory>), SetupError> {
    let list = SessionStore::new(&config.home).list(&config.workspace);
    if list.is_empty() {
        eprintln!("no earlier conversations in {}; starting a new one", config.workspace.display());
        return Ok((Ok(Resume::New), editor));
    }
    let shown = &list[..list.len().min(SESSIONS_PAGE)];
    // `NN. ` before each line.
    println!("    {}", crate::sessions::header());
    for (i, s) in shown.iter().enumerate() {
        println!("{:>2}. {}", i + 1, crate::sessions::line(s, 4));
    }
    loop {
        let (answer, ed) = tokio::task::spawn_blocking(move || {
            let r = editor.readline("resume which? [1] ");
            (r, editor)
        })
        .await
        .map_err(|e| SetupError::Other(format!("line editor crashed: {e}")))?;
        editor = ed;
        let answer = match answer {
            Ok(answer) => answer,
            Err(ReadlineError::Interrupted) => return Ok((Err(exit::INTERRUPTED), editor)),
            Err(_) => return Ok((Err(exit::OK), editor)),
        };
        let answer = answer.trim();
        let n = if answer.is_empty() { 1 } else { answer.parse::<usize>().unwrap_or(0) };
        match shown.get(n.wrapping_sub(1)) {
            Some(s) => return Ok((Ok(Resume::Id(s.id.clone())), editor)),
            None => eprintln!(
                "no conversation numbered {answer:?}: type 1 to {} (Enter: 1), or Ctrl-C to leave",
                shown.len()
            ),
        }
    }
}

/// Handles a slash command; `Ok(false)` means leave.
fn command(input: &str, agent: &mut Agent, runtime: &Runtime, repl: &Repl) -> Result<bool, String> {
    let config = runtime.config();
    let (name, arg) = input.split_once(char::is_whitespace).unwrap_or((input, ""));
    let arg = arg.trim();
    let store = SessionStore::new(&config.home);
    match name {
        "/exit" | "/quit" => return Ok(false),
        "/help" => {
            for (c, what) in COMMANDS {
                println!("  {c:<10} {what}");
            }
            for c in runtime.custom_commands() {
                let hint = c.argument_hint.as_deref().map(|h| format!(" {h}")).unwrap_or_default();
                println!("  /{}{hint}  {} (custom: {})", c.name, c.description, c.path.display());
            }
            println!(
                "  !COMMAND  run a shell command; its output goes to the model with your next line"
            );
            println!("  @FILE     include a file (text or image) in your request");
            println!(
                "  End a line with \\ to continue it; Esc or Ctrl-C interrupts a request; Ctrl-C twice exits."
            );
        }
        "/hooks" => show_hooks(agent, config),
        "/clear" | "/new" => {
            crate::archive::spawn(agent, config);
            let session =
                store.create(&config.workspace, agent.model_spec()).map_err(|e| e.to_string())?;
            agent.switch_session(session, Vec::new());
            println!("new conversation {}", agent.session().meta().id);
        }
        "/model" if arg.is_empty() => println!("{}", agent.model_spec()),
        "/model" => {
            let spec = crate::model_alias::resolve(arg, config);
            let (provider, model) =
                runtime.provider(&spec).map_err(|e| crate::model_alias::explain(&e))?;
            agent.set_model(provider, model, spec.clone());
            println!("model: {spec}");
        }
        "/sessions" => {
            let page = if arg.is_empty() {
                1
            } else {
                arg.parse().map_err(|_| "usage: /sessions [PAGE]")?
            };
            crate::sessions::print_page(&store.list(&config.workspace), page, SESSIONS_PAGE);
        }
        "/expand" => match repl.tools.last() {
            Some(record) => println!("{}", crate::printable::printable(record.output.trim_end())),
            None => println!("no tool output yet"),
        },
        "/resume" => {
            let path = if arg.is_empty() {
                store.latest(&config.workspace).ok_or("no conversation to resume")?
            } else {
                store.find(&config.workspace, arg).map_err(|e| match e {
                    // Point at the REPL's own list, not the CLI command.
                    SessionError::NotFound { id, dir } => {
                        format!(
                            "no session {id:?} in {} (/sessions lists this project's)",
                            dir.display()
                        )
                    }
                    e => e.to_string(),
                })?
            };
            let r = SessionLog::resume(&path, RESUME_TAIL_BYTES).map_err(|e| e.to_string())?;
            println!("resumed {} ({} messages)", r.log.meta().id, r.messages.len());
            agent.switch_session(r.log, r.messages);
            show_last_exchanges(agent.messages());
        }
        "/plan" => {
            let now = if agent.permissions().mode() == PermissionMode::Plan {
                PermissionMode::Default
            } else {
                PermissionMode::Plan
            };
            agent.set_permission_mode(now);
            println!("permission mode: {}", ferroclaw_core::plan::mode_name(now));
        }
        "/jobs" => {
            let jobs = agent.jobs().map(ferroclaw_tools::JobManager::jobs).unwrap_or_default();
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
        "/team" => match &repl.team {
            Some(team) => match ferroclaw_team::render_team(
                team.team(),
                &Config::user_config_shown(&config.home),
            ) {
                Ok(text) => println!("{text}"),
                Err(e) => return Err(e.to_string()),
            },
            None => println!("teams are off: add a [team] section to the config"),
        },
        "/inbox" => match &repl.team {
            Some(team) => {
                let batch = team.lead_seat().reader.peek().map_err(|e| e.to_string())?;
                if batch.messages.is_empty() {
                    println!("no unread team messages");
                }
                for m in &batch.messages {
                    println!("{}", m.render());
                }
            }
            None => println!("teams are off: add a [team] section to the config"),
        },
        "/todos" => {
            let list = agent.todos().render();
            println!("{}", if list.is_empty() { "no todos" } else { &list });
        }
        "/usage" | "/cost" => {
            let u = agent.total_usage();
            let cost = pricing::cost(agent.model_spec(), &u)
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
async fn compact_now(agent: &mut Agent, repl: &Repl, focus: &str) {
    let (tx, rx) = unbounded_channel();
    let renderer = tokio::spawn(render(
        rx,
        agent.model_spec().to_string(),
        render_options(agent, repl, false),
    ));
    let cancel = CancellationToken::new();
    let watcher = crate::interrupt::watch(cancel.clone());
    let focus = (!focus.is_empty()).then_some(focus);
    match agent.compact(focus, &tx, &cancel).await {
        Ok(()) => {
            let n = agent.messages().len();
            eprintln!(
                "compacted: {n} message{} now, the full transcript stays in {}",
                if n == 1 { "" } else { "s" },
                agent.session().path().display()
            );
        }
        Err(e) => eprintln!("{}", crate::style::Style::for_stderr().red(&e.clone())),
    }
    watcher.abort();
    drop(tx);
    let _ = renderer.await;
}

/// One line above the prompt while background jobs run.
/// A status line of the teammates still running, before the prompt.
fn show_team(repl: &Repl) {
    let Some(team) = &repl.team else { return };
    let Ok(Some(config)) = team.team().load() else { return };
    let alive: Vec<String> = config
        .members
        .iter()
        .filter(|m| m.status != ferroclaw_team::MemberStatus::Shutdown)
        .map(|m| format!("{} {}", m.name, m.status.as_str()))
        .collect();
    if !alive.is_empty() {
        let line = format!("⚑ team: {} (/team, /inbox)", alive.join(", "));
        eprintln!("{}", crate::style::Style::for_stderr().dim(&line));
    }
}

fn show_running_jobs(agent: &Agent) {
    let running = agent.jobs().map(ferroclaw_tools::JobManager::running).unwrap_or_default();
    if !running.is_empty() {
        let names: Vec<String> = running
            .iter()
            .map(|j| format!("{} {}", j.id, crate::render::shorten(&j.command, 30)))
            .collect();
        let line = format!(
            "⧗ {} background job{} running: {} (/jobs)",
            running.len(),
            if running.len() == 1 { "" } else { "s" },
            names.join(", ")
        );
        eprintln!("{}", crate::style::Style::for_stderr().dim(&line));
    }
}

fn print_banner(agent: &Agent, resumed: bool, skipped_bytes: u64) {
    let what = if resumed { "resumed" } else { "session" };
    let st = crate::style::Style::for_stderr();
    eprintln!(
        "{} {} · {} · {what} {} · /help for commands",
        st.bold("ferroclaw"),
        env!("CARGO_PKG_VERSION"),
        agent.model_spec(),
        agent.session().meta().id
    );
    if resumed {
        show_last_exchanges(agent.messages());
        let loaded = format!(
            "{} messages loaded{}",
            agent.messages().len(),
            if skipped_bytes > 0 {
                format!(
                    "; {:.1} MB of older transcript left out of the context (still on disk)",
                    skipped_bytes as f64 / 1e6
                )
            } else {
                String::new()
            }
        );
        eprintln!("{}", st.dim(&loaded));
    }
}

/// Says once, at the start, that skill drafts wait for a person.
fn mention_drafts(config: &Config) {
    let pending =
        ferroclaw_core::learning::SkillStore::new(&config.home, &config.workspace).drafts().len();
    if pending > 0 {
        let line = format!(
            "{pending} skill draft{} wait{} for review: ferroclaw skills review",
            if pending == 1 { "" } else { "s" },
            if pending == 1 { "s" } else { "" }
        );
        eprintln!("{}", crate::style::Style::for_stderr().dim(&line));
    }
}

/// The last few exchanges of a resumed conversation, shortened.
fn show_last_exchanges(messages: &[ferroclaw_protocol::Message]) {
    use ferroclaw_protocol::{ContentBlock, Role};
    let st = crate::style::Style::for_stderr();
    let mut lines: Vec<String> = Vec::new();
    let mut users = 0;
    for m in messages.iter().rev() {
        let text: String = m
            .content
            .iter()
            .filter_map(|b| match b {
                ContentBlock::Text { text } if !text.starts_with("<system-reminder>") => {
                    Some(text.as_str())
                }
                _ => None,
            })
            .collect::<Vec<_>>()
            .join(" ");
        let calls: Vec<String> =
            m.tool_calls().map(|c| format!("⏺ {}", crate::printable::printable(&c.name))).collect();
        match m.role {
            Role::User if !text.trim().is_empty() => {
                lines.push(format!("{} {}", st.bold("›"), crate::render::shorten(&text, 100)));
                users += 1;
                if users == RESUME_SHOWN_EXCHANGES {
                    break;
                }
            }
            Role::Assistant => {
                if !calls.is_empty() {
                    lines.push(format!("  {}", st.dim(&calls.join(" "))));
                }
                if !text.trim().is_empty() {
                    lines.push(format!("  {}", crate::render::shorten(&text, 160)));
                }
            }
            _ => {}
        }
    }
    for line in lines.iter().rev() {
        eprintln!("{line}");
    }
}

fn history_path(config: &Config) -> std::path::PathBuf {
    config.home.join("history.txt")
}

fn new_editor(
    config: &Config,
    typed: Arc<std::sync::Mutex<String>>,
) -> Result<Editor<ReplHelper, FileHistory>, SetupError> {
    // A short wait after Esc tells a lone Esc from a key's escape sequence,
    // so Esc followed by `/` is not read as Alt-/ (which ate the slash).
    let editor_config = rustyline::Config::builder().keyseq_timeout(Some(50)).build();
    let mut editor = Editor::<ReplHelper, FileHistory>::with_config(editor_config)
        .map_err(|e| SetupError::Other(format!("cannot open the terminal: {e}")))?;
    let (custom, _) = commands::load(&config.workspace, &config.home, config.trusted);
    let custom = custom.into_iter().map(|c| format!("/{}", c.name)).collect();
    editor.set_helper(Some(ReplHelper::new(custom, typed, config.workspace.clone())));
    let _ = std::fs::create_dir_all(&config.home);
    let _ = editor.load_history(&history_path(config));
    Ok(editor)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_prompt_shows_the_permission_mode() {
        assert!(prompt_for(PermissionMode::Plan).contains("⏸ plan"));
        assert!(prompt_for(PermissionMode::AcceptEdits).contains("accept edits"));
        assert!(!prompt_for(PermissionMode::Default).contains("plan"));
    }
}
