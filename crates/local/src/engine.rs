//! The engine: a GGUF model loaded once per process, and the worker thread
//! that owns its llama.cpp context. Requests queue on a channel; the worker
//! renders each with the model's chat template, reuses the KV cache for the
//! prefix it shares with the previous request, and streams what it samples
//! back as [`ProviderEvent`]s. Dropping the receiving end stops generation.

use std::collections::HashMap;
use std::num::NonZeroU32;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Mutex, OnceLock, mpsc};
use std::time::Instant;

use ferroclaw_llm::{ChatRequest, LlmError};
use ferroclaw_protocol::{ProviderEvent, Role, StopReason, Usage};
use llama_cpp_2::context::LlamaContext;
use llama_cpp_2::context::params::LlamaContextParams;
use llama_cpp_2::llama_backend::LlamaBackend;
use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::model::params::LlamaModelParams;
use llama_cpp_2::model::{LlamaChatMessage, LlamaChatTemplate, LlamaModel};
use llama_cpp_2::token::LlamaToken;

use crate::kvcache::PrefixCache;
use crate::options::{LocalOptions, ToolChoice};
use crate::repetition::LoopGuard;
use crate::sampling::{GrammarMode, Sampling};
use crate::toolcall::{CALL_OPEN, CallSplitter, RESULT_OPEN, Segment, parse_call};
use crate::{LocalError, grammar, prompt};

/// Where a request's events go.
pub type EventSender = tokio::sync::mpsc::Sender<Result<ProviderEvent, LlmError>>;

/// Name used in errors and messages.
const PROVIDER: &str = "local";

/// Tokens decoded per llama.cpp batch while reading a prompt (llama.cpp's
/// own default `n_batch`).
const PROMPT_BATCH: u32 = 512;

/// One loaded model and the queue of its worker.
pub struct Engine {
    /// The GGUF file.
    pub path: PathBuf,
    /// Context size in tokens the worker was given.
    pub context_tokens: u32,
    jobs: Mutex<mpsc::Sender<Job>>,
}

/// A request waiting for the worker, with the sampling settings of the
/// provider that sent it.
struct Job {
    request: ChatRequest,
    options: LocalOptions,
    events: EventSender,
}

static BACKEND: OnceLock<Result<LlamaBackend, String>> = OnceLock::new();
static ENGINES: LazyLock<Mutex<HashMap<PathBuf, Arc<Engine>>>> = LazyLock::new(Default::default);

/// Numbers tool-call ids across the process.
static NEXT_CALL: AtomicU64 = AtomicU64::new(1);

/// The llama.cpp backend, initialised once; its logs go to `tracing`.
fn backend() -> Result<&'static LlamaBackend, LocalError> {
    BACKEND
        .get_or_init(|| {
            llama_cpp_2::send_logs_to_tracing(llama_cpp_2::LogOptions::default());
            LlamaBackend::init().map_err(|e| e.to_string())
        })
        .as_ref()
        .map_err(|e| LocalError::Backend(e.clone()))
}

/// The engine for a model file: loaded on first use, then shared by every
/// caller in the process. Threads and context size of the first caller win;
/// sampling settings travel with each request.
pub fn open(path: &Path, options: &LocalOptions) -> Result<Arc<Engine>, LocalError> {
    let key = path
        .canonicalize()
        .map_err(|source| LocalError::ModelFile { path: path.to_path_buf(), source })?;
    let mut engines = ENGINES.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(engine) = engines.get(&key) {
        return Ok(engine.clone());
    }
    crate::store::check_gguf(&key)?;
    let backend = backend()?;
    let started = Instant::now();
    let model = LlamaModel::load_from_file(backend, &key, &LlamaModelParams::default())
        .map_err(|e| LocalError::Load { path: key.clone(), message: e.to_string() })?;
    let context_tokens = options.context_tokens.min(model.n_ctx_train().max(1));
    tracing::info!(
        "loaded {} in {} ms ({} parameters, context {context_tokens} tokens, {} threads)",
        key.display(),
        started.elapsed().as_millis(),
        model.n_params(),
        options.threads,
    );
    let prefix_cache = match &options.kv_cache_dir {
        Some(dir) if options.kv_cache_cap > 0 => PrefixCache::open(dir, &key, options.kv_cache_cap)
            .map_err(|e| tracing::warn!("local: prompt states are not saved: {e}"))
            .ok(),
        _ => None,
    };
    let (tx, rx) = mpsc::channel();
    let worker_options = LocalOptions { context_tokens, ..options.clone() };
    std::thread::Builder::new()
        .name("ferroclaw-local".into())
        .spawn(move || worker(model, worker_options, prefix_cache, rx))
        .map_err(|e| LocalError::Backend(format!("cannot start the model thread: {e}")))?;
    let engine = Arc::new(Engine { path: key.clone(), context_tokens, jobs: Mutex::new(tx) });
    engines.insert(key, engine.clone());
    Ok(engine)
}

