//! Renders agent events in a terminal: the answer streamed as styled
//! Markdown on stdout; a spinner while waiting, compact tool lines, retries,
//! errors and the turn's usage and cost on stderr.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ferroclaw_core::permission::call_subject;
use ferroclaw_core::pricing;
use ferroclaw_protocol::{AgentEvent, TodoStatus};
use tokio::sync::mpsc::UnboundedReceiver;

use crate::markdown::MarkdownStream;
use crate::printable::printable;
use crate::style::Style;
use crate::tool_log::{FILE_TOOLS, ToolLog, read_text};

const SPINNER: &[&str] = &["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"];

/// Lines of a tool's output shown after it runs; `/expand` shows the rest.
pub(crate) const OUTPUT_HEAD_LINES: usize = 5;

/// What to show besides the answer.
#[derive(Debug, Clone)]
pub(crate) struct RenderOptions {
    /// Print the answer text (REPL) or leave it to the caller (one-shot).
    pub answer: bool,
    /// Show spinner, tool lines and usage on stderr.
    pub status: bool,
    /// Say on stderr when the provider is retrying, even when `status` is off.
    pub notices: bool,
    /// Tool outputs and file snapshots, for output heads and diffs.
    pub tools: Option<Arc<ToolLog>>,
    /// Where relative paths of tool calls point.
    pub workspace: PathBuf,
    /// The hint after a cut tool output (`/expand` in the REPL).
    pub expand_hint: &'static str,
    /// Told each time a question (approval, plan) is on screen, so the
    /// answer is read only after the user could see what it is about.
    pub question_shown: Option<Arc<tokio::sync::Notify>>,
}

