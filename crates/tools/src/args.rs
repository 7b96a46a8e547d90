//! Reading tool arguments out of the validated JSON input. The registry has
//! checked the types already; these helpers still refuse missing or
//! nonsensical values with a message the model can act on.

use serde_json::Value;

use crate::ToolError;

/// The required string argument `key`.
pub(crate) fn required_str<'a>(input: &'a Value, key: &str) -> Result<&'a str, ToolError> {
    input
        .get(key)
        .and_then(Value::as_str)
        .ok_or_else(|| ToolError::InvalidArguments(format!("`{key}` (a string) is required")))
}

/// The optional string argument `key`.
pub(crate) fn optional_str<'a>(input: &'a Value, key: &str) -> Option<&'a str> {
    input.get(key).and_then(Value::as_str)
}

/// The optional boolean argument `key`, `default` when absent.
pub(crate) fn flag(input: &Value, key: &str, default: bool) -> bool {
    input.get(key).and_then(Value::as_bool).unwrap_or(default)
}

/// The optional non-negative integer argument `key`; negative or fractional
/// values are refused with the argument named.
pub(crate) fn optional_count(input: &Value, key: &str) -> Result<Option<u64>, ToolError> {
    match input.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v.as_u64().map(Some).ok_or_else(|| {
            ToolError::InvalidArguments(format!(
                "`{key}` must be a whole number of 0 or more, got {v}"
            ))
        }),
    }
}

/// Like [`optional_count`], and also at least 1.
pub(crate) fn optional_positive(input: &Value, key: &str) -> Result<Option<u64>, ToolError> {
    match optional_count(input, key)? {
        Some(0) => Err(ToolError::InvalidArguments(format!("`{key}` must be 1 or more, got 0"))),
        other => Ok(other),
    }
}
