//! `ferroclaw -p`: one request, the answer on stdout, an exit code.
//!
//! Piped input joins the prompt (`cat log | ferroclaw -p "explain this"`).
//! Tool calls refused because nobody can approve them are listed on stderr
//! with the flag that would allow them, and in the JSON result.

use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicU32, Ordering::SeqCst};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use ferroclaw_core::hooks;
use ferroclaw_core::{Config, NoOneToAsk, Outcome, Report};
use ferroclaw_protocol::AgentEvent;
use serde_json::{Value, json};
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};
use tokio_util::sync::CancellationToken;

use crate::args::{Cli, InputFormat, OutputFormat, StreamFormat};
use crate::exit;
use crate::piped::Prompt;
use crate::render::{RenderOptions, render};
use crate::setup::SetupError;
use crate::tool_log::{self, ToolLog};
use ferroclaw_runtime::{InputRules, Runtime, Turn};

/// A tool call refused in this run, as Claude Code's `permission_denials`.
#[derive(Debug, Clone)]
pub(crate) struct Denial {
    pub tool_name: String,
    pub tool_use_id: String,
    pub tool_input: Value,
    pub reason: String,
}

/// Where the prompts come from: the argument (and piped stdin), or stdin's
/// stream-json, read while the turns run.
enum Prompts {
    One(Option<Prompt>),
    Stream(UnboundedReceiver<Result<String, String>>),
}

impl Prompts {
    async fn next(&mut self) -> Option<Result<Prompt, String>> {
        match self {
            Prompts::One(prompt) => prompt.take().map(Ok),
            Prompts::Stream(rx) => rx.recv().await.map(|p| p.map(Prompt::typed)),
        }
    }
}

