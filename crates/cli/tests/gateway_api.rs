//! The gateway as API clients and owners meet it: failures are HTTP errors
//! with OpenAI-style bodies (a full queue 429 with retry-after, a failed turn
//! 5xx); `/v1/models` lists `ferroclaw`; `--port`/`--bind`; config typos and
//! a gateway with no channel are refused with the reason; `gateway install`
//! says where keys go; hundreds of chats share one recall connection.

use crate::common;
use crate::gateway_support;

use std::time::Duration;

use common::{Env, Wire, run};
use ferroclaw_testkit::{Fault, ServerOptions, Turn};
use gateway_support::{Gateway, TOKEN, chat, request, wait_for};
use serde_json::Value;

fn error_of(body: &str) -> Value {
    let v: Value = serde_json::from_str(body).unwrap_or(Value::Null);
    assert!(
        v["error"]["message"].is_string()
            && v["error"]["type"].is_string()
            && v["error"]["code"].is_string(),
        "not an OpenAI-style error body: {body}"
    );
    v["error"].clone()
}

#[test]
fn a_full_chat_queue_is_429_with_retry_after_and_a_failed_turn_is_500() {
    let slow = Fault::SlowFirstByte { delay_ms: 2000, then: Turn::text("Slow answer.") };
    let failing = Fault::Status { status: 400, body: None, retry_after: None };
    let env = Env::new(
        Wire::OpenAi,
        vec![slow.into(), Turn::text("Queued answer.").into(), failing.into()],
    );
    let gw = Gateway::start(&env, "heartbeat_minutes = 0\nchat_queue = 1\n");
    let port = gw.port;
    let first = std::thread::spawn(move || chat(port, "q", "one"));
    wait_for(30, "the first turn to reach the model", || env.server.requests().len() == 1);
    let second = std::thread::spawn(move || chat(port, "q", "two"));
    std::thread::sleep(Duration::from_millis(300));
    let body = serde_json::json!({"user": "q", "messages": [{"role": "user", "content": "three"}]});
    let head_and_body = gateway_support::request_raw(port, "/v1/chat/completions", TOKEN, &body);
    assert!(head_and_body.starts_with("HTTP/1.1 429"), "{head_and_body}");
    assert!(head_and_body.to_ascii_lowercase().contains("retry-after: "), "{head_and_body}");
    let error = error_of(head_and_body.split_once("\r\n\r\n").unwrap().1);
    assert_eq!(error["type"], "rate_limit_error");
    assert_eq!(first.join().unwrap(), (200, "Slow answer.".to_string()));
    assert_eq!(second.join().unwrap(), (200, "Queued answer.".to_string()));
    // The model refuses the request: the client gets a 5xx, not a 200 "Sorry".
    let (status, body) = chat(port, "q", "four");
    assert!((500..600).contains(&status), "{status} {body}");
    assert_eq!(error_of(&body)["type"], "server_error");
}

#[test]
fn models_lists_ferroclaw_and_the_port_and_bind_flags_win_over_config() {
    let env = Env::new(Wire::OpenAi, vec![]);
    let config_port = gateway_support::free_port();
    let port = gateway_support::free_port();
    env.write_home_config(&format!(
        "[gateway]\nport = {config_port}\ntoken = \"{TOKEN}\"\nheartbeat_minutes = 0\n"
    ));
    let stderr_path = env.home.path().join("flags.stderr");
    let child = env
        .std_cmd()
        .args(["gateway", "--port", &port.to_string(), "--bind", "127.0.0.1"])
        .stderr(std::fs::File::create(&stderr_path).unwrap())
        .spawn()
        .unwrap();
    let _gw = Gateway { child, port, stderr_path };
    wait_for(30, "the gateway on --port", || {
        gateway_support::get(port, "/health").is_some_and(|(s, _)| s == 200)
    });
    let (status, body) = request(port, "GET", "/v1/models", Some(TOKEN), None).unwrap();
    assert_eq!(status, 200);
    let models: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(models["data"][0]["id"], "ferroclaw", "{models}");
    assert!(gateway_support::get(config_port, "/health").is_none());
}

