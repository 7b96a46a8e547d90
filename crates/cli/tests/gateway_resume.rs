//! A gateway killed with SIGKILL in the middle of a multi-step turn: the
//! next gateway finishes the turn from its journal. The model is not asked
//! again for the steps that had finished, a tool whose result was recorded
//! does not run again, and the person gets the answer exactly once, even
//! though the platform delivers their message a second time.

use crate::common;
use crate::gateway_support;

use common::{Env, Wire, tool_results};
use ferroclaw_testkit::Turn;
use gateway_support::fake_telegram::FakeTelegram;
use gateway_support::{Gateway, wait_for};
use serde_json::json;

#[test]
fn a_turn_cut_by_kill_9_is_finished_by_the_next_gateway_without_asking_the_model_again() {
    let fake = FakeTelegram::start();
    let env = Env::new(
        Wire::OpenAi,
        vec![
            Turn::tool("bash", json!({"command": "echo one >> side.txt"})).into(),
            // Holds the turn (this tool call) until the test says go.
            Turn::tool(
                "bash",
                json!({"command": "echo two >> side.txt; touch reached; while [ ! -e go ]; do sleep 0.05; done"}),
            )
            .into(),
            Turn::text("All done.").into(),
            Turn::text("pong").into(),
        ],
    );
    let config = format!(
        "heartbeat_minutes = 0\npermission_mode = \"bypass\"\n[channels.telegram]\nenabled = true\ntoken = \"TEST:TOKEN\"\napi_base = \"{}\"\npoll_timeout_secs = 1\nallow_from = [\"42\"]\n",
        fake.base
    );
    let workspace = env.home.path().join("workspace");
    let mut gw = Gateway::start(&env, &config);
    fake.user_says(42, "Ann", "write both lines");
    wait_for(60, "the second tool call to run", || workspace.join("reached").exists());
    gw.child.kill().unwrap();
    gw.child.wait().unwrap();
    drop(gw);
    assert_eq!(env.server.requests().len(), 2);
    assert!(fake.sent_to(42).is_empty(), "no answer before the kill");

    std::fs::write(workspace.join("go"), "").unwrap();
    // The fake Bot API hands the message out again too (its offset starts over).
    let gw = Gateway::start(&env, &config);
    wait_for(60, "the resumed answer", || !fake.sent_to(42).is_empty());
    // The chat is answered in order: once "ping" is answered, a second copy
    // of the first answer would have gone out before it.
    fake.user_says(42, "Ann", "ping");
    wait_for(60, "the next answer", || fake.sent_to(42).len() >= 2);
    assert_eq!(fake.sent_to(42), ["All done.", "pong"]);

    let requests = env.server.requests();
    assert_eq!(requests.len(), 4, "one request to finish the turn, one for ping");
    let results: Vec<String> = tool_results(&requests[2].body).into_iter().map(|r| r.0).collect();
    assert_eq!(results.len(), 2, "{results:?}");
    // The first call's result was recorded: it did not run again. The
    // second was cut before its result was recorded: it ran again.
    let side = std::fs::read_to_string(workspace.join("side.txt")).unwrap();
    let log = std::fs::read_to_string(&gw.stderr_path).unwrap_or_default();
    assert_eq!(side, "one\ntwo\ntwo\n", "{results:?}\n{log}");
}

/// The `.turns` folders under `dir`, however deep.
fn turn_folders(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            if path.extension().is_some_and(|e| e == "turns") {
                found.push(path);
            } else {
                found.extend(turn_folders(&path));
            }
        }
    }
    found
}

/// A long-running gateway's journal does not grow with every turn it ever
/// ran: housekeeping deletes a finished turn's journal file once it is
/// older than `store_keep_days`; a turn never finished stays, however old,
/// to be resumed.
#[test]
fn a_finished_turns_journal_is_pruned_after_store_keep_days_and_an_unfinished_one_stays() {
    let env = gateway_support::echo_env();
    let port = gateway_support::free_port();
    env.write_home_config(&format!(
        "[gateway]\nport = {port}\ntoken = \"{}\"\nheartbeat_minutes = 0\nstore_keep_days = 7\n",
        gateway_support::TOKEN
    ));
    // Housekeeping every 200 ms instead of every 10 minutes.
    let vars = [("FERROCLAW_TEST_HOUSEKEEPING_MS", "200")];
    let gw = Gateway::spawn_with(&env, env.home.path(), port, &vars);
    assert_eq!(gateway_support::chat(port, "ann", "hello"), (200, "echo: hello".to_string()));
    let folders = turn_folders(&env.home.path().join("sessions"));
    let [folder] = folders.as_slice() else { panic!("one session journalled: {folders:?}") };
    let finished: Vec<_> = std::fs::read_dir(folder).unwrap().flatten().map(|e| e.path()).collect();
    assert_eq!(finished.len(), 1, "{finished:?}");
    // A turn that began eight days ago and never finished (its process died).
    let unfinished = folder.join("telegram-42-7.jsonl");
    let begin = json!({"line": "step", "turn": "telegram-42-7", "step": 0,
        "body": {"kind": "begin", "input": {"role": "user", "content": [{"type": "text", "text": "hi"}]},
                 "origin": null, "session_len": 0}});
    std::fs::write(&unfinished, format!("{begin}\n")).unwrap();
    let week_and_a_day = std::time::Duration::from_secs(8 * 86_400);
    for path in [&finished[0], &unfinished] {
        let file = std::fs::File::options().write(true).open(path).unwrap();
        file.set_modified(std::time::SystemTime::now() - week_and_a_day).unwrap();
    }
    wait_for(60, "the finished turn's journal to go", || !finished[0].exists());
    assert!(unfinished.exists(), "an unfinished turn stays for resume");
    let (_, log) = gw.terminate();
    assert!(log.contains("finished turns' journals pruned"), "{log}");
}
