//! Several `ferroclaw gateway` processes on one PostgreSQL database (a real
//! throw-away server): every message answered exactly once, each chat in
//! order with its whole history, whichever process a message arrives at;
//! a database that cannot be used stops the gateway with one clear line.
//!
//! The processes share one `FERROCLAW_HOME` (session files), as this
//! increment of the scale-out gateway requires.

mod common;
mod gateway_support;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use common::{Env, Wire};
use ferroclaw_testkit::{LAST_USER, PgCluster, ServerOptions, Turn};
use gateway_support::{Gateway, TOKEN, chat, free_port};

const USERS: usize = 8;
const MESSAGES: usize = 6;

/// Starts `ferroclaw gateway --port PORT` with the config already written.
fn start(env: &Env, port: u16) -> Gateway {
    Gateway::spawn(env, port)
}

fn last_user_text(body: &serde_json::Value) -> String {
    let messages = body["messages"].as_array().cloned().unwrap_or_default();
    user_texts(&messages).pop().unwrap_or_default()
}

/// The user messages' texts of an OpenAI-wire request, in order.
fn user_texts(messages: &[serde_json::Value]) -> Vec<String> {
    messages
        .iter()
        .filter(|m| m["role"] == "user")
        .map(|m| match &m["content"] {
            serde_json::Value::String(s) => s.clone(),
            other => other
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|p| p["text"].as_str())
                .collect::<Vec<_>>()
                .join("\n"),
        })
        .collect()
}

#[test]
fn two_gateways_on_one_database_answer_every_message_once_and_each_chat_in_order() {
    let Some(pg) = PgCluster::shared() else { return };
    let url = pg.database("two_gateways");
    let options = ServerOptions { repeat: true, ..Default::default() };
    let env = Env::with_options(
        Wire::OpenAi,
        vec![Turn::text(format!("echo: {LAST_USER}")).into()],
        options,
    );
    env.write_home_config(&format!(
        "[retry]\nmax_attempts = 2\nbase_delay_ms = 10\nmax_delay_ms = 50\n\n[gateway]\ntoken = \"{TOKEN}\"\n\
         heartbeat_minutes = 0\nrequests_per_minute = 0\nmessages_per_minute = 0\nstore = \"{url}\"\n"
    ));
    let a = start(&env, free_port());
    let b = start(&env, free_port());
    let ports = [a.port, b.port];
    // Each user alternates between the two gateways, one message at a time.
    let users: Vec<_> = (0..USERS)
        .map(|u| {
            std::thread::spawn(move || {
                for m in 0..MESSAGES {
                    let text = format!("user {u} message {m}");
                    let (status, answer) = chat(ports[(u + m) % 2], &format!("u{u}"), &text);
                    assert_eq!((status, answer), (200, format!("echo: {text}")));
                }
            })
        })
        .collect();
    for u in users {
        u.join().unwrap();
    }
    // Exactly once: the model was asked about each message once.
    let requests = env.server.requests();
    let mut asked: HashMap<String, usize> = HashMap::new();
    for r in &requests {
        *asked.entry(last_user_text(&r.body)).or_default() += 1;
    }
    assert_eq!(requests.len(), USERS * MESSAGES, "{asked:?}");
    assert!(asked.values().all(|&n| n == 1), "a message ran twice: {asked:?}");
    // In order, with the whole history: each chat's last request carries its
    // messages in the order they were sent, whichever process ran each turn.
    for u in 0..USERS {
        let last = format!("user {u} message {}", MESSAGES - 1);
        let request = requests.iter().find(|r| last_user_text(&r.body) == last).unwrap();
        let texts = user_texts(request.body["messages"].as_array().unwrap());
        let expected: Vec<String> =
            (0..MESSAGES).map(|m| format!("user {u} message {m}")).collect();
        assert_eq!(texts, expected, "chat u{u}");
    }
    // `/new` in one process starts a new session the other one talks in.
    let (status, answer) = chat(ports[0], "u0", "/new");
    assert_eq!(status, 200);
    assert!(answer.starts_with("Started a new conversation"), "{answer}");
    assert_eq!(chat(ports[1], "u0", "after new"), (200, "echo: after new".to_string()));
    let requests = env.server.requests();
    let fresh = requests.iter().find(|r| last_user_text(&r.body) == "after new").unwrap();
    assert_eq!(user_texts(fresh.body["messages"].as_array().unwrap()), ["after new"]);
    // Both processes did some of the work.
    let log = std::fs::read_to_string(env.home.path().join("logs").join("gateway.log"))
        .unwrap_or_default();
    let (_, err_a) = a.terminate();
    let (_, err_b) = b.terminate();
    assert!(
        err_a.contains("sharing the work through") && err_b.contains("sharing the work"),
        "{err_a}"
    );
    assert!(!log.contains("ERROR"), "{log}");
}

