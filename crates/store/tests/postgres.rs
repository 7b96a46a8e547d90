//! The PostgreSQL store against a real PostgreSQL server (a throw-away
//! cluster; these tests skip, loudly, only where PostgreSQL is not installed).

use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ferroclaw_store::{
    Answered, ApprovalRequest, CRON_RUN_ATTEMPTS, Claim, CodeRequest, Enqueued, Incoming,
    LookAgain, Outbound, PgOptions, PgStore, Pruned, Registration, SCHEMA_VERSION, SendIt,
    SessionHead, SessionStart, SessionWrite, StoreError, StoredMedia, TakenOver, TurnStep,
};
use ferroclaw_testkit::PgCluster;
use serde_json::json;

/// A lease long enough never to run out during a test.
const LONG: Duration = Duration::from_secs(600);

async fn store(pg: &PgCluster, db: &str, holder: &str) -> PgStore {
    let url = pg.database(db);
    let options = PgOptions { holder: Some(holder.into()), ..Default::default() };
    PgStore::connect(&url, options).await.unwrap()
}

macro_rules! cluster_or_skip {
    () => {
        match PgCluster::shared() {
            Some(pg) => pg,
            None => return,
        }
    };
}

#[tokio::test]
async fn migrations_build_the_schema_from_empty_and_a_second_run_changes_nothing() {
    let pg = cluster_or_skip!();
    let url = pg.database("migrate_empty");
    let applied = PgStore::migrate(&url).await.unwrap();
    assert_eq!(applied, (1..=SCHEMA_VERSION).collect::<Vec<_>>());
    assert_eq!(PgStore::migrate(&url).await.unwrap(), Vec::<i32>::new(), "up to date");
    let s =
        PgStore::connect(&url, PgOptions { migrate: false, ..Default::default() }).await.unwrap();
    assert_eq!(s.schema_version().await.unwrap(), SCHEMA_VERSION);
}

#[tokio::test]
async fn a_schema_newer_than_the_binary_is_refused_and_says_so() {
    let pg = cluster_or_skip!();
    let url = pg.database("too_new");
    PgStore::migrate(&url).await.unwrap();
    let (client, connection) = tokio_postgres_connect(&url).await;
    let newer = SCHEMA_VERSION + 1;
    client.execute("INSERT INTO ferroclaw_schema (version) VALUES ($1)", &[&newer]).await.unwrap();
    drop(client);
    connection.abort();
    for migrate in [true, false] {
        let e =
            PgStore::connect(&url, PgOptions { migrate, ..Default::default() }).await.unwrap_err();
        assert!(matches!(e, StoreError::SchemaTooNew { found, .. } if found == newer), "{e}");
        let text = e.to_string();
        assert!(text.contains(&format!("schema version {newer}")), "{text}");
        assert!(text.contains("upgrade ferroclaw"), "{text}");
    }
}

#[tokio::test]
async fn an_unreachable_database_is_one_clear_line_with_the_password_hidden() {
    // A port nothing listens on: no PostgreSQL needed.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let url = format!("postgres://bot:hunter2@127.0.0.1:{port}/claw");
    let e = PgStore::connect(&url, PgOptions::default()).await.unwrap_err();
    let text = e.to_string();
    assert!(matches!(e, StoreError::Unreachable { .. }), "{text}");
    assert!(text.contains(&format!("postgres://bot:***@127.0.0.1:{port}/claw")), "{text}");
    assert!(!text.contains("hunter2"), "{text}");
    assert!(text.contains("files"), "says how to run on files instead: {text}");
    assert!(!text.contains('\n'), "one line: {text}");
}

#[tokio::test]
async fn the_same_platform_message_delivered_twice_is_stored_once() {
    let pg = cluster_or_skip!();
    let s = store(&pg, "idempotent", "a").await;
    let body = json!({"text": "hi"});
    let first = s.enqueue("telegram", "update-7", "telegram:42", None, &body).await.unwrap();
    assert!(matches!(first, Enqueued::New(_)));
    let again = s.enqueue("telegram", "update-7", "telegram:42", None, &body).await.unwrap();
    assert_eq!(again, Enqueued::Duplicate);
    // The same id on another channel is another message.
    let other = s.enqueue("discord", "update-7", "discord:42", None, &body).await.unwrap();
    assert!(matches!(other, Enqueued::New(_)));
    assert_eq!(s.unfinished().await.unwrap(), 2);
    // Handled once, it stays handled when the platform sends it again.
    let claim = s.claim(LONG).await.unwrap().unwrap();
    assert!(s.complete(&claim, None).await.unwrap());
    let again = s.enqueue("telegram", "update-7", "telegram:42", None, &body).await.unwrap();
    assert_eq!(again, Enqueued::Duplicate);
    assert_eq!(s.unfinished().await.unwrap(), 1);
}

/// Two processes (holders), four workers each, racing for 30 chats x 8
/// messages: every message is answered exactly once, each chat's answers
/// in order, and never two workers on one chat at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_processes_racing_answer_every_message_once_and_each_chat_in_order() {
    let pg = cluster_or_skip!();
    let a = store(&pg, "race", "process-a").await;
    let b = a.with_holder("process-b");
    const CHATS: usize = 30;
    const PER_CHAT: usize = 8;
    for n in 0..PER_CHAT {
        for chat in 0..CHATS {
            let body = json!({"chat": chat, "n": n});
            let id = format!("{chat}-{n}");
            a.enqueue("web", &id, &format!("web:{chat}"), None, &body).await.unwrap();
        }
    }
    let busy: Arc<Mutex<HashSet<String>>> = Arc::default();
    let handled: Arc<Mutex<BTreeMap<usize, Vec<usize>>>> = Arc::default();
    let mut workers = Vec::new();
    for worker in 0..8 {
        let s = if worker % 2 == 0 { a.clone() } else { b.clone() };
        let (busy, handled) = (busy.clone(), handled.clone());
        workers.push(tokio::spawn(async move {
            let mut idle_rounds = 0;
            while idle_rounds < 20 {
                let Some(claim) = s.claim(LONG).await.unwrap() else {
                    idle_rounds += 1;
                    tokio::task::yield_now().await;
                    continue;
                };
                idle_rounds = 0;
                assert!(busy.lock().unwrap().insert(claim.chat.clone()), "two workers on one chat");
                let chat = claim.body["chat"].as_u64().unwrap() as usize;
                let n = claim.body["n"].as_u64().unwrap() as usize;
                tokio::task::yield_now().await;
                let answer = Outbound {
                    key: format!("reply:{}", claim.id),
                    channel: claim.channel.clone(),
                    chat: claim.chat.clone(),
                    origin: None,
                    body: json!({"chat": chat, "n": n}),
                };
                handled.lock().unwrap().entry(chat).or_default().push(n);
                busy.lock().unwrap().remove(&claim.chat);
                assert!(s.complete(&claim, Some(&answer)).await.unwrap());
            }
        }));
    }
    for w in workers {
        w.await.unwrap();
    }
    assert_eq!(a.unfinished().await.unwrap(), 0);
    let handled = handled.lock().unwrap().clone();
    assert_eq!(handled.len(), CHATS);
    for (chat, order) in &handled {
        assert_eq!(order, &(0..PER_CHAT).collect::<Vec<_>>(), "chat {chat} out of order or twice");
    }
    // Both processes take deliveries at once: each answer goes out once.
    let (ta, tb) = tokio::join!(drain(&a), drain(&b));
    let mut keys: Vec<String> = ta.iter().chain(&tb).map(|o| o.key.clone()).collect();
    let total = keys.len();
    keys.sort();
    keys.dedup();
    assert_eq!((total, keys.len()), (CHATS * PER_CHAT, CHATS * PER_CHAT));
    assert!(a.take_outbound(100).await.unwrap().is_empty(), "nothing is delivered twice");
}

