//! LLM providers. Two hand-written wire clients, Anthropic Messages and
//! OpenAI-compatible Chat Completions, streaming (SSE) or not, with retries
//! under our control, behind one small trait: [`Provider::stream`] takes a
//! [`ChatRequest`] and returns a stream of [`ProviderEvent`]s.
//!
//! Named presets (anthropic, openai, openrouter, deepseek, groq, gemini,
//! ollama, vllm, llamacpp) map a provider name to a wire format, base URL and
//! key variable; see [`presets`]. Model names are written `PROVIDER/MODEL`.
//!
//! This crate does not read config files or decide which provider to use:
//! that is `ferroclaw-core`'s job.
//!
//! What a stream promises: text arrives as deltas, tool calls arrive whole
//! (announced first by `ToolCallStarted`), usage comes once just before the
//! final `Stop`. Transient failures (429, 5xx, 529, resets, timeouts, an
//! overload error event) that happen before any output are retried, each
//! retry announced by `Retrying { attempt, .. }` where `attempt` is the
//! number of the attempt about to start (2 for the first retry). Anything
//! else ends the stream with one [`LlmError`] as its last item; a stream never
//! hangs longer than [`ProviderConfig::idle_timeout`] without data.
//!
//! ```
//! use ferroclaw_llm::{ModelSpec, WireFormat, preset};
//!
//! let spec = ModelSpec::parse("openrouter/anthropic/claude-sonnet-4.5").unwrap();
//! assert_eq!(spec.model, "anthropic/claude-sonnet-4.5");
//! let openrouter = preset(&spec.provider).unwrap();
//! assert_eq!(openrouter.wire, WireFormat::OpenAi);
//! assert_eq!(openrouter.key_env, Some("OPENROUTER_API_KEY"));
//! ```
//!
//! ```no_run
//! use ferroclaw_llm::{ChatRequest, ProviderConfig, WireFormat, connect};
//! use ferroclaw_protocol::Message;
//! use futures_util::StreamExt;
//!
//! # async fn demo() {
//! let provider = connect(ProviderConfig::new("anthropic", WireFormat::Anthropic, "https://api.anthropic.com"));
//! let request = ChatRequest::new("claude-sonnet-4-5", vec![Message::user("hi")]);
//! let mut events = provider.stream(request);
//! while let Some(event) = events.next().await {
//!     println!("{event:?}");
//! }
//! # }
//! ```

mod answer_limit;
mod anthropic;
mod decode;
#[cfg(test)]
mod fuzz;
mod http;
mod images;
mod openai;
mod presets;
mod retry;
mod sse;
mod text_part;

pub use answer_limit::MAX_TOKENS_CEILING;
pub use presets::{ModelSpec, ModelSpecError, Preset, preset, presets};

use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use ferroclaw_protocol::{Message, ProviderEvent, Sampling, ToolSpec};
use futures_util::Stream;

/// A stream of events answering one request.
pub type EventStream = Pin<Box<dyn Stream<Item = Result<ProviderEvent, LlmError>> + Send>>;

/// Something that answers chat requests with a stream of events.
pub trait Provider: Send + Sync {
    /// The provider's name, for messages ("anthropic", "openrouter", ...).
    fn name(&self) -> &str;
    /// Sends the request (retrying transient failures before any output) and
    /// streams the answer. Errors arrive as the stream's last item.
    fn stream(&self, request: ChatRequest) -> EventStream;
}

/// One request to a model. Its big parts are shared, not copied: an agent
/// hands the provider its conversation, system prompt and tool specs as
/// reference-counted handles, so building a request copies nothing big, and
/// the agent's next append reuses the same vector once the provider has let
/// go of it (see [`Arc::make_mut`]).
#[derive(Debug, Clone, PartialEq)]
pub struct ChatRequest {
    /// The model name as the provider knows it (without the `PROVIDER/` prefix).
    pub model: String,
    /// The system prompt; empty for none.
    pub system: Arc<str>,
    /// The conversation so far, oldest first.
    pub messages: Arc<Vec<Message>>,
    /// Tools the model may call; empty for none.
    pub tools: Arc<[ToolSpec]>,
    /// Cap on the answer's length in tokens (sent as at most
    /// [`MAX_TOKENS_CEILING`]).
    pub max_tokens: u32,
    /// Temperature, `top_p`, seed and stop sequences; the default leaves
    /// the provider's own. Chat Completions sends all four; Anthropic
    /// Messages drops the seed, and `top_p` beside a temperature.
    pub sampling: Sampling,
}

