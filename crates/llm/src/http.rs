//! The one [`Provider`] implementation: an HTTP client for either wire format
//! that sends a request, retries transient failures before any output, and
//! reads the answer under an idle timeout.

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use ferroclaw_protocol::ProviderEvent;
use futures_util::{Stream, StreamExt};
use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderMap};

use crate::answer_limit::AnswerLimit;
use crate::decode::{DecodeError, SseDecoder, parse_response};
use crate::retry::{delay_before_retry, is_transient_response, parse_error_body, server_delay};
use crate::{
    ChatRequest, EventStream, LlmError, Provider, ProviderConfig, WireFormat, anthropic, openai,
};

/// Most of an error response body we read: enough for any JSON error.
const ERROR_BODY_LIMIT: usize = 64 * 1024;

/// Sent as `User-Agent`.
/// How long the rest of a complete answer's body may take to arrive (from a
/// well-behaved server, its end comes with the last event). Reading a body to
/// its end hands the connection back to the pool for the next request; a
/// body dropped unread closes it, and the next request connects again.
const DRAIN_TIMEOUT: Duration = Duration::from_millis(50);

const USER_AGENT: &str = concat!("ferroclaw/", env!("CARGO_PKG_VERSION"));

/// A provider reached over HTTP, speaking one of the two wire formats.
pub(crate) struct HttpProvider {
    shared: Arc<Shared>,
}

/// What every request of one provider shares.
struct Shared {
    config: ProviderConfig,
    /// The endpoint: base URL plus the wire format's path.
    url: String,
    /// The client, or why it could not be built (reported per request).
    client: Result<reqwest::Client, String>,
}

impl HttpProvider {
    /// Builds the HTTP client for a config. Cheap: nothing is connected yet.
    pub(crate) fn new(config: ProviderConfig) -> Self {
        let client = build_client(&config);
        let base = config.base_url.trim_end_matches('/');
        let url = match config.wire {
            WireFormat::Anthropic => format!("{base}{}", anthropic::PATH),
            WireFormat::OpenAi => format!("{base}{}", openai::PATH),
        };
        Self { shared: Arc::new(Shared { config, url, client }) }
    }
}

/// The HTTP client for one provider. Plain-HTTP base URLs (local servers)
/// get a TLS setup with no root certificates, which skips reading the
/// system's store: faster, and works on systems that have none.
fn build_client(config: &ProviderConfig) -> Result<reqwest::Client, String> {
    // Ignore the error: another crate or an earlier call installed one.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut builder = reqwest::Client::builder()
        .user_agent(USER_AGENT)
        .connect_timeout(config.connect_timeout)
        .tcp_keepalive(Duration::from_secs(30));
    if config.base_url.trim_start().starts_with("http://") {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let tls = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?
            .with_root_certificates(rustls::RootCertStore::empty())
            .with_no_client_auth();
        builder = builder.tls_backend_preconfigured(tls);
    }
    builder.build().map_err(|e| describe(&e))
}

impl Provider for HttpProvider {
    fn name(&self) -> &str {
        &self.shared.config.name
    }

    fn stream(&self, mut request: ChatRequest) -> EventStream {
        let config = &self.shared.config;
        // The one place a request's max_tokens is bounded: what is sent and
        // the answer's bound below both follow from it.
        request.max_tokens =
            crate::answer_limit::bounded_max_tokens(&config.name, request.max_tokens);
        if !config.images && crate::images::any_image(&request.messages) {
            let messages: &mut Vec<_> = Arc::make_mut(&mut request.messages);
            crate::images::replace_images_with_notes(messages);
        }
        let body = match config.wire {
            WireFormat::Anthropic => anthropic::request_bytes(&request, config.stream),
            WireFormat::OpenAi => openai::request_bytes(
                &request,
                config.stream,
                openai::max_tokens_field(&config.base_url),
            ),
        };
        let exchange = Exchange {
            limit: AnswerLimit::for_max_tokens(request.max_tokens),
            body_read: 0,
            text_read: 0,
            shared: Arc::clone(&self.shared),
            body: Bytes::from(body),
            attempt: 0,
            phase: Phase::Send,
            ready: VecDeque::new(),
            committed: false,
            rng: fastrand::Rng::new(),
        };
        Box::pin(futures_util::stream::unfold(exchange, |mut exchange| async move {
            let item = exchange.next().await?;
            Some((item, exchange))
        }))
    }
}

/// A response body as a stream of chunks.
type Body = Pin<Box<dyn Stream<Item = reqwest::Result<Bytes>> + Send>>;

/// Where one request stands.
enum Phase {
    /// About to send (first attempt or a retry).
    Send,
    /// Waiting before a retry.
    Backoff(Duration),
    /// Reading an SSE body.
    Streaming { body: Body, decoder: Box<SseDecoder> },
    /// The answer is complete: reading what is left of the body (see
    /// [`DRAIN_TIMEOUT`]) once its events are handed out.
    Draining(Body),
    /// Nothing more to do once `ready` is drained.
    Done,
}

