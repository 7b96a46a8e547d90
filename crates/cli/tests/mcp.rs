//! End-to-end MCP: the agent calling a real MCP server's tool, the REPL's
//! `/mcp` commands, `ferroclaw mcp add/list/get/remove`, and `ferroclaw mcp
//! serve` driven by the rmcp client (through `ferroclaw-mcp`'s hub).

use crate::common;

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use common::{Env, Wire, run, tool_results};
use ferroclaw_mcp::{HubOptions, McpConfig, McpHub, ServerConfig, Transport};
use ferroclaw_testkit::Turn;
use ferroclaw_testkit::components::{self, Component};
use ferroclaw_tools::{ToolContext, ToolRegistry};
use serde_json::json;

/// `server-everything` from npm (installed by `scripts/test`): without it
/// the test fails; `None` only when the developer opted out
/// (`FERROCLAW_TEST_SKIP=mcp-servers`).
#[track_caller]
fn everything_bin() -> Option<PathBuf> {
    components::require(Component::McpServers, components::mcp_server("mcp-server-everything"))
}

fn write_mcp_json(ws: &Path, bin: &Path) {
    let config = json!({"mcpServers": {"ev": {"command": bin, "args": ["stdio"]}}});
    std::fs::write(ws.join(".mcp.json"), config.to_string()).unwrap();
}

/// `ferroclaw trust` in the test's workspace: project MCP servers start only then.
fn trust(env: &Env) {
    let (code, _, stderr) = run(env.cmd().arg("trust"));
    assert_eq!(code, 0, "{stderr}");
}

#[test]
fn the_model_calls_an_mcp_tool_through_the_agent_loop() {
    let Some(bin) = everything_bin() else { return };
    for wire in [Wire::Anthropic, Wire::OpenAi] {
        let env = Env::new(
            wire,
            vec![
                Turn::tool("mcp__ev__echo", json!({"message": "hi"})).into(),
                Turn::text("done").into(),
            ],
        );
        write_mcp_json(env.ws(), &bin);
        trust(&env);
        let (code, stdout, stderr) = run(&mut env.oneshot("echo hi", &["--yes"]));
        assert_eq!(code, 0, "{wire:?}: {stderr}");
        assert_eq!(stdout, "done\n");
        let tools = env.request_body(0)["tools"].to_string();
        assert!(
            tools.contains("mcp__ev__echo") && tools.contains("Echoes back the input string"),
            "{tools}"
        );
        let results = tool_results(&env.request_body(1));
        assert_eq!(results, [("Echo: hi".to_string(), false)]);
    }
}

#[test]
fn a_sub_agent_calls_the_parents_mcp_tools() {
    let Some(bin) = everything_bin() else { return };
    let env = Env::new(
        Wire::Anthropic,
        vec![
            // The parent delegates; the child calls the MCP tool and reports.
            Turn::tool(
                "task",
                json!({"description": "echo", "prompt": "echo hi with the ev server"}),
            )
            .into(),
            Turn::tool("mcp__ev__echo", json!({"message": "hi"})).into(),
            Turn::text("the server said Echo: hi").into(),
            Turn::text("done").into(),
        ],
    );
    write_mcp_json(env.ws(), &bin);
    trust(&env);
    let (code, stdout, stderr) = run(&mut env.oneshot("delegate", &["--yes"]));
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(stdout, "done\n");
    let child_tools = env.request_body(1)["tools"].to_string();
    assert!(child_tools.contains("mcp__ev__echo"), "the child was offered: {child_tools}");
    assert!(!child_tools.contains("\"task\""), "no delegation for the child: {child_tools}");
    assert_eq!(tool_results(&env.request_body(2)), [("Echo: hi".to_string(), false)]);
    let parent = tool_results(&env.request_body(3));
    assert!(parent[0].0.starts_with("the server said Echo: hi"), "{parent:?}");
}

#[test]
fn a_broken_server_is_reported_once_and_the_request_still_runs() {
    let env = Env::new(Wire::Anthropic, vec![Turn::text("fine").into()]);
    let config = json!({"mcpServers": {
        "gone": {"command": "/nonexistent/server"},
        "typo": {"command": "x", "env": {"K": "${FERROCLAW_TEST_UNSET_VAR}"}}
    }});
    std::fs::write(env.ws().join(".mcp.json"), config.to_string()).unwrap();
    trust(&env);
    let (code, stdout, stderr) = run(&mut env.oneshot("hi", &[]));
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(stdout, "fine\n");
    assert_eq!(stderr.matches("mcp server gone did not start").count(), 1, "{stderr}");
    assert!(stderr.contains("FERROCLAW_TEST_UNSET_VAR is not set"), "{stderr}");
}

