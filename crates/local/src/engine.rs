//! The engine: a GGUF model loaded once per process, and the worker thread
//! that owns its llama.cpp context. Requests queue on a channel; the worker
//! serves up to [`LocalOptions::parallel`] of them at once, each in its own
//! sequence of one context whose KV cache is unified (cells are shared
//! between sequences). A prompt start that another sequence holds (the
//! system prompt and tools, the previous turn of the same conversation) is
//! copied, not read again; each step decodes, in one batch, the next token
//! of every answer in progress and the next chunk of prompts being read. A
//! request arriving mid-answer joins at the next step; past the cap it
//! waits its turn. Dropping the receiving end stops an answer.

use std::collections::{HashMap, VecDeque};
use std::num::NonZeroU32;
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock, Mutex, OnceLock, mpsc};
use std::time::Instant;

use ferroclaw_llm::{ChatRequest, LlmError};
use ferroclaw_protocol::Role;
use llama_cpp_2::context::LlamaContext;
use llama_cpp_2::context::params::LlamaContextParams;
use llama_cpp_2::llama_backend::LlamaBackend;
use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::model::params::LlamaModelParams;
use llama_cpp_2::model::{LlamaChatMessage, LlamaChatTemplate, LlamaModel};
use llama_cpp_2::token::LlamaToken;

pub(crate) use crate::chat::EventSender;
use crate::chat::{Chat, Next, stream_error};
use crate::kvcache::PrefixCache;
use crate::options::{LocalOptions, ToolChoice};
use crate::sampling::{GrammarMode, Sampling};
use crate::schedule::{FreeSlot, Want, common_prefix, pick_slot, plan_batch};
use crate::toolcall::CALL_OPEN;
use crate::{LocalError, grammar, prompt};

/// Tokens decoded per llama.cpp batch, all chats together (llama.cpp's own
/// default `n_batch`).
const BATCH_TOKENS: u32 = 512;

