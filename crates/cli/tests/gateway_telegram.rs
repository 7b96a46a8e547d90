//! The Telegram channel against a local fake Bot API: pairing (an unknown
//! sender is refused and given a code; the owner approves it; then the
//! sender is answered), long answers split, and heartbeat delivery.

use crate::common;
use crate::gateway_support;

use common::{Env, Wire, run};
use ferroclaw_testkit::Turn;
use gateway_support::fake_telegram::FakeTelegram;
use gateway_support::{Gateway, wait_for};

fn telegram_config(fake: &FakeTelegram, extra: &str) -> String {
    format!(
        "{extra}\n[channels.telegram]\nenabled = true\ntoken = \"TEST:TOKEN\"\napi_base = \"{}\"\npoll_timeout_secs = 1\n",
        fake.base
    )
}

#[test]
fn an_unknown_sender_gets_a_pairing_code_and_is_answered_once_the_owner_approves() {
    let fake = FakeTelegram::start();
    let env = Env::new(Wire::OpenAi, vec![Turn::text("Hello **Ann**, nice to meet you.").into()]);
    let _gw = Gateway::start(&env, &telegram_config(&fake, "heartbeat_minutes = 0"));
    fake.user_says(42, "Ann", "hi, who are you?");
    wait_for(30, "the pairing code", || !fake.sent_to(42).is_empty());
    let refusal = fake.sent_to(42)[0].clone();
    assert!(refusal.contains("ferroclaw pairing approve telegram"), "{refusal}");
    assert!(env.server.requests().is_empty(), "an unapproved sender never reaches the model");
    let code = refusal
        .split_whitespace()
        .find(|w| w.len() == 8 && w.chars().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit()))
        .expect("a code")
        .to_string();
    let (rc, out, err) = run(env.cmd().args(["pairing", "approve", "telegram", &code]));
    assert_eq!(rc, 0, "{out}{err}");
    assert!(out.contains("approved sender 42"), "{out}");
    fake.user_says(42, "Ann", "hi again");
    wait_for(30, "the answer", || fake.sent_to(42).len() >= 2);
    assert_eq!(fake.sent_to(42)[1], "Hello <b>Ann</b>, nice to meet you.");
    assert_eq!(fake.sent().last().unwrap()["parse_mode"], "HTML");
    let (_, listed, _) = run(env.cmd().args(["pairing", "list"]));
    assert!(listed.contains("approved  sender 42"), "{listed}");
}

#[test]
fn an_allow_listed_sender_gets_a_long_answer_split_under_telegrams_limit() {
    let fake = FakeTelegram::start();
    let long =
        (0..300).map(|i| format!("Line {i} of a long answer.")).collect::<Vec<_>>().join("\n");
    let env = Env::new(Wire::OpenAi, vec![Turn::text(long.clone()).into()]);
    let config =
        format!("heartbeat_minutes = 0\n{}allow_from = [\"7\"]\n", telegram_config(&fake, ""));
    let _gw = Gateway::start(&env, &config);
    fake.user_says(7, "Bo", "tell me a lot");
    wait_for(30, "the answer", || fake.sent_to(7).len() >= 2);
    std::thread::sleep(std::time::Duration::from_millis(300));
    let pieces = fake.sent_to(7);
    assert!(pieces.iter().all(|p| p.chars().count() <= 4096));
    assert_eq!(pieces.join("\n"), long);
}

#[test]
fn the_heartbeat_reports_findings_and_keeps_quiet_on_heartbeat_ok() {
    let fake = FakeTelegram::start();
    let env = Env::new(
        Wire::OpenAi,
        vec![Turn::text("HEARTBEAT_OK").into(), Turn::text("Time to water the plants!").into()],
    );
    let workspace = env.home.path().join("workspace");
    std::fs::create_dir_all(&workspace).unwrap();
    std::fs::write(
        workspace.join("HEARTBEAT.md"),
        "# Tasks\n<!-- checked every beat -->\n- [ ] remind me to water the plants\n",
    )
    .unwrap();
    let config = telegram_config(&fake, "heartbeat_minutes = 0.02\nheartbeat_to = \"telegram:99\"");
    let _gw = Gateway::start(&env, &config);
    wait_for(20, "a delivered heartbeat", || !fake.sent_to(99).is_empty());
    assert_eq!(fake.sent_to(99), ["Time to water the plants!"], "HEARTBEAT_OK was not delivered");
    let first = env.request_body(0);
    assert!(first.to_string().contains("water the plants"), "the beat carried HEARTBEAT.md");
}

#[test]
fn a_heartbeat_file_of_headings_and_comments_runs_no_turn() {
    let env = Env::new(Wire::OpenAi, vec![]);
    let workspace = env.home.path().join("workspace");
    std::fs::create_dir_all(&workspace).unwrap();
    std::fs::write(workspace.join("HEARTBEAT.md"), "# Heartbeat\n<!-- add tasks -->\n- [ ]\n")
        .unwrap();
    let _gw = Gateway::start(&env, "heartbeat_minutes = 0.01\n");
    std::thread::sleep(std::time::Duration::from_secs(2));
    assert!(env.server.requests().is_empty());
}