#[test]
fn a_gateway_refuses_an_unreachable_database_and_a_newer_schema_with_one_line() {
    let env = Env::new(Wire::OpenAi, vec![]);
    env.write_home_config(&format!("[gateway]\ntoken = \"{TOKEN}\"\nheartbeat_minutes = 0\n"));
    let closed = free_port();
    let output = env
        .std_cmd()
        .args(["gateway", "--port", &free_port().to_string()])
        .env("FERROCLAW_DATABASE_URL", format!("postgres://bot:hunter2@127.0.0.1:{closed}/claw"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    let line = err
        .lines()
        .find(|l| l.contains("cannot reach the database"))
        .unwrap_or_else(|| panic!("{err}"));
    assert!(line.contains(&format!("postgres://bot:***@127.0.0.1:{closed}/claw")), "{line}");
    assert!(line.contains("files"), "{line}");
    assert!(!err.contains("hunter2"), "{err}");

    let Some(pg) = PgCluster::shared() else { return };
    let url = pg.database("newer_schema");
    let migrate = env
        .std_cmd()
        .args(["gateway", "migrate"])
        .env("FERROCLAW_DATABASE_URL", &url)
        .output()
        .unwrap();
    assert!(migrate.status.success(), "{}", String::from_utf8_lossy(&migrate.stderr));
    assert!(String::from_utf8_lossy(&migrate.stdout).contains("applied migrations"));
    let again = env
        .std_cmd()
        .args(["gateway", "migrate"])
        .env("FERROCLAW_DATABASE_URL", &url)
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&again.stdout).contains("up to date"));
    // A newer ferroclaw migrated the database further.
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let (client, connection) =
            tokio_postgres::connect(&url, tokio_postgres::NoTls).await.unwrap();
        let task = tokio::spawn(connection);
        client.execute("INSERT INTO ferroclaw_schema (version) VALUES (999)", &[]).await.unwrap();
        drop(client);
        let _ = task.await;
    });
    let output = env
        .std_cmd()
        .args(["gateway", "--port", &free_port().to_string()])
        .env("FERROCLAW_DATABASE_URL", &url)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(err.contains("schema version 999") && err.contains("upgrade ferroclaw"), "{err}");
}

#[test]
fn telegram_runs_in_one_gateway_and_another_takes_it_over_when_that_one_is_killed() {
    use gateway_support::fake_telegram::FakeTelegram;
    let Some(pg) = PgCluster::shared() else { return };
    let url = pg.database("telegram_failover");
    let fake = FakeTelegram::start();
    let options = ServerOptions { repeat: true, ..Default::default() };
    let env = Env::with_options(
        Wire::OpenAi,
        vec![Turn::text(format!("echo: {LAST_USER}")).into()],
        options,
    );
    env.write_home_config(&format!(
        "[gateway]\ntoken = \"{TOKEN}\"\nheartbeat_minutes = 0\nstore = \"{url}\"\n\
         [channels.telegram]\nenabled = true\ntoken = \"TEST:TOKEN\"\napi_base = \"{}\"\n\
         poll_timeout_secs = 1\nallow_from = [\"7\"]\n",
        fake.base
    ));
    let mut gateways = vec![start(&env, free_port()), start(&env, free_port())];
    fake.user_says(7, "Bo", "one");
    gateway_support::wait_for(60, "the first answer", || !fake.sent_to(7).is_empty());
    let holds = |gw: &Gateway| {
        std::fs::read_to_string(&gw.stderr_path)
            .unwrap_or_default()
            .contains("this process holds the channel")
    };
    let holder = gateways.iter().position(holds).expect("one gateway polls Telegram");
    assert_eq!(gateways.iter().filter(|g| holds(g)).count(), 1, "only one polls");
    // kill -9: no chance to give the lease up.
    let mut dead = gateways.remove(holder);
    dead.child.kill().unwrap();
    dead.child.wait().unwrap();
    let killed = Instant::now();
    fake.user_says(7, "Bo", "two");
    gateway_support::wait_for(60, "the survivor's answer", || fake.sent_to(7).len() >= 2);
    eprintln!("telegram failover: answered {:.1} s after the kill", killed.elapsed().as_secs_f64());
    assert!(holds(&gateways[0]));
    // The survivor polls from the start again and sees "one" again: it is a
    // duplicate (same chat and message id), answered once.
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(fake.sent_to(7), ["echo: one", "echo: two"]);
}