async fn drain(s: &PgStore) -> Vec<Outbound> {
    let mut all = Vec::new();
    loop {
        let batch = s.take_outbound(7).await.unwrap();
        if batch.is_empty() {
            return all;
        }
        all.extend(batch);
    }
}

#[tokio::test]
async fn a_chat_whose_worker_stopped_renewing_is_taken_over_and_answered_once() {
    let pg = cluster_or_skip!();
    let a = store(&pg, "takeover_chat", "process-a").await;
    let b = a.with_holder("process-b");
    a.enqueue("web", "m1", "web:7", None, &json!({"n": 1})).await.unwrap();
    let short = Duration::from_millis(300);
    let stalled = a.claim(short).await.unwrap().unwrap();
    assert_eq!(stalled.attempts, 0);
    assert_eq!(b.claim(LONG).await.unwrap(), None, "the chat is held");
    let taken = wait_for(|| async { b.claim(LONG).await.unwrap() }).await;
    assert_eq!((taken.id, taken.attempts), (stalled.id, 1), "the same message, again");
    let answer = |by: &str| Outbound {
        key: format!("reply:{}", stalled.id),
        channel: "web".into(),
        chat: "web:7".into(),
        origin: None,
        body: json!({"by": by}),
    };
    assert!(!a.renew(&stalled, LONG).await.unwrap(), "the stalled worker lost its lease");
    assert!(!a.complete(&stalled, Some(&answer("a"))).await.unwrap(), "and stores nothing");
    assert!(b.complete(&taken, Some(&answer("b"))).await.unwrap());
    let sent = drain(&a).await;
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].body["by"], "b");
}

#[tokio::test]
async fn a_channel_lease_is_held_by_one_process_and_taken_over_when_not_renewed() {
    let pg = cluster_or_skip!();
    let a = store(&pg, "takeover_channel", "process-a").await;
    let b = a.with_holder("process-b");
    assert!(a.hold_channel("telegram", LONG).await.unwrap());
    assert!(!b.hold_channel("telegram", LONG).await.unwrap(), "one holder at a time");
    assert!(a.hold_channel("telegram", LONG).await.unwrap(), "the holder renews");
    assert!(b.hold_channel("discord", LONG).await.unwrap(), "other channels are free");
    // A renews with a short lease, then "dies": B takes over once it runs out.
    assert!(a.hold_channel("telegram", Duration::from_millis(300)).await.unwrap());
    wait_for(|| async { b.hold_channel("telegram", LONG).await.unwrap().then_some(()) }).await;
    assert_eq!(a.channel_holder("telegram").await.unwrap().as_deref(), Some("process-b"));
    assert!(!a.hold_channel("telegram", LONG).await.unwrap(), "the old holder stays out");
    // A stopping holder lets go at once.
    b.release_channel("telegram").await.unwrap();
    assert!(a.hold_channel("telegram", LONG).await.unwrap());
}

#[tokio::test]
async fn a_cron_slot_runs_once_however_many_gateways_race_for_it() {
    let pg = cluster_or_skip!();
    let a = store(&pg, "cron_slots", "process-a").await;
    let stores: Vec<PgStore> = (0..5).map(|i| a.with_holder(format!("p{i}"))).collect();
    let claims = futures_util::future::join_all(
        stores.iter().map(|s| s.claim_cron_slot("daily-report", 1_700_000_000_000)),
    )
    .await;
    let won: Vec<_> = stores
        .iter()
        .zip(claims)
        .filter_map(|(s, claim)| claim.unwrap().map(|claim| (s, claim)))
        .collect();
    assert_eq!(won.len(), 1, "one process runs the slot");
    let (winner, claim) = &won[0];
    winner.finish_cron_run(claim, "ok").await.unwrap();
    assert!(a.claim_cron_slot("daily-report", 1_700_000_060_000).await.unwrap().is_some());
    let runs = a.cron_runs("daily-report").await.unwrap();
    assert_eq!(runs.len(), 2);
    assert_eq!(runs[1].2.as_deref(), Some("ok"));
    a.save_cron_job("daily-report", &json!({"schedule": "0 9 * * *"})).await.unwrap();
    assert_eq!(a.cron_jobs().await.unwrap().len(), 1);
    assert!(a.remove_cron_job("daily-report").await.unwrap());
}

/// Waits out the grace after the server started in which every lease holds
/// (`ferroclaw_lease_held`): a test of a takeover may run in it.
async fn after_restart_grace(url: &str) {
    let (client, connection) = tokio_postgres_connect(url).await;
    let left: f64 = client
        .query_one(
            "SELECT greatest(0, extract(epoch FROM pg_postmaster_start_time()
                 + make_interval(secs => 10) - now()))::float8",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    drop(client);
    connection.abort();
    tokio::time::sleep(Duration::from_secs_f64(left + 0.05)).await;
}

