//! Several `ferroclaw gateway` processes on one PostgreSQL database when
//! things go wrong: the database goes away mid-run and comes back, and a
//! gateway is killed with SIGKILL in the middle of a turn, a cron run, or
//! while it holds a Telegram message the database could not take yet.
//! Every message is answered exactly once, and the model is never asked
//! again for a step a dead worker had finished.

use crate::common;
use crate::gateway_support;

use std::collections::HashMap;

use common::{Env, Wire, tool_results};
use ferroclaw_testkit::{Fault, LAST_USER, PgCluster, ServerOptions, Step, Turn};
use gateway_support::fake_telegram::FakeTelegram;
use gateway_support::{Gateway, TOKEN, chat, echo_env, free_port, request, wait_for};
use serde_json::json;

/// A chat lease short enough that a killed worker's chat is taken over at once.
const SHORT_LEASE_MS: &str = "1500";

/// The chat lease of the database outage test, which the outage outlasts:
/// long enough for a gateway to come back within the grace a restarted
/// server gives every lease (this long), on a busy machine too.
const OUTAGE_LEASE_MS: &str = "4000";

/// A safety poll no test waits for: what happens, happens through a
/// notification or a lease running out.
const NO_POLL_MS: &str = "3600000";

/// Starts `ferroclaw gateway --port PORT` with the config already written.
fn start(env: &Env, port: u16) -> Gateway {
    let lease = [("FERROCLAW_TEST_CHAT_LEASE_MS", SHORT_LEASE_MS)];
    Gateway::spawn_with(env, env.home.path(), port, &lease)
}

/// The same, with no polling of the database to speak of.
fn start_without_polling(env: &Env) -> Gateway {
    let vars = [
        ("FERROCLAW_TEST_CHAT_LEASE_MS", SHORT_LEASE_MS),
        ("FERROCLAW_TEST_SAFETY_POLL_MS", NO_POLL_MS),
    ];
    Gateway::spawn_with(env, env.home.path(), free_port(), &vars)
}

/// The pid in a `host-PID-random` holder name.
fn pid_of(holder: &str) -> u32 {
    holder.rsplit('-').nth(1).and_then(|p| p.parse().ok()).expect("a holder name")
}

fn stderr(gw: &Gateway) -> String {
    std::fs::read_to_string(&gw.stderr_path).unwrap_or_default()
}

/// The last user message's text of an OpenAI-wire request.
fn last_user_text(body: &serde_json::Value) -> String {
    let messages = body["messages"].as_array().cloned().unwrap_or_default();
    messages
        .iter()
        .rev()
        .find(|m| m["role"] == "user")
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default()
        .to_string()
}

/// Runs `sql` against `url` and returns the first column of each row as text.
fn query(url: &str, sql: &str) -> Vec<String> {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let (client, connection) =
            tokio_postgres::connect(url, tokio_postgres::NoTls).await.unwrap();
        let task = tokio::spawn(connection);
        let rows = client.query(sql, &[]).await.unwrap();
        drop(client);
        let _ = task.await;
        rows.iter().map(|r| r.get::<_, String>(0)).collect()
    })
}

