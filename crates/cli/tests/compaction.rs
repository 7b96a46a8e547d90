//! End-to-end: the context passes the threshold, the model is asked for a
//! summary, the history is replaced by it, the next request is small, the
//! transcript on disk stays complete, and resuming restores the compacted view.

use crate::common;

use common::{Env, Wire, run};
use ferroclaw_testkit::{ScriptedToolCall, Turn};
use serde_json::json;

#[test]
fn past_the_threshold_the_history_is_summarised_and_replaced_but_kept_on_disk() {
    let env = Env::new(
        Wire::Anthropic,
        vec![
            // Ten reads of 40 lines: no one result may take more than a
            // quarter of the window, so it takes several to fill it.
            Turn::tools(
                (0..10)
                    .map(|i| {
                        ScriptedToolCall::new(
                            "read",
                            json!({"path": "big.txt", "offset": 1 + 40 * i, "limit": 40}),
                        )
                    })
                    .collect(),
            )
            .into(),
            Turn::text("SUMMARY: the user asked about big.txt, which holds 400 numbered lines.")
                .into(),
            Turn::text("big.txt has 400 lines.").into(),
            Turn::text("Yes, 400.").into(),
        ],
    );
    // The scripted server reports 10 input tokens a call, which drives the
    // estimate down to its floor (a quarter): the window is sized for that.
    env.write_home_config("context_window = 4000\ncompaction_threshold = 0.5\n");
    let big: String = (0..400).map(|i| format!("line {i:04} {}\n", "x".repeat(90))).collect();
    std::fs::write(env.ws().join("big.txt"), big).unwrap();

    let (code, stdout, stderr) =
        run(&mut env.oneshot("what is in big.txt?", &["--yes", "--output-format", "stream-json"]));
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains(r#""type":"compaction""#), "{stdout}");
    let reqs = env.server.requests();
    assert_eq!(reqs.len(), 3);
    let summary_req = &reqs[1].body;
    assert!(
        summary_req.get("tools").is_none() || summary_req["tools"] == json!([]),
        "no tools in a summary request"
    );
    assert!(summary_req.to_string().contains("<transcript>"));
    let after = &reqs[2].body;
    let history = after["messages"].to_string();
    assert!(history.len() < 3_000, "the next request's history is small: {} chars", history.len());
    assert!(!history.contains("line 0360"), "the big tool result is gone from it");
    let first = after["messages"][0]["content"].to_string();
    assert!(
        first.contains("SUMMARY: the user asked about big.txt") && first.contains(".jsonl"),
        "{first}"
    );

    let session = std::fs::read_to_string(&env.session_files()[0]).unwrap();
    assert!(session.contains("line 0360"), "the transcript keeps the original tool result");
    assert!(session.contains(r#""type":"compaction""#));

    let (code, stdout, stderr) = run(&mut env.oneshot("sure?", &["--continue"]));
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(stdout, "Yes, 400.\n");
    let resumed = env.request_body(3);
    let msgs = resumed["messages"].as_array().unwrap();
    assert!(
        msgs[0]["content"].to_string().contains("SUMMARY"),
        "resume starts from the summary: {msgs:?}"
    );
    assert!(!resumed.to_string().contains("line 0360"), "not from the original history");
}

#[test]
fn the_model_can_ask_for_compaction_with_a_focus() {
    let env = Env::new(
        Wire::OpenAi,
        vec![
            Turn::tool("glob", json!({"pattern": "*"})).into(),
            Turn::tool("compact", json!({"focus": "the file list"})).into(),
            Turn::text("SUMMARY: no files").into(),
            Turn::text("continuing").into(),
        ],
    );
    let (code, stdout, _) = run(&mut env.oneshot("list files", &[]));
    assert_eq!(code, 0);
    assert_eq!(stdout, "continuing\n");
    let summary_req = env.request_body(2).to_string();
    assert!(summary_req.contains("Pay particular attention to: the file list"), "{summary_req}");
}

#[test]
fn slash_compact_in_the_repl_summarises_and_says_how_many_messages_are_left() {
    let env = Env::new(
        Wire::Anthropic,
        vec![
            Turn::text("The answer is 42.").into(),
            Turn::text("SUMMARY: the user asked a question; the answer was 42.").into(),
        ],
    );
    let (code, _, stderr) = run(env.cmd().write_stdin("what is it?\n/compact\n/exit\n"));
    assert_eq!(code, 0, "{stderr}");
    let line = stderr.lines().find(|l| l.starts_with("compacted: ")).expect(&stderr);
    assert!(line.starts_with("compacted: 1 message now, the full transcript stays in "), "{line}");
    assert_eq!(env.server.requests().len(), 2, "the summary was asked for");
}
