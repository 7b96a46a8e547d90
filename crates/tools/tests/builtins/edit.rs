use serde_json::json;

use crate::workspace;

const SOURCE: &str = "fn main() {\n    let x = 1;\n    println!(\"{x}\");\n    let x = 1;\n}\n";

#[tokio::test]
async fn edit_replaces_a_unique_match_and_shows_numbered_context() {
    let ws = workspace();
    ws.write_and_read("main.rs", SOURCE).await;
    let out = ws
        .ok("edit", json!({"path": "main.rs", "old_string": "println!(\"{x}\");", "new_string": "dbg!(x);"}))
        .await;
    assert_eq!(ws.read("main.rs"), SOURCE.replace("println!(\"{x}\");", "dbg!(x);"));
    assert!(out.contains("1 replacement"), "{out}");
    assert!(out.contains("     3\t    dbg!(x);"), "{out}");
    assert!(out.contains("     1\tfn main() {"), "context before: {out}");
}

#[tokio::test]
async fn edit_refuses_ambiguous_match_and_leaves_file_untouched() {
    let ws = workspace();
    ws.write_and_read("main.rs", SOURCE).await;
    let err = ws
        .err(
            "edit",
            json!({"path": "main.rs", "old_string": "let x = 1;", "new_string": "let x = 2;"}),
        )
        .await;
    assert!(err.contains("occurs 2 times") && err.contains("lines 2, 4"), "{err}");
    assert!(err.contains("replace_all"), "{err}");
    assert_eq!(ws.read("main.rs"), SOURCE);
}

#[tokio::test]
async fn edit_replace_all_changes_every_occurrence() {
    let ws = workspace();
    ws.write_and_read("main.rs", SOURCE).await;
    let out = ws
        .ok(
            "edit",
            json!({"path": "main.rs", "old_string": "let x = 1;", "new_string": "let x = 2;", "replace_all": true}),
        )
        .await;
    assert!(out.contains("2 replacements"), "{out}");
    assert_eq!(ws.read("main.rs").matches("let x = 2;").count(), 2);
}

#[tokio::test]
async fn edit_without_a_match_shows_the_closest_lines_and_leaves_file_untouched() {
    let ws = workspace();
    ws.write_and_read("main.rs", SOURCE).await;
    let err = ws
        .err(
            "edit",
            json!({"path": "main.rs", "old_string": "printn!(\"{x}\")", "new_string": "x"}),
        )
        .await;
    assert!(err.contains("not found"), "{err}");
    assert!(err.contains("     3\t    println!"), "{err}");
    assert_eq!(ws.read("main.rs"), SOURCE);
}

#[tokio::test]
async fn edit_with_wrong_indentation_names_the_lines_to_copy() {
    let ws = workspace();
    ws.write_and_read("main.rs", SOURCE).await;
    let err = ws
        .err(
            "edit",
            json!({"path": "main.rs", "old_string": "fn main() {\nlet x = 1;", "new_string": "x"}),
        )
        .await;
    assert!(err.contains("lines 1-2 when whitespace is ignored"), "{err}");
}

#[tokio::test]
async fn edit_refuses_empty_or_unchanged_strings() {
    let ws = workspace();
    ws.write_and_read("main.rs", SOURCE).await;
    let err = ws.err("edit", json!({"path": "main.rs", "old_string": "", "new_string": "x"})).await;
    assert!(err.contains("old_string is empty"), "{err}");
    let err = ws
        .err("edit", json!({"path": "main.rs", "old_string": "main", "new_string": "main"}))
        .await;
    assert!(err.contains("the same"), "{err}");
    assert_eq!(ws.read("main.rs"), SOURCE);
}

#[tokio::test]
async fn edit_of_a_missing_file_points_to_write() {
    let ws = workspace();
    let err = ws.err("edit", json!({"path": "new.rs", "old_string": "a", "new_string": "b"})).await;
    assert!(err.contains("does not exist") && err.contains("write"), "{err}");
}

#[tokio::test]
async fn edit_matches_lf_strings_in_crlf_files() {
    let ws = workspace();
    ws.write_and_read("win.txt", "one\r\ntwo\r\nthree\r\n").await;
    ws.ok("edit", json!({"path": "win.txt", "old_string": "one\ntwo", "new_string": "1\n2"})).await;
    assert_eq!(ws.read("win.txt"), "1\r\n2\r\nthree\r\n");
}

#[tokio::test]
async fn multi_edit_applies_edits_in_order() {
    let ws = workspace();
    ws.write_and_read("main.rs", SOURCE).await;
    let out = ws
        .ok(
            "multi_edit",
            json!({"path": "main.rs", "edits": [
                {"old_string": "let x = 1;", "new_string": "let y = 1;", "replace_all": true},
                {"old_string": "{x}", "new_string": "{y}"},
                {"old_string": "let y = 1;\n}", "new_string": "let y = 3;\n}"}
            ]}),
        )
        .await;
    assert!(out.contains("3 edits, 4 replacements"), "{out}");
    assert_eq!(
        ws.read("main.rs"),
        "fn main() {\n    let y = 1;\n    println!(\"{y}\");\n    let y = 3;\n}\n"
    );
}

#[tokio::test]
async fn multi_edit_is_all_or_nothing_and_names_the_failing_edit() {
    let ws = workspace();
    ws.write_and_read("main.rs", SOURCE).await;
    let err = ws
        .err(
            "multi_edit",
            json!({"path": "main.rs", "edits": [
                {"old_string": "fn main", "new_string": "fn start"},
                {"old_string": "let x = 1;", "new_string": "let x = 5;"}
            ]}),
        )
        .await;
    assert!(err.contains("edit #2 of 2 failed") && err.contains("occurs 2 times"), "{err}");
    assert!(err.contains("Nothing was written"), "{err}");
    assert_eq!(ws.read("main.rs"), SOURCE);
}

#[tokio::test]
async fn multi_edit_refuses_an_empty_edit_list() {
    let ws = workspace();
    ws.write_and_read("main.rs", SOURCE).await;
    let err = ws
        .call_unvalidated("multi_edit", json!({"path": "main.rs", "edits": []}))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("empty"), "{err}");
}

#[tokio::test]
async fn edit_and_multi_edit_refuse_a_file_the_conversation_never_read_and_leave_it_untouched() {
    let ws = workspace();
    ws.write("main.rs", SOURCE);
    let err = ws
        .err("edit", json!({"path": "main.rs", "old_string": "fn main", "new_string": "fn go"}))
        .await;
    assert_eq!(err, ferroclaw_tools::NOT_READ_YET);
    let edits = json!([{"old_string": "fn main", "new_string": "fn go"}]);
    let err = ws.err("multi_edit", json!({"path": "main.rs", "edits": edits})).await;
    assert_eq!(err, ferroclaw_tools::NOT_READ_YET);
    assert_eq!(ws.read("main.rs"), SOURCE);
    // A read of a few lines is enough, as in Claude Code.
    ws.ok("read", json!({"path": "main.rs", "offset": 3, "limit": 1})).await;
    ws.ok("edit", json!({"path": "main.rs", "old_string": "fn main", "new_string": "fn go"})).await;
    assert!(ws.read("main.rs").starts_with("fn go() {"));
}
