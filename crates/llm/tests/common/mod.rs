//! Helpers shared by the integration tests: configs pointing at a scripted
//! server, and collecting a provider's stream with a hang guard.

#![allow(dead_code)] // each test file uses a different subset

use std::time::Duration;

use ferroclaw_llm::{ChatRequest, LlmError, ProviderConfig, RetryPolicy, WireFormat, connect};
use ferroclaw_protocol::{Message, ProviderEvent, StopReason};
use ferroclaw_testkit::ScriptedServer;
use futures_util::StreamExt;

/// Every combination of wire format and streaming.
pub(crate) const MODES: [(WireFormat, bool); 4] = [
    (WireFormat::Anthropic, true),
    (WireFormat::Anthropic, false),
    (WireFormat::OpenAi, true),
    (WireFormat::OpenAi, false),
];

/// Longest any one test stream may take before the test calls it a hang.
const HANG_GUARD: Duration = Duration::from_secs(20);

/// A config for the scripted server, with a key and fast retries.
pub(crate) fn config(server: &ScriptedServer, wire: WireFormat, stream: bool) -> ProviderConfig {
    let (name, base_url) = match wire {
        WireFormat::Anthropic => ("scripted-anthropic", server.url()),
        WireFormat::OpenAi => ("scripted-openai", server.openai_base_url()),
    };
    let mut config = ProviderConfig::new(name, wire, base_url);
    config.api_key = Some("sk-test-key".into());
    config.stream = stream;
    config.retry = RetryPolicy {
        max_attempts: 3,
        base_delay: Duration::from_millis(5),
        max_delay: Duration::from_millis(50),
    };
    config.idle_timeout = Duration::from_secs(5);
    config
}

/// A request with one user message.
pub(crate) fn ask(text: &str) -> ChatRequest {
    ChatRequest::new("scripted-model", vec![Message::user(text)])
}

/// What a stream produced: its events, and the error that ended it, if any.
#[derive(Debug)]
pub(crate) struct Outcome {
    pub events: Vec<ProviderEvent>,
    pub error: Option<LlmError>,
}

impl Outcome {
    /// All text deltas joined.
    pub(crate) fn text(&self) -> String {
        self.events
            .iter()
            .filter_map(|e| match e {
                ProviderEvent::TextDelta(t) => Some(t.as_str()),
                _ => None,
            })
            .collect()
    }

    /// The `Retrying` events, as (attempt, delay_ms, reason).
    pub(crate) fn retries(&self) -> Vec<(u32, u64, String)> {
        self.events
            .iter()
            .filter_map(|e| match e {
                ProviderEvent::Retrying { attempt, delay_ms, reason } => {
                    Some((*attempt, *delay_ms, reason.clone()))
                }
                _ => None,
            })
            .collect()
    }

    /// The stop reason, if the answer completed.
    pub(crate) fn stop(&self) -> Option<&StopReason> {
        self.events.iter().find_map(|e| match e {
            ProviderEvent::Stop(reason) => Some(reason),
            _ => None,
        })
    }

    /// The error's message, or "" when the stream ended cleanly.
    pub(crate) fn error_text(&self) -> String {
        self.error.as_ref().map(ToString::to_string).unwrap_or_default()
    }
}

/// Runs a request to completion; panics if the stream hangs or yields after an error.
pub(crate) async fn run(config: ProviderConfig, request: ChatRequest) -> Outcome {
    let provider = connect(config);
    let mut stream = provider.stream(request);
    let collect = async {
        let mut events = Vec::new();
        while let Some(item) = stream.next().await {
            match item {
                Ok(event) => events.push(event),
                Err(error) => {
                    assert!(stream.next().await.is_none(), "the stream went on after an error");
                    return Outcome { events, error: Some(error) };
                }
            }
        }
        Outcome { events, error: None }
    };
    match tokio::time::timeout(HANG_GUARD, collect).await {
        Ok(outcome) => outcome,
        Err(_) => panic!("the provider stream hung for {HANG_GUARD:?}"),
    }
}
