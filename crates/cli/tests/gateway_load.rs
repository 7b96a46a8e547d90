//! Measurements, not checks (run with `--ignored --nocapture`): idle RSS of
//! the gateway with its channels on, RSS with 1,000 idle chat sessions, and
//! messages per second through the API with the scripted model answering at once.

use crate::common;
use crate::gateway_support;

use std::time::Instant;

use common::{Env, Wire};
use ferroclaw_testkit::{ServerOptions, Turn};
use gateway_support::fake_telegram::FakeTelegram;
use gateway_support::{Gateway, chat};

/// Chats opened for the memory measurement.
const SESSIONS: usize = 1000;
/// Clients sending at once.
const CLIENTS: usize = 4;

#[test]
#[ignore = "a measurement; run with --ignored --nocapture"]
fn measure_memory_and_throughput() {
    let fake = FakeTelegram::start();
    let options = ServerOptions { repeat: true, ..Default::default() };
    let env = Env::with_options(Wire::OpenAi, vec![Turn::text("ok").into()], options);
    let config = format!(
        "heartbeat_minutes = 0\nmax_concurrent_turns = 4\nrequests_per_minute = 0\n[channels.telegram]\nenabled = true\ntoken = \"TEST:TOKEN\"\napi_base = \"{}\"\npoll_timeout_secs = 1\n",
        fake.base
    );
    let gw = Gateway::start(&env, &config);
    std::thread::sleep(std::time::Duration::from_secs(2));
    let idle = gw.rss_kib();
    let port = gw.port;
    let started = Instant::now();
    let workers: Vec<_> = (0..CLIENTS)
        .map(|c| {
            std::thread::spawn(move || {
                for i in (c..SESSIONS).step_by(CLIENTS) {
                    let (status, answer) = chat(port, &format!("u{i}"), "hi");
                    assert_eq!((status, answer.as_str()), (200, "ok"));
                }
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    let elapsed = started.elapsed().as_secs_f64();
    std::thread::sleep(std::time::Duration::from_secs(1));
    let loaded = gw.rss_kib();
    println!("idle RSS (web + API + telegram): {} MiB", idle / 1024);
    println!("RSS with {SESSIONS} live sessions: {} MiB", loaded / 1024);
    println!(
        "{SESSIONS} messages, {SESSIONS} new sessions, {CLIENTS} clients: {:.0} msg/s",
        SESSIONS as f64 / elapsed
    );
    let started = Instant::now();
    let same: Vec<_> = (0..CLIENTS)
        .map(|c| {
            std::thread::spawn(move || {
                for _ in 0..50 {
                    assert_eq!(chat(port, &format!("u{c}"), "again").0, 200);
                }
            })
        })
        .collect();
    for w in same {
        w.join().unwrap();
    }
    println!(
        "{} messages to {CLIENTS} existing sessions: {:.0} msg/s",
        CLIENTS * 50,
        (CLIENTS * 50) as f64 / started.elapsed().as_secs_f64()
    );
}