/// One request's progress, driven by the event stream's consumer: dropping
/// the stream drops this, which cancels the request.
struct Exchange {
    shared: Arc<Shared>,
    body: Bytes,
    /// Attempts started so far.
    attempt: u32,
    phase: Phase,
    /// Items to hand out before doing anything else.
    ready: VecDeque<Result<ProviderEvent, LlmError>>,
    /// Whether content has been handed out; from then on nothing is retried.
    committed: bool,
    rng: fastrand::Rng,
    /// How much this answer may hold.
    limit: AnswerLimit,
    /// Bytes of the current attempt's body read so far.
    body_read: u64,
    /// Bytes of answer text handed out so far.
    text_read: u64,
}

/// What reading one chunk of an SSE body found.
enum Read {
    /// More of the answer is to come.
    More,
    /// The answer is complete; the body may still have its end to send.
    Complete,
    /// The body ended.
    Ended,
}

/// How a failure of one attempt is treated.
struct Failure {
    error: LlmError,
    /// Whether another attempt may succeed.
    transient: bool,
    /// How long the server asked us to wait.
    server_delay: Option<Duration>,
}

impl Failure {
    fn permanent(error: LlmError) -> Self {
        Self { error, transient: false, server_delay: None }
    }

    fn transient(error: LlmError) -> Self {
        Self { error, transient: true, server_delay: None }
    }
}

impl Exchange {
    async fn next(&mut self) -> Option<Result<ProviderEvent, LlmError>> {
        loop {
            if let Some(item) = self.ready.pop_front() {
                return Some(item);
            }
            match std::mem::replace(&mut self.phase, Phase::Done) {
                Phase::Done => return None,
                Phase::Backoff(delay) => {
                    tokio::time::sleep(delay).await;
                    self.phase = Phase::Send;
                }
                Phase::Send => {
                    if let Err(failure) = self.send().await {
                        self.fail(failure);
                    }
                }
                Phase::Streaming { mut body, mut decoder } => {
                    match self.read_chunk(&mut body, &mut decoder).await {
                        Ok(Read::More) => self.phase = Phase::Streaming { body, decoder },
                        Ok(Read::Complete) => self.phase = Phase::Draining(body),
                        Ok(Read::Ended) => {}
                        Err(failure) => self.fail(failure),
                    }
                }
                Phase::Draining(mut body) => {
                    let rest = async { while let Some(Ok(_)) = body.next().await {} };
                    let _ = tokio::time::timeout(DRAIN_TIMEOUT, rest).await;
                }
            }
        }
    }

    fn config(&self) -> &ProviderConfig {
        &self.shared.config
    }

    /// Sends one attempt; on success, either starts streaming or decodes the
    /// whole answer.
    async fn send(&mut self) -> Result<(), Failure> {
        self.attempt += 1;
        let shared = Arc::clone(&self.shared);
        let config = &shared.config;
        let client = shared.client.as_ref().map_err(|message| {
            Failure::permanent(LlmError::Connect {
                provider: config.name.clone(),
                url: shared.url.clone(),
                message: format!("cannot build the HTTP client: {message}"),
            })
        })?;
        let mut request = client
            .post(&shared.url)
            .header(CONTENT_TYPE, "application/json")
            .body(self.body.clone());
        if config.stream {
            request = request.header(ACCEPT, "text/event-stream");
        }
        match (config.wire, &config.api_key) {
            (WireFormat::Anthropic, key) => {
                request = request.header("anthropic-version", anthropic::API_VERSION);
                if let Some(key) = key {
                    request = request.header("x-api-key", key);
                }
            }
            (WireFormat::OpenAi, Some(key)) => request = request.bearer_auth(key),
            (WireFormat::OpenAi, None) => {}
        }
        for (name, value) in &config.headers {
            request = request.header(name, value);
        }
        let response = match tokio::time::timeout(config.idle_timeout, request.send()).await {
            Err(_) => return Err(Failure::transient(self.idle_error())),
            Ok(Err(e)) => {
                let permanent = e.is_builder();
                let error = LlmError::Connect {
                    provider: config.name.clone(),
                    url: shared.url.clone(),
                    message: describe(&e.without_url()),
                };
                return Err(if permanent {
                    Failure::permanent(error)
                } else {
                    Failure::transient(error)
                });
            }
            Ok(Ok(response)) => response,
        };
        let status = response.status();
        if !status.is_success() {
            return Err(self.http_failure(response).await);
        }
        // Servers sometimes answer in the other mode than asked: go by the
        // content type when it says, by the request when it does not.
        let content_type = header_str(response.headers(), CONTENT_TYPE.as_str())
            .unwrap_or("")
            .trim_start()
            .to_ascii_lowercase();
        let is_sse = match content_type.as_str() {
            t if t.starts_with("text/event-stream") => true,
            t if t.starts_with("application/json") => false,
            t if t.starts_with("text/html") => {
                // A proxy's or a web server's page, not an API: say what came back.
                return Err(self.not_an_answer(status.as_u16(), t.to_string(), response).await);
            }
            _ => config.stream,
        };
        let body: Body = Box::pin(response.bytes_stream());
        self.body_read = 0;
        if is_sse {
            self.phase = Phase::Streaming { body, decoder: Box::new(SseDecoder::new(config.wire)) };
            return Ok(());
        }
        // One JSON answer.
        let cap = usize::try_from(self.limit.body_bytes).unwrap_or(usize::MAX);
        let bytes = self.read_all(body, cap.saturating_add(1)).await?;
        if bytes.len() > cap {
            return Err(Failure::permanent(self.too_large("body", self.limit.body_bytes)));
        }
        let events = parse_response(config.wire, &bytes).map_err(|e| self.decode_failure(e))?;
        self.accept(events);
        Ok(())
    }