#[test]
fn gateways_hold_messages_while_the_database_is_away_and_answer_each_once_when_it_is_back() {
    // Its own server: this test stops it.
    let Some(pg) = PgCluster::start() else { return };
    let url = pg.database("outage");
    // Each answer takes a moment, so turns are running when the database stops.
    let slow = Step::Fault(Fault::SlowFirstByte {
        delay_ms: 2500,
        then: Turn::text(format!("echo: {LAST_USER}")),
    });
    let options = ServerOptions { repeat: true, ..Default::default() };
    let env = Env::with_options(Wire::OpenAi, vec![slow], options);
    env.write_home_config(&format!(
        "[gateway]\ntoken = \"{TOKEN}\"\nheartbeat_minutes = 0\nrequests_per_minute = 0\n\
         messages_per_minute = 0\nstore = \"{url}\"\n"
    ));
    // A lease the outage outlasts: the gateway holding an answer it could
    // not store keeps it past its lease (nobody can take the chat over
    // while the database is away, nor for a grace after it restarts).
    let lease = [("FERROCLAW_TEST_CHAT_LEASE_MS", OUTAGE_LEASE_MS)];
    let a = Gateway::spawn_with(&env, env.home.path(), free_port(), &lease);
    let b = Gateway::spawn_with(&env, env.home.path(), free_port(), &lease);
    let ports = [a.port, b.port];
    const USERS: usize = 3;
    let send = |u: usize, text: String| {
        std::thread::spawn(move || {
            let answer = chat(ports[u % 2], &format!("u{u}"), &text);
            (text, answer)
        })
    };
    let mut waiting: Vec<_> = (0..USERS).map(|u| send(u, format!("user {u} before"))).collect();
    // Their turns are running (the model is answering them): the database
    // goes away under them.
    wait_for(60, "the first turns to start", || env.server.requests().len() >= USERS);
    pg.stop();
    // Messages keep coming while it is away: the gateways hold them.
    waiting.extend((0..USERS).map(|u| send(USERS + u, format!("user {} during", USERS + u))));
    wait_for(60, "the gateways to hold answers and messages", || {
        let both = stderr(&a) + &stderr(&b);
        both.contains("not stored yet") && both.contains("holding up to")
    });
    assert_eq!(env.server.requests().len(), USERS, "nothing ran without the database");
    // Away for longer than a lease.
    std::thread::sleep(std::time::Duration::from_millis(
        OUTAGE_LEASE_MS.parse::<u64>().unwrap() + 1000,
    ));
    pg.start_again();
    for w in waiting {
        let (text, answer) = w.join().unwrap();
        assert_eq!(answer, (200, format!("echo: {text}")));
    }
    // Exactly once: the model was asked about each message once.
    let mut asked: HashMap<String, usize> = HashMap::new();
    for r in env.server.requests() {
        *asked.entry(last_user_text(&r.body)).or_default() += 1;
    }
    assert_eq!(asked.len(), USERS * 2, "{asked:?}");
    assert!(asked.values().all(|&n| n == 1), "a message ran twice: {asked:?}");
    let unfinished = query(&url, "SELECT count(*)::text FROM inbound WHERE done_at IS NULL");
    assert_eq!(unfinished, ["0"]);
    let (ea, eb) = (stderr(&a), stderr(&b));
    assert!((ea.clone() + &eb).contains("the database is back"), "{ea}\n{eb}");
}

#[test]
fn messages_are_taken_and_answered_on_notifications_alone_when_nothing_polls() {
    let Some(pg) = PgCluster::shared() else { return };
    let url = pg.database("no_polling");
    let env = echo_env();
    env.write_home_config(&format!(
        "[gateway]\ntoken = \"{TOKEN}\"\nheartbeat_minutes = 0\nrequests_per_minute = 0\n\
         messages_per_minute = 0\nstore = \"{url}\"\n"
    ));
    // Each message after the first comes after the gateways' first look.
    let gateways = [start_without_polling(&env), start_without_polling(&env)];
    for m in 0..6 {
        let text = format!("message {m}");
        let (status, answer) = chat(gateways[m % 2].port, "u1", &text);
        let log = stderr(&gateways[0]) + &stderr(&gateways[1]);
        assert_eq!((status, answer), (200, format!("echo: {text}")), "{log}");
    }
}

