//! Keeping the conversation inside the context window, as pure functions the
//! loop calls (learn-claude-code's three layers):
//!
//! 1. micro-compaction every turn ([`micro_compact`]): old, long tool results
//!    become `[Previous: used TOOL]`, except those of `read` (policy);
//! 2. auto-compaction over a threshold: [`estimate_tokens`] (chars/4, corrected
//!    by real usage with a [`TokenEstimator`]) against [`context_window`] with
//!    [`needs_compaction`]; then the model summarises ([`summary_request`]) and
//!    the history is REPLACED by [`compacted_history`]; the session file gets
//!    an [`Entry::Compaction`](crate::session::Entry) ([`compaction_entry`]) so
//!    that resuming restores the compacted view;
//! 3. the full transcript stays on disk: compaction is lossy in memory,
//!    lossless on disk.

use std::path::Path;

use ferroclaw_protocol::{ContentBlock, Message, ResultPart, Role, ToolSpec};

use crate::clock;
use crate::session::Entry;

/// Share of the context window at which auto-compaction starts (config
/// `compaction_threshold`): leaves room for the answer and a few tool results.
pub const DEFAULT_COMPACTION_THRESHOLD: f64 = 0.8;
/// Context window assumed for a model not in [`CONTEXT_WINDOWS`] (config
/// `context_window` overrides): a common size for current open models.
pub const DEFAULT_CONTEXT_WINDOW: u64 = 128_000;
/// Tool results kept verbatim by micro-compaction, newest first
/// (learn-claude-code keeps 3).
pub const DEFAULT_KEEP_RECENT: usize = 3;
/// Tool results this short are never replaced (learn-claude-code: 100).
pub const DEFAULT_MIN_CHARS: usize = 100;
/// Longest tool result quoted in a summary request, in characters.
pub const SUMMARY_RESULT_CHARS: usize = 2_000;

/// Context windows by model-name prefix, most specific first; the name is
/// matched after its last `/` (so `openrouter/anthropic/claude-x` works).
/// Sources: the providers' model pages.
pub const CONTEXT_WINDOWS: &[(&str, u64)] = &[
    ("claude", 200_000),
    ("gpt-5", 400_000),
    ("gpt-4.1", 1_047_576),
    ("gpt-4o", 128_000),
    ("o3", 200_000),
    ("o4", 200_000),
    ("gemini", 1_048_576),
    // deepseek-chat and deepseek-reasoner have 128k since V3.1; older
    // deepseek models (coder, llm) 64k.
    ("deepseek-chat", 128_000),
    ("deepseek-reasoner", 128_000),
    ("deepseek", 64_000),
    ("qwen", 128_000),
];

/// The context window of `model` in tokens: `configured` when set, else the
/// table, else [`DEFAULT_CONTEXT_WINDOW`].
pub fn context_window(model: &str, configured: Option<u64>) -> u64 {
    if let Some(n) = configured {
        return n;
    }
    let name = model.rsplit('/').next().unwrap_or(model).to_ascii_lowercase();
    CONTEXT_WINDOWS
        .iter()
        .find(|(prefix, _)| name.starts_with(prefix))
        .map_or(DEFAULT_CONTEXT_WINDOW, |(_, n)| *n)
}

/// Which tool results micro-compaction may replace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MicroPolicy {
    /// The most recent results kept verbatim.
    pub keep_recent: usize,
    /// Results this long or shorter are kept.
    pub min_chars: usize,
    /// Tools whose results are always kept (re-reading a file costs a turn).
    pub keep_tools: Vec<String>,
}

impl Default for MicroPolicy {
    fn default() -> Self {
        Self {
            keep_recent: DEFAULT_KEEP_RECENT,
            min_chars: DEFAULT_MIN_CHARS,
            keep_tools: vec!["read".into()],
        }
    }
}

/// Replaces tool results older than the `keep_recent` newest and longer than
/// `min_chars` with `[Previous: used TOOL]`, keeping results of `read`.
/// Returns how many were replaced. Idempotent.
pub fn micro_compact(messages: &mut [Message], keep_recent: usize, min_chars: usize) -> usize {
    micro_compact_with(messages, &MicroPolicy { keep_recent, min_chars, ..MicroPolicy::default() })
}