    /// Reads one chunk of an SSE body.
    async fn read_chunk(
        &mut self,
        body: &mut Body,
        decoder: &mut SseDecoder,
    ) -> Result<Read, Failure> {
        let chunk = match tokio::time::timeout(self.config().idle_timeout, body.next()).await {
            Err(_) => return Err(Failure::transient(self.idle_error())),
            Ok(Some(Err(e))) => return Err(Failure::transient(self.broken_error(&e))),
            Ok(Some(Ok(chunk))) => Some(chunk),
            Ok(None) => None,
        };
        let events = match &chunk {
            Some(chunk) => decoder.push(chunk),
            None => decoder.finish(),
        };
        let events = events.map_err(|e| self.decode_failure(e))?;
        self.accept(events);
        self.body_read += chunk.as_ref().map_or(0, |c| c.len() as u64);
        if self.text_read > self.limit.text_bytes {
            return Err(Failure::permanent(self.too_large("text", self.limit.text_bytes)));
        }
        if self.body_read > self.limit.body_bytes && !decoder.is_done() {
            return Err(Failure::permanent(self.too_large("stream", self.limit.body_bytes)));
        }
        Ok(match (chunk.is_some(), decoder.is_done()) {
            (false, _) => Read::Ended,
            (true, true) => Read::Complete,
            (true, false) => Read::More,
        })
    }

    /// Reads a whole body (up to `limit` bytes) under the idle timeout.
    async fn read_all(&mut self, mut body: Body, limit: usize) -> Result<Vec<u8>, Failure> {
        let mut out = Vec::new();
        while out.len() < limit {
            match tokio::time::timeout(self.config().idle_timeout, body.next()).await {
                Err(_) => return Err(Failure::transient(self.idle_error())),
                Ok(Some(Err(e))) => return Err(Failure::transient(self.broken_error(&e))),
                Ok(Some(Ok(chunk))) => out.extend_from_slice(&chunk),
                Ok(None) => break,
            }
        }
        out.truncate(limit);
        Ok(out)
    }

    /// An error status: the provider's own message, transient or not.
    async fn http_failure(&mut self, response: reqwest::Response) -> Failure {
        let status = response.status();
        let headers = response.headers();
        let server_delay =
            server_delay(header_str(headers, "retry-after-ms"), header_str(headers, "retry-after"));
        let body = self
            .read_all(Box::pin(response.bytes_stream()), ERROR_BODY_LIMIT)
            .await
            .unwrap_or_default();
        let parsed = parse_error_body(&body);
        let message = match parsed.message.as_str() {
            "" => status.canonical_reason().unwrap_or("no error message").to_string(),
            _ => parsed.message,
        };
        Failure {
            error: LlmError::Http {
                provider: self.config().name.clone(),
                status: status.as_u16(),
                message,
            },
            transient: is_transient_response(status.as_u16(), parsed.kind.as_deref()),
            server_delay,
        }
    }

    /// A success status whose body is not an answer (an HTML page): the
    /// status, the content type and the first bytes, so the user can tell a
    /// wrong `base_url` or a captive portal from a model failure.
    async fn not_an_answer(
        &mut self,
        status: u16,
        content_type: String,
        response: reqwest::Response,
    ) -> Failure {
        let body = self
            .read_all(Box::pin(response.bytes_stream()), ERROR_BODY_LIMIT)
            .await
            .unwrap_or_default();
        let text = String::from_utf8_lossy(&body);
        let first: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
        Failure::permanent(LlmError::Http {
            provider: self.config().name.clone(),
            status,
            message: format!(
                "the answer is a {content_type} page, not an API response (is base_url {} \
                 right?): {}",
                self.shared.url,
                crate::decode::snippet(&first)
            ),
        })
    }