#[test]
fn a_turn_cut_by_kill_9_is_finished_by_the_other_gateway_from_the_journal_in_the_database() {
    let Some(pg) = PgCluster::shared() else { return };
    let url = pg.database("kill_mid_turn");
    let fake = FakeTelegram::start();
    let env = Env::new(
        Wire::OpenAi,
        vec![
            Turn::tool("bash", json!({"command": "echo one >> side.txt"})).into(),
            // The second model call hangs: the turn is mid-flight here.
            Step::Fault(Fault::Stall { after_text: String::new() }),
            Turn::text("All done.").into(),
            Turn::text("pong").into(),
        ],
    );
    env.write_home_config(&format!(
        "[gateway]\ntoken = \"{TOKEN}\"\nheartbeat_minutes = 0\npermission_mode = \"bypass\"\n\
         store = \"{url}\"\n[channels.telegram]\nenabled = true\ntoken = \"TEST:TOKEN\"\n\
         api_base = \"{}\"\npoll_timeout_secs = 1\nallow_from = [\"42\"]\n",
        fake.base
    ));
    // No polling: the survivor takes the chat over when the dead one's lease
    // runs out, and the answers go out on notifications.
    let mut gateways = vec![start_without_polling(&env), start_without_polling(&env)];
    fake.user_says(42, "Ann", "write the line");
    wait_for(60, "the second model call", || env.server.requests().len() >= 2);
    // The process running the turn holds the chat's lease (`host-PID-random`).
    let holders = query(&url, "SELECT holder FROM chat_leases");
    assert_eq!(holders.len(), 1, "{holders:?}");
    let pid: u32 = holders[0].rsplit('-').nth(1).unwrap().parse().unwrap();
    let running = gateways.iter().position(|g| g.child.id() == pid).expect("a gateway's turn");
    let mut dead = gateways.remove(running);
    dead.child.kill().unwrap();
    dead.child.wait().unwrap();
    assert!(fake.sent_to(42).is_empty(), "no answer before the kill");

    let survivor = &gateways[0];
    wait_for(60, "the survivor's answer", || !fake.sent_to(42).is_empty());
    // In order and once: a second copy of the answer would come before "pong".
    fake.user_says(42, "Ann", "ping");
    wait_for(60, "the next answer", || fake.sent_to(42).len() >= 2);
    assert_eq!(fake.sent_to(42), ["All done.", "pong"], "{}", stderr(survivor));

    // The model was asked once per step: the finished first step (the tool
    // call) came from the journal, not from the model again.
    let requests = env.server.requests();
    assert_eq!(requests.len(), 4, "{}", stderr(survivor));
    assert!(tool_results(&requests[0].body).is_empty());
    assert_eq!(tool_results(&requests[1].body).len(), 1);
    assert_eq!(tool_results(&requests[2].body).len(), 1, "the survivor resumed after the tool");
    // The tool's recorded result was replayed: it did not run again.
    let side = std::fs::read_to_string(env.home.path().join("workspace").join("side.txt"));
    assert_eq!(side.unwrap_or_default(), "one\n");
    assert!(stderr(survivor).contains("resuming an interrupted turn"), "{}", stderr(survivor));
}

#[test]
fn a_telegram_message_held_while_the_database_is_away_survives_the_death_of_its_gateway() {
    // Its own server: this test stops it.
    let Some(pg) = PgCluster::start() else { return };
    let url = pg.database("telegram_outage");
    let fake = FakeTelegram::start();
    fake.forget_confirmed();
    let env = echo_env();
    env.write_home_config(&format!(
        "[gateway]\ntoken = \"{TOKEN}\"\nheartbeat_minutes = 0\nstore = \"{url}\"\n\
         channel_lease_secs = 2\nchannel_lease_renew_secs = 1\n\
         [channels.telegram]\nenabled = true\ntoken = \"TEST:TOKEN\"\napi_base = \"{}\"\n\
         poll_timeout_secs = 1\nallow_from = [\"42\"]\n",
        fake.base
    ));
    let mut gateways = vec![start(&env, free_port()), start(&env, free_port())];
    let holds = |gw: &Gateway| stderr(gw).contains("this process holds the channel");
    wait_for(60, "a gateway to poll Telegram", || gateways.iter().any(holds));
    let poller = gateways.iter().position(holds).unwrap();
    // The database goes away; a message arrives at the polling gateway,
    // which holds it (it cannot be stored) ...
    pg.stop();
    fake.user_says(42, "Ann", "are you there");
    wait_for(60, "the poller to hold the message", || {
        stderr(&gateways[poller]).contains("holding up to")
    });
    // ... and dies before the database is back: what it held is gone, and
    // only Telegram (not told it was taken) still has the message.
    let mut dead = gateways.remove(poller);
    dead.child.kill().unwrap();
    dead.child.wait().unwrap();
    pg.start_again();
    let survivor = &gateways[0];
    wait_for(60, "the survivor's answer", || !fake.sent_to(42).is_empty());
    // Exactly once: a second answer would come before the next one's.
    fake.user_says(42, "Ann", "ping");
    wait_for(60, "the next answer", || fake.sent_to(42).len() >= 2);
    assert_eq!(fake.sent_to(42), ["echo: are you there", "echo: ping"], "{}", stderr(survivor));
    let asked =
        env.server.requests().iter().filter(|r| last_user_text(&r.body) == "are you there").count();
    assert_eq!(asked, 1);
}