/// [`micro_compact`] with a full policy.
pub fn micro_compact_with(messages: &mut [Message], policy: &MicroPolicy) -> usize {
    // Tool name of each call id, from the assistant messages.
    let names: std::collections::HashMap<String, String> = messages
        .iter()
        .filter(|m| m.role == Role::Assistant)
        .flat_map(Message::tool_calls)
        .map(|c| (c.id.clone(), c.name.clone()))
        .collect();
    let mut positions = Vec::new();
    for (mi, m) in messages.iter().enumerate() {
        for (bi, b) in m.content.iter().enumerate() {
            if matches!(b, ContentBlock::ToolResult { .. }) {
                positions.push((mi, bi));
            }
        }
    }
    let old = positions.len().saturating_sub(policy.keep_recent);
    let mut replaced = 0;
    for &(mi, bi) in &positions[..old] {
        let ContentBlock::ToolResult { tool_call_id, content, .. } = &mut messages[mi].content[bi]
        else {
            continue;
        };
        let name = names.get(tool_call_id.as_str()).map_or("a tool", String::as_str);
        if policy.keep_tools.iter().any(|k| k == name) {
            continue;
        }
        let size: usize = content.iter().map(part_len).sum();
        let marker = format!("[Previous: used {name}]");
        if size <= policy.min_chars || is_marker(content) {
            continue;
        }
        *content = vec![ResultPart::Text { text: marker }];
        replaced += 1;
    }
    replaced
}

fn part_len(p: &ResultPart) -> usize {
    match p {
        ResultPart::Text { text } => text.len(),
        ResultPart::Image { data, .. } => data.len(),
    }
}

fn is_marker(content: &[ResultPart]) -> bool {
    matches!(content, [ResultPart::Text { text }] if text.starts_with("[Previous: used "))
}

/// Tokens the request would take, estimated as characters / 4 over the
/// system prompt, the messages (text, tool calls, results) and the tool
/// specs. The same count for both wire formats; correct it with a
/// [`TokenEstimator`].
pub fn estimate_tokens(system: &str, messages: &[Message], tools: &[ToolSpec]) -> u64 {
    tokens_of_chars(system.len() + messages_chars(messages) + tools_chars(tools))
}

/// The characters [`estimate_tokens`] counts for `messages`.
pub fn messages_chars(messages: &[Message]) -> usize {
    messages.iter().map(Message::char_len).sum()
}

/// The characters [`estimate_tokens`] counts for `tools` (their schemas as
/// JSON: the costly part of an estimate, worth keeping per set of specs).
pub fn tools_chars(tools: &[ToolSpec]) -> usize {
    tools.iter().map(|t| t.name.len() + t.description.len() + json_len(&t.input_schema)).sum()
}

/// [`estimate_tokens`] of counted characters.
pub fn tokens_of_chars(chars: usize) -> u64 {
    (chars as u64).div_ceil(4)
}

/// Bytes of `value` as compact JSON, counted without building the text
/// (estimates run before every model request).
fn json_len(value: &serde_json::Value) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    // Writing to a counter cannot fail.
    let _ = serde_json::to_writer(&mut count, value);
    count.0
}

/// Estimates corrected by what the provider actually counted: after each
/// model call, [`observe`](Self::observe) the estimate made for it and the
/// real input tokens; later estimates are scaled by that ratio.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TokenEstimator {
    ratio: f64,
}

impl Default for TokenEstimator {
    fn default() -> Self {
        Self { ratio: 1.0 }
    }
}

impl TokenEstimator {
    /// Learns from one call: `estimated` is what [`estimate_tokens`] said for
    /// the request, `actual_input` the provider's count (for Anthropic:
    /// `input_tokens + cache_read_tokens + cache_write_tokens`). The ratio is
    /// kept within 0.25..4 so one odd report cannot derail it.
    pub fn observe(&mut self, estimated: u64, actual_input: u64) {
        if estimated > 0 && actual_input > 0 {
            self.ratio = (actual_input as f64 / estimated as f64).clamp(0.25, 4.0);
        }
    }

    /// The corrected estimate for a request.
    pub fn estimate(&self, system: &str, messages: &[Message], tools: &[ToolSpec]) -> u64 {
        self.correct(estimate_tokens(system, messages, tools))
    }

    /// `tokens` (an [`estimate_tokens`] figure) corrected.
    pub fn correct(&self, tokens: u64) -> u64 {
        (tokens as f64 * self.ratio).ceil() as u64
    }

    /// The current correction factor.
    pub fn ratio(&self) -> f64 {
        self.ratio
    }
}

/// True when `estimate` has reached `threshold_share` of `context_window`.
pub fn needs_compaction(estimate: u64, context_window: u64, threshold_share: f64) -> bool {
    estimate as f64 >= context_window as f64 * threshold_share.clamp(0.05, 1.0)
}

/// The system prompt and messages of a summarisation call; the loop adds
/// model, `max_tokens` and no tools.
#[derive(Debug, Clone, PartialEq)]
pub struct SummaryRequest {
    pub system: String,
    pub messages: Vec<Message>,
}