#[tokio::test]
async fn a_cron_run_whose_process_stops_renewing_is_taken_over_once_and_a_renewed_one_never() {
    let pg = cluster_or_skip!();
    let a = store(&pg, "cron_leases", "a").await;
    after_restart_grace(&format!("postgres://postgres@127.0.0.1:{}/cron_leases", pg.port())).await;
    let (b, c) = (a.with_holder("b"), a.with_holder("c"));
    let run = a.claim_cron_run("news", 1, LONG).await.unwrap().unwrap();
    // While it runs (renewed), the job's next slot waits and nobody takes the run.
    assert!(a.renew_cron_run(&run, LONG).await.unwrap());
    assert_eq!(b.claim_cron_run("news", 2, LONG).await.unwrap(), None);
    let looked = b.take_over_cron_runs(LONG).await.unwrap();
    assert!(looked.runs.is_empty());
    assert!(looked.next_expiry.is_some_and(|d| d > Duration::ZERO && d <= LONG), "{looked:?}");
    // A dies: its lease runs out (here: is made to end now) ...
    assert!(a.renew_cron_run(&run, Duration::ZERO).await.unwrap());
    // ... and one of two processes looking at once takes the run over.
    let (by_b, by_c) = tokio::join!(b.take_over_cron_runs(LONG), c.take_over_cron_runs(LONG));
    let (by_b, by_c) = (by_b.unwrap(), by_c.unwrap());
    assert_eq!(by_b.runs.len() + by_c.runs.len(), 1, "{by_b:?} {by_c:?}");
    let (winner, name) = if by_b.runs.is_empty() { (&c, "c") } else { (&b, "b") };
    assert_eq!([by_b.runs, by_c.runs].concat(), std::slice::from_ref(&run));
    // The dead process's late renewal and finish change nothing.
    assert!(!a.renew_cron_run(&run, LONG).await.unwrap());
    a.finish_cron_run(&run, "ok").await.unwrap();
    assert_eq!(a.cron_runs("news").await.unwrap(), [(1, name.to_string(), None)]);
    winner.finish_cron_run(&run, "ok").await.unwrap();
    assert_eq!(a.cron_runs("news").await.unwrap(), [(1, name.to_string(), Some("ok".into()))]);
    assert_eq!(b.take_over_cron_runs(LONG).await.unwrap(), TakenOver::default());
    // A run that kills its process every time is given up after a few tries.
    let run = b.claim_cron_run("news", 2, LONG).await.unwrap().unwrap();
    for attempt in 1..CRON_RUN_ATTEMPTS {
        assert!(b.renew_cron_run(&run, Duration::ZERO).await.unwrap());
        let taken = b.take_over_cron_runs(Duration::ZERO).await.unwrap();
        assert_eq!(taken.runs, std::slice::from_ref(&run), "attempt {}", attempt + 1);
    }
    assert!(b.take_over_cron_runs(LONG).await.unwrap().runs.is_empty(), "given up");
    // Given up, it no longer keeps the job's next slots from running.
    assert!(c.claim_cron_run("news", 3, LONG).await.unwrap().is_some());
}