#[test]
fn broken_mcp_json_files_are_each_named_with_line_and_column_and_the_request_still_runs() {
    let env = Env::new(Wire::Anthropic, vec![Turn::text("fine").into()]);
    std::fs::write(env.ws().join(".mcp.json"), "{\"mcpServers\": {\"fs\": {\"args\": [}}}")
        .unwrap();
    std::fs::create_dir_all(env.ws().join(".agent")).unwrap();
    std::fs::write(env.ws().join(".agent/mcp.json"), "{\"mcpServers\": [\n]}").unwrap();
    trust(&env);
    let (code, stdout, stderr) = run(&mut env.oneshot("hi", &[]));
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(stdout, "fine\n");
    let ws = env.ws().canonicalize().unwrap();
    let json = format!(
        "{}:1:33: invalid JSON (expected value); no server in this file starts",
        ws.join(".mcp.json").display()
    );
    assert_eq!(stderr.matches(&json).count(), 1, "{stderr}");
    let agent =
        format!("{}: \"mcpServers\" must be an object", ws.join(".agent/mcp.json").display());
    assert_eq!(stderr.matches(&agent).count(), 1, "{stderr}");
    assert!(!stderr.contains("mcp server \"*\""), "{stderr}");
    // `mcp list` names each broken file by its path, one line each.
    let (_, stdout, _) = run(env.cmd().args(["mcp", "list"]));
    let expected = format!(
        "{}: failed: invalid JSON (expected value); no server in this file starts\n",
        ws.join(".mcp.json").display()
    );
    assert!(stdout.contains(&expected), "{stdout:?}");
}

#[test]
fn the_repl_shows_server_status_and_runs_a_server_prompt() {
    let Some(bin) = everything_bin() else { return };
    let env = Env::new(Wire::Anthropic, vec![Turn::text("it is sunny").into()]);
    write_mcp_json(env.ws(), &bin);
    trust(&env);
    let input = "/mcp\n/mcp__ev__args-prompt\n/mcp__ev__args-prompt city=Paris\n/exit\n";
    let (code, stdout, stderr) = run(env.cmd().write_stdin(input));
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("ev") && stdout.contains("ready"), "{stdout}");
    assert!(stdout.contains("/mcp__ev__args-prompt"), "/mcp lists prompts: {stdout}");
    assert!(stderr.contains("needs city"), "{stderr}");
    assert!(stdout.contains("it is sunny"), "{stdout}");
    let body = env.request_body(0).to_string();
    assert!(body.contains("What's weather in Paris?"), "{body}");
}

#[test]
fn mcp_add_list_get_and_remove_edit_the_project_mcp_json() {
    let Some(bin) = everything_bin() else { return };
    let env = Env::new(Wire::Anthropic, vec![]);
    let bin = bin.to_str().unwrap();
    let (code, stdout, stderr) = run(env.cmd().args(["mcp", "add", "ev", "--", bin, "stdio"]));
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("added mcp server ev to"), "{stdout}");
    let written: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(env.ws().join(".mcp.json")).unwrap())
            .unwrap();
    assert_eq!(written["mcpServers"]["ev"]["args"], json!(["stdio"]));

    let (code, stdout, _) = run(env.cmd().args([
        "mcp",
        "add",
        "web",
        "--url",
        "http://127.0.0.1:9/mcp",
        "--scope",
        "user",
    ]));
    assert_eq!(code, 0);
    assert!(stdout.contains("config.toml"), "{stdout}");

    let (code, stdout, stderr) = run(env.cmd().args(["mcp", "list"]));
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("ev: ready, "), "{stdout}");
    assert!(stdout.contains("web: failed: mcp server web did not start"), "{stdout}");

    let (code, stdout, stderr) = run(env.cmd().args(["mcp", "get", "ev"]));
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("mcp__ev__echo  Echoes back the input string"), "{stdout}");

    let (code, _, stderr) = run(env.cmd().args(["mcp", "get", "nope"]));
    assert_eq!(code, 2);
    assert!(stderr.contains("no mcp server named \"nope\"; configured: ev, web"), "{stderr}");

    let (code, _, _) = run(env.cmd().args(["mcp", "remove", "ev"]));
    assert_eq!(code, 0);
    let (code, _, _) = run(env.cmd().args(["mcp", "remove", "web", "--scope", "user"]));
    assert_eq!(code, 0);
    let (_, stdout, _) = run(env.cmd().args(["mcp", "list"]));
    assert!(stdout.contains("no mcp servers configured"), "{stdout}");
}

