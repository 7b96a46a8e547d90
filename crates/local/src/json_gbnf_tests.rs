//! The converter, as specification: the grammar text for each construct,
//! then, with the test matcher ([`crate::gbnf_match`]), that values valid
//! under a schema match its grammar and typical invalid ones do not.

use proptest::prelude::*;
use serde_json::{Value, json};

use super::*;
use crate::gbnf_match::Gbnf;

fn grammar(schema: Value) -> Gbnf {
    let text = schema_to_gbnf(&schema);
    Gbnf::parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

fn root_rule(schema: Value) -> String {
    let text = schema_to_gbnf(&schema);
    let line = text.lines().find(|l| l.starts_with("root ::= ")).unwrap();
    line["root ::= ".len()..].to_string()
}

#[test]
fn primitive_types_use_the_shared_rules() {
    for t in ["string", "integer", "number", "boolean", "null"] {
        assert_eq!(root_rule(json!({"type": t})), t);
    }
    let text = schema_to_gbnf(&json!({"type": "string"}));
    assert!(text.contains(r#"char ::= [^"\\\x00-\x1F] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4})"#));
}

#[test]
fn an_object_lists_required_properties_always_and_optional_ones_maybe_in_schema_order() {
    // (Names in alphabetical order: without serde_json's `preserve_order`
    // a schema's properties come out sorted.)
    let schema = json!({
        "type": "object",
        "properties": {"file": {"type": "string"}, "limit": {"type": "integer"}},
        "required": ["file"],
        "additionalProperties": false
    });
    let text = schema_to_gbnf(&schema);
    assert!(text.contains(r#"root-file-kv ::= "\"file\"" space ":" space string"#), "{text}");
    assert!(text.contains(r#"root-limit-kv ::= "\"limit\"" space ":" space integer"#), "{text}");
    assert_eq!(root_rule(schema), r#""{" space root-file-kv ("," space root-limit-kv)? "}" space"#);
}

#[test]
fn an_object_with_only_optional_properties_may_start_with_any_of_them_or_be_empty() {
    let rule = root_rule(json!({
        "type": "object",
        "properties": {"a": {"type": "null"}, "b": {"type": "null"}}
    }));
    assert_eq!(rule, r#""{" space (root-a-kv ("," space root-b-kv)? | (root-b-kv)?) "}" space"#);
}

#[test]
fn additional_properties_come_after_the_listed_ones_when_allowed() {
    let rule = root_rule(json!({
        "type": "object",
        "properties": {"a": {"type": "null"}},
        "required": ["a"],
        "additionalProperties": {"type": "integer"}
    }));
    assert_eq!(rule, r#""{" space root-a-kv ("," space root-extra-kv)* "}" space"#);
    assert_eq!(root_rule(json!({"type": "object"})), "any-object");
    assert_eq!(
        root_rule(json!({"type": "object", "additionalProperties": false})),
        r#""{" space "}" space"#
    );
}

#[test]
fn arrays_take_their_items_and_min_items_of_one_forbids_the_empty_array() {
    let text = schema_to_gbnf(&json!({"type": "array", "items": {"type": "string"}}));
    assert!(
        text.contains(r#"root ::= "[" space (string ("," space string)*)? "]" space"#),
        "{text}"
    );
    let text =
        schema_to_gbnf(&json!({"type": "array", "items": {"type": "string"}, "minItems": 1}));
    assert!(text.contains(r#"root ::= "[" space string ("," space string)* "]" space"#), "{text}");
    assert!(root_rule(json!({"type": "array"})).contains("value"));
}

#[test]
fn enum_and_const_are_json_literals_escaped_for_gbnf() {
    assert_eq!(
        root_rule(json!({"enum": ["a\"b", 1, null, "back\\slash\nline"]})),
        r#"("\"a\\\"b\"" | "1" | "null" | "\"back\\\\slash\\nline\"") space"#
    );
    assert_eq!(root_rule(json!({"const": "x"})), r#""\"x\"" space"#);
}

#[test]
fn any_of_one_of_and_type_lists_are_alternatives() {
    assert_eq!(root_rule(json!({"type": ["string", "null"]})), "string | null");
    assert_eq!(
        root_rule(json!({"anyOf": [{"type": "integer"}, {"const": true}]})),
        r#"integer | "true" space"#
    );
    assert_eq!(
        root_rule(json!({"oneOf": [{"type": "boolean"}, {"type": "null"}]})),
        "boolean | null"
    );
}

#[test]
fn what_the_converter_does_not_know_takes_any_json_value() {
    for schema in [
        json!({}),
        json!(true),
        json!({"$ref": "#/$defs/x"}),
        json!({"allOf": [{"type": "string"}]}),
        json!({"type": "date"}),
        json!({"type": "object", "anyOf": [{"required": ["a"]}]}),
    ] {
        let rule = root_rule(schema.clone());
        assert!(rule == "value" || rule == "any-object", "{schema}: {rule}");
    }
}

#[test]
fn property_names_become_valid_distinct_rule_names() {
    let text = schema_to_gbnf(&json!({
        "type": "object",
        "properties": {"a b": {"type": "string"}, "a_b": {"type": "string"}, "ü\"": {"type": "null"}},
        "required": ["a b", "a_b", "ü\""]
    }));
    let g = Gbnf::parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    assert!(g.matches(r#"{"a b": "1", "a_b": "2", "ü\"": null}"#), "{text}");
}

#[test]
fn typical_wrong_answers_do_not_match() {
    let g = grammar(json!({
        "type": "object",
        "properties": {
            "file": {"type": "string"},
            "limit": {"type": "integer"},
            "mode": {"enum": ["fast", "slow"]}
        },
        "required": ["file"],
        "additionalProperties": false
    }));
    assert!(g.matches(r#"{"file": "a.txt", "limit": 10, "mode": "fast"}"#));
    assert!(g.matches("{\n  \"file\": \"a\\n\\u00e9\"\n}"));
    for wrong in [
        r#"{"limit": 10}"#,                                   // required file missing
        r#"{"file": 3}"#,                                     // wrong type
        r#"{"file": "a", "other": 1}"#,                       // unknown key
        r#"{"file": "a", "limit": 1.5}"#,                     // not an integer
        r#"{"file": "a", "limit": 012}"#,                     // leading zero
        r#"{"file": "a", "mode": "medium"}"#,                 // not in the enum
        r#"{"file": "a",}"#,                                  // trailing comma
        r#"{"file": "a\q"}"#,                                 // bad escape
        "{\"file\": \"a\u{1}\"}",                             // raw control character
        r#"{"file": "a"} trailing"#,                          // text after the value
        "{\"file\": \"a\"                                 }", // padding beyond the cap
    ] {
        assert!(!g.matches(wrong), "matched: {wrong}");
    }
}

// ---- property tests: every value valid under a schema matches ----

/// Schemas of the supported subset, nested a few levels.
fn schema() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(json!({"type": "string"})),
        Just(json!({"type": "integer"})),
        Just(json!({"type": "number"})),
        Just(json!({"type": "boolean"})),
        Just(json!({"type": "null"})),
        Just(json!({"type": ["string", "null"]})),
        Just(json!({})),
        Just(json!({"$ref": "#/x"})),
        prop::collection::vec(any::<String>(), 1..4).prop_map(|e| json!({"enum": e})),
        any::<String>().prop_map(|c| json!({"const": c})),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            (
                prop::collection::vec((any::<String>(), inner.clone(), any::<bool>()), 0..4),
                prop_oneof![
                    Just(None),
                    Just(Some(json!(false))),
                    Just(Some(json!(true))),
                    Just(Some(json!({"type": "integer"})))
                ],
            )
                .prop_map(|(props, extra)| {
                    let mut properties = Map::new();
                    let mut required = Vec::new();
                    for (k, s, req) in props {
                        if properties.contains_key(&k) {
                            continue;
                        }
                        if req {
                            required.push(Value::String(k.clone()));
                        }
                        properties.insert(k, s);
                    }
                    let mut o =
                        json!({"type": "object", "properties": properties, "required": required});
                    if let Some(e) = extra {
                        o["additionalProperties"] = e;
                    }
                    o
                }),
            (inner.clone(), any::<bool>()).prop_map(|(items, one)| if one {
                json!({"type": "array", "items": items, "minItems": 1})
            } else {
                json!({"type": "array", "items": items})
            }),
            prop::collection::vec(inner, 1..3).prop_map(|alts| json!({"anyOf": alts})),
        ]
    })
}

/// Any JSON value, written compactly.
fn any_json() -> BoxedStrategy<String> {
    let leaf = prop_oneof![
        Just("null".to_string()),
        any::<bool>().prop_map(|b| b.to_string()),
        any::<i64>().prop_map(|n| n.to_string()),
        any::<f64>().prop_filter("finite", |f| f.is_finite()).prop_map(|f| json!(f).to_string()),
        any::<String>().prop_map(|s| Value::String(s).to_string()),
    ];
    leaf.prop_recursive(2, 12, 3, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..3).prop_map(|v| format!("[{}]", v.join(","))),
            prop::collection::vec((any::<String>(), inner), 0..3).prop_map(|kv| {
                let kv: Vec<String> =
                    kv.into_iter().map(|(k, v)| format!("{}:{v}", Value::String(k))).collect();
                format!("{{{}}}", kv.join(","))
            }),
        ]
    })
    .boxed()
}

/// A value valid under `schema`, as JSON text with its members in the
/// order the schema lists them (the order the grammar asks for).
fn valid(schema: &Value) -> BoxedStrategy<String> {
    let Some(s) = schema.as_object() else { return any_json() };
    if let Some(c) = s.get("const") {
        return Just(c.to_string()).boxed();
    }
    if let Some(Value::Array(e)) = s.get("enum") {
        let e: Vec<String> = e.iter().map(Value::to_string).collect();
        return prop::sample::select(e).boxed();
    }
    if let Some(Value::Array(alts)) = s.get("anyOf") {
        let strategies: Vec<BoxedStrategy<String>> = alts.iter().map(valid).collect();
        return prop::strategy::Union::new(strategies).boxed();
    }
    match s.get("type") {
        Some(Value::Array(types)) => {
            let strategies: Vec<BoxedStrategy<String>> = types
                .iter()
                .map(|t| {
                    let mut one = s.clone();
                    one.insert("type".into(), t.clone());
                    valid(&Value::Object(one))
                })
                .collect();
            prop::strategy::Union::new(strategies).boxed()
        }
        Some(Value::String(t)) => match t.as_str() {
            "string" => any::<String>().prop_map(|s| Value::String(s).to_string()).boxed(),
            "integer" => any::<i64>().prop_map(|n| n.to_string()).boxed(),
            "number" => prop_oneof![
                any::<i64>().prop_map(|n| n.to_string()),
                any::<f64>()
                    .prop_filter("finite", |f| f.is_finite())
                    .prop_map(|f| json!(f).to_string()),
            ]
            .boxed(),
            "boolean" => any::<bool>().prop_map(|b| b.to_string()).boxed(),
            "null" => Just("null".to_string()).boxed(),
            "array" => {
                let min = usize::from(s.get("minItems").is_some());
                prop::collection::vec(valid(&s["items"]), min..4)
                    .prop_map(|v| format!("[{}]", v.join(",")))
                    .boxed()
            }
            "object" => valid_object(s),
            _ => any_json(),
        },
        _ => any_json(),
    }
}

fn valid_object(s: &Map<String, Value>) -> BoxedStrategy<String> {
    let required: Vec<&str> = s["required"]
        .as_array()
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let members: Vec<BoxedStrategy<Option<String>>> = s["properties"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(k, v)| {
            let key = Value::String(k.clone()).to_string();
            let member = valid(v).prop_map(move |v| format!("{key}:{v}"));
            if required.contains(&k.as_str()) {
                member.prop_map(Some).boxed()
            } else {
                prop::option::of(member).boxed()
            }
        })
        .collect();
    let extra = match s.get("additionalProperties") {
        Some(Value::Bool(true)) => any_json(),
        Some(schema @ Value::Object(_)) => valid(schema),
        _ => {
            return members
                .prop_map(|m| {
                    format!("{{{}}}", m.into_iter().flatten().collect::<Vec<_>>().join(","))
                })
                .boxed();
        }
    };
    let extras = prop::collection::vec(
        (any::<String>(), extra).prop_map(|(k, v)| format!("{}:{v}", Value::String(k))),
        0..3,
    );
    (members, extras)
        .prop_map(|(m, e)| {
            let all: Vec<String> = m.into_iter().flatten().chain(e).collect();
            format!("{{{}}}", all.join(","))
        })
        .boxed()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn every_value_valid_under_the_schema_matches_its_grammar(
        (schema, text) in schema().prop_flat_map(|s| (Just(s.clone()), valid(&s)))
    ) {
        let gbnf = schema_to_gbnf(&schema);
        let g = Gbnf::parse(&gbnf).map_err(|e| TestCaseError::fail(format!("{e}\n{gbnf}")))?;
        prop_assert!(serde_json::from_str::<Value>(&text).is_ok(), "not JSON: {}", text);
        prop_assert!(g.matches(&text), "schema {}\nvalue {}\ngrammar\n{}", schema, text, gbnf);
    }

    #[test]
    fn any_json_value_matches_the_grammar_of_the_empty_schema(text in any_json()) {
        let g = grammar(json!({}));
        prop_assert!(g.matches(&text), "{}", text);
    }

    #[test]
    fn strings_match_exactly_when_json_would_read_them(s in "[\\x00-\\x20\"\\\\/bfnrtu0-9a-cA-C\\x7fé]{0,8}") {
        let g = grammar(json!({"type": "string"}));
        let quoted = format!("\"{s}\"");
        let json_reads = serde_json::from_str::<String>(&quoted).is_ok();
        prop_assert_eq!(g.matches(&quoted), json_reads, "{:?}", quoted);
    }
}

#[test]
fn an_integer_with_a_small_closed_range_allows_only_its_values() {
    let days = grammar(json!({"type": "integer", "minimum": 1, "maximum": 7}));
    for ok in ["1", "4", "7"] {
        assert!(days.matches(ok), "{ok}");
    }
    for bad in ["0", "8", "2017", "-1", "1.5"] {
        assert!(!days.matches(bad), "{bad}");
    }
    let exclusive =
        grammar(json!({"type": "integer", "exclusiveMinimum": 0, "exclusiveMaximum": 3}));
    assert!(exclusive.matches("1") && exclusive.matches("2"));
    assert!(!exclusive.matches("0") && !exclusive.matches("3"));
    // Open or large ranges take any integer.
    assert_eq!(root_rule(json!({"type": "integer", "minimum": 1})), "integer");
    assert_eq!(root_rule(json!({"type": "integer", "minimum": 0, "maximum": 100000})), "integer");
}
