//! A tool's input as a Rust type: one `#[derive(Deserialize, JsonSchema)]`
//! struct per tool is both the schema the model sees ([`schema_for`]) and
//! what `execute` reads ([`parse`]). The fields' doc comments are the
//! parameters' descriptions, so write them for the model, short.
//!
//! Every tool's schema travels in every request, so [`schema_for`] keeps it
//! as lean as a hand-written one: no `$schema`, `title` or `format`,
//! definitions inlined, and an optional field written as its type alone
//! (absent means "not given"; `null` is not offered). The doc comments of
//! the input struct itself, of nested structs and enums and of enum
//! variants are for Rust readers and are left out; a field's doc comment
//! describes the field.
//!
//! ```
//! use ferroclaw_tools::tool_input::{AtLeastOne, parse, schema_for};
//! use schemars::JsonSchema;
//! use serde::Deserialize;
//! use serde_json::json;
//!
//! #[derive(Deserialize, JsonSchema)]
//! #[serde(deny_unknown_fields)]
//! struct Args {
//!     path: String,
//!     /// Lines to show (default 2000).
//!     limit: Option<AtLeastOne>,
//! }
//!
//! assert_eq!(
//!     schema_for::<Args>(),
//!     json!({
//!         "type": "object",
//!         "properties": {
//!             "path": {"type": "string"},
//!             "limit": {"type": "integer", "minimum": 1, "description": "Lines to show (default 2000)."}
//!         },
//!         "additionalProperties": false,
//!         "required": ["path"]
//!     })
//! );
//! let err = parse::<Args>(json!({"path": "a", "limit": 0})).err().unwrap();
//! assert!(err.to_string().contains("`limit`"), "{err}");
//! ```

use std::borrow::Cow;

use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde::de::{self, DeserializeOwned, Deserializer, Unexpected, Visitor};
use serde_json::{Map, Value, json};

use crate::ToolError;

/// The input schema of a tool whose input is `T`, lean (see the module docs).
pub fn schema_for<T: JsonSchema>() -> Value {
    let mut settings = schemars::generate::SchemaSettings::draft2020_12();
    settings.meta_schema = None;
    let root = settings.into_generator().into_root_schema_for::<T>().to_value();
    let Value::Object(mut root) = root else { return root };
    // Nested types come as definitions, so that a type's own doc comment
    // (for Rust readers) stays apart from a field's (for the model).
    let definitions = root.remove("$defs").unwrap_or_default();
    root.remove("description");
    root.entry("properties").or_insert_with(|| json!({}));
    let mut schema = Value::Object(root);
    lean(&mut schema, &definitions);
    schema
}

/// Strips what schemars adds beyond what a model needs, everywhere in
/// `schema`: titles, formats and defaults, the `null` alternative of
/// optional fields; a reference to one of `definitions` is replaced by
/// the definition, without its doc comment.
fn lean(schema: &mut Value, definitions: &Value) {
    let Value::Object(map) = schema else { return };
    for key in ["$schema", "title", "format", "default"] {
        map.remove(key);
    }
    drop_null_alternative(map);
    inline_definition(map, definitions);
    constants_as_enum(map);
    for (key, value) in map.iter_mut() {
        match (key.as_str(), value) {
            ("properties", Value::Object(fields)) => {
                fields.values_mut().for_each(|field| lean(field, definitions));
            }
            ("enum" | "const" | "required" | "examples", _) => {}
            (_, Value::Array(schemas)) => schemas.iter_mut().for_each(|s| lean(s, definitions)),
            (_, value) => lean(value, definitions),
        }
    }
}

/// `{"$ref": "#/$defs/Step", "description": ...}` becomes the definition
/// of `Step` with the field's own keys (its description) kept.
fn inline_definition(map: &mut Map<String, Value>, definitions: &Value) {
    let Some(Value::String(target)) = map.get("$ref") else { return };
    let Some(Value::Object(definition)) =
        target.strip_prefix("#/$defs/").and_then(|name| definitions.get(name))
    else {
        return;
    };
    let definition = definition.clone();
    map.remove("$ref");
    for (key, value) in definition {
        if key != "description" {
            map.entry(key).or_insert(value);
        }
    }
}