/// One loaded model and the queue of its worker.
pub(crate) struct Engine {
    /// The GGUF file.
    pub path: PathBuf,
    /// Context size in tokens the worker was given (shared by its chats).
    pub context_tokens: u32,
    /// Chats answered at once.
    pub parallel: u32,
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
/// caller in the process. Threads, context size and parallel chats of the
/// first caller win; sampling settings travel with each request.
pub(crate) fn open(path: &Path, options: &LocalOptions) -> Result<Arc<Engine>, LocalError> {
    let key = path
        .canonicalize()
        .map_err(|source| LocalError::ModelFile { path: path.to_path_buf(), source })?;
    let mut engines = ENGINES.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(engine) = engines.get(&key) {
        return Ok(engine.clone());
    }
    crate::store::check_gguf(&key)?;
    let backend = backend()?;
    let started = Instant::now();
    let model = LlamaModel::load_from_file(backend, &key, &LlamaModelParams::default())
        .map_err(|e| LocalError::Load { path: key.clone(), message: e.to_string() })?;
    let context_tokens = options.context_tokens.min(model.n_ctx_train().max(1));
    let parallel = options.parallel.max(1);
    tracing::info!(
        "loaded {} in {} ms ({} parameters, context {context_tokens} tokens, {} threads, \
         {parallel} chats at once)",
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
    let worker_options = LocalOptions { context_tokens, parallel, ..options.clone() };
    std::thread::Builder::new()
        .name("ferroclaw-local".into())
        .spawn(move || worker(model, worker_options, prefix_cache, rx))
        .map_err(|e| LocalError::Backend(format!("cannot start the model thread: {e}")))?;
    let engine =
        Arc::new(Engine { path: key.clone(), context_tokens, parallel, jobs: Mutex::new(tx) });
    engines.insert(key, engine.clone());
    Ok(engine)
}

impl Engine {
    /// Queues a request; its events arrive on `events`.
    pub(crate) fn submit(&self, request: ChatRequest, options: LocalOptions, events: EventSender) {
        let job = Job { request, options, events };
        let sent = self.jobs.lock().unwrap_or_else(std::sync::PoisonError::into_inner).send(job);
        if let Err(mpsc::SendError(job)) = sent {
            let _ = job.events.try_send(Err(stream_error("the model thread has stopped")));
        }
    }
}

/// The worker: owns the context; admits requests while sequences are free
/// and steps every admitted chat forward together.
fn worker(
    model: LlamaModel,
    options: LocalOptions,
    prefix_cache: Option<PrefixCache>,
    jobs: mpsc::Receiver<Job>,
) {
    let params = LlamaContextParams::default()
        .with_n_ctx(NonZeroU32::new(options.context_tokens))
        .with_n_batch(BATCH_TOKENS)
        .with_n_seq_max(options.parallel)
        .with_kv_unified(true)
        .with_n_threads(options.threads as i32)
        .with_n_threads_batch(options.threads as i32);
    let context = backend().and_then(|b| {
        model
            .new_context(b, params)
            .map_err(|e| LocalError::Backend(format!("cannot create a context: {e}")))
    });
    let ctx = match context {
        Ok(ctx) => ctx,
        Err(e) => {
            for job in jobs {
                let _ = job.events.blocking_send(Err(stream_error(e.to_string())));
            }
            return;
        }
    };
    let mut session = Session {
        template: model
            .chat_template(None)
            .or_else(|_| {
                let arch = model.meta_val_str("general.architecture").unwrap_or_default();
                LlamaChatTemplate::new(fallback_template(&arch))
            })
            .ok(),
        model: &model,
        ctx,
        slots: (0..options.parallel as i32)
            .map(|seq| Slot { seq, cached: Vec::new(), chat: None, last_used: 0 })
            .collect(),
        prefix_cache,
        batch: LlamaBatch::new(BATCH_TOKENS as usize, 1),
        clock: 0,
    };
    let mut queue: VecDeque<Job> = VecDeque::new();
    loop {
        if session.idle() && queue.is_empty() {
            match jobs.recv() {
                Ok(job) => queue.push_back(job),
                Err(_) => return,
            }
        }
        queue.extend(jobs.try_iter());
        queue.retain(|job| !job.events.is_closed());
        while session.has_free_slot() {
            let Some(job) = queue.pop_front() else { break };
            session.admit(job);
        }
        session.step();
    }
}

/// llama.cpp's built-in template for a model whose GGUF carries none (a
/// base model such as Gemma 3 270M): the turn markers of its family, whose
/// end-of-turn token the vocabulary knows as an end of generation, else
/// ChatML. Measured with `ferroclaw eval tools` on Gemma 3 270M: under
/// ChatML, whose markers are plain text in Gemma's vocabulary, both tasks
/// tried ran out their 300 s calling tools over and over; under its own
/// markers each task ended after two turns (still failing them: it is a
/// base model).
pub(crate) fn fallback_template(architecture: &str) -> &'static str {
    if architecture.starts_with("gemma") { "gemma" } else { "chatml" }
}

/// The context and its sequences.
pub(crate) struct Session<'m> {
    pub(crate) model: &'m LlamaModel,
    pub(crate) ctx: LlamaContext<'m>,
    pub(crate) template: Option<LlamaChatTemplate>,
    /// One per sequence of the context.
    pub(crate) slots: Vec<Slot>,
    /// Where prompt prefix states are saved across processes.
    pub(crate) prefix_cache: Option<PrefixCache>,
    batch: LlamaBatch<'static>,
    /// Steps taken (orders slots by last use).
    clock: u64,
}

/// One sequence of the context: what its KV cells hold, and the chat it
/// serves. A finished chat leaves its cells as a cache for the next turn of
/// its conversation; they are dropped when the slot serves another prompt
/// or the context runs out of room.
pub(crate) struct Slot {
    pub(crate) seq: i32,
    /// The tokens whose keys and values are in this sequence, in order.
    pub(crate) cached: Vec<LlamaToken>,
    chat: Option<Chat>,
    last_used: u64,
}

