//! JSON schema to GBNF, the grammar language llama.cpp's samplers take: the
//! part of JSON schema that tools' input schemas use, in Rust, so that the
//! engine needs nothing from llama.cpp beyond `llama.h` (its own converter
//! lives in the `common` helpers, half of llama.cpp's build time).
//!
//! Understood: `type` (`object`, `array`, `string`, `integer`, `number`,
//! `boolean`, `null`, or a list of them), `properties`, `required`,
//! `additionalProperties`, `items`, `minItems` (of 1 or more), `enum`,
//! `const`, `anyOf` and `oneOf`. Every other keyword is ignored, and a
//! schema the converter does not understand (`$ref`, `allOf`, `not`, ...)
//! takes any JSON value, so the grammar is never stricter than the schema:
//! whatever the schema accepts, the grammar accepts (in the property
//! order the schema lists; JSON's own whitespace between tokens, up to a
//! newline and 20 spaces or tabs, so that a small model cannot pad forever).
//! One choice follows llama.cpp's converter rather than JSON schema: an
//! object that lists `properties` takes no other keys unless
//! `additionalProperties` allows them, so a small model cannot invent
//! arguments.
//!
//! ```
//! use ferroclaw_local::json_gbnf::schema_to_gbnf;
//! use serde_json::json;
//!
//! let g = schema_to_gbnf(&json!({"type": "object", "properties": {"n": {"type": "integer"}}}));
//! assert!(g.contains(r#"root ::= "{" space (root-n-kv)? "}" space"#), "{g}");
//! ```

use std::collections::HashSet;

use serde_json::{Map, Value};

