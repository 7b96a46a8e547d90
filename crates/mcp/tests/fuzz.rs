//! Property tests (proptest, bounded) for mapping what an MCP server returns
//! into tool results: any JSON gives a result, never a panic.

use ferroclaw_mcp::{resource_part, result_part, tool_output};
use proptest::prelude::*;
use serde_json::{Value, json};

const CASES: u32 = 600;

/// A value of any shape, a few levels deep.
fn any_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_filter("finite", |f| f.is_finite()).prop_map(Value::from),
        prop_oneof![
            Just("text"),
            Just("image"),
            Just("audio"),
            Just("resource"),
            Just("resource_link"),
            Just("image/png"),
            Just("text/plain"),
            Just("aGVsbG8="),
            Just("file:///x"),
        ]
        .prop_map(Value::from),
        ".{0,20}".prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 24, 6, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            proptest::collection::btree_map(
                prop_oneof![
                    Just("type"),
                    Just("text"),
                    Just("data"),
                    Just("mimeType"),
                    Just("uri"),
                    Just("resource"),
                    Just("blob"),
                    Just("content"),
                    Just("isError"),
                    Just("structuredContent"),
                    Just("name"),
                ]
                .prop_map(str::to_string),
                inner,
                0..5,
            )
            .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: CASES, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn any_result_maps_without_panicking(result in any_json(), block in any_json()) {
        let _ = tool_output(&result);
        let _ = result_part(&block);
        let _ = resource_part(&block);
        let wrapped = json!({"content": [block.clone(), result.clone()], "isError": block});
        let _ = tool_output(&wrapped);
    }
}