/// Runs one request (or, with stream-json input, each prompt as it comes);
/// returns the process exit code.
pub(crate) async fn run(cli: &Cli, config: Config) -> Result<i32, SetupError> {
    let started = Instant::now();
    let streaming = cli.input_format == InputFormat::StreamJson;
    let mut prompts = match streaming {
        false => Prompts::One(Some(prompt(cli)?)),
        true => Prompts::One(None), // the reader starts once the agent is open
    };
    let cancel = CancellationToken::new();
    let control = streaming.then(|| crate::stream_control::Control::new(&cancel));
    let runtime = Runtime::load(config.clone(), Default::default()).await?;
    let resume = crate::setup::resume_from_cli(cli);
    let approver: Arc<dyn ferroclaw_core::Approver> = match (
        cli.permission_prompt_tool.as_deref(),
        &control,
    ) {
        (None, _) => Arc::new(NoOneToAsk),
        (Some(crate::stream_control::STDIO_PROMPTS), Some(control)) => Arc::new(
            crate::stream_control::SdkApprover::new(control.clone(), config.workspace.clone()),
        ),
        (Some(tool), _) => {
            return Err(SetupError::Other(format!(
                "--permission-prompt-tool {tool}: only `stdio` (with --input-format stream-json) is supported"
            )));
        }
    };
    let opened = runtime.open(resume, approver, crate::setup::session_options(cli))?;
    let mut agent = opened.agent;
    let team = crate::team::attach(&runtime, &mut agent)?;
    if let Some(control) = &control {
        let answer = crate::stream_control::initialize_answer(&agent, &runtime.custom_commands());
        control.ready(answer, agent.permissions().clone());
        prompts = Prompts::Stream(crate::stream_input::spawn_reader(control.clone()));
    }
    let log = Arc::new(ToolLog::default());
    agent.map_tools(|tools| tool_log::observe(tools, &log));
    let (tx, rx) = unbounded_channel();
    let (forward, consumed) = unbounded_channel();
    let denials = Arc::new(Mutex::new(Vec::new()));
    let extra = Arc::new(AtomicU32::new(0));
    let tee = tokio::spawn(collect_denials(rx, forward, denials.clone(), extra.clone()));
    let status = std::io::stderr().is_terminal();
    // With stream-json input, Claude's stream has a result per turn.
    let per_turn = streaming
        && cli.output_format == OutputFormat::StreamJson
        && cli.stream_format() == StreamFormat::Claude;
    let (results, queued) = unbounded_channel::<crate::claude_stream::TurnResult>();
    // The refusals and extra calls the results written so far told of.
    let told = Arc::new(Mutex::new((0usize, 0u32)));
    let consumer = match (cli.output_format, cli.stream_format()) {
        (OutputFormat::Text, _) => tokio::spawn(render(
            consumed,
            agent.model_spec().to_string(),
            RenderOptions {
                answer: false,
                status,
                notices: true,
                tools: Some(log.clone()),
                workspace: agent.workspace().to_path_buf(),
                expand_hint: "",
                question_shown: None,
            },
        )),
        (OutputFormat::StreamJson, StreamFormat::Ferroclaw) => tokio::spawn(json_lines(consumed)),
        (OutputFormat::StreamJson, StreamFormat::Claude) => {
            let init = crate::claude_stream::init(&agent, &config);
            let queued = per_turn.then_some(queued);
            tokio::spawn(crate::claude_stream::write(consumed, init, log.clone(), queued))
        }
        (OutputFormat::Json, _) => tokio::spawn(drain(consumed)),
    };
    let _ = tx.send(AgentEvent::SessionStarted {
        session_id: agent.session().meta().id.clone(),
        model: agent.model_spec().to_string(),
        resumed: opened.resumed,
    });
    crate::interrupt::watch(cancel.clone());
    if let Some(team) = &team {
        team.set_events(Some(tx.clone()));
    }
    // `-p "/name ARGS"` runs a custom command, as typed in the REPL.
    // Several prompts (stream-json input) run one after another, as turns.
    let mut total: Option<Report> = None;
    while let Some(prompt) = prompts.next().await {
        let prompt = match prompt {
            Ok(prompt) => prompt,
            Err(e) if total.is_none() => return Err(SetupError::Other(e)),
            Err(e) => {
                eprintln!("ferroclaw: {e}");
                break;
            }
        };
        let turn_started = Instant::now();
        let turn_cancel = control.as_ref().map_or_else(|| cancel.clone(), |c| c.start_turn());
        let report = match runtime.turn(&prompt.text, InputRules::PROMPT) {
            Turn::Command { command, args } => {
                let message = crate::attach::user_message;
                runtime.run_command(&mut agent, &command, args, message, &tx, &turn_cancel).await
            }
            Turn::Shell(_) | Turn::Message { .. } => {
                crate::attach::warn_missing_files(&prompt.typed, agent.workspace());
                let message = prompt.message(agent.workspace());
                agent.run(message, &tx, &turn_cancel).await
            }
        };
        if let Some(control) = &control {
            control.end_turn(&cancel);
        }
        if per_turn {
            let (denials, extra, told) = (denials.clone(), extra.clone(), told.clone());
            let (report, session_id) = (report.clone(), agent.session().meta().id.clone());
            let (model, ws) = (agent.model_spec().to_string(), agent.workspace().to_path_buf());
            // Run by the writer at the turn's end, when the tee has seen
            // every event of it: this turn's refusals and calls are those
            // counted since the last result.
            let _ = results.send(Box::new(move || {
                let denied = denials.lock().unwrap_or_else(PoisonError::into_inner);
                let mut told = told.lock().unwrap_or_else(PoisonError::into_inner);
                let now = (denied.len(), extra.load(SeqCst));
                let before = std::mem::replace(&mut *told, now);
                let denied = denied.get(before.0..).unwrap_or_default();
                let turns = report.num_turns + now.1.saturating_sub(before.1);
                let mut lines = Vec::new();
                if report.outcome == Outcome::Blocked {
                    lines.push(crate::claude_stream::prompt_blocked(&report.text, &session_id));
                }
                let result = crate::claude_stream::result;
                lines.push(result(&report, turns, &session_id, &model, denied, turn_started, &ws));
                lines
            }));
            let _ = tx.send(crate::claude_stream::turn_end_marker());
        }
        // One prompt's failure ends a run of several, except when a program
        // drives it (stream-json input): it decides; Ctrl-C ends it anyway.
        let stop = (report.is_error() && !streaming) || cancel.is_cancelled();
        total = Some(match total {
            None => report,
            Some(before) => {
                let mut usage = before.usage;
                usage.add(&report.usage);
                Report { num_turns: before.num_turns + report.num_turns, usage, ..report }
            }
        });
        if stop {
            break;
        }
    }
    let Some(report) = total else {
        return Err(SetupError::Other(
            "--input-format stream-json: stdin had no user message with text".into(),
        ));
    };
    // A one-shot lead answers its teammates' plans and waits for those
    // still working; idle ones are shut down.
    let report = match &team {
        Some(team) => {
            let report = crate::team::finish_one_shot(team, &mut agent, &tx, &cancel, report).await;
            team.set_events(None);
            report
        }
        None => report,
    };
    runtime.shutdown().await;
    agent.finish().await;
    drop(tx);
    let _ = tee.await;
    let extra_calls = extra.load(SeqCst);
    let _ = consumer.await;
    let denials = std::mem::take(&mut *denials.lock().unwrap_or_else(PoisonError::into_inner));
    explain_denials(&denials, &agent, &config.home);
    let mut stdout = std::io::stdout().lock();
    let session_id = agent.session().meta().id.clone();
    let result = || {
        let (model, ws) = (agent.model_spec(), agent.workspace());
        // Claude Code counts each of several tool calls of one answer as a turn.
        let turns = report.num_turns + extra_calls;
        crate::claude_stream::result(&report, turns, &session_id, model, &denials, started, ws)
    };
    let blocked = report.outcome == Outcome::Blocked;
    match cli.output_format {
        OutputFormat::Text if report.is_error() && !blocked => {
            if !status {
                eprintln!("error: {}", report.text);
                if let Some(hint) = crate::render::error_hint(&report.text) {
                    eprintln!("  {hint}");
                }
            }
        }
        OutputFormat::Text => {
            let _ = writeln!(stdout, "{}", report.text.trim_end());
        }
        OutputFormat::Json => {
            let _ = writeln!(stdout, "{}", result());
        }
        // With stream-json input each turn's result is out already.
        OutputFormat::StreamJson if per_turn => {}
        OutputFormat::StreamJson if cli.stream_format() == StreamFormat::Claude => {
            if blocked {
                let note = crate::claude_stream::prompt_blocked(&report.text, &session_id);
                let _ = writeln!(stdout, "{note}");
            }
            let _ = writeln!(stdout, "{}", result());
        }
        OutputFormat::StreamJson => {}
    }
    let _ = stdout.flush();
    Ok(match report.outcome {
        // Claude Code's `-p` ends a prompt a hook blocked with success.
        Outcome::Answered | Outcome::Blocked => exit::OK,
        // The program that drives the run stopped that turn (interrupt).
        Outcome::Cancelled if streaming && !cancel.is_cancelled() => exit::OK,
        Outcome::Cancelled => exit::INTERRUPTED,
        Outcome::MaxTurns | Outcome::Failed(_) => exit::FAILED,
    })
}