/// Draws events until the channel closes. Returns when the sender is dropped.
pub(crate) async fn render(
    mut events: UnboundedReceiver<AgentEvent>,
    model: String,
    opts: RenderOptions,
) {
    let color = std::io::stdout().is_terminal();
    let st = Style::for_stderr();
    let status_tty = opts.status && std::io::stderr().is_terminal();
    let mut md = MarkdownStream::new();
    let mut waiting = false;
    let mut frame = 0usize;
    let mut tick = tokio::time::interval(Duration::from_millis(80));
    let started = Instant::now();
    let mut tokens_so_far = 0u64;
    let mut out = std::io::stdout();
    // Calls whose diff was shown in the approval question.
    let mut diffed: Vec<String> = Vec::new();
    // The answer's current line is unfinished: end it before status lines.
    let mut line_open = false;
    loop {
        let event = tokio::select! {
            e = events.recv() => e,
            _ = tick.tick(), if waiting && status_tty => {
                let counted = if tokens_so_far > 0 {
                    format!(" · {} tokens", tokens(tokens_so_far))
                } else {
                    String::new()
                };
                eprint!(
                    "\r\x1b[2K{}",
                    st.dim(&format!(
                        "{} thinking… {}s{counted} · esc to interrupt",
                        SPINNER[frame % SPINNER.len()],
                        started.elapsed().as_secs()
                    ))
                );
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
        if line_open && (opts.status || opts.notices) && status_line {
            let _ = out.write_all(b"\n");
            let _ = out.flush();
            line_open = false;
        }
        match event {
            AgentEvent::TurnStarted { .. } => waiting = true,
            AgentEvent::Usage { usage } => {
                tokens_so_far += usage.input_tokens
                    + usage.cache_read_tokens
                    + usage.cache_write_tokens
                    + usage.output_tokens;
            }
            AgentEvent::TextDelta { text } if opts.answer => {
                let styled = if color { md.push(&printable(&text)) } else { text };
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
                eprintln!("{} {}({})", st.green("⏺"), printable(&name), shorten(&subject, 80));
            }
            AgentEvent::ToolCallFinished { id, name, is_error, duration_ms, preview }
                if opts.status =>
            {
                let record = opts.tools.as_ref().and_then(|log| log.get(&id));
                eprint!(
                    "{}",
                    finished_block(
                        &name,
                        is_error,
                        duration_ms,
                        &preview,
                        record,
                        &diffed,
                        &id,
                        &opts,
                        st
                    )
                );
            }
            AgentEvent::PermissionRequested { id, name, input } if opts.answer => {
                let subject = subject(&input);
                if let Some((before, after)) = crate::diff::proposed(&name, &input, &opts.workspace)
                {
                    eprint!("{}", crate::diff::render(before.as_deref(), &after, st));
                    diffed.push(id);
                } else if ferroclaw_tools::canonical_tool_name(&name) == "bash"
                    && let Some(command) = input["command"].as_str()
                {
                    if command.chars().count() > 100 || command.contains('\n') {
                        for line in command.lines() {
                            eprintln!("    {}", st.bold(&printable(line)));
                        }
                    }
                    // What the permission gate sees: every simple command, each
                    // needing its own rule (a chain hides nothing).
                    let parsed = ferroclaw_core::permission::parsed_commands(command);
                    if parsed.len() > 1 {
                        eprintln!("  {}", st.dim("runs:"));
                        for line in parsed {
                            eprintln!("    {} {}", st.dim("·"), printable(&line));
                        }
                    }
                }
                // What "always" would save, said before the answer.
                let covers = ferroclaw_core::permission::describe_rules(
                    &ferroclaw_core::permission::always_rules(&opts.workspace, &name, &input),
                );
                eprintln!("  {}", st.dim(&format!("always allows: {}", printable(&covers))));
                eprint!(
                    "{} [y/N] {} ",
                    st.yellow(&format!(
                        "? allow {}({})?",
                        printable(&name),
                        shorten(&subject, 100)
                    )),
                    st.dim("y yes · n no (\"n, reason\") · a always this session · p always in this project ›")
                );
                question_shown(&opts);
            }
            AgentEvent::Retrying { attempt, delay_ms, reason } if opts.status || opts.notices => {
                if waiting && status_tty {
                    // The spinner is on this line: clear it, or the notice is glued to it.
                    eprint!("\r\x1b[2K");
                }
                eprintln!(
                    "{}",
                    st.yellow(&format!(
                        "⟳ retrying in {}: {reason} (attempt {attempt})",
                        wait_shown(delay_ms)
                    ))
                );
            }
            // Without a status line (`-p` into a pipe) a problem that does not
            // stop the run is still said; the fatal one is the run's own error.
            AgentEvent::Error { message, fatal } if opts.status || (opts.notices && !fatal) => {
                eprintln!("{}", st.red(&format!("error: {}", printable(&message))));
                if let Some(hint) = error_hint(&message) {
                    eprintln!("{}", st.dim(&format!("  {hint}")));
                }
            }
            AgentEvent::Compaction { before_tokens, after_tokens } if opts.status => {
                eprintln!(
                    "{}",
                    st.dim(&format!(
                        "⇣ context compacted: ~{} → ~{} tokens",
                        tokens(before_tokens),
                        tokens(after_tokens)
                    ))
                );
            }
            AgentEvent::Todos { items } if opts.status => {
                for item in items {
                    match item.status {
                        TodoStatus::Completed => {
                            eprintln!("  {}", st.dim(&format!("☑ {}", printable(&item.content))));
                        }
                        TodoStatus::InProgress => eprintln!(
                            "  {}",
                            st.bold(&format!(
                                "◼ {}",
                                printable(item.active_form.as_deref().unwrap_or(&item.content))
                            ))
                        ),
                        TodoStatus::Pending => eprintln!("  ☐ {}", printable(&item.content)),
                    }
                }
            }
            AgentEvent::PlanProposed { plan } if opts.answer => {
                let mut plan_md = MarkdownStream::new();
                let mut text = plan_md.push(&printable(&plan));
                text.push_str(&plan_md.finish());
                // A plan that opens with its own "Plan" heading gets no second one.
                match opens_with_plan_heading(&plan) {
                    true => eprintln!("\n{text}"),
                    false => eprintln!("\n{}\n{text}", st.bold("Plan")),
                }
                eprint!(
                    "{} [y]es / [e] yes, and accept edits / [N]o (or \"n, what to change\"): ",
                    st.yellow("? carry out this plan?")
                );
                question_shown(&opts);
            }
            AgentEvent::SubAgent { agent_type, event, .. } if opts.status => match *event {
                AgentEvent::ToolCallStarted { name, input, .. } => {
                    let subject = subject(&input);
                    eprintln!(
                        "    {} {}({})",
                        st.dim(&format!("↳ {}:", printable(&agent_type))),
                        printable(&name),
                        shorten(&subject, 70)
                    );
                }
                AgentEvent::ToolCallFinished { is_error: true, preview, .. } => {
                    eprintln!("      {}", st.red(&format!("⎿ {}", shorten(&preview, 140))));
                }
                AgentEvent::PermissionRequested { name, input, .. } if opts.answer => {
                    let subject = subject(&input);
                    eprint!(
                        "{} [y/N] {} ",
                        st.yellow(&format!(
                            "? allow {} sub-agent: {}({})?",
                            printable(&agent_type),
                            printable(&name),
                            shorten(&subject, 90)
                        )),
                        st.dim("y yes · n no · a always this session ›")
                    );
                    question_shown(&opts);
                }
                AgentEvent::Finished { num_turns, is_error, .. } => {
                    let how = if is_error { st.red("failed") } else { st.dim("done") };
                    eprintln!(
                        "    {how}{}",
                        st.dim(&format!(" · {agent_type} sub-agent · {num_turns} turns"))
                    );
                }
                _ => {}
            },
            AgentEvent::Team { name, status, detail } if opts.status => {
                let what = if detail == status { status } else { format!("{status} · {detail}") };
                eprintln!("  {}", st.dim(&format!("⚑ {}: {}", printable(&name), printable(&what))));
            }
            AgentEvent::Finished { usage, num_turns, .. } if opts.status => {
                let cost = pricing::cost(&model, &usage)
                    .map(|c| format!(" · ${c:.4}"))
                    .unwrap_or_default();
                eprintln!(
                    "{}",
                    st.dim(&format!(
                        "{} in · {} out{cost} · {num_turns} turn{} · {}s",
                        tokens(
                            usage.input_tokens + usage.cache_read_tokens + usage.cache_write_tokens
                        ),
                        tokens(usage.output_tokens),
                        if num_turns == 1 { "" } else { "s" },
                        started.elapsed().as_secs()
                    ))
                );
            }
            _ => {}
        }
    }
}

/// Lets the approver read the answer now that the question is on screen.
fn question_shown(opts: &RenderOptions) {
    let _ = std::io::stderr().flush();
    if let Some(shown) = &opts.question_shown {
        shown.notify_one();
    }
}

/// The lines under a finished tool call: for a file change its diff (unless
/// the approval question showed it), else the output's first lines.
#[allow(clippy::too_many_arguments)]
fn finished_block(
    name: &str,
    is_error: bool,
    duration_ms: u64,
    preview: &str,
    record: Option<crate::tool_log::Record>,
    diffed: &[String],
    id: &str,
    opts: &RenderOptions,
    st: Style,
) -> String {
    let Some(record) = record else {
        return if is_error {
            format!("  {}\n", st.red(&format!("⎿ {}", shorten(preview, 160))))
        } else {
            format!("  {}\n", st.dim(&format!("⎿ ok · {duration_ms} ms")))
        };
    };
    if !is_error
        && FILE_TOOLS.contains(&name)
        && let Some(path) = &record.path
        && let Some(after) = read_text(path)
    {
        let shown = diffed.iter().any(|d| d == id);
        let (added, removed) = count_changes(record.before.as_deref(), &after);
        let mut out = format!(
            "  {}\n",
            st.dim(&format!(
                "⎿ {} · +{added} −{removed} · {duration_ms} ms",
                shorten(record.output.lines().next().unwrap_or_default(), 100)
            ))
        );
        if !shown {
            out.push_str(&crate::diff::render(record.before.as_deref(), &after, st));
        }
        return out;
    }
    output_head(&record.output, is_error, duration_ms, opts.expand_hint, st)
}

/// The first [`OUTPUT_HEAD_LINES`] lines of a tool's output, then how many
/// more there are and how to see them.
pub(crate) fn output_head(
    output: &str,
    is_error: bool,
    duration_ms: u64,
    hint: &str,
    st: Style,
) -> String {
    let lines: Vec<&str> = output.trim_end().lines().collect();
    if lines.is_empty() {
        return format!("  {}\n", st.dim(&format!("⎿ (no output) · {duration_ms} ms")));
    }
    let paint = |s: &str| if is_error { st.red(s) } else { st.dim(s) };
    let mut out = String::new();
    for (i, line) in lines.iter().take(OUTPUT_HEAD_LINES).enumerate() {
        let mark = if i == 0 { "⎿" } else { " " };
        out.push_str(&format!("  {}\n", paint(&format!("{mark} {}", shorten(line, 160)))));
    }
    let more = lines.len().saturating_sub(OUTPUT_HEAD_LINES);
    let tail = if more > 0 {
        format!("… +{more} lines{hint} · {duration_ms} ms")
    } else {
        format!("{duration_ms} ms")
    };
    out.push_str(&format!("    {}\n", st.dim(&tail)));
    out
}

/// Lines added and removed between two texts.
fn count_changes(before: Option<&str>, after: &str) -> (usize, usize) {
    let Some(before) = before else { return (after.lines().count(), 0) };
    let diff = similar::TextDiff::from_lines(before, after);
    let mut counts = (0, 0);
    for change in diff.iter_all_changes() {
        match change.tag() {
            similar::ChangeTag::Insert => counts.0 += 1,
            similar::ChangeTag::Delete => counts.1 += 1,
            similar::ChangeTag::Equal => {}
        }
    }
    counts
}

/// A wait as a person reads it: `80 ms` under a second, else `2 s` or `1.5 s`.
fn wait_shown(ms: u64) -> String {
    if ms < 1000 {
        format!("{ms} ms")
    } else if ms.is_multiple_of(1000) {
        format!("{} s", ms / 1000)
    } else {
        format!("{:.1} s", ms as f64 / 1000.0)
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

/// One line of at most `max` characters, safe to print (see [`printable`]).
pub(crate) fn shorten(s: &str, max: usize) -> String {
    let line = printable(s.lines().next().unwrap_or_default());
    let mut out: String = line.chars().take(max).collect();
    if line.chars().count() > max || s.lines().nth(1).is_some() {
        out.push('…');
    }
    out
}

/// What to do about a provider error that the retries could not cure, when
/// the error says enough: a refused key, a rate limit, a server that is not
/// there.
pub(crate) fn error_hint(message: &str) -> Option<&'static str> {
    if message.contains("HTTP 401") || message.contains("HTTP 403") {
        Some(
            "hint: the provider refused the API key: check the key variable (ANTHROPIC_API_KEY, \
             OPENAI_API_KEY, ...) or api_key_env in [providers.NAME]; `ferroclaw doctor` tries it",
        )
    } else if message.contains("HTTP 404") {
        Some(
            "hint: the provider does not know that model (or the base URL is wrong): check the \
             name after PROVIDER/ in --model or `model` in config.toml (`ferroclaw --help` lists \
             the aliases)",
        )
    } else if message.contains("HTTP 429") {
        Some(
            "hint: the provider is rate-limiting this key; wait a minute and try again, or allow \
             more retries with max_attempts under [retry] in config.toml",
        )
    } else if message.contains("cannot reach") {
        Some(
            "hint: nothing answered at that address: is the server running, and is the base URL \
             right (ANTHROPIC_BASE_URL, OPENAI_BASE_URL, ... or base_url in [providers.NAME])? \
             `ferroclaw doctor` tries it",
        )
    } else {
        None
    }
}

/// True when `plan`'s first line is a heading or label that says "Plan"
/// (`# Plan`, `## Plan: tidy the parser`, `**Plan**`, `Plan:`).
fn opens_with_plan_heading(plan: &str) -> bool {
    let first = plan.lines().map(str::trim).find(|l| !l.is_empty()).unwrap_or("");
    let heading = first.starts_with('#');
    let text = first.trim_start_matches('#').trim().trim_start_matches('*');
    let Some(word) = text.get(..4) else { return false };
    if !word.eq_ignore_ascii_case("plan") {
        return false;
    }
    let after = text[4..].trim_start_matches('*');
    match heading {
        true => after.is_empty() || after.starts_with([':', ' ']),
        false => after.is_empty() || after.trim_end_matches('*') == ":",
    }
}

#[cfg(test)]
mod tests {
    use super::{error_hint, opens_with_plan_heading, wait_shown};

    #[test]
    fn a_plan_with_its_own_plan_heading_is_recognised_and_plain_text_is_not() {
        for own in ["# Plan", "## Plan: tidy the parser", "**Plan**", "Plan:", "\n# plan\n1. x"] {
            assert!(opens_with_plan_heading(own), "{own:?}");
        }
        for other in ["1. write a.txt", "Planning is done", "# Steps", "Plant the seeds", "é"] {
            assert!(!opens_with_plan_heading(other), "{other:?}");
        }
    }

    #[test]
    fn waits_read_in_milliseconds_under_a_second_and_in_seconds_above() {
        assert_eq!(wait_shown(80), "80 ms");
        assert_eq!(wait_shown(999), "999 ms");
        assert_eq!(wait_shown(2000), "2 s");
        assert_eq!(wait_shown(1500), "1.5 s");
    }

    #[test]
    fn provider_errors_that_the_user_can_fix_come_with_a_hint() {
        assert!(error_hint("anthropic: HTTP 401: invalid x-api-key").unwrap().contains("API key"));
        assert!(
            error_hint("openai: HTTP 429: slow down (gave up after 4 attempts)")
                .unwrap()
                .contains("rate-limiting")
        );
        assert!(
            error_hint("anthropic: cannot reach http://127.0.0.1:1/v1/messages: refused")
                .unwrap()
                .contains("base URL")
        );
        assert!(
            error_hint("anthropic: HTTP 404: not_found_error: model: claude-sonet-4")
                .unwrap()
                .contains("does not know that model")
        );
        assert_eq!(error_hint("anthropic: overloaded_error: try later"), None);
    }
}