#[test]
fn a_cron_run_cut_by_kill_9_runs_again_in_another_gateway_as_soon_as_its_gateway_is_gone() {
    let Some(pg) = PgCluster::shared() else { return };
    let url = pg.database("cron_run_liveness");
    let env = Env::new(
        Wire::OpenAi,
        vec![
            // The first run hangs: its gateway is killed mid-run.
            Step::Fault(Fault::Stall { after_text: String::new() }),
            Turn::text("watered").into(),
        ],
    );
    env.write_home_config(&format!(
        "[gateway]\ntoken = \"{TOKEN}\"\nheartbeat_minutes = 0\nstore = \"{url}\"\n"
    ));
    // Three gateways that do not poll, with run leases of ten minutes: the
    // job is seen through its notification, the dead run through its
    // gateway's liveness lock (which the kill frees at once), never through
    // its lease, which outlasts every wait of this test.
    let vars =
        [("FERROCLAW_TEST_CHAT_LEASE_MS", "600000"), ("FERROCLAW_TEST_SAFETY_POLL_MS", NO_POLL_MS)];
    let mut gateways: Vec<Gateway> =
        (0..3).map(|_| Gateway::spawn_with(&env, env.home.path(), free_port(), &vars)).collect();
    let out = env.std_cmd().args(["cron", "add", "--at", "+1s", "-m", "water the plants"]).output();
    assert!(out.unwrap().status.success());
    wait_for(60, "the job's first run", || !env.server.requests().is_empty());
    let holders = query(&url, "SELECT holder FROM cron_runs");
    assert_eq!(holders.len(), 1, "{holders:?}");
    let running = gateways.iter().position(|g| g.child.id() == pid_of(&holders[0])).unwrap();
    // The kill comes after the grace that follows the server's start, in
    // which every lease holds (here: its first 10 s).
    let grace = "SELECT greatest(0, extract(epoch FROM pg_postmaster_start_time() \
                 + interval '10 s' - now()))::text";
    let left: f64 = query(&url, grace)[0].parse().unwrap();
    std::thread::sleep(std::time::Duration::from_secs_f64(left));
    let mut dead = gateways.remove(running);
    let killed = std::time::Instant::now();
    dead.child.kill().unwrap();
    dead.child.wait().unwrap();
    let outcome = || query(&url, "SELECT coalesce(outcome, '') || ' ' || attempts FROM cron_runs");
    wait_for(60, "the run's end", || outcome().iter().any(|o| o.starts_with("ok")));
    // A figure for the log, not a check: the run ended this long after the kill.
    eprintln!("cron takeover: run again and ended {:.2?} after kill -9", killed.elapsed());
    let log = stderr(&gateways[0]) + &stderr(&gateways[1]);
    assert_eq!(outcome(), ["ok 2"], "{log}");
    // Run again once, by a survivor.
    assert_eq!(env.server.requests().len(), 2, "{log}");
    let holder = query(&url, "SELECT holder FROM cron_runs");
    assert!(gateways.iter().any(|g| g.child.id() == pid_of(&holder[0])), "{holder:?}");
    assert!(log.contains("running it again here"), "{log}");
}

