//! Cron end to end: a job due in 2 s runs once and delivers its answer; a bad
//! expression is refused with the reason; a restart never re-runs a slot.

use crate::common;
use crate::gateway_support;

use common::{Env, Wire, run};
use ferroclaw_testkit::Turn;
use gateway_support::fake_telegram::FakeTelegram;
use gateway_support::{Gateway, wait_for};
use serde_json::{Value, json};

fn jobs(env: &Env) -> Value {
    let text = std::fs::read_to_string(env.home.path().join("cron/jobs.json")).unwrap_or_default();
    serde_json::from_str(&text).unwrap_or(Value::Null)
}

#[test]
fn a_bad_cron_expression_is_refused_with_the_reason() {
    let env = Env::new(Wire::OpenAi, vec![]);
    let (rc, out, err) = run(env.cmd().args(["cron", "add", "-m", "x", "--cron", "every morning"]));
    assert_eq!(rc, 2, "{out}");
    assert!(err.contains("not valid") && err.contains("every morning"), "{err}");
    let (rc, _, err) =
        run(env.cmd().args(["cron", "add", "-m", "x", "--cron", "0 9 * * *", "--tz", "Mars/Base"]));
    assert_eq!(rc, 2);
    assert!(err.contains("time zone"), "{err}");
    assert!(!env.home.path().join("cron/jobs.json").exists(), "nothing was saved");
}

#[test]
fn a_job_due_in_two_seconds_runs_once_and_delivers_its_answer() {
    let fake = FakeTelegram::start();
    let env = Env::new(Wire::OpenAi, vec![Turn::text("Stand up and stretch!").into()]);
    let config = format!(
        "heartbeat_minutes = 0\n[channels.telegram]\nenabled = true\ntoken = \"TEST:TOKEN\"\napi_base = \"{}\"\npoll_timeout_secs = 1\n",
        fake.base
    );
    // `--to` is checked against the channels config.toml enables.
    env.write_home_config(&format!("[gateway]\n{config}"));
    let (rc, out, err) = run(env.cmd().args([
        "cron",
        "add",
        "-m",
        "remind me to stretch",
        "--at",
        "+2s",
        "--to",
        "telegram:5",
    ]));
    assert_eq!(rc, 0, "{out}{err}");
    let _gw = Gateway::start(&env, &config);
    wait_for(30, "the job's answer", || !fake.sent_to(5).is_empty());
    std::thread::sleep(std::time::Duration::from_secs(2));
    assert_eq!(fake.sent_to(5), ["Stand up and stretch!"]);
    assert_eq!(env.server.requests().len(), 1, "ran once");
    assert!(env.request_body(0).to_string().contains("remind me to stretch"));
    assert_eq!(
        jobs(&env)["jobs"].as_array().map(Vec::len),
        Some(0),
        "a one-shot job is removed after it ran"
    );
}

#[test]
fn a_restart_does_not_run_a_slot_again_and_the_run_is_recorded() {
    let env = Env::new(Wire::OpenAi, vec![Turn::text("Done.").into(), Turn::text("Again?").into()]);
    let (rc, out, err) = run(env.cmd().args([
        "cron",
        "add",
        "-m",
        "hourly check",
        "--every",
        "1h",
        "--name",
        "check",
    ]));
    assert_eq!(rc, 0, "{out}{err}");
    // Make the first slot come in two seconds.
    let mut file = jobs(&env);
    let soon =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis()
            as u64
            + 2000;
    file["jobs"][0]["state"]["next_run_at_ms"] = soon.into();
    std::fs::write(env.home.path().join("cron/jobs.json"), file.to_string()).unwrap();
    let gw = Gateway::start(&env, "heartbeat_minutes = 0\n");
    wait_for(30, "the run to be recorded", || {
        jobs(&env)["jobs"][0]["state"]["last_status"] == "ok"
    });
    let state = &jobs(&env)["jobs"][0]["state"];
    assert_eq!(state["last_run_at_ms"], soon);
    assert!(state["next_run_at_ms"].as_u64().unwrap() > soon + 3_000_000, "{state}");
    let (code, stderr) = gw.terminate();
    assert_eq!(code, 0, "{stderr}");
    let port = gateway_support::free_port();
    let text = std::fs::read_to_string(env.home.path().join("config.toml")).unwrap();
    let text = text
        .lines()
        .map(|l| if l.starts_with("port =") { format!("port = {port}") } else { l.to_string() })
        .collect::<Vec<_>>()
        .join("\n");
    env.write_home_config(&text);
    let _again = Gateway::spawn(&env, port);
    std::thread::sleep(std::time::Duration::from_secs(3));
    assert_eq!(env.server.requests().len(), 1, "the slot did not run again after the restart");
    let (_, listed, _) = run(env.cmd().args(["cron", "list"]));
    assert!(
        listed.contains("check") && listed.contains("every 1h") && listed.contains(" ok"),
        "{listed}"
    );
    let (_, status, _) = run(env.cmd().arg("status"));
    assert!(status.contains("gateway    running") && status.contains("1 jobs"), "{status}");
}

