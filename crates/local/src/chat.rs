//! One answer in progress on the model thread: its prompt, how much of it
//! is read, its samplers, and what it has streamed so far. The scheduler
//! ([`crate::engine`]) feeds it one token of logits per step; everything
//! after sampling (repetition guard, tool-call splitting, stop conditions,
//! events) happens here, so each chat stops on its own terms while sharing
//! one decode with the others.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use ferroclaw_llm::LlmError;
use ferroclaw_protocol::{ProviderEvent, StopReason, Usage};
use llama_cpp_2::context::LlamaContext;
use llama_cpp_2::model::LlamaModel;
use llama_cpp_2::token::LlamaToken;

use crate::repetition::LoopGuard;
use crate::sampling::Sampling;
use crate::toolcall::{CALL_OPEN, CallSplitter, RESULT_OPEN, Segment, parse_call};

/// Where a request's events go.
pub type EventSender = tokio::sync::mpsc::Sender<Result<ProviderEvent, LlmError>>;

/// Name used in errors and messages.
const PROVIDER: &str = "local";

/// Numbers tool-call ids across the process.
static NEXT_CALL: AtomicU64 = AtomicU64::new(1);

/// A stream error from the local provider.
pub fn stream_error(message: impl Into<String>) -> LlmError {
    LlmError::Stream { provider: PROVIDER.into(), message: message.into() }
}

/// One answer being produced.
pub struct Chat {
    pub events: EventSender,
    /// The rendered prompt, tokenized.
    pub tokens: Vec<LlamaToken>,
    /// Prompt tokens found already in the KV cache when the chat started.
    pub reused: usize,
    /// Save the sequence's state here once this many prompt tokens are read
    /// (the fixed prefix, for the next process).
    pub save_at: Option<(usize, PathBuf)>,
    /// Wait for the chat in this slot to read this many shared prompt
    /// tokens, then copy them instead of reading them again.
    pub copy_from: Option<(usize, usize)>,
    /// The token sampled last, to be decoded in the next step.
    pub next: Option<LlamaToken>,
    /// Where this chat's logits are in the batch just decoded.
    pub logits_at: Option<i32>,
    /// The scheduler's clock when the chat was admitted.
    pub admitted: u64,
    budget: usize,
    sampler: Sampling,
    splitter: CallSplitter,
    utf8: Utf8Pieces,
    calls: Calls,
    guard: LoopGuard,
    generated: usize,
    started: Instant,
    prompt_done: Option<Instant>,
    first_token: Option<Instant>,
}

/// What a chat does after a step.
#[derive(Debug, PartialEq, Eq)]
pub enum Next {
    /// Go on: decode [`Chat::next`] in the next step.
    Continue,
    /// The answer is complete (events sent, usage and stop included).
    Done,
    /// The receiver is gone: stop quietly.
    Cancelled,
}

impl Chat {
    /// A chat for a prompt with `budget` tokens of answer at most.
    pub fn new(
        events: EventSender,
        tokens: Vec<LlamaToken>,
        budget: usize,
        sampler: Sampling,
        started: Instant,
    ) -> Self {
        Self {
            events,
            tokens,
            reused: 0,
            save_at: None,
            copy_from: None,
            next: None,
            logits_at: None,
            admitted: 0,
            budget,
            sampler,
            splitter: CallSplitter::new(),
            utf8: Utf8Pieces::default(),
            calls: Calls::default(),
            guard: LoopGuard::new(),
            generated: 0,
            started,
            prompt_done: None,
            first_token: None,
        }
    }

    /// True once the caller dropped the stream.
    pub fn cancelled(&self) -> bool {
        self.events.is_closed()
    }

    /// Samples from the logits at `self.logits_at`, streams what it means,
    /// and says whether to go on.
    pub fn step(&mut self, model: &LlamaModel, ctx: &LlamaContext<'_>) -> Next {
        let Some(at) = self.logits_at.take() else {
            return Next::Continue;
        };
        self.prompt_done.get_or_insert_with(Instant::now);
        let token = self.sampler.sample(ctx, at);
        if model.vocab().is_eog(token) {
            return self.finish(StopReason::EndTurn);
        }
        self.generated += 1;
        self.first_token.get_or_insert_with(Instant::now);
        let piece = model.vocab().token_to_piece(token, true, None);
        let text = self.utf8.push(&piece);
        if self.guard.push(token.0, &text) {
            tracing::warn!("local: stopped a looping answer after {} tokens", self.generated);
            return self.finish(StopReason::EndTurn);
        }
        for segment in self.splitter.push(&text) {
            if emit_segment(segment, &self.events, &mut self.calls).is_err() {
                return Next::Cancelled;
            }
        }
        if self.events.is_closed() {
            return Next::Cancelled;
        }
        if self.splitter.ended() {
            tracing::debug!("local: stopped an answer that began a {RESULT_OPEN}");
            return self.finish(StopReason::EndTurn);
        }
        if self.generated >= self.budget {
            return self.finish(StopReason::MaxTokens);
        }
        self.next = Some(token);
        Next::Continue
    }