#[test]
fn a_database_outage_is_one_line_when_it_starts_and_one_when_it_ends() {
    // Its own server: this test stops it.
    let Some(pg) = PgCluster::start() else { return };
    let url = pg.database("outage_lines");
    let env = echo_env();
    env.write_home_config(&format!(
        "[gateway]\ntoken = \"{TOKEN}\"\nheartbeat_minutes = 0\nstore = \"{url}\"\n"
    ));
    let gw = start(&env, free_port());
    pg.stop();
    wait_for(60, "the outage to be noticed", || {
        stderr(&gw).contains("database notifications lost")
    });
    // Away long enough for a line a second to show, were one written.
    std::thread::sleep(std::time::Duration::from_secs(4));
    pg.start_again();
    wait_for(60, "the recovery", || stderr(&gw).contains("database notifications are back"));
    assert_eq!(chat(gw.port, "ada", "still there?"), (200, "echo: still there?".into()));
    let err = stderr(&gw);
    assert_eq!(err.matches("database notifications lost").count(), 1, "{err}");
    assert_eq!(err.matches("database notifications are back").count(), 1, "{err}");
}

/// What people read is kept in the database: while it is away, the list
/// and a conversation answer 503 "try again", not 500, and read whole once
/// it is back.
#[test]
fn reading_conversations_while_the_database_is_away_says_try_again_and_works_once_it_is_back() {
    // Its own server: this test stops it.
    let Some(pg) = PgCluster::start() else { return };
    let url = pg.database("outage_reads");
    let env = echo_env();
    env.write_home_config(&format!(
        "[gateway]\ntoken = \"{TOKEN}\"\nheartbeat_minutes = 0\nstore = \"{url}\"\n"
    ));
    let gw = start(&env, free_port());
    assert_eq!(chat(gw.port, "ada", "keep this"), (200, "echo: keep this".into()));
    let read = |path: &str| {
        let (status, body) = request(gw.port, "GET", path, Some(TOKEN), None).expect("an answer");
        (status, serde_json::from_str::<serde_json::Value>(&body).unwrap_or_default())
    };
    let (status, list) = read("/api/sessions");
    assert_eq!(status, 200, "{list}");
    let id = list["sessions"][0]["id"].as_str().expect("the conversation").to_string();

    pg.stop();
    for path in ["/api/sessions".to_string(), format!("/api/sessions/{id}")] {
        let (status, body) = read(&path);
        assert_eq!(status, 503, "{path}: {body}");
        let said = body["error"].as_str().unwrap_or_default();
        assert!(said.contains("database") && said.contains("try again"), "{path}: {said}");
    }
    pg.start_again();
    wait_for(60, "the history to read again", || read("/api/sessions").0 == 200);
    let (status, shown) = read(&format!("/api/sessions/{id}"));
    assert_eq!(status, 200, "{shown}");
    assert!(shown.to_string().contains("echo: keep this"), "{shown}");
}

/// A chat lease far longer than any test waits: a takeover seen here came
/// from the dead process's liveness, not from its lease running out.
const LEASE_NO_TEST_WAITS_FOR: &str = "chat_lease_secs = 600";

