//! Range checks on config values that parse but make no sense (`max_turns = 0`,
//! `compaction_threshold = 7`, `idle_secs = 0`). Each runs while the file is
//! deserialized, so the error carries the value's line and column like any
//! other mistake in the file, and nothing starts with a value that would
//! only fail later (or never finish).

use serde::{Deserialize, Deserializer, de::Error as _};

/// A count or duration that must be at least 1: `key = 0` is refused, naming
/// the key and what it is for.
fn at_least_one<'de, D, T>(d: D, key: &str, what: &str) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de> + PartialOrd + From<u8> + std::fmt::Display,
{
    let value = T::deserialize(d)?;
    if value < T::from(1) {
        return Err(D::Error::custom(format!("{key} = {value}: must be at least 1 ({what})")));
    }
    Ok(Some(value))
}

/// `max_turns`: 0 would stop every request before its first model call.
pub(super) fn max_turns<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u32>, D::Error> {
    at_least_one(d, "max_turns", "it caps the model round-trips of a request")
}

/// `max_tokens`: 0 leaves the model no room to answer; more than
/// [`ferroclaw_llm::MAX_TOKENS_CEILING`] is more than any model answers in
/// one go, and would loosen the bound on a runaway answer to match. Refused
/// rather than cut, since the user wrote it (a request asking for more from
/// elsewhere is cut, with a warning, where every request is sent).
pub(super) fn max_tokens<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u32>, D::Error> {
    let value = u64::deserialize(d)?;
    let ceiling = ferroclaw_llm::MAX_TOKENS_CEILING;
    match u32::try_from(value) {
        Ok(n) if (1..=ceiling).contains(&n) => Ok(Some(n)),
        _ if value == 0 => Err(D::Error::custom(
            "max_tokens = 0: must be at least 1 (it caps the tokens of one answer)",
        )),
        _ => Err(D::Error::custom(format!(
            "max_tokens = {value}: must be at most {ceiling} (the most any model answers in one \
             go; a runaway answer is cut at a bound that follows from max_tokens)"
        ))),
    }
}

/// `max_file_bytes`: 0 would refuse every file that is not empty.
pub(super) fn max_file_bytes<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    at_least_one(d, "max_file_bytes", "the bytes a file may have for the file tools to open it")
}

/// `context_window`: the model's window in tokens.
pub(super) fn context_window<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    at_least_one(d, "context_window", "the model's context window in tokens")
}

/// `[timeouts] connect_secs`: 0 would fail every connection at once.
pub(super) fn connect_secs<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    at_least_one(d, "connect_secs", "seconds to wait for a connection")
}

/// `[timeouts] idle_secs`: 0 would call every stream broken before its first byte.
pub(super) fn idle_secs<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    at_least_one(d, "idle_secs", "seconds a stream may stay silent before it counts as broken")
}

/// `compaction_threshold`: a share of the context window, above 0 and at most 1.
pub(super) fn compaction_threshold<'de, D: Deserializer<'de>>(
    d: D,
) -> Result<Option<f64>, D::Error> {
    let value = f64::deserialize(d)?;
    if !(value > 0.0 && value <= 1.0) {
        return Err(D::Error::custom(format!(
            "compaction_threshold = {value}: must be above 0 and at most 1 (the share of the \
             context window at which history is summarised, e.g. 0.8)"
        )));
    }
    Ok(Some(value))
}

/// Serde's names for number types (`expected u32`) in words a user reads.
pub(super) fn plain_number_words(message: &str) -> String {
    let mut out = message.to_string();
    for (rust, words) in [
        ("expected u8", "expected a whole number (0 or more)"),
        ("expected u16", "expected a whole number (0 or more)"),
        ("expected u32", "expected a whole number (0 or more)"),
        ("expected u64", "expected a whole number (0 or more)"),
        ("expected usize", "expected a whole number (0 or more)"),
        ("expected i32", "expected a whole number"),
        ("expected i64", "expected a whole number"),
        ("expected f32", "expected a number"),
        ("expected f64", "expected a number"),
    ] {
        if let Some(at) = out.find(rust)
            && !out[at + rust.len()..].starts_with(|c: char| c.is_ascii_alphanumeric())
        {
            out.replace_range(at..at + rust.len(), words);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::plain_number_words;

    #[test]
    fn number_types_are_said_in_words() {
        assert_eq!(
            plain_number_words("invalid type: string \"ten\", expected u32"),
            "invalid type: string \"ten\", expected a whole number (0 or more)"
        );
        assert_eq!(plain_number_words("expected a sequence"), "expected a sequence");
    }

    #[test]
    fn a_max_tokens_no_model_answers_is_refused_with_its_line_and_the_ceiling() {
        let parse = |text: &str| crate::config::parse_layer(Path::new("config.toml"), text);
        let ceiling = ferroclaw_llm::MAX_TOKENS_CEILING;
        for absurd in ["1000000000", "4294967295", "99999999999"] {
            let err = parse(&format!("\nmax_tokens = {absurd}\n")).unwrap_err().to_string();
            assert_eq!(
                err,
                format!(
                    "config.toml:2:14: max_tokens = {absurd}: must be at most {ceiling} (the most \
                     any model answers in one go; a runaway answer is cut at a bound that \
                     follows from max_tokens)"
                )
            );
        }
        let err = parse("max_tokens = 0\n").unwrap_err().to_string();
        assert!(err.starts_with("config.toml:1:14: max_tokens = 0: must be at least 1"), "{err}");
        let at_ceiling = parse(&format!("max_tokens = {ceiling}\n")).unwrap();
        assert_eq!(at_ceiling.max_tokens, Some(ceiling));
    }
}