/// `ferroclaw mcp serve ARGS` as a stdio server of a hub.
fn serve_config(env: &Env, args: &[&str]) -> ServerConfig {
    let mut all = vec!["mcp", "serve"];
    all.extend_from_slice(args);
    let mut config = ServerConfig::stdio("ferro", env!("CARGO_BIN_EXE_ferroclaw"), &all);
    if let Transport::Stdio { env: vars, cwd, .. } = &mut config.transport {
        vars.insert("FERROCLAW_HOME".into(), env.home.path().display().to_string());
        *cwd = Some(env.ws().to_path_buf());
    }
    config
}

async fn start(servers: Vec<ServerConfig>, ws: &Path) -> (McpHub, ToolRegistry) {
    let hub = McpHub::start(
        McpConfig { servers, ..Default::default() },
        HubOptions { workspace: ws.to_path_buf(), ..Default::default() },
    )
    .await;
    assert!(hub.problems().is_empty(), "{:?}", hub.problems());
    let mut tools = ToolRegistry::new();
    hub.register_tools(&mut tools);
    (hub, tools)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_serve_over_stdio_offers_read_only_tools_by_default_and_reads_files() {
    let env = Env::new(Wire::Anthropic, vec![]);
    std::fs::write(env.ws().join("notes.txt"), "first line\nsecond line\n").unwrap();
    let (hub, tools) = start(vec![serve_config(&env, &[])], env.ws()).await;
    let names = hub.tool_names()["ferro"].clone();
    assert!(names.contains(&"mcp__ferro__read".to_string()), "{names:?}");
    assert!(!names.iter().any(|n| n.ends_with("__bash") || n.ends_with("__write")), "{names:?}");
    let read = tools.get("mcp__ferro__read").unwrap();
    assert!(read.read_only());
    let out = read.execute(json!({"path": "notes.txt"}), &ToolContext::new("/")).await.unwrap();
    assert!(!out.is_error, "{out:?}");
    assert!(out.joined_text().contains("second line"), "{out:?}");
    let outside =
        read.execute(json!({"path": "/etc/passwd"}), &ToolContext::new("/")).await.unwrap();
    assert!(outside.is_error, "the sandbox still applies: {outside:?}");
    hub.shutdown().await;

    let (hub, _) = start(vec![serve_config(&env, &["--yes"])], env.ws()).await;
    let names = hub.tool_names()["ferro"].clone();
    assert!(names.contains(&"mcp__ferro__bash".to_string()), "--yes offers every tool: {names:?}");
    hub.shutdown().await;
}

/// A child process killed when the test ends, even by a failed assertion.
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `ferroclaw mcp serve --http 0`, and the port it bound.
/// Starts `mcp serve --http 0`; returns the server, its port and the bearer
/// token it printed.
fn serve_http(env: &Env) -> (KillOnDrop, u16, String) {
    let mut child = env
        .std_cmd()
        .args(["mcp", "serve", "--http", "0"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let port = loop {
        let line = lines.next().expect("the server printed its address").unwrap();
        if let Some(rest) = line.split("http://127.0.0.1:").nth(1) {
            break rest.trim_end_matches("/mcp").parse().unwrap();
        }
    };
    let line = lines.next().expect("the server printed its token").unwrap();
    let token = line
        .split("Authorization: Bearer ")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .unwrap_or_else(|| panic!("no token in {line:?}"))
        .to_string();
    // Keep draining stderr: a closed pipe would break the server's logging.
    std::thread::spawn(move || lines.for_each(drop));
    (KillOnDrop(child), port, token)
}

/// The status line of a raw POST to the server with the given headers.
fn raw_post_status(port: u16, extra_headers: &str) -> String {
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    write!(
        stream,
        "POST /mcp HTTP/1.1\r\n{extra_headers}Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    // The status line arrives in the first read; the connection may stay open.
    let mut buf = [0u8; 256];
    let n = stream.read(&mut buf).unwrap_or(0);
    String::from_utf8_lossy(&buf[..n]).lines().next().unwrap_or_default().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_serve_over_http_answers_on_loopback_with_its_token_and_refuses_others() {
    let env = Env::new(Wire::Anthropic, vec![]);
    std::fs::write(env.ws().join("a.txt"), "over http\n").unwrap();
    let (_server, port, token) = serve_http(&env);
    assert_eq!(token.len(), 64, "32 random bytes as hex: {token}");
    let url = format!("http://127.0.0.1:{port}/mcp");
    let mut config = ServerConfig::http("web", &url);
    if let Transport::Http { headers, .. } = &mut config.transport {
        headers.insert("Authorization".into(), format!("Bearer {token}"));
    }
    let (hub, tools) = start(vec![config], env.ws()).await;
    let out = tools
        .get("mcp__web__read")
        .unwrap()
        .execute(json!({"path": "a.txt"}), &ToolContext::new("/"))
        .await
        .unwrap();
    assert!(out.joined_text().contains("over http"), "{out:?}");
    hub.shutdown().await;

    // Another local user or a container on the host network: no token, or a wrong one.
    let loopback = format!("Host: 127.0.0.1:{port}\r\n");
    assert_eq!(raw_post_status(port, &loopback), "HTTP/1.1 401 Unauthorized");
    let wrong = format!("{loopback}Authorization: Bearer {}\r\n", "0".repeat(64));
    assert_eq!(raw_post_status(port, &wrong), "HTTP/1.1 401 Unauthorized");
    let authorized = format!("Authorization: Bearer {token}\r\n");
    let rebinding = raw_post_status(port, &format!("Host: evil.example:80\r\n{authorized}"));
    assert_eq!(rebinding, "HTTP/1.1 403 Forbidden");
    let foreign_origin =
        raw_post_status(port, &format!("{loopback}Origin: http://evil.example\r\n{authorized}"));
    assert_eq!(foreign_origin, "HTTP/1.1 403 Forbidden");
}

/// A raw request to the server: its status line and headers (the body is not waited for).
fn raw_request(port: u16, method: &str, headers: &str, body: &str) -> String {
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        stream,
        "{method} /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n{headers}Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    while !String::from_utf8_lossy(&head).contains("\r\n\r\n") {
        match stream.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    }
    String::from_utf8_lossy(&head).into_owned()
}

/// Opens a session (an `initialize` request); its `Mcp-Session-Id`, or the
/// whole answer when none came.
fn open_session(port: u16, auth: &str) -> Result<String, String> {
    let initialize = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}"#;
    let answer = raw_request(port, "POST", auth, initialize);
    answer
        .lines()
        .find_map(|l| {
            let (name, value) = l.split_once(':')?;
            name.eq_ignore_ascii_case("mcp-session-id").then(|| value.trim().to_string())
        })
        .ok_or(answer)
}

#[test]
fn mcp_serve_over_http_refuses_sessions_past_its_cap_until_one_is_closed() {
    let env = Env::new(Wire::Anthropic, vec![]);
    let (_server, port, token) = serve_http(&env);
    let auth = format!("Authorization: Bearer {token}\r\n");
    let max = ferroclaw_mcp::MAX_HTTP_SESSIONS;
    let open: Vec<String> = (0..max).map(|_| open_session(port, &auth).unwrap()).collect();
    let refused = open_session(port, &auth).unwrap_err();
    assert!(refused.starts_with("HTTP/1.1 503"), "{refused}");
    assert!(refused.to_ascii_lowercase().contains("retry-after: 60"), "{refused}");
    // Closing one makes room for one.
    let close = format!("{auth}Mcp-Session-Id: {}\r\n", open[0]);
    let closed = raw_request(port, "DELETE", &close, "");
    assert!(closed.starts_with("HTTP/1.1 2"), "{closed}");
    open_session(port, &auth).unwrap();
    assert!(open_session(port, &auth).unwrap_err().starts_with("HTTP/1.1 503"));
}

#[test]
fn mcp_serve_over_http_takes_its_token_from_the_environment_and_refuses_a_short_one() {
    let env = Env::new(Wire::Anthropic, vec![]);
    let (code, _, stderr) =
        run(env.cmd().env("FERROCLAW_MCP_TOKEN", "short").args(["mcp", "serve", "--http", "0"]));
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("FERROCLAW_MCP_TOKEN is too short"), "{stderr}");
    let (code, _, stderr) = run(env.cmd().args(["mcp", "serve", "--no-auth"]));
    assert_eq!(code, 2, "--no-auth means nothing without --http: {stderr}");
}

#[test]
fn mcp_login_is_for_http_servers_and_logout_says_when_there_is_nothing_to_forget() {
    let env = Env::new(Wire::Anthropic, vec![]);
    let config = json!({"mcpServers": {"local": {"command": "some-server"}}});
    std::fs::write(env.ws().join(".mcp.json"), config.to_string()).unwrap();
    trust(&env);
    let (code, _, stderr) = run(env.cmd().args(["mcp", "login", "local"]));
    assert_eq!(code, 2);
    assert!(
        stderr.contains("mcp server local is a stdio server; OAuth login is for HTTP servers"),
        "{stderr}"
    );
    let (code, _, stderr) = run(env.cmd().args(["mcp", "login", "nope"]));
    assert_eq!(code, 2);
    assert!(stderr.contains("no mcp server named \"nope\"; configured: local"), "{stderr}");
    let (code, _, stderr) = run(env.cmd().args(["mcp", "logout", "local"]));
    assert_eq!(code, 2);
    assert!(stderr.contains("mcp server local has no saved OAuth tokens"), "{stderr}");

    let tokens = env.home.path().join("mcp-tokens");
    std::fs::create_dir_all(&tokens).unwrap();
    std::fs::write(tokens.join("local.json"), "{}").unwrap();
    let (code, stdout, stderr) = run(env.cmd().args(["mcp", "logout", "local"]));
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("removed the OAuth tokens of mcp server local"), "{stdout}");
    assert!(!tokens.join("local.json").exists());
}

#[test]
fn an_untrusted_projects_mcp_json_starts_nothing_and_says_how_to_trust() {
    let env = Env::new(Wire::Anthropic, vec![Turn::text("fine").into()]);
    let pwned = env.ws().join("pwned");
    let config = json!({"mcpServers": {"pwn": {"command": "sh", "args": ["-c", format!("touch {}", pwned.display())]}}});
    std::fs::write(env.ws().join(".mcp.json"), config.to_string()).unwrap();
    let (code, stdout, stderr) = run(&mut env.oneshot("hi", &[]));
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(stdout, "fine\n");
    assert!(!pwned.exists(), "the project's MCP command ran before the project was trusted");
    assert!(stderr.contains(".mcp.json") && stderr.contains("ferroclaw trust"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_serve_offers_skills_as_prompts_and_memory_and_sessions_as_resources() {
    let env = Env::new(Wire::Anthropic, vec![Turn::text("noted").into()]);
    let skill = env.ws().join(".agent/skills/review");
    std::fs::create_dir_all(&skill).unwrap();
    std::fs::write(
        skill.join("SKILL.md"),
        "---\nname: review\ndescription: Review a change carefully\nargument-hint: the file to review\n---\nReview $ARGUMENTS for bugs.\n",
    )
    .unwrap();
    let memory = env.home.path().join("workspace/memory");
    std::fs::create_dir_all(&memory).unwrap();
    std::fs::write(memory.join("MEMORY.md"), "- the user likes tests\n").unwrap();
    let (code, _, stderr) = run(&mut env.oneshot("remember this", &[]));
    assert_eq!(code, 0, "{stderr}");

    let (hub, _) = start(vec![serve_config(&env, &[])], env.ws()).await;
    let prompts = hub.prompts().await;
    let review = prompts.iter().find(|p| p.name == "review").expect("the skill is a prompt");
    assert_eq!(review.description, "Review a change carefully");
    assert_eq!(review.arguments, vec![("arguments".to_string(), false)]);
    let args = [("arguments".to_string(), "src/parse.rs".to_string())].into_iter().collect();
    let text = hub.get_prompt("ferro", "review", args).await.unwrap();
    assert_eq!(text, "Review src/parse.rs for bugs.");
    let resources = hub.list_resources(Some("ferro")).await.unwrap().join("\n");
    assert!(resources.contains("ferroclaw://memory/MEMORY.md"), "{resources}");
    assert!(resources.contains("ferroclaw://sessions/"), "the transcript is offered: {resources}");
    hub.shutdown().await;
}

#[test]
fn an_mcp_json_over_the_cap_is_refused_naming_its_size_and_the_cap() {
    let env = Env::new(Wire::Anthropic, vec![Turn::text("done").into()]);
    let padding = "x".repeat(5 * 1024 * 1024);
    let config = json!({"mcpServers": {"big": {"command": "true"}}, "padding": padding});
    std::fs::write(env.ws().join(".mcp.json"), config.to_string()).unwrap();
    trust(&env);
    let (code, stdout, stderr) = run(&mut env.oneshot("hi", &[]));
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(stdout, "done\n");
    assert!(
        stderr.contains(".mcp.json is 5.0 MB (") && stderr.contains("over the 4 MB cap"),
        "a 5 MB .mcp.json is not ignored without a word: {stderr}"
    );
}