impl ChatRequest {
    /// A request with no system prompt, no tools and the default `max_tokens`.
    pub fn new(model: impl Into<String>, messages: Vec<Message>) -> Self {
        Self {
            model: model.into(),
            system: Arc::from(""),
            messages: Arc::new(messages),
            tools: Arc::from([]),
            max_tokens: DEFAULT_MAX_TOKENS,
            sampling: Sampling::default(),
        }
    }
}

/// Default `max_tokens` of an answer.
pub const DEFAULT_MAX_TOKENS: u32 = 8192;

/// The two wire formats we speak.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WireFormat {
    /// Anthropic Messages API; base URL is the server root, we append `/v1/messages`.
    Anthropic,
    /// OpenAI Chat Completions; base URL includes `/v1`, we append `/chat/completions`.
    OpenAi,
}

/// Everything needed to talk to one provider.
#[derive(Debug, Clone)]
pub struct ProviderConfig {
    /// Name used in messages.
    pub name: String,
    /// The wire format the server speaks.
    pub wire: WireFormat,
    /// Where the server lives; see [`WireFormat`] for what it includes.
    pub base_url: String,
    /// The API key; `None` sends no key (local servers).
    pub api_key: Option<String>,
    /// Use SSE streaming (`true`) or one JSON response (`false`).
    pub stream: bool,
    /// The model accepts images; when `false`, image blocks are sent as a
    /// short text note instead.
    pub images: bool,
    /// Extra HTTP headers sent with every request.
    pub headers: Vec<(String, String)>,
    pub retry: RetryPolicy,
    /// Time allowed to connect.
    pub connect_timeout: Duration,
    /// Longest silence allowed while waiting for the first byte or between
    /// stream chunks before the stream is declared broken.
    pub idle_timeout: Duration,
}

impl ProviderConfig {
    /// A config with defaults: streaming, no key, default retries and timeouts.
    pub fn new(name: impl Into<String>, wire: WireFormat, base_url: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            wire,
            base_url: base_url.into(),
            api_key: None,
            stream: true,
            images: true,
            headers: Vec::new(),
            retry: RetryPolicy::default(),
            connect_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(120),
        }
    }
}

/// How transient failures (429, 5xx, 529/overloaded, resets, timeouts) are retried.
#[derive(Debug, Clone, PartialEq)]
pub struct RetryPolicy {
    /// Total attempts including the first.
    pub max_attempts: u32,
    /// Delay before the first retry; doubles each time, with jitter.
    pub base_delay: Duration,
    /// Cap on any one delay, also on a server's `retry-after`.
    pub max_delay: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_attempts: 4,
            base_delay: Duration::from_millis(500),
            max_delay: Duration::from_secs(30),
        }
    }
}

/// Everything that can go wrong talking to a provider.
#[derive(Debug, Clone, thiserror::Error)]
pub enum LlmError {
    /// The provider answered with an error status (after retries, if transient).
    #[error("{provider}: HTTP {status}: {message}")]
    Http { provider: String, status: u16, message: String },
    /// The request never got an answer (connection refused, reset, DNS, timeout).
    #[error("{provider}: cannot reach {url}: {message}")]
    Connect { provider: String, url: String, message: String },
    /// The stream broke or carried something we cannot parse.
    #[error("{provider}: {message}")]
    Stream { provider: String, message: String },
    /// The provider sent an error in the stream (e.g. Anthropic `overloaded_error`).
    #[error("{provider}: {kind}: {message}")]
    Api { provider: String, kind: String, message: String },
    /// The answer passed the bound derived from `max_tokens` (see
    /// `answer_limit`): the provider ignored it; what came before is kept.
    #[error(
        "{provider}: the answer passed {limit} bytes of {what}, more than max_tokens = \
         {max_tokens} allows; it was cut there (the provider does not respect max_tokens)"
    )]
    TooLarge { provider: String, what: &'static str, limit: u64, max_tokens: u32 },
}

/// Builds a provider for a config: one HTTP client, nothing connected yet.
pub fn connect(config: ProviderConfig) -> Arc<dyn Provider> {
    Arc::new(http::HttpProvider::new(config))
}
