//! End-to-end: `ferroclaw -p` against the scripted LLM server, both wire
//! formats, streaming and not.

use crate::common;

use common::{Env, Wire, run, tool_results};
use ferroclaw_protocol::AgentEvent;
use ferroclaw_testkit::{Fault, ScriptedToolCall, Step, Turn};
use serde_json::json;

const WIRES: [Wire; 2] = [Wire::Anthropic, Wire::OpenAi];

#[test]
fn prints_the_answer_and_sends_a_well_formed_request() {
    for wire in WIRES {
        let env = Env::new(wire, vec![Turn::text("Hello from the model").into()]);
        let (code, stdout, stderr) = run(&mut env.oneshot("say hello", &[]));
        assert_eq!(code, 0, "{wire:?} stderr: {stderr}");
        assert_eq!(stdout, "Hello from the model\n");
        let req = &env.server.requests()[0];
        match wire {
            Wire::Anthropic => {
                assert_eq!(req.path, "/v1/messages");
                assert_eq!(req.header("x-api-key"), Some("test-key"));
                assert!(req.header("anthropic-version").is_some());
                assert_eq!(req.body["model"], "claude-test");
                assert_eq!(req.body["messages"][0]["content"][0]["text"], "say hello");
                assert!(req.body["system"].to_string().contains("ferroclaw"));
            }
            Wire::OpenAi => {
                assert_eq!(req.path, "/v1/chat/completions");
                assert_eq!(req.header("authorization"), Some("Bearer test-key"));
                assert_eq!(req.body["model"], "gpt-test");
                assert_eq!(req.body["messages"][0]["role"], "system");
                assert_eq!(req.body["stream"], true);
            }
        }
        let names: Vec<&str> = req.body["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().or(t["function"]["name"].as_str()).unwrap())
            .collect();
        assert!(names.contains(&"read") && names.contains(&"bash"), "{names:?}");
    }
}

#[test]
fn non_streaming_providers_work_too() {
    for (wire, section) in [
        (Wire::Anthropic, "[providers.anthropic]\nstream = false\n"),
        (Wire::OpenAi, "[providers.openai]\nstream = false\n"),
    ] {
        let env = Env::new(
            wire,
            vec![
                Turn::tool("read", json!({"path": "a.txt"})).into(),
                Turn::text("done reading").into(),
            ],
        );
        env.write_home_config(section);
        std::fs::write(env.ws().join("a.txt"), "alpha\n").unwrap();
        let (code, stdout, stderr) = run(&mut env.oneshot("read a.txt", &[]));
        assert_eq!(code, 0, "{wire:?}: {stderr}");
        assert_eq!(stdout, "done reading\n");
        assert_eq!(env.server.requests()[0].body["stream"], false);
        let results = tool_results(&env.request_body(1));
        assert!(results[0].0.contains("alpha"), "{results:?}");
    }
}

#[test]
fn a_tool_round_trip_feeds_the_result_back_and_reports_json() {
    for wire in WIRES {
        let env = Env::new(
            wire,
            vec![
                Turn::tool("read", json!({"path": "notes.txt"})).with_text("Let me look.").into(),
                Turn::text("The notes say hi.").with_usage(100, 7).into(),
            ],
        );
        std::fs::write(env.ws().join("notes.txt"), "hi from notes\n").unwrap();
        let (code, stdout, stderr) =
            run(&mut env.oneshot("what do the notes say?", &["--output-format", "json"]));
        assert_eq!(code, 0, "{stderr}");
        let v: serde_json::Value = serde_json::from_str(&stdout).unwrap();
        assert_eq!(v["result"], "The notes say hi.");
        assert_eq!(v["num_turns"], 2);
        assert_eq!(v["is_error"], false);
        assert_eq!(v["usage"]["input_tokens"], 110);
        assert_eq!(v["usage"]["output_tokens"], 12);
        assert!(v["session_id"].as_str().unwrap().len() > 10);
        let results = tool_results(&env.request_body(1));
        assert_eq!(results.len(), 1);
        assert!(results[0].0.contains("hi from notes") && !results[0].1, "{results:?}");
    }
}

#[test]
fn stream_json_emits_one_agent_event_per_line() {
    let env = Env::new(
        Wire::Anthropic,
        vec![
            Turn::tool("glob", json!({"pattern": "*.txt"})).into(),
            Turn::text("Found one file.").into(),
        ],
    );
    std::fs::write(env.ws().join("x.txt"), "x").unwrap();
    let (code, stdout, _) = run(&mut env.oneshot("list", &["--output-format", "stream-json"]));
    assert_eq!(code, 0);
    let events: Vec<AgentEvent> =
        stdout.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let kinds: Vec<String> = stdout
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["type"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(kinds.first().map(String::as_str), Some("session_started"));
    assert_eq!(kinds.last().map(String::as_str), Some("finished"));
    for k in [
        "turn_started",
        "tool_call_started",
        "tool_call_finished",
        "usage",
        "text_delta",
        "turn_finished",
    ] {
        assert!(kinds.iter().any(|x| x == k), "missing {k} in {kinds:?}");
    }
    let text: String = events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::TextDelta { text } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(text, "Found one file.");
    assert!(events.iter().any(|e| matches!(e, AgentEvent::ToolCallFinished { name, is_error: false, .. } if name == "glob")));
}

#[test]
fn unknown_tools_and_bad_arguments_become_error_results_and_the_loop_goes_on() {
    for wire in WIRES {
        let env = Env::new(
            wire,
            vec![
                Turn::tools(vec![
                    ScriptedToolCall::new("teleport", json!({"to": "mars"})),
                    ScriptedToolCall::new("read", json!({"path": 42})),
                ])
                .into(),
                Turn::text("sorry").into(),
            ],
        );
        let (code, stdout, _) = run(&mut env.oneshot("go", &[]));
        assert_eq!(code, 0);
        assert_eq!(stdout, "sorry\n");
        let results = tool_results(&env.request_body(1));
        assert_eq!(results.len(), 2, "{results:?}");
        if wire == Wire::Anthropic {
            assert!(results.iter().all(|r| r.1), "both are errors: {results:?}");
        }
        assert!(
            results[0].0.contains("unknown tool \"teleport\"") && results[0].0.contains("read"),
            "{results:?}"
        );
        assert!(results[1].0.contains("/path") && results[1].0.contains("string"), "{results:?}");
    }
}

#[test]
fn writes_need_approval_in_one_shot_unless_yes_is_given() {
    let script = || -> Vec<Step> {
        vec![
            Turn::tool("write", json!({"path": "out.txt", "content": "made"})).into(),
            Turn::text("ok").into(),
        ]
    };
    let env = Env::new(Wire::Anthropic, script());
    let (code, _, _) = run(&mut env.oneshot("write it", &[]));
    assert_eq!(code, 0);
    assert!(!env.ws().join("out.txt").exists(), "refused without --yes");
    let results = tool_results(&env.request_body(1));
    assert!(results[0].1 && results[0].0.contains("--yes"), "{results:?}");

    let env = Env::new(Wire::Anthropic, script());
    let (code, _, stderr) = run(&mut env.oneshot("write it", &["--yes"]));
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(std::fs::read_to_string(env.ws().join("out.txt")).unwrap(), "made");
}

/// A write killed between its temp file and the rename (kill -9) leaves the
/// temp file beside its target; the next write into that folder deletes it
/// once it is stale, and leaves a fresh one (another write in flight) alone.
#[test]
fn a_write_sweeps_the_temp_file_a_killed_write_left_and_leaves_a_fresh_one() {
    let env = Env::new(
        Wire::Anthropic,
        vec![
            Turn::tool("write", json!({"path": "out.txt", "content": "made"})).into(),
            Turn::text("ok").into(),
        ],
    );
    let stale = env.ws().join(".ferroclaw-write-4242-0-123456789");
    let fresh = env.ws().join(".ferroclaw-write-4343-0-987654321");
    for temp in [&stale, &fresh] {
        std::fs::write(temp, "half a file").unwrap();
    }
    let an_hour_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
    std::fs::File::options().write(true).open(&stale).unwrap().set_modified(an_hour_ago).unwrap();
    let (code, _, stderr) = run(&mut env.oneshot("write it", &["--yes"]));
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(std::fs::read_to_string(env.ws().join("out.txt")).unwrap(), "made");
    assert!(!stale.exists(), "the killed write's temp file is gone");
    assert!(fresh.exists(), "a write in flight is never touched");
}

#[test]
fn a_provider_that_stays_down_fails_with_a_clear_error_and_keeps_the_session() {
    for wire in WIRES {
        let down = || Step::Fault(Fault::Status { status: 500, body: None, retry_after: None });
        let env = Env::new(wire, vec![down(), down(), down()]);
        let (code, stdout, stderr) = run(&mut env.oneshot("hello?", &[]));
        assert_eq!(code, 1, "{stderr}");
        assert!(stdout.is_empty());
        assert!(stderr.contains("500"), "{stderr}");
        let provider = if wire == Wire::Anthropic { "anthropic" } else { "openai" };
        assert!(stderr.contains(provider), "{stderr}");
        assert_eq!(env.server.requests().len(), 3, "max_attempts = 3");
        let files = env.session_files();
        let text = std::fs::read_to_string(&files[0]).unwrap();
        assert!(text.lines().next().unwrap().contains("\"type\":\"meta\""));
        assert!(text.contains("hello?"), "the request is kept");
    }
}

#[test]
fn a_refused_key_and_a_rate_limit_end_with_a_hint_on_what_to_do() {
    let refused = Step::Fault(Fault::Status { status: 401, body: None, retry_after: None });
    let env = Env::new(Wire::Anthropic, vec![refused]);
    let (code, stdout, stderr) = run(&mut env.oneshot("hello?", &[]));
    assert_eq!((code, stdout.as_str()), (1, ""), "{stderr}");
    assert!(stderr.contains("HTTP 401"), "{stderr}");
    assert!(stderr.contains("hint: the provider refused the API key"), "{stderr}");

    let limited = || Step::Fault(Fault::Status { status: 429, body: None, retry_after: Some(0) });
    let env = Env::new(Wire::OpenAi, vec![limited(), limited(), limited()]);
    let (code, _, stderr) = run(&mut env.oneshot("hello?", &[]));
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("hint: the provider is rate-limiting this key"), "{stderr}");
}

#[test]
fn output_format_without_p_is_a_usage_error_not_a_silent_repl() {
    let env = Env::new(Wire::Anthropic, vec![]);
    let (code, stdout, stderr) = run(env.cmd().args(["--output-format", "stream-json"]));
    assert_eq!((code, stdout.as_str()), (2, ""), "{stderr}");
    assert!(stderr.contains("--output-format stream-json works with -p"), "{stderr}");
    assert!(env.server.requests().is_empty());
}

#[test]
fn a_mentioned_file_that_is_not_there_is_said_on_stderr() {
    let env = Env::new(Wire::Anthropic, vec![Turn::text("ok").into()]);
    let (code, stdout, stderr) = run(&mut env.oneshot("summarise @notes.md for @bob", &[]));
    assert_eq!((code, stdout.as_str()), (0, "ok\n"), "{stderr}");
    assert!(stderr.contains("@notes.md: no such file"), "{stderr}");
    assert!(!stderr.contains("@bob"), "{stderr}");
}

#[test]
fn transient_failures_are_retried() {
    for wire in WIRES {
        let env = Env::new(
            wire,
            vec![
                Fault::Status { status: 429, body: None, retry_after: Some(0) }.into(),
                Fault::Status { status: 529, body: None, retry_after: None }.into(),
                Turn::text("third time lucky").into(),
            ],
        );
        let (code, stdout, stderr) = run(&mut env.oneshot("hi", &[]));
        assert_eq!(code, 0, "{stderr}");
        assert_eq!(stdout, "third time lucky\n");
    }
}

#[test]
fn malformed_and_cut_streams_are_errors_not_hangs() {
    for wire in WIRES {
        for fault in [Fault::MalformedSse, Fault::CutMidStream] {
            let env = Env::new(
                wire,
                vec![fault.clone().into(), fault.clone().into(), fault.clone().into()],
            );
            let (code, _, stderr) = run(&mut env.oneshot("hi", &[]));
            assert_eq!(code, 1, "{wire:?} {fault:?}: {stderr}");
            assert!(stderr.contains("error"), "{stderr}");
            if fault == Fault::MalformedSse {
                assert!(stderr.contains("nope"), "the offending snippet is shown: {stderr}");
            }
        }
    }
}

#[test]
fn an_answer_without_end_is_cut_stored_as_cut_and_fails_the_request() {
    for wire in WIRES {
        let text = "all work and no play makes a dull model ";
        let env = Env::new(wire, vec![Fault::Endless { text: text.into() }.into()]);
        env.write_home_config("max_tokens = 200\n");
        let (code, stdout, stderr) = run(&mut env.oneshot("hi", &["--output-format", "json"]));
        assert_eq!(code, 1, "{wire:?}: {stderr}");
        let v: serde_json::Value = serde_json::from_str(&stdout).unwrap();
        assert_eq!(v["is_error"], true, "{wire:?}");
        let result = v["result"].as_str().unwrap();
        assert!(result.contains("more than max_tokens = 200 allows"), "{wire:?}: {result}");
        // The session keeps what came, marked as cut, and stays small.
        let session = &env.session_files()[0];
        let stored = std::fs::read_to_string(session).unwrap();
        assert!(stored.contains("all work and no play"), "{wire:?}");
        assert!(stored.contains("[the answer was cut off:"), "{wire:?}");
        assert!(stored.len() < 256 * 1024, "{wire:?}: {} bytes stored", stored.len());
    }
}

#[test]
fn max_turns_stops_a_model_that_never_finishes() {
    let steps: Vec<Step> =
        (0..5).map(|_| Turn::tool("glob", json!({"pattern": "*"})).into()).collect();
    let env = Env::new(Wire::OpenAi, steps);
    let (code, stdout, _) =
        run(&mut env.oneshot("loop", &["--max-turns", "2", "--output-format", "json"]));
    assert_eq!(code, 1);
    let v: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(v["is_error"], true);
    assert_eq!(v["num_turns"], 2);
    assert!(v["result"].as_str().unwrap().contains("max-turns"));
    assert_eq!(env.server.requests().len(), 2);
}

#[test]
fn prompt_can_come_from_stdin() {
    let env = Env::new(Wire::Anthropic, vec![Turn::text("got it").into()]);
    let (code, stdout, _) = run(env.cmd().arg("-p").write_stdin("from stdin\n"));
    assert_eq!(code, 0);
    assert_eq!(stdout, "got it\n");
    assert_eq!(env.request_body(0)["messages"][0]["content"][0]["text"], "from stdin\n");
}

#[test]
fn a_piped_image_is_attached_with_no_bogus_file_warnings() {
    // `cat shot.png | ferroclaw -p "..."`: the bytes hold `@` words that look
    // like files; none is a mention, and the picture reaches the model.
    let mut png = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR".to_vec();
    png.extend_from_slice(b" @x9.k2 @Q/r.z \xff\xfe @a.b\n\0\0 tail");
    for wire in WIRES {
        let env = Env::new(wire, vec![Turn::text("a tiny picture").into()]);
        let (code, stdout, stderr) =
            run(env.oneshot("what is this?", &[]).write_stdin(png.clone()));
        assert_eq!(code, 0, "{stderr}");
        assert_eq!(stdout, "a tiny picture\n");
        assert!(!stderr.contains("no such file"), "bogus @file warnings: {stderr}");
        let sent = env.request_body(0).to_string();
        assert!(sent.contains("image/png"), "{wire:?}: the image is attached: {sent}");
        assert!(!sent.contains("IHDR"), "its bytes are not sent as text: {sent}");
    }
}

#[test]
fn other_binary_stdin_is_named_not_decoded() {
    let env = Env::new(Wire::Anthropic, vec![Turn::text("noted").into()]);
    let bytes = b"\0\x01\x02 @bin/x.so @y.o \0".to_vec();
    let (code, _, stderr) = run(env.oneshot("look", &[]).write_stdin(bytes));
    assert_eq!(code, 0, "{stderr}");
    assert!(!stderr.contains("no such file"), "{stderr}");
    let text =
        env.request_body(0)["messages"][0]["content"][0]["text"].as_str().unwrap().to_string();
    assert!(text.contains("[stdin: 20 bytes of binary data, not included]"), "{text}");
    assert!(!text.contains("@y.o"), "{text}");
}

#[test]
fn an_endless_stdin_is_cut_and_the_run_goes_on() {
    // `yes | ferroclaw -p ...` (or `tail -f log | ...`) never ends: the
    // prompt takes its head and ferroclaw stops reading instead of waiting.
    let env = Env::new(Wire::Anthropic, vec![Turn::text("answered").into()]);
    let mut yes =
        std::process::Command::new("yes").stdout(std::process::Stdio::piped()).spawn().unwrap();
    let mut cmd = env.std_cmd();
    cmd.args(["-p", "what is this?"])
        .stdin(yes.stdout.take().unwrap())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    // A safety net only: a regression waits forever, so it is killed.
    let mut waited = 0;
    while child.try_wait().unwrap().is_none() && waited < 600 {
        std::thread::sleep(std::time::Duration::from_millis(100));
        waited += 1;
    }
    let _ = child.kill();
    let out = child.wait_with_output().unwrap();
    let _ = yes.kill();
    let _ = yes.wait();
    let (code, stdout, stderr) = (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    );
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(stdout, "answered\n");
    assert!(stderr.contains("[stdin cut: the first 256 KiB of more than"), "{stderr}");
}

#[test]
fn a_model_name_the_provider_does_not_know_ends_with_a_hint() {
    let body =
        r#"{"type":"error","error":{"type":"not_found_error","message":"model: claude-sonet-4"}}"#;
    let missing =
        Step::Fault(Fault::Status { status: 404, body: Some(body.into()), retry_after: None });
    let env = Env::new(Wire::Anthropic, vec![missing]);
    let (code, _, stderr) = run(&mut env.oneshot("hello?", &[]));
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("HTTP 404"), "{stderr}");
    assert!(stderr.contains("hint: the provider does not know that model"), "{stderr}");
}