/// Rules every grammar may use, defined only when used. The digit caps
/// come from the values JSON tools exchange: 20 digits hold any `u64`, 24
/// fraction digits any `f64` printed the shortest way (17 significant
/// digits after up to 5 zeros), 3 exponent digits its largest exponent; they keep a looping model from writing digits
/// forever.
const SHARED: &[(&str, &str)] = &[
    ("space", r#"| " " | "\n" [ \t]{0,20}"#),
    ("char", r#"[^"\\\x00-\x1F] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4})"#),
    ("string", r#""\"" char* "\"" space"#),
    ("digits", r#""0" | [1-9] [0-9]{0,19}"#),
    ("integer", r#""-"? digits space"#),
    ("number", r#""-"? digits ("." [0-9]{1,24})? ([eE] [-+]? [0-9]{1,3})? space"#),
    ("boolean", r#"("true" | "false") space"#),
    ("null", r#""null" space"#),
    ("value", r#"any-object | any-array | string | number | boolean | null"#),
    ("any-pair", r#"string ":" space value"#),
    ("any-object", r#""{" space (any-pair ("," space any-pair)*)? "}" space"#),
    ("any-array", r#""[" space (value ("," space value)*)? "]" space"#),
];

/// The grammar (start rule `root`) of the JSON values `schema` accepts.
pub fn schema_to_gbnf(schema: &Value) -> String {
    let mut g = Grammar::default();
    let root = g.value(schema, "root");
    if root != "root" {
        g.define("root", &root);
    }
    g.finish()
}

/// Rules being built: named rules in the order they were defined, and the
/// shared rules they use.
#[derive(Default)]
pub struct Grammar {
    rules: Vec<(String, String)>,
    names: HashSet<String>,
}

impl Grammar {
    /// Defines a rule named `name`, or `name` with a number when that is
    /// taken; returns the name given.
    pub fn define(&mut self, name: &str, body: &str) -> String {
        let mut unique = name.to_string();
        let mut n = 1;
        while self.names.contains(&unique) || SHARED.iter().any(|(s, _)| *s == unique) {
            unique = format!("{name}-{n}");
            n += 1;
        }
        self.names.insert(unique.clone());
        self.rules.push((unique.clone(), body.to_string()));
        unique
    }

    /// The grammar's text: the defined rules, then the shared rules.
    pub fn finish(self) -> String {
        let mut out = String::new();
        for (name, body) in &self.rules {
            out.push_str(&format!("{name} ::= {body}\n"));
        }
        for (name, body) in SHARED {
            out.push_str(&format!("{name} ::= {body}\n"));
        }
        out
    }

    /// An expression for a JSON value valid under `schema` (with the
    /// whitespace after it); `name` names the rules it needs.
    pub fn value(&mut self, schema: &Value, name: &str) -> String {
        let Value::Object(s) = schema else { return "value".into() };
        if let Some(c) = s.get("const") {
            return format!("{} space", json_literal(c));
        }
        if let Some(Value::Array(values)) = s.get("enum") {
            if values.is_empty() {
                return "value".into();
            }
            let alts: Vec<String> = values.iter().map(json_literal).collect();
            return self.define(name, &format!("({}) space", alts.join(" | ")));
        }
        if let Some(alts) = alternatives(s) {
            let alts: Vec<String> = alts
                .iter()
                .enumerate()
                .map(|(i, a)| self.value(a, &format!("{name}-{i}")))
                .collect();
            return self.define(name, &alts.join(" | "));
        }
        match s.get("type") {
            Some(Value::String(t)) => self.typed(s, t, name),
            Some(Value::Array(types)) if !types.is_empty() => {
                let alts: Vec<String> = types
                    .iter()
                    .map(|t| match t {
                        Value::String(t) => self.typed(s, t, &format!("{name}-{t}")),
                        _ => "value".into(),
                    })
                    .collect();
                self.define(name, &alts.join(" | "))
            }
            _ if s.contains_key("properties") => self.object(s, name),
            _ if s.contains_key("items") => self.array(s, name),
            _ => "value".into(),
        }
    }

    /// A value of the one JSON type `t`, with the rest of `s` applying.
    fn typed(&mut self, s: &Map<String, Value>, t: &str, name: &str) -> String {
        match t {
            "integer" => match integer_range(s) {
                // A small closed range: each allowed value spelled out (as
                // llama.cpp's converter bounds digits), so `days: 1..=7`
                // cannot come out as 2017.
                Some((low, high)) => {
                    let alts: Vec<String> = (low..=high).map(|n| format!("\"{n}\"")).collect();
                    self.define(name, &format!("({}) space", alts.join(" | ")))
                }
                None => t.into(),
            },
            "string" | "number" | "boolean" | "null" => t.into(),
            "object" => self.object(s, name),
            "array" => self.array(s, name),
            _ => "value".into(),
        }
    }

    fn array(&mut self, s: &Map<String, Value>, name: &str) -> String {
        let item = match s.get("items") {
            Some(items @ Value::Object(_)) => self.value(items, &format!("{name}-item")),
            _ => "value".into(),
        };
        let at_least_one = s.get("minItems").and_then(Value::as_u64).is_some_and(|n| n >= 1);
        let items = format!("{item} (\",\" space {item})*");
        let items = if at_least_one { items } else { format!("({items})?") };
        self.define(name, &format!("\"[\" space {items} \"]\" space"))
    }

    /// An object: the listed properties in their order (the required ones
    /// always, the others optionally), then, if `additionalProperties`
    /// allows, any other keys.
    fn object(&mut self, s: &Map<String, Value>, name: &str) -> String {
        let required: Vec<&str> = match s.get("required") {
            Some(Value::Array(r)) => r.iter().filter_map(Value::as_str).collect(),
            _ => Vec::new(),
        };
        let properties = match s.get("properties") {
            Some(Value::Object(p)) => Some(p),
            _ => None,
        };
        let extra = match s.get("additionalProperties") {
            Some(Value::Bool(false)) => None,
            None if properties.is_some() => None,
            Some(schema @ Value::Object(_)) => {
                let v = self.value(schema, &format!("{name}-extra"));
                Some(self.define(&format!("{name}-extra-kv"), &format!("string \":\" space {v}")))
            }
            _ => Some("any-pair".to_string()),
        };
        if properties.is_none() && required.is_empty() && extra.as_deref() == Some("any-pair") {
            return "any-object".into();
        }
        let mut slots = Vec::new();
        for (key, schema) in properties.into_iter().flatten() {
            let v = self.value(schema, &format!("{name}-{}", rule_name(key)));
            let kv = format!("{} space \":\" space {v}", json_literal(&Value::String(key.clone())));
            let kv = self.define(&format!("{name}-{}-kv", rule_name(key)), &kv);
            slots.push(Slot { rule: kv, required: required.contains(&key.as_str()) });
        }
        // Required keys the properties do not describe take any value.
        for key in required.iter().filter(|k| properties.is_none_or(|p| !p.contains_key(**k))) {
            let kv = format!(
                "{} space \":\" space value",
                json_literal(&Value::String(key.to_string()))
            );
            let kv = self.define(&format!("{name}-{}-kv", rule_name(key)), &kv);
            slots.push(Slot { rule: kv, required: true });
        }
        let body = match first(&slots, extra.as_deref()) {
            Some(members) => format!("\"{{\" space {members} \"}}\" space"),
            None => "\"{\" space \"}\" space".to_string(),
        };
        self.define(name, &body)
    }
}

/// One listed property of an object: the rule of its `"key": value`.
struct Slot {
    rule: String,
    required: bool,
}

/// The members from `slots[0]` on, nothing written before them; `None`
/// when they may all be absent and there is nothing else.
fn first(slots: &[Slot], extra: Option<&str>) -> Option<String> {
    let Some((slot, rest)) = slots.split_first() else {
        return extra.map(|e| format!("({e} (\",\" space {e})*)?"));
    };
    let with = join(&slot.rule, after(rest, extra));
    if slot.required {
        return Some(with);
    }
    Some(match first(rest, extra) {
        None => format!("({with})?"),
        Some(without) => format!("({with} | {without})"),
    })
}

/// The members from `slots[0]` on, after one already written (so each
/// starts with a comma).
fn after(slots: &[Slot], extra: Option<&str>) -> Option<String> {
    let Some((slot, rest)) = slots.split_first() else {
        return extra.map(|e| format!("(\",\" space {e})*"));
    };
    let this = if slot.required {
        format!("\",\" space {}", slot.rule)
    } else {
        format!("(\",\" space {})?", slot.rule)
    };
    Some(join(&this, after(rest, extra)))
}

fn join(head: &str, tail: Option<String>) -> String {
    match tail {
        Some(t) => format!("{head} {t}"),
        None => head.to_string(),
    }
}

/// `anyOf`/`oneOf` when every alternative is a schema of its own (a type,
/// a constant, an enumeration, properties or alternatives). Alternatives
/// that only add to the schema around them (`{"required": ["a"]}`) are
/// dropped, which only loosens the grammar.
fn alternatives(s: &Map<String, Value>) -> Option<&Vec<Value>> {
    let alts = match s.get("anyOf").or_else(|| s.get("oneOf")) {
        Some(Value::Array(a)) if !a.is_empty() => a,
        _ => return None,
    };
    const STANDALONE: [&str; 6] = ["type", "const", "enum", "properties", "anyOf", "oneOf"];
    let standalone =
        |a: &Value| a.as_object().is_some_and(|o| STANDALONE.iter().any(|k| o.contains_key(*k)));
    alts.iter().all(standalone).then_some(alts)
}

/// The GBNF literal of `value` written as JSON.
pub fn json_literal(value: &Value) -> String {
    gbnf_literal(&value.to_string())
}

/// A GBNF string literal matching exactly `text`.
pub fn gbnf_literal(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => {
                out.push_str(&format!("\\x{:02X}", c as u32));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A rule name made of what GBNF allows (`[a-zA-Z0-9-]`).
pub fn rule_name(text: &str) -> String {
    let name: String =
        text.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '-' }).collect();
    if name.is_empty() { "x".into() } else { name }
}

/// Values an integer schema allows spelled out one by one: its closed
/// range (`minimum`/`maximum`, or the exclusive bounds) when both ends are
/// given and it holds at most [`MAX_SPELLED_RANGE`] values.
fn integer_range(s: &Map<String, Value>) -> Option<(i64, i64)> {
    let bound = |key: &str| s.get(key).and_then(Value::as_f64);
    let low = match (bound("minimum"), bound("exclusiveMinimum")) {
        (Some(m), _) => m.ceil(),
        (None, Some(m)) => m.floor() + 1.0,
        (None, None) => return None,
    };
    let high = match (bound("maximum"), bound("exclusiveMaximum")) {
        (Some(m), _) => m.floor(),
        (None, Some(m)) => m.ceil() - 1.0,
        (None, None) => return None,
    };
    let in_range = |x: f64| x.abs() < 1e15;
    if !in_range(low) || !in_range(high) || high < low || high - low >= MAX_SPELLED_RANGE as f64 {
        return None;
    }
    Some((low as i64, high as i64))
}

/// The most integers a range is spelled out for (larger ranges take any integer).
const MAX_SPELLED_RANGE: usize = 256;

#[cfg(test)]
#[path = "json_gbnf_tests.rs"]
mod tests;