#[tokio::test]
async fn a_cron_run_of_a_gateway_that_died_is_taken_over_at_once_not_when_its_lease_runs_out() {
    let pg = cluster_or_skip!();
    let url = pg.database("cron_liveness");
    let connect = |holder: &str| {
        let options = PgOptions { holder: Some(holder.into()), ..Default::default() };
        PgStore::connect(&url, options)
    };
    let (a, b) = (connect("gw-a").await.unwrap(), connect("gw-b").await.unwrap());
    after_restart_grace(&url).await;
    let me = Registration {
        version: "0.1.0".into(),
        model: "test/prod".into(),
        model_digest: "prod".into(),
        adopt: false,
    };
    let (alive_a, _) = a.register(&me).await.unwrap();
    let (_alive_b, _) = b.register(&me).await.unwrap();
    let run = a.claim_cron_run("news", 1, LONG).await.unwrap().unwrap();
    // While gw-a lives, its run is its own, for all of its ten-minute lease.
    assert!(b.take_over_cron_runs(LONG).await.unwrap().runs.is_empty());
    assert_eq!(b.claim_cron_run("news", 2, LONG).await.unwrap(), None, "the job still runs");
    // gw-a dies (its liveness connection ends): the run is gw-b's at once,
    // its lease notwithstanding.
    drop(alive_a);
    let mut taken = Vec::new();
    for _ in 0..500 {
        taken = b.take_over_cron_runs(LONG).await.unwrap().runs;
        if !taken.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(taken, std::slice::from_ref(&run));
    assert!(!a.renew_cron_run(&run, LONG).await.unwrap(), "no longer gw-a's");
    b.finish_cron_run(&run, "ok").await.unwrap();
    assert_eq!(b.cron_runs("news").await.unwrap(), [(1, "gw-b".to_string(), Some("ok".into()))]);
}

#[tokio::test]
async fn turn_steps_replay_in_order_the_first_record_wins_and_finished_turns_stay_finished() {
    let pg = cluster_or_skip!();
    let s = store(&pg, "turn_steps", "a").await;
    let begin = json!({"kind": "begin", "origin": {"chat": "web:1"}});
    assert!(s.record_step("gw-web-1", "web-1-7", 1, &json!({"kind": "model"})).await.unwrap());
    assert!(s.record_step("gw-web-1", "web-1-7", 0, &begin).await.unwrap());
    assert!(!s.record_step("gw-web-1", "web-1-7", 0, &json!({"other": 1})).await.unwrap());
    let (steps, finished) = s.load_steps("gw-web-1", "web-1-7").await.unwrap();
    let bodies: Vec<_> = steps.iter().map(|t| (t.step, t.body.clone())).collect();
    assert_eq!(bodies, [(0, begin.clone()), (1, json!({"kind": "model"}))]);
    assert!(!finished);
    let unfinished = s.unfinished_turns().await.unwrap();
    assert_eq!(unfinished, [("gw-web-1".to_string(), "web-1-7".to_string(), begin)]);
    s.finish_turn("gw-web-1", "web-1-7").await.unwrap();
    assert!(s.load_steps("gw-web-1", "web-1-7").await.unwrap().1);
    assert!(s.unfinished_turns().await.unwrap().is_empty());
    assert!(s.load_steps("gw-web-1", "other").await.unwrap().0.is_empty());
}

#[tokio::test]
async fn pairing_approval_puts_the_sender_on_the_allow_list() {
    let pg = cluster_or_skip!();
    let s = store(&pg, "pairing", "a").await;
    s.request_pairing("telegram", "ABC123", "42").await.unwrap();
    assert!(!s.is_allowed("telegram", "42").await.unwrap());
    assert_eq!(s.approve_pairing("telegram", "ABC123").await.unwrap().as_deref(), Some("42"));
    assert!(s.is_allowed("telegram", "42").await.unwrap());
    assert_eq!(s.approve_pairing("telegram", "ABC123").await.unwrap(), None, "used once");
}

#[tokio::test]
async fn a_sender_keeps_one_code_which_any_process_approves_once_and_expired_codes_are_refused() {
    let pg = cluster_or_skip!();
    let a = store(&pg, "pairing_codes", "a").await;
    let b = a.with_holder("b");
    let hour = Duration::from_secs(3600);
    let ask = |sender: &'static str, code: &'static str| CodeRequest {
        channel: "telegram",
        sender,
        chat_id: sender,
        name: Some("Ann"),
        new_code: code,
        ttl: hour,
        max_pending: 2,
    };
    let first = a.request_code(ask("42", "AAAA2222")).await.unwrap();
    assert_eq!(first.code, "AAAA2222");
    let again = b.request_code(ask("42", "BBBB3333")).await.unwrap();
    assert_eq!(again.code, "AAAA2222", "the same sender keeps the code it was given");
    // The oldest codes make room beyond max_pending.
    b.request_code(ask("7", "CCCC4444")).await.unwrap();
    b.request_code(ask("8", "DDDD5555")).await.unwrap();
    let waiting: Vec<String> =
        a.pairing_requests("telegram", hour).await.unwrap().into_iter().map(|r| r.code).collect();
    assert_eq!(waiting, ["CCCC4444", "DDDD5555"]);
    let approved = b.approve_code("telegram", "CCCC4444", hour).await.unwrap().unwrap();
    assert_eq!((approved.sender.as_str(), approved.name.as_deref()), ("7", Some("Ann")));
    assert!(a.is_allowed("telegram", "7").await.unwrap(), "honoured by the other process");
    assert_eq!(a.approve_code("telegram", "CCCC4444", hour).await.unwrap(), None, "once");
    assert_eq!(a.allowed_senders("telegram").await.unwrap()[0].sender, "7");
    assert_eq!(a.pairing_channels().await.unwrap(), ["telegram"]);
    // A code older than its lifetime cannot be approved; a denied one is gone.
    assert_eq!(a.approve_code("telegram", "DDDD5555", Duration::ZERO).await.unwrap(), None);
    assert_eq!(a.deny_code("telegram", "DDDD5555").await.unwrap().unwrap().sender, "8");
    assert!(a.pairing_requests("telegram", hour).await.unwrap().is_empty());
    assert!(a.disallow("telegram", "7").await.unwrap());
    assert!(!b.is_allowed("telegram", "7").await.unwrap());
}

#[tokio::test]
async fn cron_job_edits_from_several_processes_never_lose_one_another() {
    let pg = cluster_or_skip!();
    let a = store(&pg, "cron_edits", "a").await;
    let edits = (0..8).map(|i| {
        let s = a.with_holder(format!("p{i}"));
        async move {
            s.edit_cron_jobs(|jobs| {
                jobs.push((format!("job{i}"), json!({"n": i})));
                Ok::<_, ()>(())
            })
            .await
        }
    });
    for done in futures_util::future::join_all(edits).await {
        done.unwrap().unwrap();
    }
    let jobs = a.cron_jobs().await.unwrap();
    assert_eq!(jobs.len(), 8, "{jobs:?}");
    // A change that fails writes nothing; a removal removes.
    let failed = a
        .edit_cron_jobs(|jobs| {
            jobs.clear();
            Err::<(), _>("no")
        })
        .await
        .unwrap();
    assert_eq!(failed, Err("no"));
    assert_eq!(a.cron_jobs().await.unwrap().len(), 8);
    a.edit_cron_jobs(|jobs| {
        jobs.retain(|(id, _)| id != "job3");
        jobs[0].1 = json!({"changed": true});
        Ok::<_, ()>(())
    })
    .await
    .unwrap()
    .unwrap();
    let jobs = a.cron_jobs().await.unwrap();
    assert_eq!(jobs.len(), 7);
    assert!(jobs.iter().all(|(id, _)| id != "job3"));
    assert!(jobs.iter().any(|(_, body)| body["changed"] == true));
    // A job still running in one process is not started again by another.
    let b = a.with_holder("b");
    let run = a.claim_cron_run("job1", 1, LONG).await.unwrap().unwrap();
    assert_eq!(b.claim_cron_run("job1", 2, LONG).await.unwrap(), None, "still running");
    a.finish_cron_run(&run, "ok").await.unwrap();
    assert!(b.claim_cron_run("job1", 2, LONG).await.unwrap().is_some());
    assert_eq!(b.claim_cron_run("job1", 2, LONG).await.unwrap(), None, "once a slot");
}

#[tokio::test]
async fn an_approval_is_answered_once_by_its_owner_wherever_the_answer_arrives() {
    let pg = cluster_or_skip!();
    let a = store(&pg, "approvals", "a").await;
    let b = a.with_holder("b");
    let request = ApprovalRequest {
        id: "0123abcd".into(),
        channel: "web".into(),
        chat_id: "c1".into(),
        owner: "owner".into(),
        tool: "bash".into(),
        prompt: json!({"summary": "bash: ls"}),
    };
    a.open_approval(&request).await.unwrap();
    assert!(a.approvals_to_show("web", &[]).await.unwrap().is_empty(), "not its own");
    assert_eq!(b.approvals_to_show("web", &[]).await.unwrap(), [request]);
    assert!(b.approvals_to_show("web", &["0123abcd".into()]).await.unwrap().is_empty());
    assert!(!a.approval_shown("0123abcd").await.unwrap());
    b.mark_approval_shown("0123abcd").await.unwrap();
    assert!(a.approval_shown("0123abcd").await.unwrap());
    let answer = |s: &PgStore, chat: &'static str, sender: &'static str| {
        let s = s.clone();
        async move {
            s.answer_approval("0123abcd", "web", chat, |owner| owner == sender, "once", "")
                .await
                .unwrap()
        }
    };
    assert_eq!(answer(&b, "c2", "owner").await, Answered::Unknown, "another chat's");
    assert_eq!(answer(&b, "c1", "mallory").await, Answered::NotAllowed);
    assert_eq!(a.approval_answer("0123abcd").await.unwrap(), None);
    assert_eq!(answer(&b, "c1", "owner").await, Answered::Done { tool: "bash".into() });
    assert_eq!(answer(&b, "c1", "owner").await, Answered::Unknown, "answered once");
    assert_eq!(a.approval_answer("0123abcd").await.unwrap(), Some(("once".into(), String::new())));
    a.resolve_approval("0123abcd", "approved once").await.unwrap();
    let ids = ["0123abcd".to_string()];
    assert_eq!(
        b.approval_outcomes(&ids).await.unwrap(),
        [("0123abcd".to_string(), "approved once".to_string())]
    );
}

#[tokio::test]
async fn housekeeping_prunes_only_what_finished_and_one_process_at_a_time() {
    let pg = cluster_or_skip!();
    let s = store(&pg, "prune", "a").await;
    for n in 0..5 {
        let body = json!({"metadata": {"turn": format!("t{n}")}});
        s.enqueue("web", &format!("m{n}"), &format!("web:{n}"), None, &body).await.unwrap();
    }
    // Three finished with an answer each, delivered; two still waiting.
    for _ in 0..3 {
        let claim = s.claim(LONG).await.unwrap().unwrap();
        let answer = Outbound {
            key: format!("reply:{}", claim.id),
            channel: "web".into(),
            chat: claim.chat.clone(),
            origin: None,
            body: json!({}),
        };
        assert!(s.complete(&claim, Some(&answer)).await.unwrap());
    }
    assert_eq!(s.take_outbound(10).await.unwrap().len(), 3);
    s.claim_cron_slot("daily", 1).await.unwrap();
    s.record_step("sess", "done", 0, &json!({})).await.unwrap();
    s.record_step("sess", "done", 1, &json!({})).await.unwrap();
    s.finish_turn("sess", "done").await.unwrap();
    // Message m4 (turn t4) waits: its turn is in flight.
    s.record_step("sess", "t4", 0, &json!({})).await.unwrap();
    for n in 0..3 {
        let request = ApprovalRequest {
            id: format!("req{n}"),
            channel: "web".into(),
            chat_id: "c".into(),
            owner: "o".into(),
            tool: "bash".into(),
            prompt: json!({}),
        };
        s.open_approval(&request).await.unwrap();
    }
    s.request_pairing("telegram", "ABCD1234", "42").await.unwrap();
    // Kept a week: nothing is old enough.
    let week = Duration::from_secs(7 * 86_400);
    assert_eq!(s.prune(week, 2).await.unwrap(), Some(Pruned::default()));
    // Kept no time: what finished goes, in batches of 2; the rest stays.
    tokio::time::sleep(Duration::from_millis(20)).await;
    let pruned = s.prune(Duration::ZERO, 2).await.unwrap().unwrap();
    assert_eq!((pruned.inbound, pruned.outbound, pruned.cron_runs, pruned.turns), (3, 3, 1, 1));
    assert_eq!((pruned.approvals, pruned.pairing_requests), (3, 1));
    assert_eq!(s.unfinished().await.unwrap(), 2);
    assert_eq!(s.prune(Duration::ZERO, 2).await.unwrap(), Some(Pruned::default()), "all gone");
    assert!(s.load_steps("sess", "done").await.unwrap().0.is_empty());
    assert_eq!(s.unfinished_turns().await.unwrap().len(), 1, "a turn in flight stays");
    assert_eq!(s.load_steps("sess", "t4").await.unwrap().0.len(), 1);
    // While another process prunes, a second one skips the round.
    let url = format!("postgres://postgres@127.0.0.1:{}/prune", pg.port());
    let (client, connection) = tokio_postgres_connect(&url).await;
    client.batch_execute("BEGIN; SELECT pg_advisory_xact_lock(1717790827)").await.unwrap();
    assert_eq!(s.prune(Duration::ZERO, 2).await.unwrap(), None);
    drop(client);
    connection.abort();
}

/// An answer nobody can deliver (its web chat's gateway is gone, so no
/// other process may take it) does not wait in the table for ever: after
/// the time kept it is dropped, and the chats that lost answers are named.
#[tokio::test]
async fn answers_never_delivered_are_dropped_after_the_time_kept_naming_their_chats() {
    let pg = cluster_or_skip!();
    let s = store(&pg, "prune_undelivered", "a").await;
    let answer = |key: &str, chat: &str, origin: Option<&str>| Outbound {
        key: key.into(),
        channel: chat.split(':').next().unwrap_or_default().into(),
        chat: chat.into(),
        origin: origin.map(str::to_string),
        body: json!({"content": key}),
    };
    // Two answers to a page on a gateway that died, one delivered answer.
    assert!(s.send_later(&answer("r1", "web:page-1", Some("gw-gone"))).await.unwrap());
    assert!(s.send_later(&answer("r2", "web:page-1", Some("gw-gone"))).await.unwrap());
    assert!(s.send_later(&answer("r3", "telegram:42", None)).await.unwrap());
    assert_eq!(drain(&s).await.len(), 1, "process a may send only the Telegram answer");
    tokio::time::sleep(Duration::from_millis(20)).await;
    let week = Duration::from_secs(7 * 86_400);
    assert_eq!(s.prune(week, 100).await.unwrap(), Some(Pruned::default()), "too young");
    // One more answer waits, stored after the cut: it stays.
    let pruned = s.prune(Duration::ZERO, 1).await.unwrap().unwrap();
    assert_eq!(pruned.undelivered, BTreeMap::from([("web:page-1".to_string(), 2)]));
    assert_eq!(pruned.outbound, 1, "the delivered one, as before");
    assert!(s.send_later(&answer("r4", "web:page-2", Some("gw-gone"))).await.unwrap());
    assert_eq!(s.prune(week, 100).await.unwrap(), Some(Pruned::default()));
    // Nothing of page-1 is left for anyone, even a process named like the dead one.
    let gone = s.with_holder("gw-gone");
    let left: Vec<String> =
        gone.take_outbound(10).await.unwrap().into_iter().map(|a| a.key).collect();
    assert_eq!(left, ["r4"]);
}

/// What a gateway writes (the journal marks no turn finished; the queue's
/// finish says the message was answered): a turn's steps stay while its
/// message waits, so a worker taking it over replays them, and go once the
/// message is answered, so a long-running gateway's database does not grow
/// with every turn it ever ran.
#[tokio::test]
async fn a_turns_journal_steps_are_pruned_once_its_message_is_answered_and_kept_while_it_waits() {
    let pg = cluster_or_skip!();
    let s = store(&pg, "prune_turn_steps", "a").await;
    let message = |turn: &str| json!({"id": "1", "metadata": {"turn": turn}});
    s.enqueue("telegram", "u1", "telegram:1", None, &message("telegram-1-u1")).await.unwrap();
    s.enqueue("telegram", "u2", "telegram:2", None, &message("telegram-2-u2")).await.unwrap();
    let mut claims = s.claim_many(LONG, 2).await.unwrap();
    assert_eq!(claims.len(), 2);
    let steps = [
        TurnStep { step: 0, body: json!({"kind": "begin"}) },
        TurnStep { step: 1, body: json!({"kind": "model"}) },
        TurnStep { step: 2, body: json!({"kind": "tool"}) },
    ];
    assert_eq!(s.record_steps("gw-telegram-1", "telegram-1-u1", &steps).await.unwrap(), 3);
    assert_eq!(s.record_steps("gw-telegram-2", "telegram-2-u2", &steps).await.unwrap(), 3);
    tokio::time::sleep(Duration::from_millis(20)).await;
    // Both turns in flight: nothing goes, however short the time kept.
    assert_eq!(s.prune(Duration::ZERO, 100).await.unwrap().unwrap().turns, 0);
    // The first message is answered (no journal mark), the second one's
    // worker died: its message waits for another.
    let second = claims.pop().unwrap();
    let first = claims.pop().unwrap();
    assert!(s.complete(&first, None).await.unwrap());
    assert!(s.release(&second).await.unwrap());
    // Kept a week: the answered turn is too young to go.
    let week = Duration::from_secs(7 * 86_400);
    assert_eq!(s.prune(week, 100).await.unwrap().unwrap().turns, 0);
    assert_eq!(s.load_steps("gw-telegram-1", "telegram-1-u1").await.unwrap().0.len(), 3);
    let pruned = s.prune(Duration::ZERO, 100).await.unwrap().unwrap();
    assert_eq!(pruned.turns, 1);
    assert!(s.load_steps("gw-telegram-1", "telegram-1-u1").await.unwrap().0.is_empty());
    let kept = s.load_steps("gw-telegram-2", "telegram-2-u2").await.unwrap().0;
    assert_eq!(kept, steps, "the waiting message's turn replays whole");
    // Its new worker finishes it; then its steps go too.
    let retaken = s.claim(LONG).await.unwrap().unwrap();
    assert!(s.complete(&retaken, None).await.unwrap());
    assert_eq!(s.prune(Duration::ZERO, 100).await.unwrap().unwrap().turns, 1);
    assert!(s.load_steps("gw-telegram-2", "telegram-2-u2").await.unwrap().0.is_empty());
}

#[tokio::test]
async fn media_older_than_its_keep_time_is_pruned_and_a_file_sent_again_starts_afresh() {
    let pg = cluster_or_skip!();
    let s = store(&pg, "media_prune", "a").await;
    let file = |name: &str| StoredMedia {
        media_type: "image/png".into(),
        name: name.into(),
        bytes: b"\x89PNG".to_vec(),
    };
    for id in ["charts/q1.png", "charts/q2.png", "charts/q3.png"] {
        s.put_media(id, &file(id)).await.unwrap();
    }
    // q1 and q2 were sent forty days ago; q2 is sent again today.
    let url = format!("postgres://postgres@127.0.0.1:{}/media_prune", pg.port());
    let (client, connection) = tokio_postgres_connect(&url).await;
    client
        .execute(
            "UPDATE media SET created_at = now() - interval '40 days' WHERE id <> 'charts/q3.png'",
            &[],
        )
        .await
        .unwrap();
    drop(client);
    connection.abort();
    s.put_media("charts/q2.png", &file("q2.png")).await.unwrap();
    let month = Duration::from_secs(30 * 86_400);
    assert_eq!(s.prune_media(month, 1).await.unwrap(), 1);
    assert_eq!(s.media_ids().await.unwrap(), ["charts/q2.png", "charts/q3.png"]);
    assert_eq!(s.media("charts/q1.png").await.unwrap(), None);
    assert_eq!(s.media("charts/q2.png").await.unwrap().unwrap().name, "q2.png");
    assert_eq!(s.prune_media(month, 1).await.unwrap(), 0, "the rest is younger");
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert_eq!(s.prune_media(Duration::ZERO, 1).await.unwrap(), 2, "in rounds of one");
    assert!(s.media_ids().await.unwrap().is_empty());
}

#[tokio::test]
async fn a_session_is_stored_line_by_line_with_its_answer_and_a_stale_or_unleased_writer_stores_nothing()
 {
    let pg = cluster_or_skip!();
    let a = store(&pg, "sessions", "process-a").await;
    let b = a.with_holder("process-b");
    let lines = |l: &[&str]| l.iter().map(ToString::to_string).collect::<Vec<_>>();
    let first = SessionWrite {
        session: "gw-web-7".into(),
        seen: None,
        keep: SessionHead::default(),
        lines: lines(&[r#"{"type":"meta"}"#, "one", "two"]),
    };
    assert!(a.write_session(&first).await.unwrap());
    let head = a.session_head("gw-web-7").await.unwrap().unwrap();
    assert_eq!(head, SessionHead { lines: 3, bytes: 16 + 4 + 4 });
    // A copy that ends after the metadata line fetches only what follows.
    assert_eq!(
        a.session_line_ending_at("gw-web-7", 16).await.unwrap().as_deref(),
        Some(r#"{"type":"meta"}"#)
    );
    assert_eq!(a.session_lines_after("gw-web-7", 16).await.unwrap(), ["one", "two"]);
    assert!(!a.write_session(&first).await.unwrap(), "a writer that did not see the stored lines");
    assert_eq!(a.session_head("gw-web-7").await.unwrap(), Some(head), "changed nothing");

    // A turn's lines go with its answer, and `/new`'s session with them.
    a.enqueue("web", "m1", "web:7", None, &json!({"n": 1})).await.unwrap();
    let claim = a.claim(LONG).await.unwrap().unwrap();
    let answer = Outbound {
        key: format!("reply:{}", claim.id),
        channel: "web".into(),
        chat: "web:7".into(),
        origin: None,
        body: json!({"text": "hi"}),
    };
    let turn = SessionWrite { seen: Some(head), keep: head, lines: lines(&["three"]), ..first };
    // Another process, not holding the chat: nothing of it is stored.
    assert!(!b.complete_with_session(&claim, Some(&answer), Some(&turn), None).await.unwrap());
    assert_eq!(a.session_head("gw-web-7").await.unwrap(), Some(head));
    let current = Some(("web:7", "gw-web-7-2"));
    assert!(a.complete_with_session(&claim, Some(&answer), Some(&turn), current).await.unwrap());
    assert_eq!(a.session_lines_after("gw-web-7", 0).await.unwrap().len(), 4);
    assert_eq!(a.chat_session("web:7").await.unwrap().as_deref(), Some("gw-web-7-2"));
    // A turn's start reads the chat's session and its head together: the
    // recorded session wins over the one the asking process would use.
    let stored = a.session_head("gw-web-7").await.unwrap();
    assert_eq!(
        a.chat_session_head("web:7", "gw-web-7").await.unwrap(),
        (Some("gw-web-7-2".into()), None),
        "the chat is on the session /new started, which has no lines yet"
    );
    assert_eq!(a.chat_session_head("web:8", "gw-web-7").await.unwrap(), (None, stored));
    assert_eq!(a.chat_session_head("web:9", "gw-web-9").await.unwrap(), (None, None));
    assert_eq!(drain(&a).await.len(), 1);
    assert_eq!(a.unfinished().await.unwrap(), 0);
    // Keeping fewer lines than stored cuts the rest (a copy written whole anew).
    let head = a.session_head("gw-web-7").await.unwrap().unwrap();
    let keep = SessionHead { lines: 1, bytes: 16 };
    let cut = SessionWrite { seen: Some(head), keep, lines: lines(&["again"]), ..turn };
    assert!(a.write_session(&cut).await.unwrap());
    assert_eq!(
        a.session_lines_after("gw-web-7", 0).await.unwrap(),
        [r#"{"type":"meta"}"#, "again"]
    );
    assert_eq!(a.session_ids().await.unwrap(), ["gw-web-7"]);
}

/// A claim brings where its chat's turn starts (the recorded session, how
/// far the database has it and its last line) as the chat's previous turn
/// stored it, whichever process ran that turn: the turn starts without a
/// round trip of its own.
#[tokio::test]
async fn a_claim_brings_its_chats_session_as_the_previous_turn_stored_it() {
    let pg = cluster_or_skip!();
    let a = store(&pg, "claim_start", "process-a").await;
    let b = a.with_holder("process-b");
    for n in 1..=3 {
        a.enqueue("web", &format!("m{n}"), "web:1", None, &json!({"n": n})).await.unwrap();
    }
    let first = a.claim(LONG).await.unwrap().unwrap();
    assert_eq!(first.start, None, "no session recorded yet: the worker asks");
    let turn = SessionWrite {
        session: "gw-web-1".into(),
        seen: None,
        keep: SessionHead::default(),
        lines: vec![r#"{"type":"meta"}"#.into(), "hello".into()],
    };
    let current = Some(("web:1", "gw-web-1"));
    assert!(a.complete_with_session(&first, None, Some(&turn), current).await.unwrap());

    let second = b.claim(LONG).await.unwrap().unwrap();
    let stored = SessionStart {
        session: "gw-web-1".into(),
        head: Some(SessionHead { lines: 2, bytes: 16 + 6 }),
        last_line: Some("hello".into()),
    };
    assert_eq!(second.start.as_ref(), Some(&stored), "the first turn's lines, as stored");
    // `/new` moves the chat to a session with no lines yet.
    assert!(
        b.complete_with_session(&second, None, None, Some(("web:1", "gw-web-1-2"))).await.unwrap()
    );
    // Claimed together with another chat's message: each brings its own.
    a.enqueue("web", "other", "web:2", None, &json!({})).await.unwrap();
    a.set_chat_session("web:2", "gw-web-1").await.unwrap();
    let both = a.claim_many(LONG, 8).await.unwrap();
    let starts: Vec<_> = both.iter().map(|c| (c.chat.as_str(), c.start.clone())).collect();
    let new = SessionStart { session: "gw-web-1-2".into(), head: None, last_line: None };
    assert_eq!(starts, [("web:1", Some(new)), ("web:2", Some(stored))]);
}

/// An answer to a connection the worker's own process holds is sent by that
/// worker once its finish commits, with no take of its own; it still waits
/// behind an earlier answer of its chat that the delivery loop has to send,
/// and every answer is marked delivered once, by its sender.
#[tokio::test]
async fn an_answer_its_worker_sends_itself_is_taken_by_no_loop_and_never_overtakes_an_earlier_one()
{
    let pg = cluster_or_skip!();
    let url = pg.database("sent_here");
    let options = PgOptions { holder: Some("process-a".into()), ..Default::default() };
    let a = PgStore::connect(&url, options).await.unwrap();
    let b = a.with_holder("process-b");
    let answer = |claim: &Claim| Outbound {
        key: format!("reply:{}", claim.id),
        channel: "web".into(),
        chat: claim.chat.clone(),
        origin: Some("process-a".into()),
        body: json!({"answers": claim.id}),
    };
    let (client, connection) = tokio_postgres_connect(&url).await;
    let delivered = || async {
        let rows =
            client.query("SELECT key, delivered_by FROM outbound ORDER BY key", &[]).await.unwrap();
        rows.iter().map(|r| (r.get(0), r.get(1))).collect::<Vec<(String, Option<String>)>>()
    };

    // Received and run by a: a's worker sends it, and a's loop never takes it.
    a.enqueue("web", "m1", "web:1", Some("process-a"), &json!({})).await.unwrap();
    let first = a.claim(LONG).await.unwrap().unwrap();
    a.send_myself(&answer(&first).key);
    assert!(a.complete_with_session(&first, Some(&answer(&first)), None, None).await.unwrap());
    assert_eq!(a.sent_by_worker(&answer(&first).key), SendIt::Now);
    assert_eq!(a.sent_by_worker(&answer(&first).key), SendIt::ByTheLoop, "said once");
    assert!(a.take_outbound(64).await.unwrap().is_empty(), "sent by its worker");
    assert_eq!(delivered().await, [(answer(&first).key, Some("process-a".into()))]);

    // Received by a, run by b: stored for a's loop to send.
    a.enqueue("web", "m2", "web:1", Some("process-a"), &json!({})).await.unwrap();
    let second = b.claim(LONG).await.unwrap().unwrap();
    assert!(b.complete_with_session(&second, Some(&answer(&second)), None, None).await.unwrap());
    // Run by a again while the second answer still waits: a's worker must
    // not send the third before it.
    a.enqueue("web", "m3", "web:1", Some("process-a"), &json!({})).await.unwrap();
    let third = a.claim(LONG).await.unwrap().unwrap();
    a.send_myself(&answer(&third).key);
    assert!(a.complete_with_session(&third, Some(&answer(&third)), None, None).await.unwrap());
    assert_eq!(a.sent_by_worker(&answer(&third).key), SendIt::ByTheLoop);
    let sent: Vec<String> = a.take_outbound(64).await.unwrap().into_iter().map(|o| o.key).collect();
    assert_eq!(sent, [answer(&second).key, answer(&third).key], "in order, each once");

    // A fourth sent by its worker is marked delivered by the next finish.
    a.enqueue("web", "m4", "web:1", Some("process-a"), &json!({})).await.unwrap();
    let fourth = a.claim(LONG).await.unwrap().unwrap();
    a.send_myself(&answer(&fourth).key);
    assert!(a.complete_with_session(&fourth, Some(&answer(&fourth)), None, None).await.unwrap());
    assert_eq!(a.sent_by_worker(&answer(&fourth).key), SendIt::Now);
    a.enqueue("web", "m5", "web:2", None, &json!({})).await.unwrap();
    let other = a.claim(LONG).await.unwrap().unwrap();
    assert!(a.complete_with_session(&other, None, None, None).await.unwrap());
    let undelivered = client
        .query_one("SELECT count(*) FROM outbound WHERE delivered_at IS NULL", &[])
        .await
        .unwrap()
        .get::<_, i64>(0);
    assert_eq!(undelivered, 0);
    assert_eq!(delivered().await.len(), 4);
    assert!(delivered().await.iter().all(|(_, by)| by.as_deref() == Some("process-a")));
    drop(client);
    connection.abort();
}

#[tokio::test]
async fn a_notification_wakes_a_waiting_worker() {
    let pg = cluster_or_skip!();
    let s = store(&pg, "wakeups", "a").await;
    let wakeups = s.listen();
    let waiting = tokio::spawn(async move {
        wakeups.inbound().await;
        wakeups
    });
    // Stored until a message wakes the waiter (the listener may start after
    // the first message: send until it hears one).
    let mut n = 0;
    while !waiting.is_finished() {
        n += 1;
        s.enqueue("web", &format!("w{n}"), "web:1", None, &json!({})).await.unwrap();
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    waiting.await.unwrap();
}

fn incoming(platform_id: &str, chat: &str, n: u32) -> Incoming {
    Incoming {
        channel: "web".into(),
        platform_id: platform_id.into(),
        chat: chat.into(),
        origin: Some("a".into()),
        body: json!({"n": n}),
    }
}

#[tokio::test]
async fn a_batch_is_stored_in_order_once_and_claimed_one_message_per_chat() {
    let pg = cluster_or_skip!();
    let s = store(&pg, "batches", "a").await;
    let batch = [
        incoming("m1", "web:1", 1),
        incoming("m2", "web:1", 2),
        incoming("m3", "web:2", 3),
        incoming("m1", "web:1", 1),
    ];
    let stored = s.enqueue_many(&batch).await.unwrap();
    let ids: Vec<i64> = stored
        .iter()
        .filter_map(|e| match e {
            Enqueued::New(id) => Some(*id),
            Enqueued::Duplicate => None,
        })
        .collect();
    assert_eq!(ids.len(), 3, "{stored:?}");
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "in arrival order: {ids:?}");
    assert_eq!(stored[3], Enqueued::Duplicate, "the same message twice in one batch");
    assert_eq!(s.enqueue_many(&batch[..1]).await.unwrap(), [Enqueued::Duplicate]);
    // Ten asked for, two given: one per chat, each chat's oldest.
    let claims = s.claim_many(LONG, 10).await.unwrap();
    let got: Vec<_> = claims.iter().map(|c| (c.chat.as_str(), c.body["n"].clone())).collect();
    assert_eq!(got, [("web:1", json!(1)), ("web:2", json!(3))]);
    assert!(claims.iter().all(|c| c.attempts == 0));
    assert!(s.with_holder("b").claim_many(LONG, 10).await.unwrap().is_empty(), "both held");
    assert!(s.complete(&claims[0], None).await.unwrap());
    let next = s.with_holder("b").claim_many(LONG, 10).await.unwrap();
    assert_eq!(next.len(), 1);
    assert_eq!(next[0].body["n"], json!(2), "the chat's next message, after the first");
}

#[tokio::test]
async fn a_worker_with_nothing_to_claim_is_told_to_look_again_when_a_chat_lease_runs_out() {
    let pg = cluster_or_skip!();
    let s = store(&pg, "look_again", "a").await;
    assert_eq!(s.look_again(LONG).await.unwrap(), LookAgain::OnNotification, "nothing waits");
    s.enqueue("web", "m1", "web:1", None, &json!({})).await.unwrap();
    assert_eq!(s.look_again(LONG).await.unwrap(), LookAgain::Soon, "waiting, nobody holds it");
    let claim = s.claim(LONG).await.unwrap().unwrap();
    s.enqueue("web", "m2", "web:1", None, &json!({})).await.unwrap();
    // "b" cannot take the chat's next message before "a"'s lease runs out.
    let b = s.with_holder("b");
    assert!(b.claim(LONG).await.unwrap().is_none());
    match b.look_again(LONG).await.unwrap() {
        LookAgain::LeaseEnds(end) => assert!(end <= LONG && end > LONG / 2, "{end:?}"),
        other => panic!("expected the lease's end, got {other:?}"),
    }
    assert!(s.complete(&claim, None).await.unwrap());
    let next = b.claim(LONG).await.unwrap().unwrap();
    assert!(b.complete(&next, None).await.unwrap());
    assert_eq!(b.look_again(LONG).await.unwrap(), LookAgain::OnNotification);
}

#[tokio::test]
async fn the_store_works_again_by_itself_when_the_database_comes_back() {
    // Its own server: this test stops it.
    let Some(pg) = PgCluster::start() else { return };
    let s = store(&pg, "outage", "a").await;
    s.enqueue("web", "before", "web:1", None, &json!({})).await.unwrap();
    pg.stop();
    let e = s.enqueue("web", "during", "web:1", None, &json!({})).await.unwrap_err();
    assert!(!e.to_string().is_empty());
    assert!(s.claim_many(LONG, 4).await.is_err(), "nothing is claimed while it is away");
    pg.start_again();
    // The pool opens new connections: no restart of the process.
    s.enqueue("web", "after", "web:1", None, &json!({})).await.unwrap();
    let claim = s.claim(LONG).await.unwrap().unwrap();
    assert_eq!(claim.body, json!({}));
    assert!(s.complete(&claim, None).await.unwrap());
    assert_eq!(
        s.unfinished().await.unwrap(),
        1,
        "\"before\" done, \"after\" waiting, \"during\" never stored"
    );
}

/// Polls `f` until it gives something (leases run out on the database's clock).
async fn wait_for<T, F, Fut>(mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    for _ in 0..600 {
        if let Some(v) = f().await {
            return v;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("not within 30 s");
}

async fn tokio_postgres_connect(
    url: &str,
) -> (tokio_postgres::Client, tokio::task::JoinHandle<Result<(), tokio_postgres::Error>>) {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls).await.unwrap();
    (client, tokio::spawn(connection))
}

#[tokio::test]
async fn a_local_server_is_reached_over_its_unix_socket() {
    let pg = cluster_or_skip!();
    pg.database("over_socket");
    // Before: "error performing TLS handshake: invalid dns name", even with
    // sslmode=disable (tokio-postgres asks rustls for a connector named "").
    let url = pg.socket_url("over_socket");
    let store = PgStore::connect(&url, PgOptions::default()).await.unwrap();
    drop(store);
    let url = url.replace("&sslmode=disable", "");
    PgStore::connect(&url, PgOptions::default()).await.unwrap();
}

#[tokio::test]
async fn an_api_request_key_is_taken_once_and_keeps_its_answer_for_any_process() {
    let pg = cluster_or_skip!();
    let url = pg.database("api_requests");
    let connect = |holder: &str| {
        let options = PgOptions { holder: Some(holder.into()), ..Default::default() };
        PgStore::connect(&url, options)
    };
    let (a, b) = (connect("gw-a").await.unwrap(), connect("gw-b").await.unwrap());
    after_restart_grace(&url).await;
    let first = json!({"completion_id": "chatcmpl-1"});
    assert_eq!(a.begin_api_request("k", "f", &first).await.unwrap(), None, "the first takes it");
    let seen = b.begin_api_request("k", "f", &json!({})).await.unwrap().unwrap();
    assert_eq!((seen.body, seen.answer), (first.clone(), None), "running elsewhere");
    b.forget_api_request("other").await.unwrap();
    a.answer_api_request("k", &json!({"content": "done"})).await.unwrap();
    a.answer_api_request("k", &json!({"content": "again"})).await.unwrap();
    b.forget_api_request("k").await.unwrap();
    let seen = b.begin_api_request("k", "f", &json!({})).await.unwrap().unwrap();
    assert_eq!(seen.answer, Some(json!({"content": "done"})), "the first answer, kept");
    a.begin_api_request("failed", "f", &first).await.unwrap();
    a.forget_api_request("failed").await.unwrap();
    assert_eq!(b.begin_api_request("failed", "f", &first).await.unwrap(), None, "free again");
    assert_eq!(a.prune_api_requests(Duration::from_secs(3600)).await.unwrap(), 0);
    assert_eq!(a.prune_api_requests(Duration::ZERO).await.unwrap(), 2);
}