impl Engine {
    /// Queues a request; its events arrive on `events`.
    pub fn submit(&self, request: ChatRequest, options: LocalOptions, events: EventSender) {
        let job = Job { request, options, events };
        let sent = self.jobs.lock().unwrap_or_else(|e| e.into_inner()).send(job);
        if let Err(mpsc::SendError(job)) = sent {
            let _ = job.events.try_send(Err(stream_error("the model thread has stopped")));
        }
    }
}

fn stream_error(message: impl Into<String>) -> LlmError {
    LlmError::Stream { provider: PROVIDER.into(), message: message.into() }
}

/// The worker: owns the context, answers jobs in order.
fn worker(
    model: LlamaModel,
    options: LocalOptions,
    prefix_cache: Option<PrefixCache>,
    jobs: mpsc::Receiver<Job>,
) {
    let params = LlamaContextParams::default()
        .with_n_ctx(NonZeroU32::new(options.context_tokens))
        .with_n_batch(PROMPT_BATCH)
        .with_n_threads(options.threads as i32)
        .with_n_threads_batch(options.threads as i32);
    let context = backend().and_then(|b| {
        model
            .new_context(b, params)
            .map_err(|e| LocalError::Backend(format!("cannot create a context: {e}")))
    });
    let mut session = match context {
        Ok(ctx) => Session {
            template: model.chat_template(None).or_else(|_| LlamaChatTemplate::new("chatml")).ok(),
            model: &model,
            ctx,
            cached: Vec::new(),
            prefix_cache,
        },
        Err(e) => {
            for job in jobs {
                let _ = job.events.blocking_send(Err(stream_error(e.to_string())));
            }
            return;
        }
    };
    for job in jobs {
        if job.events.is_closed() {
            continue;
        }
        if let Err(e) = session.answer(&job) {
            let _ = job.events.blocking_send(Err(e));
        }
    }
}

/// The context and what its KV cache holds.
pub(crate) struct Session<'m> {
    pub(crate) model: &'m LlamaModel,
    pub(crate) ctx: LlamaContext<'m>,
    pub(crate) template: Option<LlamaChatTemplate>,
    /// The tokens whose keys and values are in the cache, in order.
    pub(crate) cached: Vec<LlamaToken>,
    /// Where prompt prefix states are saved across processes.
    pub(crate) prefix_cache: Option<PrefixCache>,
}

/// Why generation stopped early.
enum Halt {
    /// The receiver is gone: the caller cancelled.
    Cancelled,
}