impl Session<'_> {
    fn idle(&self) -> bool {
        self.slots.iter().all(|s| s.chat.is_none())
    }

    fn has_free_slot(&self) -> bool {
        self.slots.iter().any(|s| s.chat.is_none())
    }

    /// Starts a chat in a free slot: renders and tokenizes its prompt, keeps
    /// or copies the longest prompt start already in the cache (or restores
    /// the saved prefix state), and builds its samplers. Errors go to the
    /// request's stream.
    fn admit(&mut self, job: Job) {
        if let Err(e) = self.try_admit(&job) {
            let _ = job.events.blocking_send(Err(e));
        }
    }

    fn try_admit(&mut self, job: &Job) -> Result<(), LlmError> {
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
        let free: Vec<FreeSlot<'_, LlamaToken>> = (self.slots.iter().enumerate())
            .filter(|(_, s)| s.chat.is_none())
            .map(|(index, s)| FreeSlot { index, cached: &s.cached, last_used: s.last_used })
            .collect();
        let Some(s) = pick_slot(&free, &tokens) else {
            return Err(stream_error("no free sequence (a bug: admitted without room)"));
        };
        // At least one prompt token is always read: reading is what gives
        // the next token's probabilities.
        let limit = tokens.len() - 1;
        let own = common_prefix(&self.slots[s].cached, &tokens).min(limit);
        self.keep(s, own);
        // Another sequence may hold (or be reading) a longer start.
        let mut copy_from = None;
        let best_other = (0..self.slots.len())
            .filter(|&o| o != s)
            .map(|o| (o, common_prefix(self.slots[o].holds_or_reads(), &tokens).min(limit)))
            .max_by_key(|&(_, n)| n);
        if let Some((o, n)) = best_other
            && n > own
        {
            if self.slots[o].cached.len() >= n {
                self.copy(o, s, n);
            } else {
                copy_from = Some((o, n));
            }
        }
        let mut save_at = None;
        let prefix = self.fixed_prefix_len(request, &tokens);
        let coming = copy_from.map_or(self.slots[s].cached.len(), |(_, n)| n);
        if let Some(cache) = &self.prefix_cache
            && coming < prefix
        {
            copy_from = None;
            let path = cache.path_for(&tokens[..prefix].iter().map(|t| t.0).collect::<Vec<_>>());
            if let Err(reason) = self.restore_prefix(s, &path, &tokens[..prefix]) {
                if path.exists() {
                    tracing::debug!("local: ignored prompt state {}: {reason}", path.display());
                    PrefixCache::remove(&path);
                }
                save_at = Some((prefix, path));
            }
        }
        // Half the free context at most, so the conversation can go on.
        let budget = (request.max_tokens as usize).min((n_ctx - tokens.len()) / 2).max(1);
        let (sampler, redo) = self.samplers(request, &job.options)?;
        let mut chat = Chat::new(job.events.clone(), tokens, budget, sampler, started);
        if redo.is_some() {
            let open = self.model.vocab().tokenize(CALL_OPEN.as_bytes(), false, true);
            chat.open_token = open.first().copied();
            chat.about_files =
                request.messages.last().is_some_and(|m| crate::redo::about_files(&m.text()));
        }
        chat.redo = redo;
        chat.reused = self.slots[s].cached.len();
        chat.save_at = save_at;
        chat.copy_from = copy_from;
        chat.admitted = self.clock;
        self.slots[s].chat = Some(chat);
        Ok(())
    }

    /// One step: drops cancelled chats, copies prompt starts that became
    /// ready, decodes one batch for every chat that wants tokens, saves
    /// prefix states that are complete, and lets each chat with fresh
    /// logits sample and stream.
    fn step(&mut self) {
        self.clock += 1;
        for i in 0..self.slots.len() {
            if self.slots[i].chat.as_ref().is_some_and(Chat::cancelled) {
                self.release(i, false);
            }
        }
        self.resolve_copies();
        let wants: Vec<Want> = self.slots.iter().map(Slot::want).collect();
        let plan = plan_batch(&wants, BATCH_TOKENS as usize);
        self.batch.clear();
        let mut added: Vec<Vec<LlamaToken>> = vec![Vec::new(); self.slots.len()];
        for (i, &n) in plan.iter().enumerate() {
            if n == 0 {
                continue;
            }
            let slot = &mut self.slots[i];
            let Some(chat) = slot.chat.as_mut() else { continue };
            let have = slot.cached.len();
            let (tokens, logits_last) = match chat.next {
                Some(token) => (vec![token], true),
                None => (chat.tokens[have..have + n].to_vec(), have + n == chat.tokens.len()),
            };
            for (k, token) in tokens.iter().enumerate() {
                let last = k + 1 == tokens.len() && logits_last;
                if self.batch.add(*token, (have + k) as i32, &[slot.seq], last).is_err() {
                    tracing::warn!("local: batch overflow (a bug)");
                }
            }
            if logits_last {
                chat.logits_at = Some(self.batch.n_tokens() - 1);
            }
            added[i] = tokens;
        }
        if self.batch.n_tokens() == 0 {
            return;
        }
        if !self.decode(&added) {
            return;
        }
        for (slot, tokens) in self.slots.iter_mut().zip(added) {
            if let Some(chat) = slot.chat.as_mut()
                && !tokens.is_empty()
            {
                chat.next = None;
            }
            slot.cached.extend(tokens);
        }
        for i in 0..self.slots.len() {
            let slot = &mut self.slots[i];
            let Some(chat) = slot.chat.as_mut() else { continue };
            if let Some((at, _)) = &chat.save_at
                && *at == slot.cached.len()
                && let Some((at, path)) = chat.save_at.take()
            {
                self.save_prefix(i, &path, at);
            }
        }
        for i in 0..self.slots.len() {
            let Session { model, ctx, slots, .. } = self;
            let Some(chat) = slots[i].chat.as_mut() else { continue };
            match chat.step(model, ctx) {
                Next::Continue => {}
                Next::Done => self.release(i, false),
                Next::Cancelled => self.release(i, false),
                Next::Redo => {
                    chat.start_redo();
                    // Keep the prompt but its last token: reading that one
                    // again gives the first token's probabilities afresh.
                    let prompt = chat.tokens.len() - 1;
                    self.keep(i, prompt);
                }
            }
        }
    }

    /// Decodes the batch. Out of room, it first drops the caches finished
    /// chats left, then gives up the newest chat in the batch (with an error
    /// on its stream); false when nothing was decoded this step.
    fn decode(&mut self, added: &[Vec<LlamaToken>]) -> bool {
        use llama_cpp_2::DecodeError;
        let mut result = self.ctx.decode(&mut self.batch);
        if result == Err(DecodeError::NoKvCacheSlot) && self.drop_idle_caches() > 0 {
            result = self.ctx.decode(&mut self.batch);
        }
        let message = match result {
            Ok(()) => return true,
            Err(DecodeError::NoKvCacheSlot) => format!(
                "the context is full ({} tokens shared by the chats in progress); \
                 set FERROCLAW_LOCAL_CONTEXT higher or FERROCLAW_LOCAL_PARALLEL lower",
                self.ctx.n_ctx()
            ),
            Err(e) => format!("llama.cpp failed to decode: {e}"),
        };
        tracing::warn!("local: {message}");
        let newest = (0..self.slots.len())
            .filter(|&i| !added[i].is_empty())
            .max_by_key(|&i| self.slots[i].chat.as_ref().map(|c| c.admitted));
        for chat in self.slots.iter_mut().filter_map(|s| s.chat.as_mut()) {
            chat.logits_at = None;
        }
        if let Some(i) = newest
            && let Some(chat) = &self.slots[i].chat
        {
            let _ = chat.events.blocking_send(Err(stream_error(message)));
            self.release(i, true);
        }
        false
    }

    /// Ends slot `i`'s chat and frees the slot for the next request. A
    /// failed chat's cells are cleared. A finished or cancelled one's stay,
    /// as a cache for its conversation's next turn, until the slot serves
    /// another prompt or the context needs the room: clearing them while
    /// other chats are answering would let those chats' next tokens fill the
    /// holes, out of position order, and change the order llama.cpp sums
    /// their attention in; small models' greedy answers flip on such
    /// rounding, and a chat's answer should not depend on another's fate.
    fn release(&mut self, i: usize, clear: bool) {
        let slot = &mut self.slots[i];
        slot.chat = None;
        slot.last_used = self.clock;
        if clear {
            let _ = self.ctx.clear_kv_cache_seq(Some(slot.seq as u32), None, None);
            slot.cached.clear();
        }
    }

    /// Clears the cells of sequences no chat is using; returns how many.
    fn drop_idle_caches(&mut self) -> usize {
        let mut dropped = 0;
        for slot in self.slots.iter_mut().filter(|s| s.chat.is_none() && !s.cached.is_empty()) {
            let _ = self.ctx.clear_kv_cache_seq(Some(slot.seq as u32), None, None);
            slot.cached.clear();
            dropped += 1;
        }
        dropped
    }

    /// Chats waiting for another's prompt start copy it once it is read,
    /// or give up waiting when that chat is gone.
    fn resolve_copies(&mut self) {
        for i in 0..self.slots.len() {
            let Some(chat) = &self.slots[i].chat else { continue };
            let Some((src, n)) = chat.copy_from else { continue };
            let wanted = &chat.tokens[..n];
            let source = &self.slots[src];
            let ready = source.cached.len() >= n && source.cached[..n] == *wanted;
            let coming = common_prefix(source.holds_or_reads(), wanted) >= n;
            if ready {
                self.copy(src, i, n);
            }
            let slot = &mut self.slots[i];
            if let Some(chat) = slot.chat.as_mut()
                && (ready || !coming)
            {
                chat.reused = slot.cached.len();
                chat.copy_from = None;
            }
        }
    }

    /// Keeps the first `n` tokens of slot `s`'s sequence, drops the rest.
    fn keep(&mut self, s: usize, n: usize) {
        let slot = &mut self.slots[s];
        let kept = u32::try_from(n).unwrap_or(u32::MAX);
        match self.ctx.clear_kv_cache_seq(Some(slot.seq as u32), Some(kept), None) {
            Ok(true) => slot.cached.truncate(n),
            // Recurrent models cannot cut their state: start over.
            _ => {
                let _ = self.ctx.clear_kv_cache_seq(Some(slot.seq as u32), None, None);
                slot.cached.clear();
            }
        }
    }

    /// Makes slot `to` hold the first `n` tokens of slot `from` (shared
    /// cells: nothing is computed or duplicated).
    fn copy(&mut self, from: usize, to: usize, n: usize) {
        let (src, dst) = (self.slots[from].seq, self.slots[to].seq);
        let _ = self.ctx.clear_kv_cache_seq(Some(dst as u32), None, None);
        let end = u32::try_from(n).unwrap_or(u32::MAX);
        if self.ctx.copy_kv_cache_seq(src, dst, Some(0), Some(end)).is_ok() {
            self.slots[to].cached = self.slots[from].cached[..n].to_vec();
            tracing::debug!("local: copied {n} prompt tokens from sequence {src} to {dst}");
        } else {
            self.slots[to].cached.clear();
        }
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

    /// The samplers of one answer: the tool-call grammar when tools are
    /// offered (forced for a first answer under `ToolChoice::First`, else
    /// lazy), then the penalty and temperature chain. Under
    /// `ToolChoice::Auto`, a first answer also gets samplers with a call
    /// to a tool that changes nothing forced, to redo it with if it goes
    /// wrong ([`crate::redo`]).
    fn samplers(
        &self,
        request: &ChatRequest,
        options: &LocalOptions,
    ) -> Result<(Sampling, Option<Sampling>), LlmError> {
        let asked = &request.sampling;
        let temperature = asked.temperature.unwrap_or(options.temperature);
        // A request's seed, as the low 32 bits llama.cpp takes.
        let seed = asked.seed.map_or_else(|| options.seed(), |s| s as u32);
        if asked.top_p.is_some() || !asked.stop.is_empty() {
            tracing::debug!(
                "top_p and stop sequences dropped: the local model's samplers take neither"
            );
        }
        let build = |grammar: Option<(&str, GrammarMode)>| {
            Sampling::new(self.model, grammar, temperature, seed)
                .map_err(|e| stream_error(format!("llama.cpp rejected the tool-call grammar: {e}")))
        };
        if request.tools.is_empty() {
            return Ok((build(None)?, None));
        }
        let gbnf = grammar::tool_call_grammar(&request.tools);
        let first = awaits_first_answer(request);
        let lazy = build(Some((&gbnf, GrammarMode::Lazy)))?;
        Ok(match options.tool_choice {
            ToolChoice::First if first => (build(Some((&gbnf, GrammarMode::Forced)))?, None),
            ToolChoice::Auto if first => {
                let look = crate::redo::redo_tools(&request.tools);
                if look.is_empty() {
                    (lazy, None)
                } else {
                    let gbnf = grammar::tool_call_grammar(&look);
                    (lazy, Some(build(Some((&gbnf, GrammarMode::Forced)))?))
                }
            }
            _ => (lazy, None),
        })
    }
}