#[test]
fn a_misspelt_channel_key_or_no_enabled_channel_refuses_to_start_and_says_why() {
    let env = Env::new(Wire::OpenAi, vec![]);
    env.write_home_config("model = \"openai/gpt-test\"\n\n[channels.web]\nenabeld = true\n");
    let (rc, _, err) = run(env.cmd().arg("gateway"));
    assert_ne!(rc, 0);
    let path = env.home.path().join("config.toml");
    assert!(
        err.contains(&format!("{}:4:1", path.display()))
            && err.contains("did you mean \"enabled\""),
        "{err}"
    );
    env.write_home_config("[channels.web]\nopenai_api = true\n");
    let (rc, _, err) = run(env.cmd().arg("gateway"));
    assert_ne!(rc, 0);
    assert!(err.contains("no channel is enabled") && err.contains("enabled = true"), "{err}");
    env.write_home_config("[gateway]\nbindd = \"0.0.0.0\"\n");
    let (rc, _, err) = run(env.cmd().arg("gateway"));
    assert_ne!(rc, 0);
    assert!(err.contains(":2:1") && err.contains("did you mean \"bind\""), "{err}");
}

#[test]
fn a_port_already_taken_stops_the_start_with_the_reason_instead_of_serving_nobody() {
    let env = Env::new(Wire::OpenAi, vec![]);
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port().to_string();
    let (rc, _, err) = run(env.cmd().args(["gateway", "--port", &port]));
    assert_eq!(rc, 2, "{err}");
    assert!(
        err.contains(&format!("ferroclaw: cannot listen on 127.0.0.1:{port}: something else"))
            && err.contains("--port N"),
        "{err}"
    );
    assert!(!err.contains("web chat at"), "no web chat is announced: {err}");
}

#[test]
fn gateway_install_says_where_the_keys_go_and_raises_the_open_files_limit() {
    let env = Env::new(Wire::OpenAi, vec![]);
    let config_dir = env.home.path().join("xdg");
    let (rc, out, err) =
        run(env.cmd().args(["gateway", "install"]).env("XDG_CONFIG_HOME", &config_dir));
    assert_eq!(rc, 0, "{err}");
    let env_file = env.home.path().join("gateway.env");
    assert!(out.contains(&env_file.display().to_string()) && out.contains("API_KEY"), "{out}");
    let unit =
        std::fs::read_to_string(config_dir.join("systemd/user/ferroclaw-gateway.service")).unwrap();
    assert!(unit.contains("LimitNOFILE=65536"), "{unit}");
}

/// `ferroclaw gateway` started under `ulimit LIMIT` (through sh, so the
/// limit is the process's own from its first instruction), once it answers.
fn gateway_under_ulimit(env: &Env, port: u16, limit: &str) -> Gateway {
    let stderr_path = env.home.path().join("gateway.stderr");
    let cmd = env.std_cmd();
    let child = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("ulimit {limit} && exec \"$0\" gateway"))
        .arg(cmd.get_program())
        .env_clear()
        .envs(cmd.get_envs().filter_map(|(k, v)| Some((k.to_owned(), v?.to_owned()))))
        .env("FERROCLAW_LOG", "info")
        .current_dir(env.ws())
        .stderr(std::fs::File::create(&stderr_path).unwrap())
        .spawn()
        .unwrap();
    let gw = Gateway { child, port, stderr_path };
    wait_for(30, "the gateway", || {
        gateway_support::get(port, "/health").is_some_and(|(s, _)| s == 200)
    });
    gw
}