impl Session<'_> {
    /// Answers one request, streaming its events.
    fn answer(&mut self, job: &Job) -> Result<(), LlmError> {
        let started = Instant::now();
        let request = &job.request;
        let text = self.render(request)?;
        let tokens = self.model.vocab().tokenize(text.as_bytes(), true, true);
        let n_ctx = self.ctx.n_ctx() as usize;
        if tokens.len() + 1 >= n_ctx {
            return Err(stream_error(format!(
                "the prompt is {} tokens but the context holds {n_ctx}; \
                 set FERROCLAW_LOCAL_CONTEXT higher or start a new conversation",
                tokens.len()
            )));
        }
        let mut reused = self.reuse_prefix(&tokens);
        let prefix = self.fixed_prefix_len(request, &tokens);
        let mut save_to = None;
        if let Some(cache) = &self.prefix_cache
            && reused < prefix
        {
            let path = cache.path_for(&tokens[..prefix].iter().map(|t| t.0).collect::<Vec<_>>());
            match self.restore_prefix(&path, &tokens[..prefix]) {
                Ok(()) => reused = prefix,
                Err(reason) => {
                    // A failed load leaves the sequence empty.
                    reused = self.cached.len();
                    if path.exists() {
                        tracing::debug!("local: ignored prompt state {}: {reason}", path.display());
                        PrefixCache::remove(&path);
                    }
                    save_to = Some(path);
                }
            }
        }
        if let Some(path) = save_to {
            if self.read_prompt(&tokens[reused..prefix], &job.events).is_err() {
                return Ok(());
            }
            self.save_prefix(&path, prefix);
            if self.read_prompt(&tokens[prefix..], &job.events).is_err() {
                return Ok(());
            }
        } else if self.read_prompt(&tokens[reused..], &job.events).is_err() {
            return Ok(());
        }
        let prompt_done = Instant::now();
        // Half the free context at most, so the conversation can go on.
        let budget = (request.max_tokens as usize).min((n_ctx - tokens.len()) / 2).max(1);
        let mut sampler = self.sampler(request, &job.options)?;
        let mut splitter = CallSplitter::new();
        let mut utf8 = Utf8Pieces::default();
        let mut calls = Calls::default();
        let mut guard = LoopGuard::new();
        let mut generated = 0usize;
        let mut first_token: Option<Instant> = None;
        let mut stop = StopReason::EndTurn;
        loop {
            if generated >= budget {
                stop = StopReason::MaxTokens;
                break;
            }
            let token = sampler.sample(&self.ctx);
            if self.model.vocab().is_eog(token) {
                break;
            }
            generated += 1;
            first_token.get_or_insert_with(Instant::now);
            let piece = self.model.vocab().token_to_piece(token, true, None);
            let text = utf8.push(&piece);
            if guard.push(token.0, &text) {
                tracing::warn!("local: stopped a looping answer after {generated} tokens");
                break;
            }
            for segment in splitter.push(&text) {
                if emit_segment(segment, &job.events, &mut calls).is_err() {
                    return Ok(());
                }
            }
            if job.events.is_closed() {
                return Ok(());
            }
            if splitter.ended() {
                tracing::debug!("local: stopped an answer that began a {RESULT_OPEN}");
                break;
            }
            if self.decode(&[token], true).is_err() {
                return Err(stream_error("llama.cpp failed to decode a token"));
            }
        }
        let rest = utf8.finish();
        let mut tail = splitter.push(&rest);
        let unfinished = match splitter.finish() {
            Ok(last) => {
                tail.extend(last);
                None
            }
            Err(body) => Some(body),
        };
        for segment in tail {
            if emit_segment(segment, &job.events, &mut calls).is_err() {
                return Ok(());
            }
        }
        if let Some(body) = unfinished
            && calls.emit(&job.events, body, true).is_err()
        {
            return Ok(());
        }
        if calls.count > 0 {
            stop = StopReason::ToolUse;
        }
        let done = Instant::now();
        let evaluated = tokens.len() - reused;
        let prompt_secs = (prompt_done - started).as_secs_f64();
        let gen_secs = first_token.map_or(0.0, |t| (done - t).as_secs_f64());
        tracing::info!(
            "local: prompt {} tokens ({reused} reused, {evaluated} read in {:.0} ms, {:.0} tok/s), \
             first token after {:.0} ms, {generated} generated ({:.1} tok/s, {} resampled for the grammar)",
            tokens.len(),
            prompt_secs * 1e3,
            evaluated as f64 / prompt_secs.max(1e-9),
            first_token.map_or(0.0, |t| (t - started).as_secs_f64() * 1e3),
            generated.saturating_sub(1) as f64 / gen_secs.max(1e-9),
            sampler.resampled,
        );
        let usage = Usage {
            input_tokens: evaluated as u64,
            output_tokens: generated as u64,
            cache_read_tokens: reused as u64,
            cache_write_tokens: 0,
        };
        let _ = send(&job.events, ProviderEvent::Usage(usage));
        let _ = send(&job.events, ProviderEvent::Stop(stop));
        Ok(())
    }

    /// The request as the model's chat template writes it, ready for the answer.
    fn render(&self, request: &ChatRequest) -> Result<String, LlmError> {
        let turns = prompt::turns(request);
        let messages = turns
            .into_iter()
            .map(|t| LlamaChatMessage::new(t.role.to_string(), t.content.replace('\0', "")))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| stream_error(e.to_string()))?;
        let template = match &self.template {
            Some(t) => t,
            None => return Err(stream_error("the model has no usable chat template")),
        };
        self.model
            .apply_chat_template(template, &messages, true)
            .map_err(|e| stream_error(format!("cannot apply the model's chat template: {e}")))
    }

    /// Keeps the cached prefix shared with `tokens` and drops the rest;
    /// returns its length. At least one token is always left to read, since
    /// reading is what produces the next token's probabilities.
    fn reuse_prefix(&mut self, tokens: &[LlamaToken]) -> usize {
        let mut common = self.cached.iter().zip(tokens).take_while(|(a, b)| a == b).count();
        if common == tokens.len() {
            common = common.saturating_sub(1);
        }
        let kept = u32::try_from(common).unwrap_or(u32::MAX);
        match self.ctx.clear_kv_cache_seq(Some(0), Some(kept), None) {
            Ok(true) => {}
            // Recurrent models cannot cut their state: start over.
            _ => {
                self.ctx.clear_kv_cache();
                common = 0;
            }
        }
        self.cached.truncate(common);
        common
    }

    /// Reads prompt tokens into the cache in batches.
    fn read_prompt(&mut self, tokens: &[LlamaToken], events: &EventSender) -> Result<(), Halt> {
        let chunks = tokens.chunks(PROMPT_BATCH as usize);
        let last = chunks.len().saturating_sub(1);
        for (i, chunk) in chunks.enumerate() {
            if events.is_closed() {
                return Err(Halt::Cancelled);
            }
            if self.decode(chunk, i == last).is_err() {
                let _ =
                    events.blocking_send(Err(stream_error("llama.cpp failed to read the prompt")));
                return Err(Halt::Cancelled);
            }
        }
        Ok(())
    }

    /// Decodes tokens at the end of the cache; logits for the last one if asked.
    fn decode(&mut self, tokens: &[LlamaToken], logits_for_last: bool) -> Result<(), ()> {
        let mut batch = LlamaBatch::new(tokens.len().max(1), 1);
        let start = self.cached.len();
        for (i, token) in tokens.iter().enumerate() {
            let last = i + 1 == tokens.len();
            batch.add(*token, (start + i) as i32, &[0], last && logits_for_last).map_err(|_| ())?;
        }
        self.ctx.decode(&mut batch).map_err(|e| {
            tracing::warn!("local: decode failed: {e}");
        })?;
        self.cached.extend_from_slice(tokens);
        Ok(())
    }

    /// The samplers of one answer: the tool-call grammar when tools are
    /// offered (forced for a first answer under `ToolChoice::First`, else
    /// lazy), then the penalty and temperature chain.
    fn sampler(&self, request: &ChatRequest, options: &LocalOptions) -> Result<Sampling, LlmError> {
        let gbnf = if request.tools.is_empty() {
            None
        } else {
            let (gbnf, loose) = grammar::tool_call_grammar(&request.tools)
                .map_err(|e| stream_error(format!("cannot build the tool-call grammar: {e}")))?;
            for l in loose {
                tracing::warn!("local: tool {} arguments not constrained: {}", l.name, l.reason);
            }
            Some(gbnf)
        };
        let forced = options.tool_choice == ToolChoice::First && awaits_first_answer(request);
        let mode = if forced { GrammarMode::Forced } else { GrammarMode::Lazy };
        let temperature = request.temperature.unwrap_or(options.temperature);
        Sampling::new(self.model, gbnf.as_deref().map(|g| (g, mode)), temperature, options.seed())
            .map_err(|e| stream_error(format!("llama.cpp rejected the tool-call grammar: {e}")))
    }
}