/// The instructions for a compaction summary.
const SUMMARY_SYSTEM: &str = "You compress an AI coding agent's conversation so that \
the agent can continue the work from your summary alone; the full transcript is \
unavailable to it. Write in the second person to the agent. Be specific: exact file \
paths, function names, commands, error messages, numbers. Use these sections:\n\
## Goal — what the user wants, in their words where it matters\n\
## Decisions — what was decided and why, including the user's corrections and preferences\n\
## Files — files read, created or changed, and what changed\n\
## Done — what is finished and verified\n\
## Open tasks — what remains, in order\n\
## Current state — what was happening at the end, and the next step\n\
Leave out pleasantries and anything superseded. Answer with the summary only.";

/// The request asking the model to summarise `messages`: the transcript is
/// rendered as text (tool results cut at [`SUMMARY_RESULT_CHARS`]) in one
/// user message, so tool-call pairing rules do not apply. `focus` is what
/// the user asked to keep (`/compact focus on the API`).
pub fn summary_request(messages: &[Message], focus: Option<&str>) -> SummaryRequest {
    let mut prompt = format!(
        "Summarise this conversation.\n\n<transcript>\n{}</transcript>",
        transcript_text(messages, SUMMARY_RESULT_CHARS)
    );
    if let Some(focus) = focus.map(str::trim).filter(|f| !f.is_empty()) {
        prompt.push_str(&format!("\n\nPay particular attention to: {focus}"));
    }
    SummaryRequest { system: SUMMARY_SYSTEM.into(), messages: vec![Message::user(prompt)] }
}

/// A conversation as plain text, one `[role]` block per message, tool calls
/// as `→ name(args)`, results as `← result` cut at `max_result_chars`.
pub fn transcript_text(messages: &[Message], max_result_chars: usize) -> String {
    let mut out = String::new();
    for m in messages {
        let who = match m.role {
            Role::User if m.is_tool_results() => "tool results",
            Role::User => "user",
            Role::Assistant => "assistant",
        };
        out.push_str(&format!("[{who}]\n"));
        for b in &m.content {
            match b {
                ContentBlock::Text { text } => out.push_str(text.trim_end()),
                ContentBlock::Image { media_type, .. } => {
                    out.push_str(&format!("(image {media_type})"));
                }
                ContentBlock::ToolCall(c) => out.push_str(&format!("→ {}({})", c.name, c.input)),
                ContentBlock::ToolResult { content, is_error, .. } => {
                    let text: String = content.iter().filter_map(ResultPart::as_text).collect();
                    let mark = if *is_error { "← error: " } else { "← " };
                    out.push_str(mark);
                    out.push_str(&crate::context::cap(text.trim_end(), max_result_chars));
                }
            }
            out.push('\n');
        }
        out.push('\n');
    }
    out
}

/// How the message holding a compaction's summary begins (after a
/// teammate's `<identity>`).
const COMPACTED_MARK: &str = "[The conversation so far was compacted to save context.";

/// True for the message [`compacted_history`] makes: the summary that
/// stands for the messages before it.
pub fn is_compacted_history(message: &Message) -> bool {
    let text = message.text();
    let text = match text.split_once("</identity>") {
        Some((before, after)) if before.starts_with("<identity>") => after.trim_start(),
        _ => text.as_str(),
    };
    message.role == Role::User && text.starts_with(COMPACTED_MARK)
}

/// The history that replaces the conversation after compaction: one user
/// message holding the summary, where the full transcript is, the todo list
/// and (for a teammate) its identity, so none of them is lost.
///
/// It is a user message so that the model's next turn is valid on both wire
/// formats; a new user request appended after it forms two consecutive user
/// messages, which both APIs accept.
pub fn compacted_history(
    summary: &str,
    transcript_path: &Path,
    todo_state: Option<String>,
    identity: Option<String>,
) -> Vec<Message> {
    let mut text = String::new();
    if let Some(identity) = identity.filter(|s| !s.trim().is_empty()) {
        text.push_str(&format!("<identity>{}</identity>\n\n", identity.trim()));
    }
    text.push_str(&format!(
        "{COMPACTED_MARK} Its full transcript is in {} \
         (JSONL, one entry per line); consult it only when a detail below is missing.]\n\n\
         <summary>\n{}\n</summary>",
        transcript_path.display(),
        summary.trim()
    ));
    if let Some(todos) = todo_state.filter(|s| !s.trim().is_empty()) {
        text.push_str(&format!("\n\nYour todo list:\n{}", todos.trim()));
    }
    text.push_str("\n\nContinue from where the work stopped.");
    vec![Message::user(text)]
}

/// The session entry to append after compacting: `replaced` messages gave
/// way to `history` (as built by [`compacted_history`]). Resuming the session
/// starts from this entry's summary message.
pub fn compaction_entry(history: &[Message], replaced: usize) -> Entry {
    Entry::Compaction {
        ts: clock::unix_seconds(),
        summary: history.iter().map(Message::text).collect::<Vec<_>>().join("\n\n"),
        replaced,
    }
}

#[cfg(test)]
mod tests;
