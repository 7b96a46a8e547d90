use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::{Query, State};
use axum::http::HeaderMap;
use axum::routing::{get, post};
use ferroclaw_tools::{SearchBackend, Tool, ToolContext, WebSearchTool};
use serde_json::{Value, json};

/// What the fake search services saw: (path, auth header, query text).
type Seen = Arc<Mutex<Vec<(String, String, String)>>>;

async fn serve(seen: Seen) -> String {
    let app = Router::new()
        .route(
            "/brave",
            get(|State(seen): State<Seen>, headers: HeaderMap, Query(q): Query<Vec<(String, String)>>| async move {
                let token = headers.get("x-subscription-token").and_then(|v| v.to_str().ok()).unwrap_or("").to_string();
                let query = q.iter().find(|(k, _)| k == "q").map(|(_, v)| v.clone()).unwrap_or_default();
                seen.lock().unwrap().push(("brave".into(), token, query));
                axum::Json(json!({"web": {"results": [
                    {"title": "Tokio", "url": "https://tokio.rs", "description": "An <strong>async</strong> runtime"},
                    {"title": "Docs", "url": "https://docs.rs/tokio", "description": "API docs"}
                ]}}))
            }),
        )
        .route(
            "/tavily",
            post(|State(seen): State<Seen>, headers: HeaderMap, axum::Json(body): axum::Json<Value>| async move {
                let auth = headers.get("authorization").and_then(|v| v.to_str().ok()).unwrap_or("").to_string();
                seen.lock().unwrap().push(("tavily".into(), auth, body["query"].as_str().unwrap_or("").into()));
                axum::Json(json!({"results": [{"title": "T", "url": "https://t.example", "content": "tavily says"}]}))
            }),
        )
        .route(
            "/searxng",
            get(|State(seen): State<Seen>, Query(q): Query<Vec<(String, String)>>| async move {
                let query = q.iter().find(|(k, _)| k == "q").map(|(_, v)| v.clone()).unwrap_or_default();
                seen.lock().unwrap().push(("searxng".into(), String::new(), query));
                axum::Json(json!({"results": []}))
            }),
        )
        .with_state(seen);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    format!("http://{addr}")
}

#[tokio::test]
async fn web_search_asks_each_backend_its_own_way_and_lists_the_hits() {
    let seen: Seen = Arc::default();
    let base = serve(seen.clone()).await;
    let ctx = ToolContext::new(std::env::temp_dir());

    let brave =
        WebSearchTool::new(SearchBackend::Brave, Some(format!("{base}/brave")), Some("bk".into()))
            .unwrap();
    let out = brave.execute(json!({"query": "tokio runtime", "count": 1}), &ctx).await.unwrap();
    let text = out.joined_text();
    assert_eq!(text, "1. Tokio\n   https://tokio.rs\n   An async runtime");

    let tavily = WebSearchTool::new(
        SearchBackend::Tavily,
        Some(format!("{base}/tavily")),
        Some("tk".into()),
    )
    .unwrap();
    let text = tavily.execute(json!({"query": "q2"}), &ctx).await.unwrap().joined_text();
    assert!(text.contains("tavily says"), "{text}");

    let searx =
        WebSearchTool::new(SearchBackend::Searxng, Some(format!("{base}/searxng")), None).unwrap();
    let text = searx.execute(json!({"query": "nothing"}), &ctx).await.unwrap().joined_text();
    assert_eq!(text, "no results for \"nothing\"");

    let seen = seen.lock().unwrap().clone();
    assert_eq!(
        seen,
        vec![
            ("brave".to_string(), "bk".to_string(), "tokio runtime".to_string()),
            ("tavily".to_string(), "Bearer tk".to_string(), "q2".to_string()),
            ("searxng".to_string(), String::new(), "nothing".to_string()),
        ]
    );
}

#[test]
fn web_search_needs_a_key_or_a_url_depending_on_the_backend() {
    assert!(WebSearchTool::new(SearchBackend::Brave, None, None).unwrap_err().contains("API key"));
    assert!(WebSearchTool::new(SearchBackend::Searxng, None, None).unwrap_err().contains("url"));
    assert!(SearchBackend::parse("bing").unwrap_err().contains("brave, tavily, searxng"));
}