#[test]
fn cron_add_refuses_a_channel_that_does_not_exist_and_lists_target_and_message() {
    let env = Env::new(Wire::OpenAi, vec![]);
    let add = |to: &str| {
        run(env.cmd().args(["cron", "add", "-m", "water the plants", "--every", "45m", "--to", to]))
    };
    let (rc, _, err) = add("telegramm:42");
    assert_eq!(rc, 2);
    assert!(err.contains("\"telegramm\" does not exist") && err.contains("web"), "{err}");
    let (rc, _, err) = add("slack:C1");
    assert_eq!(rc, 2);
    assert!(err.contains("not enabled"), "{err}");
    assert!(!env.home.path().join("cron/jobs.json").exists(), "nothing was saved");
    let (rc, out, err) = add("web:kitchen");
    assert_eq!(rc, 0, "{err}");
    assert!(out.contains("no gateway is running"), "{out}");
    let (_, listed, _) = run(env.cmd().args(["cron", "list"]));
    assert!(
        listed.contains("every 45m")
            && listed.contains("web:kitchen")
            && listed.contains("water the plants"),
        "{listed}"
    );
}

/// The conversation `/api/sessions/{id}` shows, as (kind, text) pairs.
fn history(port: u16, session: &str) -> Vec<(String, String)> {
    let path = format!("/api/sessions/{session}");
    let (status, body) =
        gateway_support::request(port, "GET", &path, Some(gateway_support::TOKEN), None).unwrap();
    assert_eq!(status, 200, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    v["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| (i["kind"].as_str().unwrap().into(), i["text"].as_str().unwrap_or("").into()))
        .collect()
}

type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// The next JSON frame of a chat socket.
async fn next(page: &mut Socket) -> Value {
    use futures_util::StreamExt;
    use tokio_tungstenite::tungstenite::Message;
    loop {
        let frame = tokio::time::timeout(std::time::Duration::from_secs(30), page.next()).await;
        match frame.expect("no frame in 30 s") {
            Some(Ok(Message::Text(t))) => return serde_json::from_str(&t).unwrap(),
            Some(Ok(_)) => continue,
            other => panic!("socket ended: {other:?}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_job_for_a_web_chat_with_no_page_open_lands_in_its_history_and_its_model_knows_it() {
    use futures_util::SinkExt;
    use tokio_tungstenite::tungstenite::Message;
    let env = Env::new(
        Wire::OpenAi,
        vec![Turn::text("Stand up and stretch!").into(), Turn::text("You're welcome.").into()],
    );
    let (rc, out, err) = run(env.cmd().args([
        "cron",
        "add",
        "-m",
        "remind me to stretch",
        "--at",
        "+2s",
        "--to",
        "web:page-away",
    ]));
    assert_eq!(rc, 0, "{out}{err}");
    let gw = Gateway::start(&env, "heartbeat_minutes = 0\n");
    // No page is open on the chat: the answer waits in its conversation.
    wait_for(30, "the answer in the chat's history", || {
        gateway_support::request(
            gw.port,
            "GET",
            "/api/sessions/gw-web-page-away",
            Some(gateway_support::TOKEN),
            None,
        )
        .is_some_and(|(_, body)| body.contains("Stand up and stretch!"))
    });
    assert_eq!(
        history(gw.port, "gw-web-page-away"),
        [("assistant".to_string(), "Stand up and stretch!".to_string())]
    );
    // The page that opens continues that conversation, and the model knows
    // what was said in it.
    let url =
        format!("ws://127.0.0.1:{}/ws?token={}&chat=page-away", gw.port, gateway_support::TOKEN);
    let (mut page, _) = tokio_tungstenite::connect_async(&url).await.expect("socket");
    let ready = next(&mut page).await;
    assert_eq!(ready["session"], "gw-web-page-away", "{ready}");
    let thanks = json!({"type": "message", "content": "thanks"}).to_string();
    page.send(Message::Text(thanks.into())).await.unwrap();
    while next(&mut page).await["type"] != "reply" {}
    let asked = env.request_body(1).to_string();
    assert!(asked.contains("Stand up and stretch!") && asked.contains("thanks"), "{asked}");
}

#[test]
fn a_heartbeat_finding_for_a_web_chat_lands_in_its_history() {
    let env = Env::new(Wire::OpenAi, vec![Turn::text("The plants need water.").into()]);
    let workspace = env.home.path().join("workspace");
    std::fs::create_dir_all(&workspace).unwrap();
    std::fs::write(workspace.join("HEARTBEAT.md"), "- [ ] check the plants\n").unwrap();
    let gw = Gateway::start(&env, "heartbeat_minutes = 0.02\nheartbeat_to = \"web:kitchen\"\n");
    wait_for(30, "the finding in the chat's history", || {
        gateway_support::request(
            gw.port,
            "GET",
            "/api/sessions/gw-web-kitchen",
            Some(gateway_support::TOKEN),
            None,
        )
        .is_some_and(|(_, body)| body.contains("The plants need water."))
    });
    assert_eq!(history(gw.port, "gw-web-kitchen")[0].1, "The plants need water.");
}

#[test]
fn a_job_without_a_destination_is_refused_with_the_reason() {
    let env = Env::new(Wire::OpenAi, vec![]);
    let gw = Gateway::start(&env, "heartbeat_minutes = 0\n");
    let post = |body: Value| {
        gateway_support::request(
            gw.port,
            "POST",
            "/api/cron",
            Some(gateway_support::TOKEN),
            Some(&body),
        )
        .unwrap()
    };
    let job = |to: Value| json!({"name": "x", "message": "hi", "schedule": {"kind": "every", "value": "1h"}, "deliver_to": to});
    for nowhere in [Value::Null, json!(""), json!("  ")] {
        let (status, body) = post(job(nowhere.clone()));
        assert_eq!(status, 400, "{nowhere}: {body}");
        assert!(body.contains("needs a chat to send its answer to"), "{body}");
    }
    let (status, body) = post(job(json!("telegram:5")));
    assert_eq!(status, 400, "telegram is not running: {body}");
    assert!(body.contains("no channel \\\"telegram\\\""), "{body}");
    assert_eq!(jobs(&env)["jobs"].as_array().map_or(0, Vec::len), 0, "nothing was saved");
    let (status, body) = post(job(json!("web:kitchen")));
    assert_eq!(status, 200, "{body}");
    assert_eq!(jobs(&env)["jobs"][0]["payload"]["to"], "kitchen");
}

#[test]
fn a_file_a_job_sends_to_a_web_chat_with_no_page_open_waits_in_its_history() {
    let send = Turn::tool("message", json!({"content": "Your chart.", "media": ["chart.png"]}));
    let env = Env::new(Wire::OpenAi, vec![send.into(), Turn::text("Sent the chart.").into()]);
    let workspace = env.home.path().join("workspace");
    std::fs::create_dir_all(&workspace).unwrap();
    std::fs::write(workspace.join("chart.png"), b"\x89PNG\r\n\x1a\n\0\0\0\rIHDRchart").unwrap();
    let (rc, out, err) = run(env.cmd().args([
        "cron",
        "add",
        "-m",
        "draw my chart",
        "--at",
        "+2s",
        "--to",
        "web:page-files",
    ]));
    assert_eq!(rc, 0, "{out}{err}");
    let gw = Gateway::start(&env, "heartbeat_minutes = 0\npermission_mode = \"bypass\"\n");
    wait_for(30, "the job's answer in the chat's history", || {
        gateway_support::request(
            gw.port,
            "GET",
            "/api/sessions/gw-web-page-files",
            Some(gateway_support::TOKEN),
            None,
        )
        .is_some_and(|(_, body)| body.contains("Sent the chart."))
    });
    let (_, body) = gateway_support::request(
        gw.port,
        "GET",
        "/api/sessions/gw-web-page-files",
        Some(gateway_support::TOKEN),
        None,
    )
    .unwrap();
    let items = serde_json::from_str::<Value>(&body).unwrap()["items"].clone();
    let kinds: Vec<&str> =
        items.as_array().unwrap().iter().map(|i| i["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["tool", "media", "assistant"], "{items}");
    assert_eq!(items[1]["text"], "Your chart.");
    let path = items[1]["paths"][0].as_str().unwrap();
    assert_eq!(path, "chart.png", "named by its place in the workspace");
    let query: String = path.bytes().map(|b| format!("%{b:02X}")).collect();
    let (status, _) = gateway_support::request(
        gw.port,
        "GET",
        &format!("/api/files?path={query}"),
        Some(gateway_support::TOKEN),
        None,
    )
    .unwrap();
    assert_eq!(status, 200, "the page can show the file");
    // The job's model was told the message waits for the page.
    let told = env.request_body(1).to_string();
    assert!(told.contains("waits in that chat's history"), "{told}");
}