/// The prompt: the argument, with piped stdin appended; or stdin alone when
/// there is no argument (or it is `-`). A terminal on stdin is never read.
fn prompt(cli: &Cli) -> Result<Prompt, SetupError> {
    let arg = cli.prompt.as_deref().filter(|p| *p != "-");
    let piped = match std::io::stdin().is_terminal() {
        true => None,
        false => Some(
            crate::piped::read(std::io::stdin().lock())
                .map_err(|e| SetupError::Other(format!("cannot read stdin: {e}")))?,
        ),
    };
    let Some(prompt) = crate::piped::prompt(arg, piped) else {
        return Err(SetupError::Other(format!(
            "no prompt: pass it as an argument (ferroclaw -p \"...\") or on stdin{}",
            swallowed_prompt_hint(cli)
        )));
    };
    if prompt.text.trim().is_empty() && prompt.image.is_none() {
        return Err(SetupError::Other(format!(
            "the prompt is empty{}",
            swallowed_prompt_hint(cli)
        )));
    }
    Ok(prompt)
}

/// When the prompt is missing and a rules flag was given: those flags take
/// every word after them, so `-p --allowedTools edit "fix it"` reads "fix it"
/// as rules. Says so, and where the prompt goes.
fn swallowed_prompt_hint(cli: &Cli) -> String {
    let (flag, values) = match (cli.allowed_tools.last(), cli.disallowed_tools.last()) {
        (Some(v), _) => ("--allowedTools", v),
        (None, Some(v)) => ("--disallowedTools", v),
        (None, None) => return String::new(),
    };
    format!(
        "; {flag} takes every word after it (here {values:?} too), so put the prompt \
         before it: ferroclaw -p \"...\" {flag} RULES"
    )
}

/// Passes every event on, keeping the refusals, and counting in `extra`
/// the tool calls that came beyond the first of their answer.
async fn collect_denials(
    mut rx: UnboundedReceiver<AgentEvent>,
    forward: UnboundedSender<AgentEvent>,
    denials: Arc<Mutex<Vec<Denial>>>,
    extra: Arc<AtomicU32>,
) {
    let mut in_turn = 0u32;
    while let Some(event) = rx.recv().await {
        // A sub-agent's refusals are the run's too (Claude Code lists them).
        let own = match &event {
            AgentEvent::SubAgent { event, .. } => event.as_ref(),
            other => other,
        };
        if let AgentEvent::PermissionDenied { id, name, input, reason } = own {
            denials.lock().unwrap_or_else(PoisonError::into_inner).push(Denial {
                tool_name: name.clone(),
                tool_use_id: id.clone(),
                tool_input: input.clone(),
                reason: reason.clone(),
            });
        }
        match &event {
            AgentEvent::TurnStarted { .. } => in_turn = 0,
            AgentEvent::ToolCallStarted { .. } => {
                extra.fetch_add(u32::from(in_turn > 0), SeqCst);
                in_turn += 1;
            }
            _ => {}
        }
        let _ = forward.send(event);
    }
}

