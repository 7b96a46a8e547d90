//! Misbehaving servers: retries, error statuses, cut and malformed streams,
//! stalls. Every stream must end, with an error a user can act on.

mod common;

use std::time::Duration;

use common::{MODES, ask, config, run};
use ferroclaw_llm::{LlmError, WireFormat};
use ferroclaw_testkit::{Fault, ScriptedServer, Step, Turn};

fn status(status: u16, retry_after: Option<u64>) -> Step {
    Fault::Status { status, body: None, retry_after }.into()
}

#[tokio::test]
async fn a_429_with_retry_after_is_retried_after_the_capped_delay_then_succeeds() {
    for (wire, stream) in MODES {
        let mode = format!("{wire:?} stream={stream}");
        let server =
            ScriptedServer::start(vec![status(429, Some(30)), Turn::text("Made it").into()]);
        let outcome = run(config(&server, wire, stream), ask("hi")).await;
        assert!(outcome.error.is_none(), "{mode}: {:?}", outcome.error);
        assert_eq!(outcome.text(), "Made it", "{mode}");
        let retries = outcome.retries();
        assert_eq!(retries.len(), 1, "{mode}");
        let (attempt, delay_ms, reason) = &retries[0];
        assert_eq!((*attempt, *delay_ms), (2, 50), "{mode}: retry-after 30 s capped at max_delay");
        assert!(reason.contains("HTTP 429"), "{mode}: {reason}");
        assert_eq!(server.requests().len(), 2, "{mode}");
    }
}

#[tokio::test]
async fn server_errors_on_every_attempt_end_in_an_http_error_naming_provider_status_and_message() {
    for (wire, stream) in MODES {
        let mode = format!("{wire:?} stream={stream}");
        let server =
            ScriptedServer::start(vec![status(500, None), status(500, None), status(500, None)]);
        let outcome = run(config(&server, wire, stream), ask("hi")).await;
        assert_eq!(server.requests().len(), 3, "{mode}: max_attempts is 3");
        assert_eq!(outcome.retries().len(), 2, "{mode}");
        let Some(LlmError::Http { provider, status, message }) = &outcome.error else {
            panic!("{mode}: expected an HTTP error, got {:?}", outcome.error);
        };
        assert_eq!(*status, 500, "{mode}");
        assert!(provider.starts_with("scripted-"), "{mode}");
        assert!(message.contains("scripted-llm"), "{mode}: the provider's own message: {message}");
        let text = outcome.error_text();
        assert!(text.contains("HTTP 500") && text.contains("gave up after 3 attempts"), "{text}");
    }
}

#[tokio::test]
async fn an_overloaded_529_is_retried() {
    for stream in [true, false] {
        let server = ScriptedServer::start(vec![status(529, None), Turn::text("Fine now").into()]);
        let outcome = run(config(&server, WireFormat::Anthropic, stream), ask("hi")).await;
        assert!(outcome.error.is_none(), "stream={stream}: {:?}", outcome.error);
        assert_eq!(outcome.text(), "Fine now");
        let retries = outcome.retries();
        assert_eq!(retries.len(), 1);
        assert!(retries[0].2.contains("529"), "{}", retries[0].2);
        assert!(retries[0].1 <= 50);
    }
}

#[tokio::test]
async fn an_error_event_before_any_output_is_retried() {
    for (wire, stream) in MODES {
        let mode = format!("{wire:?} stream={stream}");
        let server = ScriptedServer::start(vec![
            Fault::StreamErrorEvent.into(),
            Turn::text("Second try").into(),
        ]);
        let outcome = run(config(&server, wire, stream), ask("hi")).await;
        assert!(outcome.error.is_none(), "{mode}: {:?}", outcome.error);
        assert_eq!(outcome.text(), "Second try", "{mode}");
        assert_eq!(outcome.retries().len(), 1, "{mode}");
    }
}

#[tokio::test]
async fn a_persistent_overload_event_ends_in_an_api_error() {
    let server = ScriptedServer::start(vec![Fault::StreamErrorEvent.into(); 3]);
    let outcome = run(config(&server, WireFormat::Anthropic, true), ask("hi")).await;
    let Some(LlmError::Api { kind, message, .. }) = &outcome.error else {
        panic!("expected an API error, got {:?}", outcome.error);
    };
    assert_eq!(kind, "overloaded_error");
    assert!(message.starts_with("Overloaded"), "{message}");
}

