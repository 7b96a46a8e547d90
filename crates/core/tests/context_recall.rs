//! Recall over a fixture history: finished requests from several sessions
//! and projects, searched with BM25 ranking through the `session_search` tool.

use std::path::Path;
use std::sync::Arc;

use ferroclaw_core::recall::{Recall, SessionSearchTool};
use ferroclaw_tools::{Tool, ToolContext};
use serde_json::json;

/// (session, project, request, answer, unix time)
const HISTORY: &[(&str, &str, &str, &str, u64)] = &[
    (
        "20261101-090000-aaaa",
        "/work/shop",
        "Set up the release workflow with tags",
        "Added .github/workflows/release.yml: pushing a tag vX.Y.Z builds and publishes.",
        1_793_523_600,
    ),
    (
        "20261101-090000-aaaa",
        "/work/shop",
        "Why is checkout slow?",
        "The cart query lacked an index on user_id; added a migration.",
        1_793_524_000,
    ),
    (
        "20261115-140000-bbbb",
        "/work/blog",
        "Switch the blog to a static site generator",
        "Moved to Zola; templates in templates/, deploys via the release workflow.",
        1_794_754_800,
    ),
    (
        "20261120-100000-cccc",
        "/work/shop",
        "Rename the payments module",
        "Renamed payments to billing across 14 files; tests pass.",
        1_795_168_800,
    ),
];

fn fixture() -> (tempfile::TempDir, Arc<Recall>) {
    let home = tempfile::tempdir().unwrap();
    let recall = Recall::open(home.path()).unwrap();
    for (session, cwd, user, answer, ts) in HISTORY {
        recall.index_turn(session, Path::new(cwd), user, answer, *ts).unwrap();
    }
    (home, Arc::new(recall))
}

#[test]
fn the_best_match_comes_first_with_its_session_and_a_snippet() {
    let (_home, recall) = fixture();
    let hits = recall.search("release workflow tags", 5).unwrap();
    assert_eq!(hits.len(), 2, "{hits:?}");
    assert_eq!(hits[0].session_id, "20261101-090000-aaaa");
    assert_eq!(hits[0].cwd, "/work/shop");
    assert_eq!(hits[0].request, "Set up the release workflow with tags");
    assert!(hits[0].snippet.contains("[release]"), "{}", hits[0].snippet);
    assert_eq!(hits[1].session_id, "20261115-140000-bbbb");
}

#[test]
fn words_match_in_other_forms_and_by_prefix() {
    let (_home, recall) = fixture();
    // Porter stemming: "renaming" finds "Rename"/"Renamed".
    let hits = recall.search("renaming", 5).unwrap();
    assert_eq!(hits[0].session_id, "20261120-100000-cccc");
    let hits = recall.search("migra*", 5).unwrap();
    assert_eq!(hits[0].request, "Why is checkout slow?");
}

#[test]
fn limits_and_empty_or_hostile_queries_are_handled() {
    let (_home, recall) = fixture();
    assert_eq!(recall.search("the", 1).unwrap().len(), 1);
    assert!(recall.search("", 5).unwrap().is_empty());
    assert!(recall.search("\" OR ) NEAR(", 5).unwrap().is_empty());
    assert!(recall.search("kubernetes", 5).unwrap().is_empty());
    assert_eq!(recall.len().unwrap(), 4);
}

#[test]
fn the_index_survives_reopening() {
    let (home, recall) = fixture();
    drop(recall);
    let again = Recall::open(home.path()).unwrap();
    assert_eq!(again.len().unwrap(), 4);
}

#[tokio::test]
async fn the_session_search_tool_returns_ids_dates_and_snippets() {
    let (_home, recall) = fixture();
    let tool = SessionSearchTool::new(recall);
    assert!(tool.read_only());
    let ctx = ToolContext::new("/");
    let out = tool.execute(json!({"query": "index on user_id", "limit": 1}), &ctx).await.unwrap();
    let text = out.joined_text();
    assert!(
        text.starts_with("session 20261101-090000-aaaa · 2026-11-01 · /work/shop\n  asked: Why is checkout slow?\n  match: "),
        "{text}"
    );
    let out = tool.execute(json!({"query": "kubernetes"}), &ctx).await.unwrap();
    assert_eq!(out.joined_text(), "no earlier session mentions \"kubernetes\"");
}