#[test]
fn two_gateways_share_cron_jobs_and_pairing_through_the_database() {
    use gateway_support::fake_telegram::FakeTelegram;
    let Some(pg) = PgCluster::shared() else { return };
    let url = pg.database("shared_cron_and_pairing");
    let fake = FakeTelegram::start();
    let options = ServerOptions { repeat: true, ..Default::default() };
    let env = Env::with_options(
        Wire::OpenAi,
        vec![Turn::text(format!("echo: {LAST_USER}")).into()],
        options,
    );
    // Telegram's default policy: strangers pair first.
    env.write_home_config(&format!(
        "[gateway]\ntoken = \"{TOKEN}\"\nheartbeat_minutes = 0\nstore = \"{url}\"\n\
         [channels.telegram]\nenabled = true\ntoken = \"TEST:TOKEN\"\napi_base = \"{}\"\n\
         poll_timeout_secs = 1\n",
        fake.base
    ));
    let mut gateways = vec![start(&env, free_port()), start(&env, free_port())];
    let cli = |args: &[&str]| {
        let out = env.std_cmd().args(args).output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout).to_string();
        assert!(out.status.success(), "{args:?}: {stdout}{}", String::from_utf8_lossy(&out.stderr));
        stdout
    };
    // A job added with the CLI goes to the database, where both gateways see it.
    cli(&["cron", "add", "--at", "+2s", "-m", "water the plants"]);
    assert!(!env.home.path().join("cron").join("jobs.json").exists());
    let runs = || {
        let requests = env.server.requests();
        requests.iter().filter(|r| last_user_text(&r.body).contains("water the plants")).count()
    };
    gateway_support::wait_for(60, "the job's run", || runs() >= 1);
    // A stranger gets a code from whichever gateway polls Telegram ...
    fake.user_says(42, "Ann", "hello");
    gateway_support::wait_for(60, "a pairing code", || !fake.sent_to(42).is_empty());
    let reply = fake.sent_to(42)[0].clone();
    let code = reply.split("pairing code is ").nth(1).and_then(|r| r.get(..8)).unwrap().to_string();
    // ... the owner approves it with the CLI, against the database ...
    let approved = cli(&["pairing", "approve", "telegram", &code]);
    assert!(approved.contains("approved sender 42"), "{approved}");
    assert!(cli(&["pairing", "list"]).contains("approved  sender 42"));
    // ... and the other gateway, polling Telegram once the first stops, lets her in.
    let holds = |gw: &Gateway| {
        std::fs::read_to_string(&gw.stderr_path)
            .unwrap_or_default()
            .contains("this process holds the channel")
    };
    let holder = gateways.iter().position(holds).expect("one gateway polls Telegram");
    gateways.remove(holder).terminate();
    fake.user_says(42, "Ann", "it is me");
    gateway_support::wait_for(60, "Ann's answer", || {
        fake.sent_to(42).iter().any(|m| m == "echo: it is me")
    });
    assert!(holds(&gateways[0]));
    assert!(!env.home.path().join("pairing").exists(), "pairing lives in the database");
    // Two gateways ran, and the job ran once; a one-shot job is gone after its run.
    assert_eq!(runs(), 1, "the job ran once");
    assert!(cli(&["cron", "list"]).contains("no cron jobs"));
}
