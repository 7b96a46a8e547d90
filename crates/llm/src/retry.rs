//! Which failures are worth another try, how long to wait before it, and
//! what a provider's error body says.

use std::time::Duration;

use serde_json::Value;

use crate::RetryPolicy;
use crate::decode::str_field;

/// Share of a backoff delay taken off at random, so that clients that failed
/// together do not retry together ("jitter").
const JITTER: f64 = 0.25;

/// How much of a non-JSON error body an error message quotes.
const BODY_CHARS: usize = 300;

/// Whether an HTTP status is transient: 408 (request timeout), 429 (rate
/// limited) and every 5xx, including Anthropic's 529 (overloaded).
pub(crate) fn is_transient_status(status: u16) -> bool {
    status == 408 || status == 429 || (500..=599).contains(&status)
}

/// Whether an error response is worth retrying: by status, or by the error
/// type in its body (a rate limit sent as 403, say, is still not retried:
/// 400, 401, 403 and 404 always fail at once).
pub(crate) fn is_transient_response(status: u16, kind: Option<&str>) -> bool {
    match status {
        400 | 401 | 403 | 404 => false,
        _ => is_transient_status(status) || kind.is_some_and(is_transient_kind),
    }
}

/// Whether a provider's error type or code is transient: Anthropic's
/// `overloaded_error`, `rate_limit_error` and `api_error`, OpenAI's
/// `rate_limit_exceeded` and `server_error`, or a transient status as code.
pub(crate) fn is_transient_kind(kind: &str) -> bool {
    let kind = kind.to_ascii_lowercase();
    kind.contains("overloaded")
        || kind.contains("rate_limit")
        || kind == "api_error"
        || kind == "server_error"
        || kind.parse().is_ok_and(is_transient_status)
}

/// The wait a server asks for: `retry-after-ms` (milliseconds, OpenAI) wins
/// over `retry-after` (seconds; the HTTP-date form is not honoured).
pub(crate) fn server_delay(
    retry_after_ms: Option<&str>,
    retry_after: Option<&str>,
) -> Option<Duration> {
    let parse = |s: &str, scale: f64| {
        s.trim()
            .parse::<f64>()
            .ok()
            .filter(|n| n.is_finite() && *n >= 0.0)
            .and_then(|n| Duration::try_from_secs_f64(n * scale).ok())
    };
    retry_after_ms.and_then(|s| parse(s, 0.001)).or_else(|| retry_after.and_then(|s| parse(s, 1.0)))
}

/// The wait before retry number `retry` (0 for the first): the server's
/// wish if it stated one, else `base_delay * 2^retry` less up to 25% jitter;
/// never more than `max_delay`.
pub(crate) fn delay_before_retry(
    policy: &RetryPolicy,
    retry: u32,
    server_delay: Option<Duration>,
    rng: &mut fastrand::Rng,
) -> Duration {
    if let Some(wanted) = server_delay {
        return wanted.min(policy.max_delay);
    }
    let factor = 1u32.checked_shl(retry).unwrap_or(u32::MAX);
    let exponential = policy.base_delay.saturating_mul(factor).min(policy.max_delay);
    exponential.mul_f64(1.0 - JITTER * rng.f64())
}

/// What a provider's error body says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ErrorBody {
    /// The error type or code (`overloaded_error`, `rate_limit_exceeded`), if given.
    pub(crate) kind: Option<String>,
    /// The provider's message, or the start of the body when it is not JSON.
    pub(crate) message: String,
}

/// Reads an error body: Anthropic's and OpenAI's `{"error": {"type",
/// "message"}}`, Gemini's one-element array of that, `{"error": "text"}`,
/// `{"message"}`, FastAPI's `{"detail"}`; anything else is quoted.
pub(crate) fn parse_error_body(body: &[u8]) -> ErrorBody {
    let text = String::from_utf8_lossy(body);
    let Ok(mut value) = serde_json::from_str::<Value>(&text) else {
        return ErrorBody { kind: None, message: quote_body(&text) };
    };
    if let Value::Array(items) = &mut value
        && !items.is_empty()
    {
        value = items.swap_remove(0);
    }
    let err = value.get("error").unwrap_or(&value);
    let kind = ["type", "code", "status"].iter().find_map(|k| match err.get(*k) {
        Some(Value::String(s)) if !s.is_empty() && s != "error" => Some(s.clone()),
        Some(Value::Number(n)) => Some(n.to_string()),
        _ => None,
    });
    let mut message = match err {
        Value::String(s) => s.clone(),
        _ => ["message", "detail", "error"]
            .iter()
            .find_map(|k| match err.get(*k) {
                Some(Value::String(s)) if !s.is_empty() => Some(s.clone()),
                Some(v @ (Value::Array(_) | Value::Object(_))) => Some(v.to_string()),
                _ => None,
            })
            .unwrap_or_else(|| quote_body(&text)),
    };
    // OpenRouter wraps the upstream provider's own words here.
    if let Some(raw) = err.get("metadata").map(|m| str_field(m, "raw")).filter(|r| !r.is_empty()) {
        message = format!("{message} ({})", quote_body(raw));
    }
    ErrorBody { kind, message }
}

