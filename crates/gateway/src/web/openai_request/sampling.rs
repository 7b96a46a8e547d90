//! The sampling options of a chat completion request, checked as OpenAI
//! checks them: `temperature` 0 to 2, `top_p` 0 to 1, `max_completion_tokens`
//! (or the older `max_tokens`) from 1 to 128,000 (the ceiling every request
//! is held to, see `ferroclaw_llm::MAX_TOKENS_CEILING`), `seed` a whole number, `stop` a
//! string or a list of at most 4. A value of the wrong type or out of range
//! is 400 `invalid_request_error` naming the field, in OpenAI's words;
//! `null` is the same as leaving the field out.

use std::fmt::Display;

use ferroclaw_protocol::Sampling;
use serde_json::Value;

use super::ApiError;

/// Stop sequences OpenAI takes at most.
const MAX_STOP_SEQUENCES: usize = 4;

/// The request's sampling options, and the cap on each answer's tokens.
pub(super) fn options(body: &Value) -> Result<(Sampling, Option<u32>), ApiError> {
    let sampling = Sampling {
        temperature: decimal(body, "temperature", 2.0)?,
        top_p: decimal(body, "top_p", 1.0)?,
        seed: whole(body, "seed")?,
        stop: stop_sequences(&body["stop"])?,
    };
    // OpenAI's newer name wins where a client sends both.
    let max_tokens = match token_cap(body, "max_completion_tokens")? {
        Some(cap) => Some(cap),
        None => token_cap(body, "max_tokens")?,
    };
    Ok((sampling, max_tokens))
}

/// `body[name]`, a number from 0 to `max`.
fn decimal(body: &Value, name: &str, max: f64) -> Result<Option<f32>, ApiError> {
    let value = &body[name];
    if value.is_null() {
        return Ok(None);
    }
    let Some(x) = value.as_f64() else { return Err(wrong_type(name, "a decimal", value)) };
    if x < 0.0 {
        return Err(out_of_range(name, "decimal_below_min_value", ">= 0", x));
    }
    if x > max {
        return Err(out_of_range(name, "decimal_above_max_value", &format!("<= {max}"), x));
    }
    Ok(Some(x as f32))
}

/// `body[name]`, a whole number.
fn whole(body: &Value, name: &str) -> Result<Option<i64>, ApiError> {
    let value = &body[name];
    if value.is_null() {
        return Ok(None);
    }
    value.as_i64().map(Some).ok_or_else(|| wrong_type(name, "an integer", value))
}

/// `body[name]`, a number of tokens: at least 1.
fn token_cap(body: &Value, name: &str) -> Result<Option<u32>, ApiError> {
    let Some(n) = whole(body, name)? else { return Ok(None) };
    if n < 1 {
        return Err(out_of_range(name, "integer_below_min_value", ">= 1", n));
    }
    let ceiling = ferroclaw_llm::MAX_TOKENS_CEILING;
    match u32::try_from(n) {
        Ok(cap) if cap <= ceiling => Ok(Some(cap)),
        _ => Err(out_of_range(name, "integer_above_max_value", &format!("<= {ceiling}"), n)),
    }
}

/// `stop`: a string or a list of strings, at most [`MAX_STOP_SEQUENCES`];
/// empty ones, which end nothing, are left out.
fn stop_sequences(value: &Value) -> Result<Vec<String>, ApiError> {
    let items = match value {
        Value::Null => return Ok(Vec::new()),
        Value::String(_) => std::slice::from_ref(value),
        Value::Array(list) => list.as_slice(),
        other => return Err(wrong_type("stop", "a string or an array of strings", other)),
    };
    let mut stop = Vec::new();
    for (i, item) in items.iter().enumerate() {
        match item {
            Value::String(s) if s.is_empty() => {}
            Value::String(s) => stop.push(s.clone()),
            other => return Err(wrong_type(&format!("stop[{i}]"), "a string", other)),
        }
    }
    if stop.len() > MAX_STOP_SEQUENCES {
        return Err(ApiError::invalid(
            "stop",
            "array_above_max_length",
            format!(
                "Invalid 'stop': array too long. Expected an array with maximum length \
                 {MAX_STOP_SEQUENCES}, but got an array with length {} instead.",
                stop.len()
            ),
        ));
    }
    Ok(stop)
}