    fn decode_failure(&self, error: DecodeError) -> Failure {
        let transient = error.is_transient();
        Failure { error: error.into_llm(&self.config().name), transient, server_delay: None }
    }

    /// The answer passed its bound (`limit` bytes of `what`).
    fn too_large(&self, what: &'static str, limit: u64) -> LlmError {
        tracing::warn!(provider = %self.config().name, what, limit, "answer cut at its bound");
        LlmError::TooLarge {
            provider: self.config().name.clone(),
            what,
            limit,
            max_tokens: self.limit.max_tokens,
        }
    }

    fn idle_error(&self) -> LlmError {
        LlmError::Stream {
            provider: self.config().name.clone(),
            message: format!(
                "no data from the provider for {}",
                seconds(self.config().idle_timeout)
            ),
        }
    }

    fn broken_error(&self, e: &reqwest::Error) -> LlmError {
        LlmError::Stream {
            provider: self.config().name.clone(),
            message: format!("the connection broke during the answer: {}", describe(e)),
        }
    }

    /// Hands out decoded events; from now on this request is not retried.
    /// (Both assemblers report usage only beside the final `Stop`, so a
    /// failed attempt never leaves partial usage behind.)
    fn accept(&mut self, events: Vec<ProviderEvent>) {
        self.committed |= !events.is_empty();
        for event in &events {
            if let ProviderEvent::TextDelta(text) = event {
                self.text_read += text.len() as u64;
            }
        }
        self.ready.extend(events.into_iter().map(Ok));
    }

    /// Retries a transient failure if nothing was handed out and attempts
    /// remain; otherwise ends the stream with the error.
    fn fail(&mut self, failure: Failure) {
        let max_attempts = self.config().retry.max_attempts.max(1);
        if failure.transient && !self.committed && self.attempt < max_attempts {
            let delay = delay_before_retry(
                &self.shared.config.retry,
                self.attempt.saturating_sub(1),
                failure.server_delay,
                &mut self.rng,
            );
            tracing::debug!(provider = %self.config().name, attempt = self.attempt, ?delay, error = %failure.error, "retrying");
            self.ready.push_back(Ok(ProviderEvent::Retrying {
                attempt: self.attempt + 1,
                delay_ms: u64::try_from(delay.as_millis()).unwrap_or(u64::MAX),
                reason: failure.error.to_string(),
            }));
            self.phase = Phase::Backoff(delay);
            return;
        }
        let mut error = failure.error;
        if failure.transient && self.attempt > 1 && !self.committed {
            note_attempts(&mut error, self.attempt);
        }
        self.ready.push_back(Err(error));
        self.phase = Phase::Done;
    }
}

/// Appends "(gave up after N attempts)" to an error's message.
fn note_attempts(error: &mut LlmError, attempts: u32) {
    let message = match error {
        LlmError::Http { message, .. }
        | LlmError::Connect { message, .. }
        | LlmError::Stream { message, .. }
        | LlmError::Api { message, .. } => message,
        LlmError::TooLarge { .. } => return, // never retried
    };
    message.push_str(&format!(" (gave up after {attempts} attempts)"));
}

fn header_str<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// A duration for people: "120 s", "0.3 s".
fn seconds(d: Duration) -> String {
    if d.subsec_millis() == 0 {
        format!("{} s", d.as_secs())
    } else {
        format!("{:.1} s", d.as_secs_f64())
    }
}

/// An error and its chain of causes, joined with ": " (reqwest's own message
/// is often just "error sending request").
fn describe(e: &(dyn std::error::Error + 'static)) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        let text = cause.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        source = cause.source();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_as_seconds() {
        assert_eq!(seconds(Duration::from_secs(120)), "120 s");
        assert_eq!(seconds(Duration::from_millis(300)), "0.3 s");
    }

    #[test]
    fn the_endpoint_is_the_base_url_without_trailing_slash_plus_the_wire_path() {
        let a = HttpProvider::new(ProviderConfig::new("a", WireFormat::Anthropic, "http://h:1/"));
        assert_eq!(a.shared.url, "http://h:1/v1/messages");
        let o = HttpProvider::new(ProviderConfig::new("o", WireFormat::OpenAi, "http://h:1/v1"));
        assert_eq!(o.shared.url, "http://h:1/v1/chat/completions");
        assert_eq!(o.name(), "o");
    }

    #[test]
    fn a_gave_up_note_names_the_attempt_count() {
        let mut e = LlmError::Http { provider: "p".into(), status: 500, message: "boom".into() };
        note_attempts(&mut e, 4);
        assert_eq!(e.to_string(), "p: HTTP 500: boom (gave up after 4 attempts)");
    }
}