impl Slot {
    /// What the sequence holds, or will once its chat has read its prompt.
    fn holds_or_reads(&self) -> &[LlamaToken] {
        match &self.chat {
            Some(chat) if self.cached.len() < chat.tokens.len() && chat.next.is_none() => {
                &chat.tokens
            }
            _ => &self.cached,
        }
    }

    /// What the slot's chat wants from the next decode.
    fn want(&self) -> Want {
        let Some(chat) = &self.chat else { return Want::Nothing };
        if chat.copy_from.is_some() || chat.logits_at.is_some() {
            return Want::Nothing;
        }
        if chat.next.is_some() {
            return Want::Generate;
        }
        let have = self.cached.len();
        if have >= chat.tokens.len() {
            return Want::Nothing;
        }
        let until_pause = match &chat.save_at {
            Some((at, _)) if *at > have => at - have,
            _ => usize::MAX,
        };
        Want::Read { left: chat.tokens.len() - have, until_pause }
    }
}

/// True when the request ends with the user's own message (not tool
/// results): the model is about to give its first answer to it.
fn awaits_first_answer(request: &ChatRequest) -> bool {
    request.messages.last().is_some_and(|m| m.role == Role::User && !m.is_tool_results())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_users_own_message_awaits_a_first_answer() {
        use ferroclaw_protocol::{ContentBlock, Message};
        let mut r = ChatRequest::new("m", vec![Message::user("list files")]);
        assert!(awaits_first_answer(&r));
        Arc::make_mut(&mut r.messages).push(Message {
            role: Role::User,
            content: vec![ContentBlock::tool_result("c1", "a.txt", false)],
        });
        assert!(!awaits_first_answer(&r), "after tool results the model is free");
        Arc::make_mut(&mut r.messages).push(Message::assistant("done"));
        assert!(!awaits_first_answer(&r));
    }

    #[test]
    fn a_model_without_a_template_gets_its_familys_turn_markers_else_chatml() {
        assert_eq!(fallback_template("gemma3"), "gemma");
        assert_eq!(fallback_template("gemma"), "gemma");
        assert_eq!(fallback_template("llama"), "chatml");
        assert_eq!(fallback_template(""), "chatml");
    }
}