/// Says on stderr which calls were refused and how to allow them.
/// A rule already in force is never suggested (the call was refused for
/// another of its parts or reasons).
fn explain_denials(denials: &[Denial], agent: &ferroclaw_core::Agent, home: &std::path::Path) {
    let workspace = agent.workspace();
    let in_force = |rule: &str| {
        ferroclaw_core::permission::Rule::parse(rule)
            .is_ok_and(|r| agent.permissions().has_allow_rule(&r))
    };
    if denials.is_empty() {
        return;
    }
    let n = denials.len();
    eprintln!("ferroclaw: {n} tool call{} refused:", if n == 1 { " was" } else { "s were" });
    let mut rules: Vec<String> = Vec::new();
    for d in denials {
        let subject = crate::render::shorten(&subject_of(&d.tool_input), 80);
        let why = match d.reason.contains("nobody can be asked") {
            true => "needs approval, and nobody can approve in -p",
            false => &d.reason,
        };
        eprintln!("  {}({subject}): {}", d.tool_name, crate::render::shorten(why, 100));
        // A rule cannot overrule a hook: no rule to suggest for its refusals.
        if !d.reason.starts_with("permission denied") && !hooks::refused_by_hook(&d.reason) {
            let scoped = allow_rules(workspace, &d.tool_name, &d.tool_input);
            if scoped.is_empty() {
                eprintln!(
                    "    (too complex for a rule: approve it in the REPL, or rerun with --yes)"
                );
            }
            for rule in scoped {
                if !rules.contains(&rule) && !in_force(&rule) {
                    rules.push(rule);
                }
            }
        }
    }
    if !rules.is_empty() {
        let quoted: Vec<String> = rules.iter().map(|r| format!("'{r}'")).collect();
        eprintln!(
            "to allow them: --allowedTools {} (or --yes, --permission-mode accept-edits for edits, or allow = [{}] under [permissions] in {} or a trusted project's .agent/config.toml)",
            quoted.join(" "),
            rules.iter().map(|r| format!("\"{r}\"")).collect::<Vec<_>>().join(", "),
            Config::user_config_shown(home)
        );
    }
}

fn subject_of(input: &Value) -> String {
    ferroclaw_core::permission::call_subject(input)
        .map(str::to_string)
        .unwrap_or_else(|| input.to_string())
}

/// The allow rules covering a refused call: the same scoped rules an
/// "always" answer would add (on the resolved tool name: a prefix per simple
/// command for `bash`, the file's folder for edits, the domain for
/// web_fetch). Empty when the call is too complex to generalise.
pub(crate) fn allow_rules(workspace: &std::path::Path, tool: &str, input: &Value) -> Vec<String> {
    ferroclaw_core::permission::always_rules(workspace, tool, input)
        .iter()
        .map(ToString::to_string)
        .collect()
}

/// A `-p` request that could not start (no model, a bad config, a missing
/// key): with `--output-format json` or `stream-json` stdout still gets the
/// object that ends a normal run (the result, or the `finished` event of
/// ferroclaw's stream), marked `is_error`, with `message` as its result.
pub(crate) fn print_setup_error(cli: &Cli, message: &str) {
    let line = match (cli.output_format, cli.stream_format()) {
        (OutputFormat::Text, _) => return,
        (OutputFormat::StreamJson, StreamFormat::Ferroclaw) => json!(AgentEvent::Finished {
            result: message.to_string(),
            session_id: String::new(),
            num_turns: 0,
            usage: Default::default(),
            is_error: true,
        }),
        (OutputFormat::Json | OutputFormat::StreamJson, _) => json!({
            "type": "result",
            "subtype": "error_during_execution",
            "is_error": true,
            "duration_ms": 0,
            "num_turns": 0,
            "result": message,
            "stop_reason": null,
            "session_id": "",
            "total_cost_usd": 0.0,
            "usage": crate::claude_stream::usage(&Default::default()),
            "permission_denials": [],
            "uuid": crate::claude_stream::uuid(),
        }),
    };
    let mut stdout = std::io::stdout().lock();
    let _ = writeln!(stdout, "{line}");
    let _ = stdout.flush();
}

/// `--output-format stream-json`: one event per line, flushed as it comes.
/// Nobody is asked in `-p`, so `permission_requested` is left out; the
/// refusal comes as `permission_denied`.
async fn json_lines(mut rx: UnboundedReceiver<AgentEvent>) {
    let mut out = std::io::stdout();
    while let Some(event) = rx.recv().await {
        if matches!(event, AgentEvent::PermissionRequested { .. }) {
            continue;
        }
        if let Ok(mut line) = serde_json::to_vec(&event) {
            line.push(b'\n');
            let _ = out.write_all(&line);
            let _ = out.flush();
        }
    }
}

async fn drain(mut rx: UnboundedReceiver<AgentEvent>) {
    while rx.recv().await.is_some() {}
}