#[test]
fn three_hundred_chats_share_one_recall_connection_and_the_soft_fd_limit_is_raised() {
    let options = ServerOptions { repeat: true, ..Default::default() };
    let env = Env::with_options(Wire::OpenAi, vec![Turn::text("ok").into()], options);
    let port = gateway_support::free_port();
    env.write_home_config(&format!(
        "[gateway]\nport = {port}\ntoken = \"{TOKEN}\"\nheartbeat_minutes = 0\nmax_concurrent_turns = 8\nrequests_per_minute = 0\n"
    ));
    // Started with a soft limit of 256 fds, as a low default would give.
    let gw = gateway_under_ulimit(&env, port, "-Sn 256");
    let limits = std::fs::read_to_string(format!("/proc/{}/limits", gw.child.id())).unwrap();
    let nofile: Vec<&str> = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .unwrap()
        .split_whitespace()
        .collect();
    assert_eq!(nofile[3], nofile[4], "soft limit not raised to the hard one: {limits}");
    let workers: Vec<_> = (0..4)
        .map(|c| {
            std::thread::spawn(move || {
                for i in (c..300).step_by(4) {
                    assert_eq!(chat(port, &format!("u{i}"), "hi"), (200, "ok".to_string()));
                }
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    let fds: Vec<String> = std::fs::read_dir(format!("/proc/{}/fd", gw.child.id()))
        .unwrap()
        .flatten()
        .filter_map(|e| std::fs::read_link(e.path()).ok())
        .map(|p| p.display().to_string())
        .collect();
    let recall = fds.iter().filter(|p| p.contains("recall.db")).count();
    assert!(recall <= 3, "{recall} recall.db descriptors for 300 chats");
}

#[test]
fn out_of_file_descriptors_a_chat_fails_loudly_with_a_server_error() {
    let options = ServerOptions { repeat: true, ..Default::default() };
    let slow = Fault::SlowFirstByte { delay_ms: 1500, then: Turn::text("ok") };
    let env = Env::with_options(Wire::OpenAi, vec![slow.into()], options);
    let port = gateway_support::free_port();
    env.write_home_config(&format!(
        "[gateway]\nport = {port}\ntoken = \"{TOKEN}\"\nheartbeat_minutes = 0\nrequests_per_minute = 0\nmax_concurrent_turns = 64\n"
    ));
    // A hard limit of 48 descriptors: idle chats hold none, but 60 turns at
    // once (each with its session file and connections) use them up.
    let gw = gateway_under_ulimit(&env, port, "-n 48");
    let chats: Vec<_> =
        (0..60).map(|i| std::thread::spawn(move || chat(port, &format!("fd{i}"), "hi"))).collect();
    let answers: Vec<(u16, String)> = chats.into_iter().map(|c| c.join().unwrap()).collect();
    let failed = answers.into_iter().find(|(status, _)| *status != 200);
    let (status, body) = failed.expect("48 descriptors held 60 turns at once?");
    assert_eq!(status, 500, "{body}");
    assert!(error_of(&body)["message"].as_str().unwrap().contains("open files"), "{body}");
    let log = std::fs::read_to_string(env.home.path().join("logs/gateway.log")).unwrap();
    assert!(log.contains("ERROR") && log.contains("open files"), "{log}");
    drop(gw);
}

#[test]
fn a_broken_agent_type_skill_or_mcp_server_is_reported_once_and_the_rest_loads() {
    let env = Env::new(Wire::OpenAi, vec![Turn::text("One.").into(), Turn::text("Two.").into()]);
    let home = env.home.path();
    std::fs::create_dir_all(home.join("agents")).unwrap();
    std::fs::write(home.join("agents/bad.md"), "---\nname: bad\n---\nno description\n").unwrap();
    std::fs::write(
        home.join("agents/reviewer.md"),
        "---\ndescription: reviews diffs\n---\nReview carefully.\n",
    )
    .unwrap();
    std::fs::create_dir_all(home.join("skills/broken")).unwrap();
    std::fs::write(home.join("skills/broken/SKILL.md"), "---\nname: [unclosed\n---\nbody\n")
        .unwrap();
    std::fs::create_dir_all(home.join("skills/greet")).unwrap();
    std::fs::write(
        home.join("skills/greet/SKILL.md"),
        "---\nname: greet\ndescription: says hello nicely\n---\nSay hello.\n",
    )
    .unwrap();
    let gw = Gateway::start(
        &env,
        "heartbeat_minutes = 0\n\n[mcp_servers.gone]\ncommand = \"/nonexistent/server\"\n",
    );
    // Two chats: two agents opened from the one runtime.
    assert_eq!(chat(gw.port, "a", "hi"), (200, "One.".to_string()));
    assert_eq!(chat(gw.port, "b", "hi"), (200, "Two.".to_string()));
    let (_, stderr) = gw.terminate();
    let bad = home.join("agents/bad.md").display().to_string();
    assert_eq!(stderr.matches("agent type skipped").count(), 1, "{stderr}");
    assert!(stderr.contains(&format!("agent type skipped: {bad}: ")), "{stderr}");
    let broken = home.join("skills/broken/SKILL.md").display().to_string();
    assert_eq!(stderr.matches("skill skipped").count(), 1, "{stderr}");
    assert!(stderr.contains(&broken), "{stderr}");
    assert_eq!(stderr.matches("mcp server gone did not start").count(), 1, "{stderr}");
    assert!(stderr.contains("/nonexistent/server"), "the command that failed: {stderr}");
    for i in 0..2 {
        let body = env.request_body(i).to_string();
        assert!(body.contains("reviewer: reviews diffs"), "the good agent type loaded: {body}");
        assert!(body.contains("says hello nicely"), "the good skill loaded: {body}");
    }
}

/// The gateway's open file descriptors now.
fn open_fds(gw: &Gateway) -> usize {
    std::fs::read_dir(format!("/proc/{}/fd", gw.child.id())).unwrap().count()
}

#[test]
fn idle_chats_hold_no_open_files_and_carry_on_where_they_were() {
    // 1,000 live chats held 1,016 files open (one session file each), so a
    // gateway under the default `ulimit -n` of 1,024 ran out at about 1,000.
    let env = gateway_support::echo_env();
    let gw = Gateway::start(&env, "heartbeat_minutes = 0\nrequests_per_minute = 0\n");
    let (status, _) = chat(gw.port, "warm-up", "hello");
    assert_eq!(status, 200);
    let before = open_fds(&gw);
    for i in 0..60 {
        let (status, answer) = chat(gw.port, &format!("user{i}"), &format!("first {i}"));
        assert_eq!((status, answer), (200, format!("echo: first {i}")));
    }
    let after = open_fds(&gw);
    assert!(
        after < before + 10,
        "60 idle chats hold {} more files ({before} -> {after})",
        after - before
    );
    // An idle chat's session file opens again for its next turn.
    for i in [0, 59] {
        let (status, answer) = chat(gw.port, &format!("user{i}"), "second");
        assert_eq!((status, answer.as_str()), (200, "echo: second"));
    }
    let lines = |i: usize| {
        env.session_files()
            .iter()
            .filter(|p| p.to_string_lossy().contains(&format!("user{i}.jsonl")))
            .map(|p| std::fs::read_to_string(p).unwrap())
            .collect::<String>()
    };
    let text = lines(59);
    assert!(
        text.contains("first 59") && text.contains("second"),
        "one session, both turns: {text}"
    );
}

/// A POST to the gateway with the token and `headers`; (status, JSON body).
fn post(port: u16, path: &str, headers: &[(&str, &str)], body: &Value) -> (u16, Value) {
    use std::io::{Read, Write};
    let mut tcp = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let body = body.to_string();
    let extra: String = headers.iter().map(|(k, v)| format!("{k}: {v}\r\n")).collect();
    write!(
        tcp,
        "POST {path} HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\nconnection: close\r\nauthorization: Bearer {TOKEN}\r\n{extra}content-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut raw = String::new();
    let _ = tcp.read_to_string(&mut raw);
    let status = raw.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    let body = raw.split_once("\r\n\r\n").map(|(_, b)| b).unwrap_or_default();
    (status, serde_json::from_str(body).unwrap_or(Value::Null))
}

/// The text of the last user message of an OpenAI-wire model request.
fn last_user_text(body: &Value) -> String {
    let messages = body["messages"].as_array().cloned().unwrap_or_default();
    let Some(last) = messages.iter().rev().find(|m| m["role"] == "user") else {
        return String::new();
    };
    match &last["content"] {
        Value::String(s) => s.clone(),
        other => other
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
    }
}

/// The model requests whose last user message is `text`.
fn model_requests_for(env: &Env, text: &str) -> Vec<Value> {
    let requests = env.server.requests();
    requests.into_iter().map(|r| r.body).filter(|b| last_user_text(b) == text).collect()
}

/// The one model request whose last user message is `text`.
fn model_request_for(env: &Env, text: &str) -> Value {
    let found = model_requests_for(env, text);
    assert_eq!(found.len(), 1, "model requests for {text:?}: {found:?}");
    found[0].clone()
}

/// The system prompt of an OpenAI-wire model request.
fn system_of(body: &Value) -> String {
    body["messages"][0]["content"].as_str().unwrap_or_default().to_string()
}

#[test]
fn a_chat_front_end_through_the_official_client_gets_private_conversations_its_system_layer_and_one_turn_per_key()
 {
    if !gateway_support::python_openai() {
        return;
    }
    let env = gateway_support::echo_env();
    let gw = Gateway::start(
        &env,
        "heartbeat_minutes = 0\n\n[channels.web]\nenabled = true\nmodels = { fast = \"openai/gpt-fast\" }\n",
    );
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../gateway/tests/openai_frontend.py");
    let out =
        std::process::Command::new("python3").args([script, &gw.url(), TOKEN]).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    // The client's system message is a layer of the system prompt.
    let secret = model_request_for(&env, "my secret is 4242");
    assert!(system_of(&secret).contains("Answer like a pirate."), "{secret}");
    // A request without `user` gets nothing of another's.
    let other = model_request_for(&env, "what is my secret?").to_string();
    assert!(!other.contains("4242") && !other.contains("pirate"), "{other}");
    // A front-end's edited conversation is the conversation the model sees.
    let edited = model_request_for(&env, "second question");
    let texts: Vec<String> =
        edited["messages"].as_array().unwrap().iter().map(|m| m["content"].to_string()).collect();
    assert!(texts.iter().any(|t| t.contains("first question")), "{texts:?}");
    assert!(texts.iter().any(|t| t.contains("an edited answer")), "{texts:?}");
    assert!(!edited.to_string().contains("echo: first question"), "{edited}");
    // With `user`, the session continues under the client's latest system message.
    let judged = model_request_for(&env, "which colour?");
    assert!(judged.to_string().contains("remember blue"), "{judged}");
    let system = system_of(&judged);
    assert!(system.contains("Answer like a judge.") && !system.contains("poet"), "{system}");
    // The retried request made no second turn.
    model_request_for(&env, "charge the card once");
    // The picture reached the model as a picture.
    let picture = model_request_for(&env, "what is this picture?").to_string();
    assert!(picture.contains("image_url") && picture.contains("data:image/png"), "{picture}");
    assert!(model_requests_for(&env, "and this?").is_empty(), "a refused part runs no turn");
    // The alias chose the model.
    assert_eq!(model_request_for(&env, "quickly")["model"], "gpt-fast");
    assert!(model_requests_for(&env, "hi").is_empty(), "refused requests reach no model");
}

#[test]
fn a_chat_front_ends_whole_sequence_streams_regenerates_sends_pictures_and_gets_titles() {
    if !gateway_support::python_openai() {
        return;
    }
    let env = gateway_support::echo_env();
    let gw = Gateway::start(&env, "heartbeat_minutes = 0\n");
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../gateway/tests/openai_chat_ui.py");
    let out =
        std::process::Command::new("python3").args([script, &gw.url(), TOKEN]).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    // The front-end's system prompt is a layer of every turn's.
    let first = model_request_for(&env, "plan a picnic for four");
    assert!(system_of(&first).contains("Today is Sunday."), "{first}");
    // So are its sampling settings, on the model's request.
    let settings = ["temperature", "top_p", "max_tokens", "seed"].map(|k| first[k].clone());
    assert_eq!(settings.map(|v| v.as_f64()), [0.7, 0.9, 512.0, 42.0].map(Some), "{first}");
    // The second turn carries the history the front-end sent; regenerating
    // it asked the model again, with the same conversation.
    let second = model_requests_for(&env, "make it vegetarian");
    assert_eq!(second.len(), 2, "the answer and its regeneration");
    assert_eq!(second[0]["messages"], second[1]["messages"]);
    assert!(second[0].to_string().contains("echo: plan a picnic for four"), "{}", second[0]);
    // The picture reached the model as one, after the history.
    let picture = model_request_for(&env, "is this basket big enough?").to_string();
    assert!(picture.contains("data:image/png") && picture.contains("make it vegetarian"));
    // The title and tags requests are conversations of their own.
    let tasks: Vec<Value> = env
        .server
        .requests()
        .into_iter()
        .map(|r| r.body)
        .filter(|b| last_user_text(b).starts_with("### Task:"))
        .collect();
    assert_eq!(tasks.len(), 2);
    assert!(tasks.iter().all(|t| !system_of(t).contains("Today is Sunday.")), "{tasks:?}");
    // "Continue" was refused before any model was asked.
    assert!(!env.server.requests().iter().any(|r| r.body.to_string().contains("A basket for")));
}

#[test]
fn every_v1_path_answers_in_openais_error_shape_with_the_field_at_fault() {
    let env = Env::new(Wire::OpenAi, vec![]);
    let gw = Gateway::start(&env, "heartbeat_minutes = 0\n");
    let (status, body) = request(gw.port, "GET", "/v1/embeddings", Some(TOKEN), None).unwrap();
    assert_eq!(status, 404);
    assert!(error_of(&body)["message"].as_str().unwrap().contains("Unknown request URL"));
    let (status, body) = request(gw.port, "DELETE", "/v1/models", Some(TOKEN), None).unwrap();
    assert_eq!(status, 405);
    error_of(&body);
    let user = serde_json::json!([{"role": "user", "content": "hi"}]);
    let (status, body) = post(
        gw.port,
        "/v1/chat/completions",
        &[],
        &serde_json::json!({"model": "gpt-4o", "messages": user}),
    );
    assert_eq!(
        (status, &body["error"]["code"], &body["error"]["param"]),
        (404, &"model_not_found".into(), &"model".into()),
        "{body}"
    );
    let (status, body) =
        post(gw.port, "/v1/chat/completions", &[], &serde_json::json!({"n": 2, "messages": user}));
    assert_eq!((status, &body["error"]["param"]), (400, &"n".into()), "{body}");
    assert!(body["error"]["message"].as_str().unwrap().contains("not supported"), "{body}");
    assert!(env.server.requests().is_empty(), "nothing reached the model");
}

/// Serves `bytes` as `image/png` on a loopback port, as often as asked.
fn serve_picture(bytes: &'static [u8]) -> u16 {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for mut stream in listener.incoming().flatten() {
            let mut buf = [0u8; 4096];
            let _ = stream.read(&mut buf);
            let head = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: image/png\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                bytes.len()
            );
            let _ = stream.write_all(head.as_bytes());
            let _ = stream.write_all(bytes);
        }
    });
    port
}

/// A 1×1 PNG.
const PNG: &[u8] = &[
    0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52,
    0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 0x00, 0x00, 0x00, 0x1f, 0x15, 0xc4,
    0x89, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x44, 0x41, 0x54, 0x78, 0xda, 0x63, 0x64, 0x60, 0xf8, 0x5f,
    0x0f, 0x00, 0x02, 0x87, 0x01, 0x80, 0xeb, 0x47, 0xba, 0x92, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45,
    0x4e, 0x44, 0xae, 0x42, 0x60, 0x82,
];

#[test]
fn a_picture_linked_by_url_is_fetched_under_web_fetchs_rules_and_a_private_address_is_refused() {
    let env = gateway_support::echo_env();
    let gw = Gateway::start(
        &env,
        "heartbeat_minutes = 0\n\n[web_fetch]\nallow_private = [\"127.0.0.1\"]\n",
    );
    let picture = serve_picture(PNG);
    let ask = |url: &str| {
        let content = serde_json::json!([
            {"type": "text", "text": format!("look at {url}")},
            {"type": "image_url", "image_url": {"url": url}},
        ]);
        let body = serde_json::json!({"messages": [{"role": "user", "content": content}]});
        post(gw.port, "/v1/chat/completions", &[], &body)
    };
    let allowed = format!("http://127.0.0.1:{picture}/cat.png");
    let (status, body) = ask(&allowed);
    assert_eq!(status, 200, "{body}");
    let sent = model_request_for(&env, &format!("look at {allowed}")).to_string();
    assert!(sent.contains("data:image/png;base64,"), "{sent}");
    // The cloud metadata service is never fetched, whatever the client links.
    let (status, body) = ask("http://169.254.169.254/latest/meta-data/x.png");
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["param"], "messages[0].content[1].image_url", "{body}");
    assert!(body["error"]["message"].as_str().unwrap().contains("metadata"), "{body}");
    let (status, body) = ask("file:///etc/passwd");
    assert_eq!((status, &body["error"]["code"]), (400, &"invalid_image_url".into()), "{body}");
}

