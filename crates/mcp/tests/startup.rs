//! A server that dies while starting is reported as failing to start, with
//! the end of its stderr: not as a crash "restarted on the next call", since
//! no call can come to a server whose tools were never listed.

use ferroclaw_mcp::{HubOptions, McpConfig, McpHub, ServerConfig, ServerState};

/// Answers the handshake, then writes to stderr and exits when asked for its tools.
const DIES_AFTER_HANDSHAKE: &str = r#"
read -r line
id=$(printf '%s' "$line" | sed -n 's/.*"id":\([0-9]*\).*/\1/p')
version=$(printf '%s' "$line" | sed -n 's/.*"protocolVersion":"\([^"]*\)".*/\1/p')
printf '{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":"%s","capabilities":{"tools":{}},"serverInfo":{"name":"doomed","version":"1"}}}\n' "$id" "$version"
read -r initialized
read -r list
echo "loading plugins" >&2
echo "fatal: cannot open /var/db/doomed.sqlite" >&2
exit 3
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_dying_during_start_up_is_reported_as_not_started_with_its_stderr() {
    let ws = tempfile::tempdir().unwrap();
    let server = ServerConfig::stdio("doomed", "sh", &["-c", DIES_AFTER_HANDSHAKE]);
    let config = McpConfig { servers: vec![server], ..Default::default() };
    let options = HubOptions { workspace: ws.path().to_path_buf(), ..Default::default() };
    let hub = McpHub::start(config, options).await;
    let problems = hub.problems().join("\n");
    assert!(problems.contains("mcp server doomed did not start"), "{problems}");
    assert!(problems.contains("fatal: cannot open /var/db/doomed.sqlite"), "{problems}");
    assert!(!problems.contains("restarted on the next call"), "{problems}");
    let statuses = hub.statuses().await;
    assert!(matches!(&statuses[0].state, ServerState::Failed(_)), "{statuses:?}");
    hub.shutdown().await;
}

/// An HTTP server that answers the handshake, then sends a tool list of
/// `size` bytes (a description that long).
async fn http_server_with_a_tool_list_of(size: usize) -> String {
    use axum::Json;
    use axum::routing::post;
    use serde_json::{Value, json};
    let app = axum::Router::new().route(
        "/mcp",
        post(move |Json(body): Json<Value>| async move {
            use axum::response::IntoResponse;
            let Some(id) = body.get("id").cloned() else {
                return axum::http::StatusCode::ACCEPTED.into_response();
            };
            let result = match body["method"].as_str() {
                Some("initialize") => json!({
                    "protocolVersion": body["params"]["protocolVersion"],
                    "capabilities": {"tools": {}},
                    "serverInfo": {"name": "huge", "version": "1"},
                }),
                _ => json!({"tools": [{"name": "x", "inputSchema": {"type": "object"},
                                       "description": "a".repeat(size)}]}),
            };
            Json(json!({"jsonrpc": "2.0", "id": id, "result": result})).into_response()
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    url
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http_servers_answer_past_the_size_bound_is_reported_as_such_not_as_a_process_that_exited()
 {
    let ws = tempfile::tempdir().unwrap();
    let url = http_server_with_a_tool_list_of(20 << 20).await;
    let config =
        McpConfig { servers: vec![ServerConfig::http("huge", &url)], ..Default::default() };
    let options = HubOptions { workspace: ws.path().to_path_buf(), ..Default::default() };
    let hub = McpHub::start(config, options).await;
    let problems = hub.problems().join("\n");
    assert!(
        problems.contains(&format!(
            "mcp server huge did not start: {url} failed while listing its tools"
        )),
        "{problems}"
    );
    assert!(problems.contains("exceeded the maximum size"), "{problems}");
    for wrong in ["exited", "stderr", "rmcp::", "restarted on the next call"] {
        assert!(!problems.contains(wrong), "{wrong}: {problems}");
    }
    hub.shutdown().await;
}