#[test]
fn a_killed_gateways_chat_is_answered_by_the_survivor_long_before_its_lease_runs_out() {
    let Some(pg) = PgCluster::shared() else { return };
    let url = pg.database("kill_liveness");
    let fake = FakeTelegram::start();
    let env = Env::new(
        Wire::OpenAi,
        vec![
            // The first model call hangs: the turn is mid-flight when its gateway dies.
            Step::Fault(Fault::Stall { after_text: String::new() }),
            Turn::text("Hello Ann.").into(),
            Turn::text("pong").into(),
        ],
    );
    env.write_home_config(&format!(
        "[gateway]\ntoken = \"{TOKEN}\"\nheartbeat_minutes = 0\n{LEASE_NO_TEST_WAITS_FOR}\n\
         store = \"{url}\"\n[channels.telegram]\nenabled = true\ntoken = \"TEST:TOKEN\"\n\
         api_base = \"{}\"\npoll_timeout_secs = 1\nallow_from = [\"42\"]\n",
        fake.base
    ));
    // No polling and no short test lease: only liveness can hand the chat over.
    let vars = [("FERROCLAW_TEST_SAFETY_POLL_MS", NO_POLL_MS)];
    let mut gateways: Vec<Gateway> =
        (0..2).map(|_| Gateway::spawn_with(&env, env.home.path(), free_port(), &vars)).collect();
    fake.user_says(42, "Ann", "hello");
    wait_for(60, "the first model call", || !env.server.requests().is_empty());
    let holders = query(&url, "SELECT holder FROM chat_leases");
    assert_eq!(holders.len(), 1, "{holders:?}");
    let running = gateways
        .iter()
        .position(|g| g.child.id() == pid_of(&holders[0]))
        .expect("a gateway's turn");
    let mut dead = gateways.remove(running);
    dead.child.kill().unwrap();
    dead.child.wait().unwrap();

    // The lease has ten minutes to run; the survivor answers long before.
    let survivor = &gateways[0];
    wait_for(60, "the survivor's answer", || !fake.sent_to(42).is_empty());
    fake.user_says(42, "Ann", "ping");
    wait_for(60, "the next answer", || fake.sent_to(42).len() >= 2);
    assert_eq!(fake.sent_to(42), ["Hello Ann.", "pong"], "{}", stderr(survivor));
    let lease_left = query(
        &url,
        "SELECT coalesce(max(extract(epoch FROM expires_at - now()))::int, 0)::text FROM chat_leases",
    );
    assert_eq!(lease_left, ["0"], "the chat is free again, its answers given");
}

#[test]
fn a_gateway_with_another_model_config_takes_no_turns_and_gateway_status_lists_both() {
    let Some(pg) = PgCluster::shared() else { return };
    let url = pg.database("model_config_gate");
    let env = echo_env();
    env.write_home_config(&format!(
        "[gateway]\ntoken = \"{TOKEN}\"\nheartbeat_minutes = 0\nrequests_per_minute = 0\n\
         messages_per_minute = 0\nstore = \"{url}\"\n"
    ));
    // Production registers first; then a staging box pointed here by mistake.
    let production = Gateway::spawn(&env, free_port());
    let staging_model = [("FERROCLAW_MODEL", "openai/gpt-staging")];
    let staging = Gateway::spawn_with(&env, env.home.path(), free_port(), &staging_model);
    wait_for(60, "the staging box's refusal", || stderr(&staging).contains("takes no turns"));

    // Messages that reach the staging box are answered, by production's model.
    for n in 0..4 {
        let text = format!("message {n}");
        assert_eq!(chat(staging.port, "u1", &text), (200, format!("echo: {text}")));
    }
    let models: Vec<String> = env
        .server
        .requests()
        .iter()
        .map(|r| r.body["model"].as_str().unwrap_or_default().to_string())
        .collect();
    assert_eq!(models, ["gpt-test"; 4], "{}", stderr(&staging));

    let out = env.cmd().args(["gateway", "status"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}{}", String::from_utf8_lossy(&out.stderr));
    assert!(text.contains("model config served: openai/gpt-test"), "{text}");
    assert!(text.contains("live gateways: 2"), "{text}");
    let line_of = |pid: u32| {
        text.lines().find(|l| l.contains(&format!("-{pid}-"))).unwrap_or_default().to_string()
    };
    assert!(!line_of(production.child.id()).contains("takes no turns"), "{text}");
    assert!(line_of(staging.child.id()).contains("openai/gpt-staging"), "{text}");
    assert!(line_of(staging.child.id()).contains("takes no turns"), "{text}");
}