#[test]
fn an_idempotency_key_holds_across_gateways_on_one_database() {
    let Some(pg) = ferroclaw_testkit::PgCluster::shared() else { return };
    let url = pg.database("api_idempotency");
    let env = gateway_support::echo_env();
    env.write_home_config(&format!(
        "[gateway]\ntoken = \"{TOKEN}\"\nheartbeat_minutes = 0\nrequests_per_minute = 0\nstore = \"{url}\"\n"
    ));
    let other_home = tempfile::tempdir().unwrap();
    std::fs::copy(env.home.path().join("config.toml"), other_home.path().join("config.toml"))
        .unwrap();
    let a = Gateway::spawn(&env, gateway_support::free_port());
    let b = Gateway::spawn_in(&env, other_home.path(), gateway_support::free_port());
    let body = serde_json::json!({"messages": [{"role": "user", "content": "book the flight"}]});
    let key = [("Idempotency-Key", "flight-1")];
    let (status, first) = post(a.port, "/v1/chat/completions", &key, &body);
    assert_eq!(status, 200, "{first}");
    // The client lost the answer and retries on the other gateway.
    let (status, again) = post(b.port, "/v1/chat/completions", &key, &body);
    assert_eq!(status, 200, "{again}");
    assert_eq!(again["id"], first["id"]);
    assert_eq!(again["choices"][0]["message"]["content"], "echo: book the flight");
    assert_eq!(model_requests_for(&env, "book the flight").len(), 1, "one turn for one key");
}
