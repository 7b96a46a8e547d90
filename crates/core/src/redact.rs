//! Secret redaction: known secret values never reach session files or logs.
//!
//! The secrets are the values of environment variables whose names look
//! secret (`*_KEY`, `*_TOKEN`, `*_SECRET`, `*PASSWORD*`, ...), the provider
//! keys ferroclaw read, and whatever else registers itself (the gateway
//! token). Each is replaced by `[REDACTED:NAME]` where the session log
//! serializes a line and where log lines are written.
//!
//! ```
//! use ferroclaw_core::redact;
//! redact::register("DEMO_API_KEY", "sk-demo-1234567890");
//! assert_eq!(redact::redact("key=sk-demo-1234567890"), "key=[REDACTED:DEMO_API_KEY]");
//! ```

use std::borrow::Cow;
use std::sync::RwLock;

/// Values shorter than this are not treated as secrets: redacting `1` or
/// `yes` everywhere would mangle text and protect nothing.
pub const MIN_SECRET_LEN: usize = 8;

/// Name endings (upper-cased) that make a variable a secret.
const SECRET_SUFFIXES: &[&str] =
    &["_KEY", "_TOKEN", "_SECRET", "_PASSWORD", "_PASSWD", "_PASS", "_CREDENTIALS", "_PAT"];
/// Name parts that make a variable a secret wherever they appear.
const SECRET_PARTS: &[&str] = &["PASSWORD", "SECRET", "API_KEY", "APIKEY", "TOKEN"];

/// Registered secrets: (name, value), longest value first; a value that
/// JSON escapes differently is registered in both forms, so a session line
/// is checked with one pass and no escaping per line.
static SECRETS: RwLock<Vec<(String, String)>> = RwLock::new(Vec::new());

/// True when a variable called `name` holds a secret by its name.
pub fn looks_secret(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    SECRET_SUFFIXES.iter().any(|s| upper.ends_with(s))
        || SECRET_PARTS.iter().any(|p| upper.contains(p))
}

/// Registers `value` as the secret `name` (ignored when shorter than
/// [`MIN_SECRET_LEN`] or already known).
pub fn register(name: &str, value: &str) {
    let value = value.trim();
    if value.chars().count() < MIN_SECRET_LEN {
        return;
    }
    let mut secrets = SECRETS.write().unwrap_or_else(std::sync::PoisonError::into_inner);
    for form in [value.to_string(), json_escaped(value)] {
        if !secrets.iter().any(|(_, v)| *v == form) {
            secrets.push((name.to_string(), form));
        }
    }
    secrets.sort_by_key(|(_, value)| std::cmp::Reverse(value.len()));
}

/// Registers every variable of `vars` whose name looks secret.
pub fn register_secret_vars(vars: impl IntoIterator<Item = (String, String)>) {
    for (name, value) in vars {
        if looks_secret(&name) {
            register(&name, &value);
        }
    }
}

/// Registers the secret-looking variables of ferroclaw's own environment.
pub fn register_from_env() {
    register_secret_vars(
        std::env::vars_os()
            .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?))),
    );
}

/// `text` with every registered secret replaced by `[REDACTED:NAME]`.
pub fn redact(text: &str) -> Cow<'_, str> {
    let secrets = SECRETS.read().unwrap_or_else(std::sync::PoisonError::into_inner);
    redact_with(text, &secrets)
}

/// True when `text` holds a registered secret (as is, or JSON-escaped).
pub fn contains_secret(text: &str) -> bool {
    let secrets = SECRETS.read().unwrap_or_else(std::sync::PoisonError::into_inner);
    secrets.iter().any(|(_, v)| text.contains(v.as_str()))
}

/// Every string inside `value` redacted in place.
pub fn redact_json(value: &mut serde_json::Value) {
    match value {
        serde_json::Value::String(s) => {
            if let Cow::Owned(clean) = redact(s) {
                *s = clean;
            }
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(redact_json),
        serde_json::Value::Object(map) => map.values_mut().for_each(redact_json),
        _ => {}
    }
}

/// A writer that redacts what goes through it (for log sinks): each write
/// is redacted as lossy UTF-8 and written whole.
#[derive(Debug)]
pub struct RedactingWriter<W>(pub W);

impl<W: std::io::Write> std::io::Write for RedactingWriter<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match std::str::from_utf8(buf) {
            Ok(text) => self.0.write_all(redact(text).as_bytes())?,
            Err(_) => self.0.write_all(buf)?,
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush()
    }
}

fn redact_with<'a>(text: &'a str, secrets: &[(String, String)]) -> Cow<'a, str> {
    let mut out = Cow::Borrowed(text);
    for (name, value) in secrets {
        if out.contains(value.as_str()) {
            out = Cow::Owned(out.replace(value.as_str(), &format!("[REDACTED:{name}]")));
        }
    }
    out
}

/// `value` as it appears inside a JSON string.
fn json_escaped(value: &str) -> String {
    let quoted = serde_json::to_string(value).unwrap_or_default();
    quoted.trim_matches('"').to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secrets(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn secret_looking_names_are_recognised() {
        for name in [
            "OPENAI_API_KEY",
            "GITHUB_TOKEN",
            "AWS_SECRET_ACCESS_KEY",
            "DB_PASSWORD",
            "client_secret",
            "FERROCLAW_GATEWAY_TOKEN",
        ] {
            assert!(looks_secret(name), "{name}");
        }
        for name in ["PATH", "HOME", "LANG", "KEYBOARD_LAYOUT", "EDITOR"] {
            assert!(!looks_secret(name), "{name}");
        }
    }

    #[test]
    fn every_occurrence_is_replaced_by_the_name_and_short_values_are_left_alone() {
        let s = secrets(&[("OPENAI_API_KEY", "sk-abcdefgh12345")]);
        let text = "key sk-abcdefgh12345 and again sk-abcdefgh12345.";
        assert_eq!(
            redact_with(text, &s),
            "key [REDACTED:OPENAI_API_KEY] and again [REDACTED:OPENAI_API_KEY]."
        );
        assert!(matches!(redact_with("nothing here", &s), Cow::Borrowed(_)));
    }

    #[test]
    fn registering_ignores_short_values() {
        register("SHORT_TOKEN", "abc");
        assert_eq!(redact("abc"), "abc");
    }

    #[test]
    fn json_strings_are_redacted_and_stay_valid_json() {
        register("REDACT_TEST_TOKEN", "tok\"with\\quote-123");
        let mut v = serde_json::json!({"a": ["x tok\"with\\quote-123 y"], "n": 1});
        assert!(contains_secret(&v.to_string()));
        redact_json(&mut v);
        assert_eq!(v["a"][0], "x [REDACTED:REDACT_TEST_TOKEN] y");
    }
}
