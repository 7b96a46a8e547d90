//! The code tools as the model sees them: answers cite file:line, mark
//! exact and heuristic edges, and say how fresh the index is.

use std::path::Path;

use ferroclaw_codegraph::register_code_tools;
use ferroclaw_tools::{ToolContext, ToolRegistry};
use serde_json::json;

#[tokio::test]
async fn code_callers_tool_cites_sites_marks_edges_and_freshness() {
    let home = tempfile::tempdir().unwrap();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/python");
    let mut registry = ToolRegistry::new();
    assert!(register_code_tools(&mut registry, &root, home.path()));
    let names = registry.names();
    assert_eq!(
        names,
        [
            "code_outline",
            "code_find",
            "code_definition",
            "code_callers",
            "code_callees",
            "code_impact"
        ]
    );
    let tool = registry.get("code_callers").unwrap();
    let input = json!({"symbol": "format_name"});
    registry.validate("code_callers", &input).unwrap();
    let out = tool.execute(input, &ToolContext::new(&root)).await.unwrap();
    let text = out.joined_text();
    assert!(!out.is_error);
    assert!(
        text.starts_with(
            "callers of format_name (app/models.py:19): 2 edges (2 exact, 0 heuristic)\n"
        ),
        "{text}"
    );
    assert!(text.contains("index: 4 files"), "{text}");
    assert!(text.contains("no files changed since"), "{text}");
    assert!(text.contains("app/models.py:16 method User.greet -> format_name [exact]"), "{text}");
    assert!(text.contains("app/service.py:8 function register -> format_name [exact]"), "{text}");

    let missing = registry.get("code_definition").unwrap();
    let out = missing.execute(json!({"symbol": "nope"}), &ToolContext::new(&root)).await.unwrap();
    assert!(out.is_error);
    assert!(out.joined_text().contains("no symbol `nope`"));
}