/// A unit enum with doc comments on its variants (`"oneOf": [{"const":
/// "add", "description": ...}, ...]`) becomes `"enum": ["add", ...]`: a
/// variant's doc comment is for Rust readers.
fn constants_as_enum(map: &mut Map<String, Value>) {
    let Some(Value::Array(variants)) = map.get("oneOf") else { return };
    let mut values = Vec::new();
    for variant in variants {
        match (variant.get("const"), variant.get("enum")) {
            (Some(value), _) => values.push(value.clone()),
            (None, Some(Value::Array(more))) => values.extend(more.iter().cloned()),
            _ => return,
        }
    }
    let kind = variants[0].get("type").cloned();
    map.remove("oneOf");
    if let Some(kind) = kind {
        map.insert("type".into(), kind);
    }
    map.insert("enum".into(), Value::Array(values));
}

/// `"type": ["integer", "null"]` becomes `"type": "integer"`, an `enum`
/// loses its `null`, and `"anyOf": [X, {"type": "null"}]` becomes X (with
/// the field's own description kept); the same for `oneOf`.
fn drop_null_alternative(map: &mut Map<String, Value>) {
    if let Some(Value::Array(types)) = map.get_mut("type") {
        types.retain(|t| t != "null");
        if types.len() == 1 {
            let only = types.remove(0);
            map.insert("type".into(), only);
        }
    }
    if let Some(Value::Array(values)) = map.get_mut("enum") {
        values.retain(|v| !v.is_null());
    }
    for key in ["anyOf", "oneOf"] {
        let Some(Value::Array(alternatives)) = map.get_mut(key) else { continue };
        alternatives.retain(|a| {
            a.get("type") != Some(&json!("null")) && a.get("const") != Some(&Value::Null)
        });
        if alternatives.len() == 1 {
            let Some(Value::Object(only)) = alternatives.pop() else { continue };
            map.remove(key);
            for (key, value) in only {
                map.entry(key).or_insert(value);
            }
        }
    }
}

/// Reads a tool's input as `T`. A bad argument is refused with its place
/// and what was expected: ``edits[1].old_string`: invalid type: integer
/// `7`, expected a string``.
pub fn parse<T: DeserializeOwned>(input: Value) -> Result<T, ToolError> {
    serde_path_to_error::deserialize(input).map_err(|e| {
        let at = e.path().to_string();
        let why = plain_words(&e.inner().to_string());
        ToolError::InvalidArguments(match why.strip_prefix("missing field ") {
            Some(field) if at == "." => format!("{field} is required"),
            Some(field) => format!("`{at}`: {field} is required"),
            None if at == "." => why,
            None => format!("`{at}`: {why}"),
        })
    })
}

/// serde's names of Rust types, in words a model knows.
fn plain_words(message: &str) -> String {
    let mut out = Cow::Borrowed(message);
    for rust in ["u8", "u16", "u32", "u64", "usize"] {
        let from = format!("expected {rust}");
        if out.ends_with(&from) {
            out = Cow::Owned(format!(
                "{}expected a whole number of 0 or more",
                &out[..out.len() - rust.len() - "expected ".len()]
            ));
        }
    }
    if let Some(at) = out.find("expected struct ") {
        out = Cow::Owned(format!("{}expected an object", &out[..at]));
    }
    out.into_owned()
}

/// A whole number of 1 or more (a count, a limit, a timeout); its schema
/// is `{"type": "integer", "minimum": 1}`, and 0 or a negative number is
/// refused as such.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct AtLeastOne(pub u64);

impl AtLeastOne {
    /// The number.
    pub fn get(self) -> u64 {
        self.0
    }
}

impl<'de> de::Deserialize<'de> for AtLeastOne {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        at_least_one(deserializer, "a whole number of 1 or more").map(Self)
    }
}

impl JsonSchema for AtLeastOne {
    fn schema_name() -> Cow<'static, str> {
        "AtLeastOne".into()
    }
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        schemars::json_schema!({"type": "integer", "minimum": 1})
    }
    fn inline_schema() -> bool {
        true
    }
}

