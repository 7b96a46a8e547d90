//! Reading frontmatter fields with precise errors: strings, word lists,
//! `metadata` as a map or a JSON string, and the fields other agents add.

use serde_json::{Map, Value};

use super::Requirements;
use crate::frontmatter;

/// Fields beyond the standard, from the frontmatter or from `metadata`
/// (top level, or under `nanobot` / `openclaw` as those agents write them).
pub(super) struct Extras {
    pub(super) always: bool,
    pub(super) when_to_use: Option<String>,
    pub(super) triggers: Vec<String>,
    pub(super) requires: Requirements,
}

impl Extras {
    pub(super) fn read(
        f: &Map<String, Value>,
        metadata: &Map<String, Value>,
        errors: &mut Vec<String>,
    ) -> Extras {
        let scopes: Vec<&Map<String, Value>> = std::iter::once(f)
            .chain(std::iter::once(metadata))
            .chain(
                ["nanobot", "openclaw"]
                    .iter()
                    .filter_map(|k| metadata.get(*k).and_then(Value::as_object)),
            )
            .collect();
        let find = |key: &str| scopes.iter().find_map(|s| s.get(key));
        let always = match find("always") {
            None => false,
            Some(Value::Bool(b)) => *b,
            Some(Value::String(s)) if s == "true" || s == "false" => s == "true",
            Some(other) => {
                errors.push(format!(
                    "always must be true or false, not {}",
                    frontmatter::kind(other)
                ));
                false
            }
        };
        let requires = find("requires");
        let requires = match requires {
            None => Map::new(),
            Some(Value::Object(m)) => m.clone(),
            Some(other) => {
                errors.push(format!(
                    "requires must be a mapping with bins/env, not {}",
                    frontmatter::kind(other)
                ));
                Map::new()
            }
        };
        let os = requires.get("os").or_else(|| find("os"));
        Extras {
            always,
            when_to_use: optional_string(f, "when_to_use", errors),
            triggers: words(f.get("triggers"), "triggers", errors),
            requires: Requirements {
                bins: words(requires.get("bins"), "requires.bins", errors),
                env: words(requires.get("env"), "requires.env", errors),
                os: words(os, "os", errors),
            },
        }
    }
}

/// `metadata` as a mapping: the standard's map, or nanobot's JSON string.
pub(super) fn metadata(f: &Map<String, Value>, errors: &mut Vec<String>) -> Map<String, Value> {
    match f.get("metadata") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(m)) => m.clone(),
        Some(Value::String(s)) => match serde_json::from_str::<Value>(s) {
            Ok(Value::Object(m)) => m,
            Ok(other) => {
                errors.push(format!(
                    "metadata is a JSON string holding {}, not an object",
                    frontmatter::kind(&other)
                ));
                Map::new()
            }
            Err(e) => {
                errors.push(format!("metadata is a string but not valid JSON: {e}"));
                Map::new()
            }
        },
        Some(other) => {
            errors.push(format!("metadata must be a mapping, not {}", frontmatter::kind(other)));
            Map::new()
        }
    }
}

pub(super) fn required_string(
    f: &Map<String, Value>,
    key: &str,
    errors: &mut Vec<String>,
) -> Option<String> {
    match f.get(key) {
        None | Some(Value::Null) => {
            errors.push(format!("{key} is missing"));
            None
        }
        Some(Value::String(s)) if s.trim().is_empty() => {
            errors.push(format!("{key} is empty"));
            None
        }
        Some(Value::String(s)) => Some(s.trim().to_string()),
        Some(other) => {
            errors.push(format!("{key} must be a string, not {}", frontmatter::kind(other)));
            None
        }
    }
}

pub(super) fn optional_string(
    f: &Map<String, Value>,
    key: &str,
    errors: &mut Vec<String>,
) -> Option<String> {
    match f.get(key) {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.trim().to_string()),
        Some(other) => {
            errors.push(format!("{key} must be a string, not {}", frontmatter::kind(other)));
            None
        }
    }
}

/// A list of strings, or one string of space- or comma-separated words.
pub(super) fn words(value: Option<&Value>, key: &str, errors: &mut Vec<String>) -> Vec<String> {
    match value {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::String(s)) => s
            .split(|c: char| c.is_whitespace() || c == ',')
            .filter(|w| !w.is_empty())
            .map(str::to_string)
            .collect(),
        Some(Value::Array(items)) => {
            let mut out = Vec::new();
            for item in items {
                match item {
                    Value::String(s) => out.push(s.clone()),
                    other => errors
                        .push(format!("{key} must hold strings, not {}", frontmatter::kind(other))),
                }
            }
            out
        }
        Some(other) => {
            errors
                .push(format!("{key} must be a list of strings, not {}", frontmatter::kind(other)));
            Vec::new()
        }
    }
}
