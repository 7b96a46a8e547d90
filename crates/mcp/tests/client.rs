//! The MCP client against the official reference servers from npm
//! (`server-everything`, `server-filesystem`), over stdio and streamable HTTP.

mod servers;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use ferroclaw_mcp::{
    ClientHooks, Elicitation, Elicitor, HubOptions, McpConfig, McpHub, Sampler, SamplingRequest,
    ServerConfig, ServerState,
};
use ferroclaw_protocol::ResultPart;
use ferroclaw_tools::{ToolContext, ToolOutput, ToolRegistry};
use serde_json::{Value, json};

fn everything(name: &str, bin: &Path) -> ServerConfig {
    ServerConfig::stdio(name, bin.to_string_lossy(), &["stdio"])
}

async fn start(
    servers: Vec<ServerConfig>,
    workspace: &Path,
    hooks: ClientHooks,
) -> (McpHub, ToolRegistry) {
    let config = McpConfig { servers, ..Default::default() };
    let hub = McpHub::start(
        config,
        HubOptions { workspace: workspace.to_path_buf(), hooks, ..Default::default() },
    )
    .await;
    let mut tools = ToolRegistry::new();
    hub.register_tools(&mut tools);
    (hub, tools)
}

async fn call(tools: &ToolRegistry, name: &str, input: Value) -> ToolOutput {
    let tool = tools
        .get(name)
        .unwrap_or_else(|| panic!("{name} not registered; have {:?}", tools.names()));
    tool.execute(input, &ToolContext::new("/")).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdio_server_tools_appear_with_schema_and_read_only_hint_and_echo_round_trips() {
    let Some(bin) = servers::npm_server("mcp-server-everything") else {
        return;
    };
    let ws = tempfile::tempdir().unwrap();
    let (hub, tools) =
        start(vec![everything("everything", &bin)], ws.path(), ClientHooks::default()).await;
    assert!(hub.problems().is_empty(), "{:?}", hub.problems());
    let echo = tools.get("mcp__everything__echo").unwrap();
    assert_eq!(echo.description(), "Echoes back the input string");
    assert_eq!(echo.input_schema()["required"], json!(["message"]));
    assert!(echo.read_only(), "echo carries readOnlyHint: true");
    assert!(!tools.get("mcp__everything__toggle-simulated-logging").unwrap().read_only());
    let out = call(&tools, "mcp__everything__echo", json!({"message": "hi"})).await;
    assert_eq!(out, ToolOutput::text("Echo: hi"));
    assert_eq!(
        hub.statuses().await[0].state,
        ServerState::Ready { tools: hub.tool_names()["everything"].len() }
    );
    hub.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn results_map_images_embedded_resources_links_and_errors() {
    let Some(bin) = servers::npm_server("mcp-server-everything") else {
        return;
    };
    let ws = tempfile::tempdir().unwrap();
    let (hub, tools) = start(vec![everything("ev", &bin)], ws.path(), ClientHooks::default()).await;

    let image = call(&tools, "mcp__ev__get-tiny-image", json!({})).await;
    assert!(
        image.content.iter().any(|p| matches!(p, ResultPart::Image { media_type, data } if media_type == "image/png" && data.starts_with("iVBOR"))),
        "{image:?}"
    );
    let text_resource = call(
        &tools,
        "mcp__ev__get-resource-reference",
        json!({"resourceType": "Text", "resourceId": 1}),
    )
    .await;
    assert!(
        text_resource.joined_text().contains("[resource demo://resource/dynamic/text/1]"),
        "{text_resource:?}"
    );
    let blob = call(
        &tools,
        "mcp__ev__get-resource-reference",
        json!({"resourceType": "Blob", "resourceId": 2}),
    )
    .await;
    assert!(blob.joined_text().contains("[resource demo://resource/dynamic/blob/2]"), "{blob:?}");
    let links = call(&tools, "mcp__ev__get-resource-links", json!({"count": 2})).await;
    assert!(links.joined_text().contains("[resource link: demo://resource/"), "{links:?}");

    let refused = call(&tools, "mcp__ev__echo", json!({})).await;
    assert!(refused.is_error, "a server-side validation error is an error result");
    assert!(refused.joined_text().contains("message"), "{refused:?}");
    hub.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resources_and_prompts_are_listed_and_read() {
    let Some(bin) = servers::npm_server("mcp-server-everything") else {
        return;
    };
    let ws = tempfile::tempdir().unwrap();
    let (hub, tools) = start(vec![everything("ev", &bin)], ws.path(), ClientHooks::default()).await;

    let listed = call(&tools, "mcp_list_resources", json!({})).await;
    assert!(
        listed.joined_text().contains(
            "ev: demo://resource/static/document/architecture.md (architecture.md, text/markdown)"
        ),
        "{listed:?}"
    );
    assert!(
        listed.joined_text().contains("(template, "),
        "resource templates are listed too: {listed:?}"
    );
    let read = call(
        &tools,
        "mcp_read_resource",
        json!({"server": "ev", "uri": "demo://resource/static/document/architecture.md"}),
    )
    .await;
    assert!(!read.is_error && read.joined_text().len() > 200, "{read:?}");
    let unknown = call(&tools, "mcp_read_resource", json!({"server": "nope", "uri": "x"})).await;
    assert_eq!(unknown.joined_text(), "no mcp server named \"nope\"; configured: ev");

    let prompts = hub.prompts().await;
    let args_prompt = prompts.iter().find(|p| p.name == "args-prompt").unwrap();
    assert_eq!(args_prompt.command(), "/mcp__ev__args-prompt");
    assert_eq!(args_prompt.arguments[0], ("city".to_string(), true));
    let text = hub
        .get_prompt("ev", "args-prompt", [("city".to_string(), "Paris".to_string())].into())
        .await
        .unwrap();
    assert!(text.contains("Paris"), "{text}");
    hub.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn filesystem_server_reads_a_file_of_the_workspace_it_gets_as_root() {
    let Some(bin) = servers::npm_server("mcp-server-filesystem") else {
        return;
    };
    let ws = tempfile::tempdir().unwrap();
    let ws_path = ws.path().canonicalize().unwrap();
    std::fs::write(ws_path.join("notes.txt"), "alpha beta\n").unwrap();
    let server = ServerConfig::stdio("fs", bin.to_string_lossy(), &[ws_path.to_str().unwrap()]);
    let (hub, tools) = start(vec![server], &ws_path, ClientHooks::default()).await;
    assert!(hub.problems().is_empty(), "{:?}", hub.problems());
    let out =
        call(&tools, "mcp__fs__read_text_file", json!({"path": ws_path.join("notes.txt")})).await;
    assert!(!out.is_error, "{out:?}");
    assert!(out.joined_text().contains("alpha beta"), "{out:?}");
    let outside = call(&tools, "mcp__fs__read_text_file", json!({"path": "/etc/hostname"})).await;
    assert!(outside.is_error, "{outside:?}");
    hub.shutdown().await;
}

/// A free local port (bound, then released).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// `server-everything streamableHttp` on a free port, killed on drop.
struct HttpEverything {
    child: std::process::Child,
    url: String,
}

impl HttpEverything {
    fn start(bin: &Path) -> HttpEverything {
        let port = free_port();
        let child = std::process::Command::new(bin)
            .arg("streamableHttp")
            .env("PORT", port.to_string())
            .stderr(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "server-everything did not listen on {port}");
            std::thread::sleep(Duration::from_millis(100));
        }
        HttpEverything { child, url: format!("http://127.0.0.1:{port}/mcp") }
    }
}

impl Drop for HttpEverything {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streamable_http_server_lists_and_calls_tools_with_sse_progress_and_headers() {
    let Some(bin) = servers::npm_server("mcp-server-everything") else {
        return;
    };
    let http = HttpEverything::start(&bin);
    let ws = tempfile::tempdir().unwrap();
    let mut server = ServerConfig::http("web", &http.url);
    if let ferroclaw_mcp::Transport::Http { headers, .. } = &mut server.transport {
        headers.insert("Authorization".into(), "Bearer test-token".into());
    }
    let (hub, tools) = start(vec![server], ws.path(), ClientHooks::default()).await;
    assert!(hub.problems().is_empty(), "{:?}", hub.problems());
    let out = call(&tools, "mcp__web__echo", json!({"message": "over http"})).await;
    assert_eq!(out.joined_text(), "Echo: over http");
    // A call that streams progress notifications answers over SSE.
    let long = call(
        &tools,
        "mcp__web__trigger-long-running-operation",
        json!({"duration": 1, "steps": 2}),
    )
    .await;
    assert!(!long.is_error && long.joined_text().contains("completed"), "{long:?}");
    let sum = call(&tools, "mcp__web__get-sum", json!({"a": 2, "b": 3})).await;
    assert!(sum.joined_text().contains('5'), "{sum:?}");
    hub.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_never_answers_fails_alone_within_its_startup_timeout() {
    let Some(bin) = servers::npm_server("mcp-server-everything") else {
        return;
    };
    let ws = tempfile::tempdir().unwrap();
    let mut silent = ServerConfig::stdio("silent", "sleep", &["1000"]);
    silent.startup_timeout = Duration::from_secs(2);
    let missing = ServerConfig::stdio("missing", "/nonexistent/mcp-server", &[]);
    let began = Instant::now();
    let (hub, tools) =
        start(vec![silent, missing, everything("ev", &bin)], ws.path(), ClientHooks::default())
            .await;
    assert!(began.elapsed() < Duration::from_secs(15), "took {:?}", began.elapsed());
    let problems = hub.problems().join("\n");
    assert!(
        problems.contains("mcp server silent did not start: no answer to the handshake within 2 s"),
        "{problems}"
    );
    assert!(
        problems
            .contains("mcp server missing did not start: cannot run \"/nonexistent/mcp-server\""),
        "{problems}"
    );
    assert_eq!(
        call(&tools, "mcp__ev__echo", json!({"message": "still here"})).await.joined_text(),
        "Echo: still here"
    );
    let states: Vec<(String, bool)> = hub
        .statuses()
        .await
        .into_iter()
        .map(|s| (s.name, matches!(s.state, ServerState::Failed(_))))
        .collect();
    assert_eq!(states, [("ev".into(), false), ("missing".into(), true), ("silent".into(), true)]);
    hub.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_that_takes_too_long_times_out_with_the_server_named() {
    let Some(bin) = servers::npm_server("mcp-server-everything") else {
        return;
    };
    let ws = tempfile::tempdir().unwrap();
    let mut server = everything("slow", &bin);
    server.tool_timeout = Duration::from_secs(1);
    let (hub, tools) = start(vec![server], ws.path(), ClientHooks::default()).await;
    let began = Instant::now();
    let out = call(
        &tools,
        "mcp__slow__trigger-long-running-operation",
        json!({"duration": 30, "steps": 2}),
    )
    .await;
    assert!(began.elapsed() < Duration::from_secs(5));
    assert!(out.is_error);
    assert_eq!(
        out.joined_text(),
        "mcp server slow did not answer the call of trigger-long-running-operation within 1 s (tool_timeout_secs)"
    );
    hub.shutdown().await;
}

/// A stdio server wrapped so the test knows its pid (it leads its group).
fn killable_everything(bin: &Path, pid_file: &Path) -> ServerConfig {
    let script = format!("echo $$ > '{}'; exec '{}' stdio", pid_file.display(), bin.display());
    ServerConfig::stdio("fragile", "sh", &["-c", &script])
}

fn kill_server(pid_file: &Path) {
    let pid = std::fs::read_to_string(pid_file).unwrap();
    let status = std::process::Command::new("kill").args(["-9", pid.trim()]).status().unwrap();
    assert!(status.success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_killed_mid_call_errors_that_call_restarts_once_then_is_marked_failed() {
    let Some(bin) = servers::npm_server("mcp-server-everything") else {
        return;
    };
    let ws = tempfile::tempdir().unwrap();
    let pid_file: PathBuf = ws.path().join("pid");
    let (hub, tools) =
        start(vec![killable_everything(&bin, &pid_file)], ws.path(), ClientHooks::default()).await;
    assert!(hub.problems().is_empty(), "{:?}", hub.problems());

    let long = tokio::spawn({
        let tools = tools.clone();
        async move {
            call(
                &tools,
                "mcp__fragile__trigger-long-running-operation",
                json!({"duration": 20, "steps": 2}),
            )
            .await
        }
    });
    tokio::time::sleep(Duration::from_millis(700)).await;
    kill_server(&pid_file);
    let began = Instant::now();
    let out = tokio::time::timeout(Duration::from_secs(10), long)
        .await
        .expect("the call in flight must not hang")
        .unwrap();
    assert!(began.elapsed() < Duration::from_secs(5));
    assert!(out.is_error);
    let text = out.joined_text();
    assert!(text.starts_with("mcp server fragile crashed during the call"), "{text}");
    assert!(text.contains("restarted on the next call"), "{text}");

    // The next call restarts it.
    let again = call(&tools, "mcp__fragile__echo", json!({"message": "back"})).await;
    assert_eq!(again.joined_text(), "Echo: back");

    // A second crash marks it failed for good.
    kill_server(&pid_file);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let after = call(&tools, "mcp__fragile__echo", json!({"message": "x"})).await;
    assert!(after.is_error);
    let after = call(&tools, "mcp__fragile__echo", json!({"message": "x"})).await;
    assert!(after.joined_text().starts_with("mcp server fragile is unavailable"), "{after:?}");
    assert!(matches!(hub.statuses().await[0].state, ServerState::Failed(_)));
    hub.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_kills_the_server_process() {
    let Some(bin) = servers::npm_server("mcp-server-everything") else {
        return;
    };
    let ws = tempfile::tempdir().unwrap();
    let pid_file = ws.path().join("pid");
    let (hub, _tools) =
        start(vec![killable_everything(&bin, &pid_file)], ws.path(), ClientHooks::default()).await;
    let pid: i32 = std::fs::read_to_string(&pid_file).unwrap().trim().parse().unwrap();
    hub.shutdown().await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    // SAFETY: signal 0 only checks that the process exists.
    let alive = unsafe { libc::kill(pid, 0) } == 0;
    assert!(!alive, "server {pid} still running after shutdown");
}

struct Answering;

#[async_trait]
impl Elicitor for Answering {
    async fn elicit(&self, server: &str, message: &str, schema: &Value) -> Elicitation {
        assert_eq!(server, "ev");
        assert!(!message.is_empty());
        let mut answer = serde_json::Map::new();
        for (key, prop) in schema["properties"].as_object().into_iter().flatten() {
            let value = match prop["type"].as_str() {
                Some("boolean") => json!(true),
                Some("number" | "integer") => {
                    json!(prop["minimum"].as_f64().unwrap_or(1.0).max(1.0) as i64)
                }
                _ => match prop["enum"].as_array().and_then(|e| e.first()) {
                    Some(first) => first.clone(),
                    None => json!("Ada"),
                },
            };
            answer.insert(key.clone(), value);
        }
        Elicitation::Accept(Value::Object(answer))
    }
}

struct Canned;

#[async_trait]
impl Sampler for Canned {
    async fn sample(&self, request: SamplingRequest) -> Result<(String, String), String> {
        assert_eq!(request.server, "ev");
        Ok((format!("canned answer to {}", request.messages.len()), "test-model".into()))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn elicitation_and_sampling_are_declined_without_hooks_and_answered_with_them() {
    let Some(bin) = servers::npm_server("mcp-server-everything") else {
        return;
    };
    let ws = tempfile::tempdir().unwrap();
    let (hub, tools) = start(vec![everything("ev", &bin)], ws.path(), ClientHooks::default()).await;
    let declined = call(&tools, "mcp__ev__trigger-elicitation-request", json!({})).await;
    assert!(declined.joined_text().contains("declined"), "{declined:?}");
    let refused = call(&tools, "mcp__ev__trigger-sampling-request", json!({"prompt": "hi"})).await;
    assert!(refused.joined_text().contains("sampling declined"), "{refused:?}");
    let roots = call(&tools, "mcp__ev__get-roots-list", json!({})).await;
    assert!(roots.joined_text().contains(&format!("file://{}", ws.path().display())), "{roots:?}");
    hub.shutdown().await;

    let hooks = ClientHooks {
        elicitor: Some(Arc::new(Answering)),
        sampler: Some(Arc::new(Canned)),
        scope_consent: None,
    };
    let (hub, tools) = start(vec![everything("ev", &bin)], ws.path(), hooks).await;
    let accepted = call(&tools, "mcp__ev__trigger-elicitation-request", json!({})).await;
    assert!(accepted.joined_text().contains("accept"), "{accepted:?}");
    let sampled = call(&tools, "mcp__ev__trigger-sampling-request", json!({"prompt": "hi"})).await;
    assert!(sampled.joined_text().contains("canned answer to 1"), "{sampled:?}");
    hub.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn allowed_and_denied_tools_filter_what_the_model_sees() {
    let Some(bin) = servers::npm_server("mcp-server-everything") else {
        return;
    };
    let ws = tempfile::tempdir().unwrap();
    let mut only = everything("only", &bin);
    only.allowed_tools = Some(vec!["echo".into(), "get-sum".into()]);
    only.denied_tools = vec!["get-sum".into()];
    let (hub, _tools) = start(vec![only], ws.path(), ClientHooks::default()).await;
    assert_eq!(hub.tool_names()["only"], ["mcp__only__echo"]);
    hub.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_stdio_servers_start_in_parallel() {
    let Some(bin) = servers::npm_server("mcp-server-everything") else {
        return;
    };
    let ws = tempfile::tempdir().unwrap();
    // Each server waits (up to 20 s) until all three have been spawned before
    // it starts: started one after another, the first never sees the others,
    // gives up and exits, and the hub reports it.
    let started = tempfile::tempdir().unwrap();
    let dir = started.path().display().to_string();
    let slow = |name: &str| {
        let script = format!(
            "touch '{dir}/{name}'; i=0; \
             while [ $(ls '{dir}' | wc -l) -lt 3 ] && [ $i -lt 200 ]; do sleep 0.1; i=$((i+1)); done; \
             [ $(ls '{dir}' | wc -l) -ge 3 ] || exit 1; exec '{}' stdio",
            bin.display()
        );
        ServerConfig::stdio(name, "sh", &["-c", &script])
    };
    let (hub, _) =
        start(vec![slow("a"), slow("b"), slow("c")], ws.path(), ClientHooks::default()).await;
    assert!(hub.problems().is_empty(), "{:?}", hub.problems());
    assert_eq!(hub.tool_names().len(), 3, "{:?}", hub.tool_names());
    eprintln!("MEASURE three rendezvous stdio servers ready after {:?}", hub.ready_after());
    hub.shutdown().await;

    let (hub, _) = start(
        vec![everything("a", &bin), everything("b", &bin), everything("c", &bin)],
        ws.path(),
        ClientHooks::default(),
    )
    .await;
    assert!(hub.problems().is_empty(), "{:?}", hub.problems());
    eprintln!("MEASURE three stdio server-everything ready after {:?}", hub.ready_after());
    hub.shutdown().await;
}
