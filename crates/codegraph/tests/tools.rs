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

#[tokio::test]
async fn an_edit_through_the_edit_tool_is_in_the_index_before_any_code_tool_runs() {
    let home = tempfile::tempdir().unwrap();
    let root = tempfile::tempdir().unwrap();
    std::fs::write(root.path().join("util.py"), "def helper():\n    return 1\n").unwrap();
    std::fs::write(
        root.path().join("main.py"),
        "from util import helper\n\ndef main():\n    return helper()\n",
    )
    .unwrap();
    ferroclaw_codegraph::CodeIndex::open(root.path(), home.path()).unwrap().update().unwrap();
    let mut registry = ferroclaw_tools::builtin_tools();
    assert!(register_code_tools(&mut registry, root.path(), home.path()));

    // One conversation: the file is read before it is edited.
    let ctx = ToolContext::new(root.path());
    let read = registry.get("read").unwrap();
    assert!(!read.execute(json!({"path": "main.py"}), &ctx).await.unwrap().is_error);
    let edit = registry.get("edit").unwrap();
    let input =
        json!({"path": "main.py", "old_string": "return helper()", "new_string": "return other()"});
    let out = edit.execute(input, &ctx).await.unwrap();
    assert!(!out.is_error, "{out:?}");
    // A reader that never updates sees the edit: it was indexed by the edit itself.
    let reader = ferroclaw_codegraph::CodeIndex::open_existing(root.path(), home.path()).unwrap();
    assert!(reader.callers("helper", 1).unwrap().edges.is_empty());

    let write = registry.get("write").unwrap();
    let input = json!({"path": "extra.py", "content": "def other():\n    pass\n"});
    assert!(!write.execute(input, &ToolContext::new(root.path())).await.unwrap().is_error);
    let callers = reader.callers("other", 1).unwrap();
    assert_eq!(callers.edges.len(), 1, "{callers:?}");
    assert_eq!(callers.edges[0].site_path, "main.py");

    // A failed edit is answered as the tool answers it, and changes nothing.
    let input = json!({"path": "main.py", "old_string": "not there", "new_string": "x"});
    let failed = edit.execute(input, &ctx).await;
    assert!(failed.is_err_and(|e| e.to_string().contains("old_string was not found")));
    assert_eq!(reader.callers("other", 1).unwrap().edges.len(), 1);
}