/// A whole number of 1 or more from `deserializer`; anything else is
/// refused as not `expected` (e.g. "a 1-based line number").
pub fn at_least_one<'de, D: Deserializer<'de>>(
    deserializer: D,
    expected: &'static str,
) -> Result<u64, D::Error> {
    struct Positive(&'static str);
    impl Visitor<'_> for Positive {
        type Value = u64;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str(self.0)
        }
        fn visit_u64<E: de::Error>(self, n: u64) -> Result<u64, E> {
            if n == 0 { Err(E::invalid_value(Unexpected::Unsigned(0), &self)) } else { Ok(n) }
        }
        fn visit_i64<E: de::Error>(self, n: i64) -> Result<u64, E> {
            match u64::try_from(n) {
                Ok(n) => self.visit_u64(n),
                Err(_) => Err(E::invalid_value(Unexpected::Signed(n), &self)),
            }
        }
    }
    deserializer.deserialize_u64(Positive(expected))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    /// Doc for Rust readers only.
    #[derive(Debug, Deserialize, JsonSchema)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Sample {
        /// Where.
        path: String,
        #[serde(rename = "-A")]
        after: Option<u64>,
        edits: Vec<Pair>,
        /// A field may be called `format` or `title`.
        format: Option<Mode>,
        mode: Mode,
    }

    /// Doc for Rust readers only.
    #[derive(Debug, Deserialize, JsonSchema)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Pair {
        old_string: String,
        replace_all: Option<bool>,
    }

    /// Doc for Rust readers only.
    #[derive(Debug, Deserialize, JsonSchema)]
    #[serde(rename_all = "snake_case")]
    enum Mode {
        /// Doc for Rust readers only.
        Content,
        /// Doc for Rust readers only.
        FilesWithMatches,
    }

    #[test]
    fn the_schema_is_as_lean_as_a_hand_written_one() {
        assert_eq!(
            schema_for::<Sample>(),
            json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "Where."},
                    "-A": {"type": "integer", "minimum": 0},
                    "edits": {"type": "array", "items": {
                        "type": "object",
                        "properties": {"old_string": {"type": "string"}, "replace_all": {"type": "boolean"}},
                        "additionalProperties": false,
                        "required": ["old_string"]
                    }},
                    "format": {
                        "type": "string",
                        "enum": ["content", "files_with_matches"],
                        "description": "A field may be called `format` or `title`."
                    },
                    "mode": {"type": "string", "enum": ["content", "files_with_matches"]}
                },
                "additionalProperties": false,
                "required": ["path", "edits", "mode"]
            })
        );
    }

    /// An input with no fields.
    #[derive(Deserialize, JsonSchema)]
    #[serde(deny_unknown_fields)]
    struct Nothing {}

    #[test]
    fn an_input_with_no_fields_still_lists_its_properties() {
        assert_eq!(
            schema_for::<Nothing>(),
            json!({"type": "object", "properties": {}, "additionalProperties": false})
        );
    }

    #[test]
    fn a_bad_argument_is_named_with_what_was_expected() {
        let err = |v| parse::<Sample>(v).unwrap_err().to_string();
        assert_eq!(err(json!({"edits": []})), "invalid arguments: `path` is required");
        assert_eq!(
            err(json!({"path": "a", "edits": [{"old_string": 7}]})),
            "invalid arguments: `edits[0].old_string`: invalid type: integer `7`, expected a string"
        );
        assert_eq!(
            err(json!({"path": "a", "edits": [], "-A": -1})),
            "invalid arguments: `-A`: invalid value: integer `-1`, expected a whole number of 0 or more"
        );
        assert_eq!(
            err(json!({"path": "a", "edits": [{}]})),
            "invalid arguments: `edits[0]`: `old_string` is required"
        );
        assert_eq!(
            err(json!("a")),
            "invalid arguments: invalid type: string \"a\", expected an object"
        );
    }

    #[test]
    fn at_least_one_refuses_zero_and_negatives() {
        let parse = |v| serde_json::from_value::<AtLeastOne>(v).map_err(|e| e.to_string());
        assert_eq!(parse(json!(3)), Ok(AtLeastOne(3)));
        assert_eq!(
            parse(json!(0)).unwrap_err(),
            "invalid value: integer `0`, expected a whole number of 1 or more"
        );
        assert!(parse(json!(-5)).unwrap_err().contains("integer `-5`"));
        assert!(parse(json!(1.5)).is_err());
    }
}