/// True when the request ends with the user's own message (not tool
/// results): the model is about to give its first answer to it.
fn awaits_first_answer(request: &ChatRequest) -> bool {
    request.messages.last().is_some_and(|m| m.role == Role::User && !m.is_tool_results())
}

/// Sends one event; `Err` when the receiver is gone.
fn send(events: &EventSender, event: ProviderEvent) -> Result<(), Halt> {
    events.blocking_send(Ok(event)).map_err(|_| Halt::Cancelled)
}

/// Streams text, or announces and emits a parsed call.
fn emit_segment(segment: Segment, events: &EventSender, calls: &mut Calls) -> Result<(), Halt> {
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
    fn emit(&mut self, events: &EventSender, body: String, cut_short: bool) -> Result<(), Halt> {
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
    fn only_a_users_own_message_awaits_a_first_answer() {
        use ferroclaw_protocol::{ContentBlock, Message};
        let mut r = ChatRequest::new("m", vec![Message::user("list files")]);
        assert!(awaits_first_answer(&r));
        r.messages.push(Message {
            role: Role::User,
            content: vec![ContentBlock::tool_result("c1", "a.txt", false)],
        });
        assert!(!awaits_first_answer(&r), "after tool results the model is free");
        r.messages.push(Message::assistant("done"));
        assert!(!awaits_first_answer(&r));
    }

    #[test]
    fn a_character_split_across_tokens_comes_out_whole() {
        let mut u = Utf8Pieces::default();
        let bytes = "é".as_bytes();
        assert_eq!(u.push(&bytes[..1]), "");
        assert_eq!(u.push(&bytes[1..]), "é");
        assert_eq!(u.finish(), "");
    }
}
