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