#[tokio::test]
async fn client_errors_fail_at_once_without_retrying() {
    for (wire, stream) in MODES {
        let mode = format!("{wire:?} stream={stream}");
        for code in [400, 401, 403, 404] {
            let server =
                ScriptedServer::start(vec![status(code, None), Turn::text("never").into()]);
            let outcome = run(config(&server, wire, stream), ask("hi")).await;
            assert_eq!(server.requests().len(), 1, "{mode} {code}");
            assert!(outcome.retries().is_empty(), "{mode} {code}");
            assert!(
                matches!(&outcome.error, Some(LlmError::Http { status, .. }) if *status == code),
                "{mode} {code}: {:?}",
                outcome.error
            );
        }
    }
}

#[tokio::test]
async fn a_stream_cut_after_output_ends_in_an_error_without_retrying() {
    for wire in [WireFormat::Anthropic, WireFormat::OpenAi] {
        let server =
            ScriptedServer::start(vec![Fault::CutMidStream.into(), Turn::text("never").into()]);
        let outcome = run(config(&server, wire, true), ask("hi")).await;
        assert!(!outcome.text().is_empty(), "{wire:?}: the text before the cut arrives");
        assert!(
            matches!(outcome.error, Some(LlmError::Stream { .. })),
            "{wire:?}: {:?}",
            outcome.error
        );
        assert_eq!(server.requests().len(), 1, "{wire:?}: output was shown, so no retry");
        assert!(outcome.stop().is_none());
    }
}

#[tokio::test]
async fn a_cut_non_streaming_body_is_retried_and_then_succeeds() {
    for wire in [WireFormat::Anthropic, WireFormat::OpenAi] {
        let server =
            ScriptedServer::start(vec![Fault::CutMidStream.into(), Turn::text("Whole").into()]);
        let outcome = run(config(&server, wire, false), ask("hi")).await;
        assert!(outcome.error.is_none(), "{wire:?}: {:?}", outcome.error);
        assert_eq!(outcome.text(), "Whole");
        assert_eq!(outcome.retries().len(), 1);
    }
}

#[tokio::test]
async fn malformed_data_ends_in_an_error_quoting_it() {
    for (wire, stream) in MODES {
        let mode = format!("{wire:?} stream={stream}");
        let server =
            ScriptedServer::start(vec![Fault::MalformedSse.into(), Turn::text("never").into()]);
        let outcome = run(config(&server, wire, stream), ask("hi")).await;
        let text = outcome.error_text();
        assert!(matches!(outcome.error, Some(LlmError::Stream { .. })), "{mode}: {text}");
        assert!(text.contains("malformed JSON") && text.contains(": nope"), "{mode}: {text}");
        assert_eq!(server.requests().len(), 1, "{mode}: malformed data is not retried");
    }
}

#[tokio::test]
async fn a_stall_after_output_ends_in_an_idle_timeout_error() {
    for wire in [WireFormat::Anthropic, WireFormat::OpenAi] {
        let server = ScriptedServer::start(vec![
            Fault::Stall { after_text: "Thinking about it".into() }.into(),
        ]);
        let mut config = config(&server, wire, true);
        config.idle_timeout = Duration::from_millis(300);
        let outcome = run(config, ask("hi")).await;
        assert_eq!(outcome.text(), "Thinking about it", "{wire:?}");
        assert!(matches!(outcome.error, Some(LlmError::Stream { .. })), "{wire:?}");
        assert!(
            outcome.error_text().contains("no data from the provider for 0.3 s"),
            "{}",
            outcome.error_text()
        );
        assert_eq!(server.requests().len(), 1);
    }
}

#[tokio::test]
async fn a_slow_first_byte_within_the_idle_timeout_is_fine_and_beyond_it_is_retried() {
    for (wire, stream) in MODES {
        let mode = format!("{wire:?} stream={stream}");
        let server = ScriptedServer::start(vec![
            Fault::SlowFirstByte { delay_ms: 100, then: Turn::text("Slow but sure") }.into(),
            Fault::SlowFirstByte { delay_ms: 2_000, then: Turn::text("too late") }.into(),
            Turn::text("Quick").into(),
        ]);
        let mut slow = config(&server, wire, stream);
        slow.idle_timeout = Duration::from_millis(500);
        let outcome = run(slow.clone(), ask("hi")).await;
        assert_eq!(outcome.text(), "Slow but sure", "{mode}: {:?}", outcome.error);
        let outcome = run(slow, ask("hi")).await;
        assert_eq!(outcome.text(), "Quick", "{mode}: {:?}", outcome.error);
        let retries = outcome.retries();
        assert_eq!(retries.len(), 1, "{mode}");
        assert!(retries[0].2.contains("no data from the provider"), "{mode}: {}", retries[0].2);
    }
}

