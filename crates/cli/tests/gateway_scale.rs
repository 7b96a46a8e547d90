//! Several `ferroclaw gateway` processes on one PostgreSQL database (a real
//! throw-away server): every message answered exactly once, each chat in
//! order with its whole history, whichever process a message arrives at;
//! a database that cannot be used stops the gateway with one clear line.
//!
//! Gateways need not share `FERROCLAW_HOME`: chat sessions live in the
//! database too, and `ferroclaw gateway import|export` moves a box's files
//! into it and back.

use crate::common;
use crate::gateway_support;

use std::collections::HashMap;
use std::path::Path;
use std::time::{Duration, Instant};

use common::{Env, Wire};
use ferroclaw_testkit::PgCluster;
use gateway_support::{Gateway, TOKEN, chat, echo_env, free_port};

const USERS: usize = 8;
const MESSAGES: usize = 6;

/// Starts `ferroclaw gateway --port PORT` with the config already written.
fn start(env: &Env, port: u16) -> Gateway {
    Gateway::spawn(env, port)
}

/// The same with `home` as its `FERROCLAW_HOME` (another machine's, say).
fn start_in(env: &Env, home: &Path, port: u16) -> Gateway {
    Gateway::spawn_in(env, home, port)
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
    let env = echo_env();
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

/// An echoing model and gateways on `url` with Telegram on a fake server
/// (`extra`: more of `[channels.telegram]`).
fn echo_with_telegram(
    url: &str,
    extra: &str,
) -> (Env, gateway_support::fake_telegram::FakeTelegram) {
    let fake = gateway_support::fake_telegram::FakeTelegram::start();
    let env = echo_env();
    env.write_home_config(&format!(
        "[gateway]\ntoken = \"{TOKEN}\"\nheartbeat_minutes = 0\nstore = \"{url}\"\n\
         [channels.telegram]\nenabled = true\ntoken = \"TEST:TOKEN\"\napi_base = \"{}\"\n\
         poll_timeout_secs = 1\n{extra}",
        fake.base
    ));
    (env, fake)
}

#[test]
fn telegram_runs_in_one_gateway_and_another_takes_it_over_when_that_one_is_killed() {
    let Some(pg) = PgCluster::shared() else { return };
    let url = pg.database("telegram_failover");
    let (env, fake) = echo_with_telegram(&url, "allow_from = [\"7\"]\n");
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
    let Some(pg) = PgCluster::shared() else { return };
    let url = pg.database("shared_cron_and_pairing");
    // Telegram's default policy: strangers pair first.
    let (env, fake) = echo_with_telegram(&url, "");
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

/// The config of a gateway on `url` that echoes.
fn store_config(url: &str) -> String {
    format!(
        "[retry]\nmax_attempts = 2\nbase_delay_ms = 10\nmax_delay_ms = 50\n\n[gateway]\ntoken = \"{TOKEN}\"\n\
         heartbeat_minutes = 0\nrequests_per_minute = 0\nmessages_per_minute = 0\nstore = \"{url}\"\n"
    )
}

/// The user texts of the model request that answered `text`.
fn history_of(env: &Env, text: &str) -> Vec<String> {
    let requests = env.server.requests();
    let request = requests
        .iter()
        .rev()
        .find(|r| last_user_text(&r.body) == text)
        .unwrap_or_else(|| panic!("the model was not asked about {text:?}"));
    user_texts(request.body["messages"].as_array().unwrap())
}

fn errors_in_log(home: &Path) -> Vec<String> {
    std::fs::read_to_string(home.join("logs").join("gateway.log"))
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains("ERROR"))
        .map(str::to_string)
        .collect()
}

#[test]
fn gateways_that_share_no_folder_continue_each_others_conversations() {
    let Some(pg) = PgCluster::shared() else { return };
    let url = pg.database("no_shared_home");
    let env = echo_env();
    // Two machines: each gateway has its own home (sessions, logs, workspace).
    let other_home = tempfile::tempdir().unwrap();
    env.write_home_config(&store_config(&url));
    std::fs::write(other_home.path().join("config.toml"), store_config(&url)).unwrap();
    let mut said = Vec::new();
    let say = |port: u16, text: &str, said: &mut Vec<String>| {
        assert_eq!(chat(port, "ada", text), (200, format!("echo: {text}")));
        said.push(text.to_string());
        // The model sees the whole conversation, whichever machine ran it.
        assert_eq!(&history_of(&env, text), said, "{text}");
    };
    // Whichever process claims a message runs it: one machine at a time
    // makes sure each one continues what the other began.
    let a = start(&env, free_port());
    say(a.port, "one", &mut said);
    say(a.port, "two", &mut said);
    let b = start_in(&env, other_home.path(), free_port());
    a.terminate();
    say(b.port, "three", &mut said);
    say(b.port, "four", &mut said);
    let a = start(&env, free_port());
    b.terminate();
    say(a.port, "five", &mut said);
    // `/new` on one machine: the other talks in the new session.
    let (status, answer) = chat(a.port, "ada", "/new");
    assert_eq!(status, 200);
    assert!(answer.starts_with("Started a new conversation"), "{answer}");
    let b = start_in(&env, other_home.path(), free_port());
    a.terminate();
    said.clear();
    say(b.port, "fresh start", &mut said);
    // Both up: turns go to either.
    let a = start(&env, free_port());
    for (i, port) in [a.port, b.port, a.port, b.port].into_iter().enumerate() {
        say(port, &format!("both up {i}"), &mut said);
    }
    a.terminate();
    b.terminate();
    for home in [env.home.path(), other_home.path()] {
        assert!(errors_in_log(home).is_empty(), "{:?}", errors_in_log(home));
    }
}

/// Runs `ferroclaw gateway ACTION` with `home` on `url`: (success, stdout, stderr).
pub(crate) fn transfer(env: &Env, home: &Path, url: &str, action: &str) -> (bool, String, String) {
    let output = env
        .std_cmd()
        .env("FERROCLAW_HOME", home)
        .env("FERROCLAW_DATABASE_URL", url)
        .args(["gateway", action])
        .output()
        .unwrap();
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (output.status.success(), text(&output.stdout), text(&output.stderr))
}

#[test]
fn import_moves_a_boxs_files_into_the_database_and_export_writes_them_back() {
    let closed = free_port();
    let env = echo_env();
    // An unreachable database: one clear line, the password hidden, nothing done.
    let (ok, _, err) = transfer(
        &env,
        env.home.path(),
        &format!("postgres://bot:hunter2@127.0.0.1:{closed}/claw"),
        "import",
    );
    assert!(!ok);
    assert!(
        err.contains(&format!(
            "cannot reach the database postgres://bot:***@127.0.0.1:{closed}/claw"
        )),
        "{err}"
    );
    assert!(!err.contains("hunter2"), "{err}");

    let Some(pg) = PgCluster::shared() else { return };
    let url = pg.database("import_export");
    // A box that ran on its own files: a conversation, an approved sender,
    // a cron job.
    env.write_home_config(&format!("[gateway]\ntoken = \"{TOKEN}\"\nheartbeat_minutes = 0\n"));
    let alone = start(&env, free_port());
    assert_eq!(
        chat(alone.port, "ada", "my name is Ada"),
        (200, "echo: my name is Ada".to_string())
    );
    alone.terminate();
    let home = env.home.path();
    std::fs::create_dir_all(home.join("pairing")).unwrap();
    std::fs::write(
        home.join("pairing").join("telegram.json"),
        r#"{"approved":[{"sender":"7","approved_at_ms":1}],"pending":[]}"#,
    )
    .unwrap();
    let job = ferroclaw_gateway::cron::CronJob::new(
        "daily",
        ferroclaw_gateway::cron::Schedule::every(3_600_000).unwrap(),
        ferroclaw_gateway::cron::Payload { message: "check the news".into(), ..Default::default() },
    )
    .unwrap();
    files_now(ferroclaw_gateway::cron::CronStore::new(home).add(job.clone())).unwrap();

    let (ok, out, err) = transfer(&env, home, &url, "import");
    assert!(ok, "{err}");
    assert!(out.contains("chat sessions: 1 stored, 0 already there"), "{out}");
    assert!(out.contains("allowed senders: 1 stored, 0 already there"), "{out}");
    assert!(out.contains("cron jobs: 1 stored, 0 already there"), "{out}");
    // Twice is once.
    let (ok, out, _) = transfer(&env, home, &url, "import");
    assert!(ok);
    assert!(out.contains("chat sessions: 0 stored, 1 already there"), "{out}");
    assert!(out.contains("allowed senders: 0 stored, 1 already there"), "{out}");
    assert!(out.contains("cron jobs: 0 stored, 1 already there"), "{out}");

    // A gateway on another machine continues the conversation.
    let elsewhere = tempfile::tempdir().unwrap();
    std::fs::write(elsewhere.path().join("config.toml"), store_config(&url)).unwrap();
    let b = start_in(&env, elsewhere.path(), free_port());
    assert_eq!(
        chat(b.port, "ada", "what is my name?"),
        (200, "echo: what is my name?".to_string())
    );
    assert_eq!(history_of(&env, "what is my name?"), ["my name is Ada", "what is my name?"]);
    b.terminate();

    // Export into a third box's files: all of it, the second turn included.
    let third = tempfile::tempdir().unwrap();
    std::fs::write(third.path().join("config.toml"), "").unwrap();
    let (ok, out, err) = transfer(&env, third.path(), &url, "export");
    assert!(ok, "{err}");
    assert!(out.contains("chat sessions: 1 written, 0 already there"), "{out}");
    assert!(out.contains("allowed senders: 1 written"), "{out}");
    assert!(out.contains("cron jobs: 1 written"), "{out}");
    let (ok, again, _) = transfer(&env, third.path(), &url, "export");
    assert!(ok);
    assert!(again.contains("chat sessions: 0 written, 1 already there"), "{again}");
    assert!(again.contains("cron jobs: 0 written, 1 already there"), "{again}");
    let sessions: Vec<_> = walk(&third.path().join("sessions"));
    assert_eq!(sessions.len(), 1, "{sessions:?}");
    let text = std::fs::read_to_string(&sessions[0]).unwrap();
    assert!(text.contains("my name is Ada") && text.contains("what is my name?"), "{text}");
    let pairing = std::fs::read_to_string(third.path().join("pairing/telegram.json")).unwrap();
    assert!(pairing.contains("\"7\""), "{pairing}");
    let jobs = files_now(ferroclaw_gateway::cron::CronStore::new(third.path()).load()).unwrap();
    assert_eq!(jobs.jobs, [job]);
}

/// Every `.jsonl` file under `dir`.
fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            found.extend(walk(&path));
        } else if path.extension().is_some_and(|e| e == "jsonl") {
            found.push(path);
        }
    }
    found
}

/// Runs a files-mode store call (async only because the database mode is).
pub(crate) fn files_now<T>(call: impl Future<Output = T>) -> T {
    tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(call)
}

#[test]
fn a_cron_answer_for_a_web_chat_lands_in_its_history_through_the_database() {
    let Some(pg) = PgCluster::shared() else { return };
    let url = pg.database("cron_to_web_history");
    let env = echo_env();
    env.write_home_config(&store_config(&url));
    let out = env
        .std_cmd()
        .args(["cron", "add", "--at", "+2s", "-m", "water the plants", "--to", "web:page-pg"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let gw = start(&env, free_port());
    // No page is open on the chat: the answer is kept in its conversation.
    gateway_support::wait_for(60, "the answer in the chat's history", || {
        gateway_support::request(gw.port, "GET", "/api/sessions/gw-web-page-pg", Some(TOKEN), None)
            .is_some_and(|(status, body)| status == 200 && body.contains("water the plants"))
    });
}
