//! Renders agent events in a terminal: the answer streamed as styled
//! Markdown on stdout; a spinner while waiting, compact tool lines, retries,
//! errors and the turn's usage and cost on stderr.

use std::io::{IsTerminal, Write};
use std::time::Duration;

use ferroclaw_core::permission::call_subject;
use ferroclaw_core::pricing;
use ferroclaw_protocol::{AgentEvent, TodoStatus};
use tokio::sync::mpsc::UnboundedReceiver;

use crate::markdown::MarkdownStream;

const BOLD: &str = "\x1b[1m";
const DIM: &str = "\x1b[2m";
const RED: &str = "\x1b[31m";
const GREEN: &str = "\x1b[32m";
const YELLOW: &str = "\x1b[33m";
const RESET: &str = "\x1b[0m";
const SPINNER: &[&str] = &["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"];

/// What to show besides the answer.
#[derive(Debug, Clone, Copy)]
pub struct RenderOptions {
    /// Print the answer text (REPL) or leave it to the caller (one-shot).
    pub answer: bool,
    /// Show spinner, tool lines and usage on stderr.
    pub status: bool,
}

/// Draws events until the channel closes. Returns when the sender is dropped.
pub async fn render(mut events: UnboundedReceiver<AgentEvent>, model: String, opts: RenderOptions) {
    let color = std::io::stdout().is_terminal();
    let status_tty = opts.status && std::io::stderr().is_terminal();
    let mut md = MarkdownStream::new();
    let mut waiting = false;
    let mut frame = 0usize;
    let mut tick = tokio::time::interval(Duration::from_millis(80));
    let mut out = std::io::stdout();
    // The answer's current line is unfinished: end it before status lines.
    let mut line_open = false;
    loop {
        let event = tokio::select! {
            e = events.recv() => e,
            _ = tick.tick(), if waiting && status_tty => {
                eprint!("\r{DIM}{} thinking…{RESET}", SPINNER[frame % SPINNER.len()]);
                frame += 1;
                continue;
            }
        };
        let Some(event) = event else { break };
        if waiting && !matches!(event, AgentEvent::Usage { .. } | AgentEvent::Retrying { .. }) {
            waiting = false;
            if status_tty {
                eprint!("\r\x1b[2K");
            }
        }
        let status_line = !matches!(event, AgentEvent::TextDelta { .. } | AgentEvent::Usage { .. });
        if line_open && opts.status && status_line {
            let _ = out.write_all(b"\n");
            let _ = out.flush();
            line_open = false;
        }
        match event {
            AgentEvent::TurnStarted { .. } => waiting = true,
            AgentEvent::TextDelta { text } if opts.answer => {
                let styled = if color { md.push(&text) } else { text };
                if !styled.is_empty() {
                    line_open = !styled.ends_with('\n');
                }
                let _ = out.write_all(styled.as_bytes());
                let _ = out.flush();
            }
            AgentEvent::TurnFinished { .. } if opts.answer => {
                let rest = md.finish();
                if !rest.is_empty() {
                    line_open = !rest.ends_with('\n');
                }
                let _ = out.write_all(rest.as_bytes());
                let _ = out.flush();
            }
            AgentEvent::ToolCallStarted { name, input, .. } if opts.status => {
                let subject = subject(&input);
                eprintln!("{GREEN}⏺{RESET} {name}({})", shorten(&subject, 80));
            }
            AgentEvent::ToolCallFinished { is_error, duration_ms, preview, .. } if opts.status => {
                if is_error {
                    eprintln!("  {RED}⎿ {}{RESET}", shorten(&preview, 160));
                } else {
                    eprintln!("  {DIM}⎿ ok · {duration_ms} ms{RESET}");
                }
            }
            AgentEvent::PermissionRequested { name, input, .. } if opts.answer => {
                let subject = subject(&input);
                eprint!(
                    "{YELLOW}? allow {name}({})?{RESET} [y]es / [n]o (or \"n, reason\") / [a]lways this session / always in this [p]roject: ",
                    shorten(&subject, 100)
                );
            }
            AgentEvent::Retrying { attempt, delay_ms, reason } if opts.status => {
                eprintln!(
                    "{YELLOW}⟳ {reason}; retry {attempt} in {:.1}s{RESET}",
                    delay_ms as f64 / 1000.0
                );
            }
            AgentEvent::Error { message, .. } if opts.status => {
                eprintln!("{RED}error: {message}{RESET}");
            }
            AgentEvent::Compaction { before_tokens, after_tokens } if opts.status => {
                eprintln!(
                    "{DIM}⇣ context compacted: ~{} → ~{} tokens{RESET}",
                    tokens(before_tokens),
                    tokens(after_tokens)
                );
            }
            AgentEvent::Todos { items } if opts.status => {
                for item in items {
                    match item.status {
                        TodoStatus::Completed => eprintln!("  {DIM}☑ {}{RESET}", item.content),
                        TodoStatus::InProgress => eprintln!(
                            "  {BOLD}◼ {}{RESET}",
                            item.active_form.as_deref().unwrap_or(&item.content)
                        ),
                        TodoStatus::Pending => eprintln!("  ☐ {}", item.content),
                    }
                }
            }
            AgentEvent::PlanProposed { plan } if opts.answer => {
                let mut plan_md = MarkdownStream::new();
                let mut text = plan_md.push(&plan);
                text.push_str(&plan_md.finish());
                eprintln!("\n{BOLD}Plan{RESET}\n{text}");
                eprint!(
                    "{YELLOW}? carry out this plan?{RESET} [y]es / [e] yes, and accept edits / [n]o (or \"n, what to change\"): "
                );
            }
            AgentEvent::SubAgent { agent_type, event, .. } if opts.status => match *event {
                AgentEvent::ToolCallStarted { name, input, .. } => {
                    let subject = subject(&input);
                    eprintln!("    {DIM}↳ {agent_type}:{RESET} {name}({})", shorten(&subject, 70));
                }
                AgentEvent::ToolCallFinished { is_error: true, preview, .. } => {
                    eprintln!("      {RED}⎿ {}{RESET}", shorten(&preview, 140));
                }
                AgentEvent::PermissionRequested { name, input, .. } if opts.answer => {
                    let subject = subject(&input);
                    eprint!(
                        "{YELLOW}? allow {agent_type} sub-agent: {name}({})?{RESET} [y]es / [n]o / [a]lways this session: ",
                        shorten(&subject, 90)
                    );
                }
                AgentEvent::Finished { num_turns, is_error, .. } => {
                    let how = if is_error { format!("{RED}failed") } else { format!("{DIM}done") };
                    eprintln!("    {how} · {agent_type} sub-agent · {num_turns} turns{RESET}");
                }
                _ => {}
            },
            AgentEvent::Finished { usage, num_turns, .. } if opts.status => {
                let cost = pricing::cost(&model, &usage)
                    .map(|c| format!(" · ${c:.4}"))
                    .unwrap_or_default();
                eprintln!(
                    "{DIM}{} in · {} out{cost} · {num_turns} turn{}{RESET}",
                    tokens(usage.input_tokens + usage.cache_read_tokens + usage.cache_write_tokens),
                    tokens(usage.output_tokens),
                    if num_turns == 1 { "" } else { "s" }
                );
            }
            _ => {}
        }
    }
}

/// What a tool call is about, in a few words: the command, path, URL or
/// pattern; a sub-agent's description; the size of a todo list; else the JSON.
fn subject(input: &serde_json::Value) -> String {
    if let Some(s) = call_subject(input).or_else(|| input["description"].as_str()) {
        return s.to_string();
    }
    if let Some(items) = input["items"].as_array() {
        return format!("{} items", items.len());
    }
    input.to_string()
}

/// `12.3k` style counts.
fn tokens(n: u64) -> String {
    if n >= 1000 { format!("{:.1}k", n as f64 / 1000.0) } else { n.to_string() }
}

/// One line of at most `max` characters.
pub fn shorten(s: &str, max: usize) -> String {
    let line = s.lines().next().unwrap_or_default();
    let mut out: String = line.chars().take(max).collect();
    if line.chars().count() > max || s.lines().nth(1).is_some() {
        out.push('…');
    }
    out
}