#[tokio::test]
async fn an_unreachable_server_is_a_connect_error_naming_the_url_after_retries() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap_or(9);
    let mut config = ferroclaw_llm::ProviderConfig::new(
        "nowhere",
        WireFormat::OpenAi,
        format!("http://127.0.0.1:{port}/v1"),
    );
    config.retry.base_delay = Duration::from_millis(1);
    config.retry.max_attempts = 2;
    let outcome = run(config, ask("hi")).await;
    assert_eq!(outcome.retries().len(), 1);
    let text = outcome.error_text();
    assert!(matches!(outcome.error, Some(LlmError::Connect { .. })), "{text}");
    assert!(text.starts_with("nowhere: cannot reach http://127.0.0.1:"), "{text}");
    assert!(text.contains("/v1/chat/completions"), "{text}");
}

#[tokio::test]
async fn an_html_page_with_status_200_is_reported_as_what_came_back_and_not_retried() {
    for (wire, stream) in MODES {
        let mode = format!("{wire:?} stream={stream}");
        let page = "<!DOCTYPE html>\n<html><body><h1>Sign in to the Wi-Fi</h1></body></html>";
        let server = ScriptedServer::start(vec![
            Fault::HtmlPage { body: page.into() }.into(),
            Turn::text("never reached").into(),
        ]);
        let outcome = run(config(&server, wire, stream), ask("hi")).await;
        let text = outcome.error_text();
        assert!(text.contains("HTTP 200") && text.contains("text/html"), "{mode}: {text}");
        assert!(text.contains("Sign in to the Wi-Fi"), "{mode}: the first bytes: {text}");
        assert!(!text.contains("stream ended before"), "{mode}: {text}");
        assert_eq!(server.requests().len(), 1, "{mode}: a page is not retried");
    }
}

#[tokio::test]
async fn an_answer_without_end_is_cut_at_a_bound_from_max_tokens_on_both_wires() {
    for (wire, stream) in MODES {
        let mode = format!("{wire:?} stream={stream}");
        let text = "all work and no play makes a dull model ";
        let server = ScriptedServer::start(vec![Fault::Endless { text: text.into() }.into()]);
        let mut request = ask("hi");
        request.max_tokens = 100;
        let outcome = run(config(&server, wire, stream), request).await;
        let Some(LlmError::TooLarge { limit, max_tokens, .. }) = &outcome.error else {
            panic!("{mode}: expected the answer to be cut, got {:?}", outcome.error);
        };
        assert_eq!(*max_tokens, 100, "{mode}");
        let message = outcome.error_text();
        assert!(message.contains("max_tokens = 100") && message.contains("cut"), "{message}");
        // What streamed before the cut is handed out, and no more than the bound.
        let shown = outcome.text().len() as u64;
        assert!(shown <= *limit + 64 * 1024, "{mode}: {shown} bytes of text past {limit}");
        if stream {
            assert!(outcome.text().starts_with("all work"), "{mode}");
        }
        assert_eq!(server.requests().len(), 1, "{mode}: a cut answer is not retried");
    }
}

/// A `max_tokens` no model answers (an MCP server's sampling request, any
/// caller of the crate) is not sent as asked: the request carries the
/// ceiling, from which the answer's bound follows (see `answer_limit`).
#[tokio::test]
async fn an_absurd_max_tokens_is_sent_as_the_ceiling_on_both_wires() {
    let ceiling = ferroclaw_llm::MAX_TOKENS_CEILING;
    for (wire, stream) in MODES {
        let mode = format!("{wire:?} stream={stream}");
        let server = ScriptedServer::start(vec![Turn::text("short").into()]);
        let mut request = ask("hi");
        request.max_tokens = 1_000_000_000;
        let outcome = run(config(&server, wire, stream), request).await;
        assert_eq!(outcome.text(), "short", "{mode}");
        let body = &server.requests()[0].body;
        let sent = body.get("max_tokens").unwrap_or(&body["max_completion_tokens"]);
        assert_eq!(sent, &serde_json::json!(ceiling), "{mode}");
    }
}