/// 400 `code` for `param`, whose value `got` is not `expected` (`>= 1`).
fn out_of_range(param: &str, code: &'static str, expected: &str, got: impl Display) -> ApiError {
    // `decimal_below_min_value` -> "decimal below min value", as OpenAI says it.
    let what = code.replace('_', " ").replace(" min ", " minimum ").replace(" max ", " maximum ");
    ApiError::invalid(
        param,
        code,
        format!("Invalid '{param}': {what}. Expected a value {expected}, but got {got} instead."),
    )
}

/// 400 `invalid_type` for `param`, which should have been `expected`.
fn wrong_type(param: &str, expected: &str, got: &Value) -> ApiError {
    let got = match got {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(n) if n.is_f64() => "a decimal",
        Value::Number(_) => "an integer",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    };
    ApiError::invalid(
        param,
        "invalid_type",
        format!("Invalid type for '{param}': expected {expected}, but got {got} instead."),
    )
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_options_a_front_end_sends_are_taken_and_null_is_no_option() {
        let body = json!({"temperature": 0.7, "top_p": 0.9, "seed": 42, "stop": "END",
            "max_tokens": 512, "n": null});
        let (sampling, cap) = options(&body).unwrap();
        assert_eq!(
            sampling,
            Sampling {
                temperature: Some(0.7),
                top_p: Some(0.9),
                seed: Some(42),
                stop: vec!["END".into()]
            }
        );
        assert_eq!(cap, Some(512));
        let newer = json!({"max_tokens": 512, "max_completion_tokens": 64, "stop": ["a", ""]});
        let (sampling, cap) = options(&newer).unwrap();
        assert_eq!((sampling.stop, cap), (vec!["a".to_string()], Some(64)));
        let none = json!({"temperature": null, "stop": null, "seed": null, "max_tokens": null});
        assert_eq!(options(&none).unwrap(), (Sampling::default(), None));
    }

    #[test]
    fn values_out_of_range_or_of_the_wrong_type_are_refused_naming_the_field() {
        let refused = |body: Value| {
            let e = options(&body).unwrap_err();
            assert_eq!((e.status.as_u16(), e.kind), (400, "invalid_request_error"));
            (e.param.unwrap_or_default(), e.code, e.message)
        };
        let (param, code, message) = refused(json!({"temperature": 2.5}));
        assert_eq!((param.as_str(), code), ("temperature", "decimal_above_max_value"));
        assert!(message.contains("Expected a value <= 2, but got 2.5"), "{message}");
        let (param, code, _) = refused(json!({"temperature": -0.1}));
        assert_eq!((param.as_str(), code), ("temperature", "decimal_below_min_value"));
        assert_eq!(refused(json!({"top_p": 1.5})).1, "decimal_above_max_value");
        let (param, code, _) = refused(json!({"max_tokens": 0}));
        assert_eq!((param.as_str(), code), ("max_tokens", "integer_below_min_value"));
        assert_eq!(refused(json!({"max_completion_tokens": -3})).0, "max_completion_tokens");
        assert_eq!(refused(json!({"max_tokens": 5_000_000_000_u64})).1, "integer_above_max_value");
        let ceiling = ferroclaw_llm::MAX_TOKENS_CEILING;
        assert_eq!(refused(json!({"max_tokens": ceiling + 1})).1, "integer_above_max_value");
        assert!(options(&json!({"max_tokens": ceiling})).is_ok());
        let (param, code, message) = refused(json!({"temperature": "hot"}));
        assert_eq!((param.as_str(), code), ("temperature", "invalid_type"));
        assert!(message.contains("expected a decimal, but got a string"), "{message}");
        assert_eq!(refused(json!({"seed": 1.5})).1, "invalid_type");
        assert_eq!(refused(json!({"stop": ["a", 3]})).0, "stop[1]");
        assert_eq!(refused(json!({"stop": ["a", "b", "c", "d", "e"]})).1, "array_above_max_length");
        // The edges are allowed.
        assert!(options(&json!({"temperature": 0, "top_p": 1, "max_tokens": 1})).is_ok());
        assert!(options(&json!({"temperature": 2.0, "top_p": 0.0})).is_ok());
    }
}