    /// Flushes what is pending, then sends usage and the stop reason.
    fn finish(&mut self, mut stop: StopReason) -> Next {
        let rest = self.utf8.finish();
        let mut tail = self.splitter.push(&rest);
        let unfinished = match self.splitter.finish() {
            Ok(last) => {
                tail.extend(last);
                None
            }
            Err(body) => Some(body),
        };
        for segment in tail {
            if emit_segment(segment, &self.events, &mut self.calls).is_err() {
                return Next::Cancelled;
            }
        }
        if let Some(body) = unfinished
            && self.calls.emit(&self.events, body, true).is_err()
        {
            return Next::Cancelled;
        }
        if self.calls.count > 0 {
            stop = StopReason::ToolUse;
        }
        self.log();
        let usage = Usage {
            input_tokens: (self.tokens.len() - self.reused) as u64,
            output_tokens: self.generated as u64,
            cache_read_tokens: self.reused as u64,
            cache_write_tokens: 0,
        };
        if send(&self.events, ProviderEvent::Usage(usage)).is_err()
            || send(&self.events, ProviderEvent::Stop(stop)).is_err()
        {
            return Next::Cancelled;
        }
        Next::Done
    }

    fn log(&self) {
        let done = Instant::now();
        let prompt_done = self.prompt_done.unwrap_or(done);
        let evaluated = self.tokens.len() - self.reused;
        let prompt_secs = (prompt_done - self.started).as_secs_f64();
        let gen_secs = self.first_token.map_or(0.0, |t| (done - t).as_secs_f64());
        tracing::info!(
            "local: prompt {} tokens ({} reused, {evaluated} read in {:.0} ms, {:.0} tok/s), \
             first token after {:.0} ms, {} generated ({:.1} tok/s, {} resampled for the grammar)",
            self.tokens.len(),
            self.reused,
            prompt_secs * 1e3,
            evaluated as f64 / prompt_secs.max(1e-9),
            self.first_token.map_or(0.0, |t| (t - self.started).as_secs_f64() * 1e3),
            self.generated,
            self.generated.saturating_sub(1) as f64 / gen_secs.max(1e-9),
            self.sampler.resampled,
        );
    }
}

/// Why an event could not be sent.
pub struct Gone;

/// Sends one event; `Err` when the receiver is gone.
pub fn send(events: &EventSender, event: ProviderEvent) -> Result<(), Gone> {
    events.blocking_send(Ok(event)).map_err(|_| Gone)
}

/// Streams text, or announces and emits a parsed call.
fn emit_segment(segment: Segment, events: &EventSender, calls: &mut Calls) -> Result<(), Gone> {
    match segment {
        Segment::Text(text) => send(events, ProviderEvent::TextDelta(text)),
        Segment::Call(body) => calls.emit(events, body, false),
    }
}

/// The calls of one answer so far.
#[derive(Default)]
struct Calls {
    /// Calls emitted (malformed ones included).
    count: usize,
    /// Name and arguments of each well-formed call, to drop repeats: small
    /// models often write the same call twice in a row.
    seen: Vec<(String, serde_json::Value)>,
}

impl Calls {
    /// Announces and emits one call. A body that does not parse (or was cut
    /// short by the token cap) goes out with `parse_error` set, so the loop
    /// can tell the model what went wrong. An exact repeat of an earlier call
    /// of this answer is dropped.
    fn emit(&mut self, events: &EventSender, body: String, cut_short: bool) -> Result<(), Gone> {
        let id = next_call_id();
        let parsed = if cut_short {
            Err(format!("the answer ended inside {CALL_OPEN} (token cap reached)"))
        } else {
            parse_call(id.clone(), &body).map_err(|e| e.to_string())
        };
        let (call, parse_error) = match parsed {
            Ok(call) => {
                let key = (call.name.clone(), call.input.clone());
                if self.seen.contains(&key) {
                    tracing::debug!("local: dropped a repeated call to {}", call.name);
                    return Ok(());
                }
                self.seen.push(key);
                (call, None)
            }
            Err(e) => (
                ferroclaw_protocol::ToolCall {
                    id,
                    name: String::new(),
                    input: serde_json::Value::String(body),
                },
                Some(e),
            ),
        };
        self.count += 1;
        send(
            events,
            ProviderEvent::ToolCallStarted { id: call.id.clone(), name: call.name.clone() },
        )?;
        send(events, ProviderEvent::ToolCall { call, parse_error })
    }
}

fn next_call_id() -> String {
    format!("call_local_{}", NEXT_CALL.fetch_add(1, Ordering::Relaxed))
}

/// Joins token bytes into whole UTF-8 characters (a character may span tokens).
#[derive(Default)]
struct Utf8Pieces {
    pending: Vec<u8>,
}

impl Utf8Pieces {
    /// Adds bytes; returns the complete characters so far.
    fn push(&mut self, bytes: &[u8]) -> String {
        self.pending.extend_from_slice(bytes);
        match std::str::from_utf8(&self.pending) {
            Ok(s) => {
                let out = s.to_string();
                self.pending.clear();
                out
            }
            Err(e) if e.error_len().is_none() => {
                let valid = e.valid_up_to();
                let out = String::from_utf8_lossy(&self.pending[..valid]).into_owned();
                self.pending.drain(..valid);
                out
            }
            Err(_) => String::from_utf8_lossy(&std::mem::take(&mut self.pending)).into_owned(),
        }
    }

    /// Whatever is left, invalid bytes replaced.
    fn finish(&mut self) -> String {
        String::from_utf8_lossy(&std::mem::take(&mut self.pending)).into_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_character_split_across_tokens_comes_out_whole() {
        let mut u = Utf8Pieces::default();
        let bytes = "é".as_bytes();
        assert_eq!(u.push(&bytes[..1]), "");
        assert_eq!(u.push(&bytes[1..]), "é");
        assert_eq!(u.finish(), "");
    }
}