fn quote_body(text: &str) -> String {
    let text = text.trim();
    match text.char_indices().nth(BODY_CHARS) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(base_ms: u64, max_ms: u64) -> RetryPolicy {
        RetryPolicy {
            max_attempts: 10,
            base_delay: Duration::from_millis(base_ms),
            max_delay: Duration::from_millis(max_ms),
        }
    }

    #[test]
    fn delays_double_with_at_most_a_quarter_of_jitter() {
        let p = policy(100, 60_000);
        let mut rng = fastrand::Rng::with_seed(7);
        for retry in 0..6 {
            let full = Duration::from_millis(100 << retry);
            for _ in 0..50 {
                let d = delay_before_retry(&p, retry, None, &mut rng);
                assert!(d <= full && d >= full.mul_f64(0.75), "retry {retry}: {d:?}");
            }
        }
    }

    #[test]
    fn delays_never_exceed_the_cap_even_after_many_retries() {
        let p = policy(500, 2_000);
        let mut rng = fastrand::Rng::with_seed(1);
        for retry in [3, 10, 31, 32, 1000, u32::MAX] {
            assert!(delay_before_retry(&p, retry, None, &mut rng) <= Duration::from_secs(2));
        }
    }

    #[test]
    fn a_server_retry_after_is_honoured_but_capped() {
        let p = policy(100, 5_000);
        let mut rng = fastrand::Rng::with_seed(3);
        let asked = server_delay(None, Some("2"));
        assert_eq!(delay_before_retry(&p, 0, asked, &mut rng), Duration::from_secs(2));
        let greedy = server_delay(None, Some("3600"));
        assert_eq!(delay_before_retry(&p, 0, greedy, &mut rng), Duration::from_secs(5));
    }

    #[test]
    fn retry_after_ms_wins_and_bad_values_are_ignored() {
        assert_eq!(server_delay(Some("250"), Some("9")), Some(Duration::from_millis(250)));
        assert_eq!(server_delay(Some("soon"), Some("1.5")), Some(Duration::from_millis(1500)));
        assert_eq!(server_delay(None, Some("Wed, 21 Oct 2015 07:28:00 GMT")), None);
        assert_eq!(server_delay(None, Some("-1")), None);
        assert_eq!(server_delay(None, Some("1e300")), None);
        assert_eq!(server_delay(None, None), None);
    }

    #[test]
    fn rate_limits_server_errors_and_overload_are_transient_client_errors_are_not() {
        for s in [408, 429, 500, 502, 503, 504, 529] {
            assert!(is_transient_status(s), "{s}");
        }
        for s in [400, 401, 403, 404, 422] {
            assert!(!is_transient_status(s), "{s}");
        }
        for k in ["overloaded_error", "rate_limit_error", "rate_limit_exceeded", "api_error", "529"]
        {
            assert!(is_transient_kind(k), "{k}");
        }
        for k in ["invalid_request_error", "authentication_error", "400", ""] {
            assert!(!is_transient_kind(k), "{k}");
        }
    }

    #[test]
    fn client_error_statuses_are_final_whatever_the_body_says() {
        assert!(!is_transient_response(403, Some("rate_limit_error")));
        assert!(!is_transient_response(400, Some("overloaded_error")));
        assert!(is_transient_response(529, None));
        assert!(is_transient_response(409, Some("rate_limit_exceeded")));
        assert!(!is_transient_response(409, Some("conflict")));
    }

    #[test]
    fn anthropic_and_openai_error_bodies_yield_type_and_message() {
        let anthropic =
            br#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#;
        assert_eq!(
            parse_error_body(anthropic),
            ErrorBody { kind: Some("overloaded_error".into()), message: "Overloaded".into() }
        );
        let openai = br#"{"error":{"message":"Incorrect API key provided","type":"invalid_request_error","code":"invalid_api_key"}}"#;
        let e = parse_error_body(openai);
        assert_eq!(e.kind.as_deref(), Some("invalid_request_error"));
        assert_eq!(e.message, "Incorrect API key provided");
    }

    #[test]
    fn other_error_shapes_are_understood() {
        let gemini = br#"[{"error":{"code":429,"message":"Resource exhausted","status":"RESOURCE_EXHAUSTED"}}]"#;
        assert_eq!(parse_error_body(gemini).message, "Resource exhausted");
        assert_eq!(parse_error_body(gemini).kind.as_deref(), Some("429"));
        assert_eq!(parse_error_body(br#"{"error":"model not found"}"#).message, "model not found");
        assert_eq!(parse_error_body(br#"{"detail":"Not Found"}"#).message, "Not Found");
        let openrouter = br#"{"error":{"message":"Provider returned error","code":502,"metadata":{"raw":"upstream died"}}}"#;
        assert_eq!(parse_error_body(openrouter).message, "Provider returned error (upstream died)");
    }

    #[test]
    fn a_non_json_body_is_quoted_up_to_300_characters() {
        let html = format!("<html>{}</html>", "x".repeat(1000));
        let e = parse_error_body(html.as_bytes());
        assert_eq!(e.kind, None);
        assert_eq!(e.message.chars().count(), BODY_CHARS + 1);
        assert!(e.message.starts_with("<html>xxx"));
    }
}
