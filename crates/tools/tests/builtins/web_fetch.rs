use axum::Router;
use axum::http::StatusCode;
use axum::http::header::{CONTENT_TYPE, LOCATION};
use axum::routing::get;
use serde_json::json;

use crate::workspace;

const PAGE: &str = "<!doctype html><html><head><title>Docs</title><script>track()</script></head>\
    <body><nav>Menu</nav><h1>Guide</h1><p>Read <a href=\"/more\">more</a>.</p></body></html>";

/// A local server on 127.0.0.1; returns its base URL.
async fn serve() -> String {
    let app = Router::new()
        .route("/page", get(|| async { ([(CONTENT_TYPE, "text/html; charset=utf-8")], PAGE) }))
        .route("/data", get(|| async { ([(CONTENT_TYPE, "application/json")], r#"{"ok":true}"#) }))
        .route(
            "/image",
            get(|| async { ([(CONTENT_TYPE, "image/png")], vec![0x89u8, b'P', b'N', b'G']) }),
        )
        .route(
            "/long",
            get(|| async { ([(CONTENT_TYPE, "text/plain")], "abcdefghij".repeat(100)) }),
        )
        .route("/loop", get(|| async { (StatusCode::FOUND, [(LOCATION, "/loop")]) }))
        .route("/moved", get(|| async { (StatusCode::MOVED_PERMANENTLY, [(LOCATION, "/data")]) }))
        .route(
            "/missing",
            get(|| async {
                (StatusCode::NOT_FOUND, [(CONTENT_TYPE, "text/plain")], "no such page")
            }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    format!("http://{addr}")
}

#[tokio::test]
async fn web_fetch_converts_html_to_markdown_without_scripts_or_navigation() {
    let (ws, base) = (workspace(), serve().await);
    let out = ws.ok("web_fetch", json!({"url": format!("{base}/page")})).await;
    assert!(out.contains("Title: Docs"), "{out}");
    assert!(out.contains("# Guide"), "{out}");
    assert!(out.contains("[more](/more)"), "{out}");
    assert!(!out.contains("track()") && !out.contains("Menu"), "{out}");
}

#[tokio::test]
async fn web_fetch_text_format_drops_markup() {
    let (ws, base) = (workspace(), serve().await);
    let out = ws.ok("web_fetch", json!({"url": format!("{base}/page"), "format": "text"})).await;
    assert!(out.contains("Read more."), "{out}");
}

#[tokio::test]
async fn web_fetch_passes_json_through_and_follows_redirects() {
    let (ws, base) = (workspace(), serve().await);
    let out = ws.ok("web_fetch", json!({"url": format!("{base}/moved")})).await;
    assert!(out.contains(r#"{"ok":true}"#), "{out}");
    assert!(out.contains(&format!("URL: {base}/data")), "{out}");
}

#[tokio::test]
async fn web_fetch_refuses_binary_content_naming_the_type() {
    let (ws, base) = (workspace(), serve().await);
    let err = ws.err("web_fetch", json!({"url": format!("{base}/image")})).await;
    assert!(err.contains("image/png"), "{err}");
}

#[tokio::test]
async fn web_fetch_cuts_at_max_chars_with_a_marker() {
    let (ws, base) = (workspace(), serve().await);
    let out = ws.ok("web_fetch", json!({"url": format!("{base}/long"), "max_chars": 25})).await;
    assert!(
        out.contains("abcdefghijabcdefghijabcde\n\n[... cut at 25 of 1000 characters"),
        "{out}"
    );
}

#[tokio::test]
async fn web_fetch_stops_after_five_redirects() {
    let (ws, base) = (workspace(), serve().await);
    let err = ws.err("web_fetch", json!({"url": format!("{base}/loop")})).await;
    assert!(err.contains("too many redirects"), "{err}");
}

#[tokio::test]
async fn web_fetch_reports_http_errors_with_the_body() {
    let (ws, base) = (workspace(), serve().await);
    let err = ws.err("web_fetch", json!({"url": format!("{base}/missing")})).await;
    assert!(err.contains("404") && err.contains("no such page"), "{err}");
}

#[tokio::test]
async fn web_fetch_refuses_other_schemes_and_bad_urls() {
    let ws = workspace();
    assert!(
        ws.err("web_fetch", json!({"url": "file:///etc/passwd"}))
            .await
            .contains("only http and https")
    );
    assert!(ws.err("web_fetch", json!({"url": "not a url"})).await.contains("not a valid URL"));
}

#[tokio::test]
async fn web_fetch_names_connection_failures() {
    let ws = workspace();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    let err = ws.err("web_fetch", json!({"url": format!("http://127.0.0.1:{port}/")})).await;
    assert!(err.contains("cannot connect"), "{err}");
}
