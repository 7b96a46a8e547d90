//! End-to-end: conversations persist, continue, resume and list.

use crate::common;

use common::{Env, Wire, run};
use ferroclaw_testkit::{Fault, Turn};

/// All user/assistant texts the model was sent in request `i`.
fn texts(env: &Env, i: usize) -> Vec<String> {
    let body = env.request_body(i);
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] != "system")
        .map(|m| match &m["content"] {
            serde_json::Value::String(s) => s.clone(),
            v => v.as_array().unwrap().iter().filter_map(|b| b["text"].as_str()).collect(),
        })
        .collect()
}

#[test]
fn continue_picks_up_the_last_conversation_of_the_project() {
    for wire in [Wire::Anthropic, Wire::OpenAi] {
        let env = Env::new(
            wire,
            vec![
                Turn::text("Noted: 42.").into(),
                Turn::text("You said 42.").into(),
                Turn::text("fresh").into(),
            ],
        );
        assert_eq!(run(&mut env.oneshot("remember 42", &[])).0, 0);
        let (code, stdout, _) = run(&mut env.oneshot("what did I say?", &["--continue"]));
        assert_eq!(code, 0);
        assert_eq!(stdout, "You said 42.\n");
        assert_eq!(texts(&env, 1), ["remember 42", "Noted: 42.", "what did I say?"]);
        // Without --continue a new conversation starts.
        assert_eq!(run(&mut env.oneshot("new topic", &[])).0, 0);
        assert_eq!(texts(&env, 2), ["new topic"]);
        assert_eq!(env.session_files().len(), 2);
    }
}

#[test]
fn resume_by_id_and_list_with_a_header_and_show() {
    let env = Env::new(
        Wire::Anthropic,
        vec![
            Turn::text("first answer").into(),
            Turn::text("second").into(),
            Turn::text("again").into(),
        ],
    );
    let (_, stdout, _) = run(&mut env.oneshot("first question", &["--output-format", "json"]));
    let id = serde_json::from_str::<serde_json::Value>(&stdout).unwrap()["session_id"]
        .as_str()
        .unwrap()
        .to_string();
    run(&mut env.oneshot("other question", &[]));

    let (code, stdout, _) = run(env.cmd().args(["sessions", "list"]));
    assert_eq!(code, 0);
    assert_eq!(stdout.lines().count(), 3, "a header and two sessions: {stdout}");
    let header = stdout.lines().next().unwrap_or_default();
    assert!(header.starts_with("ID ") && header.ends_with("FIRST REQUEST"), "{stdout}");
    assert!(
        stdout.contains(&id)
            && stdout.contains("first question")
            && stdout.contains("other question")
    );

    let (code, stdout, _) = run(env.cmd().args(["sessions", "show", &id]));
    assert_eq!(code, 0);
    assert!(stdout.contains("› first question") && stdout.contains("first answer"), "{stdout}");
    assert!(!stdout.contains("other question"));

    let (code, _, stderr) = run(&mut env.oneshot("and then?", &["--resume", &id[..id.len() - 1]]));
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(texts(&env, 2), ["first question", "first answer", "and then?"]);

    let (code, _, stderr) = run(&mut env.oneshot("x", &["--resume", "nope"]));
    assert_eq!(code, 2);
    assert!(stderr.contains("no session \"nope\""), "{stderr}");
}

#[test]
fn continue_without_any_session_is_a_clear_error() {
    let env = Env::new(Wire::Anthropic, vec![]);
    let (code, _, stderr) = run(&mut env.oneshot("x", &["--continue"]));
    assert_eq!(code, 2);
    assert!(stderr.contains("no earlier session"), "{stderr}");
}

#[test]
fn a_failed_request_leaves_a_session_that_can_be_continued() {
    let down = || Fault::Status { status: 503, body: None, retry_after: None }.into();
    let env = Env::new(Wire::OpenAi, vec![down(), down(), down(), Turn::text("back up").into()]);
    assert_eq!(run(&mut env.oneshot("are you there?", &[])).0, 1);
    let (code, stdout, _) = run(&mut env.oneshot("hello again", &["--continue"]));
    assert_eq!(code, 0);
    assert_eq!(stdout, "back up\n");
    assert_eq!(texts(&env, 3), ["are you there?", "hello again"]);
}

#[test]
fn answered_requests_are_indexed_and_found_by_session_search_later() {
    let env = Env::new(
        Wire::Anthropic,
        vec![
            Turn::text("The deploy key rotates every 90 days.").into(),
            Turn::tool("session_search", serde_json::json!({"query": "deploy key rotation"}))
                .into(),
            Turn::text("You asked before: every 90 days.").into(),
        ],
    );
    let (_, first, _) = run(
        &mut env.oneshot("how often does the deploy key rotate?", &["--output-format", "json"])
    );
    let id = serde_json::from_str::<serde_json::Value>(&first).unwrap()["session_id"]
        .as_str()
        .unwrap()
        .to_string();
    let (code, _, stderr) = run(&mut env.oneshot("did I ask about keys before?", &[]));
    assert_eq!(code, 0, "{stderr}");
    let found = common::tool_results(&env.request_body(2));
    assert!(found[0].0.contains(&id) && found[0].0.contains("deploy key rotate"), "{found:?}");
}

#[test]
fn a_prefix_means_this_projects_session_and_an_ambiguous_one_names_the_newest_few() {
    let options = ferroclaw_testkit::ServerOptions { repeat: true, ..Default::default() };
    let env = Env::with_options(Wire::Anthropic, vec![Turn::text("ok").into()], options);
    let other = tempfile::tempdir().unwrap();
    let other_dir = other.path().to_str().unwrap();
    for _ in 0..7 {
        assert_eq!(run(&mut env.oneshot("theirs", &["--cwd", other_dir])).0, 0);
    }
    assert_eq!(run(&mut env.oneshot("mine", &[])).0, 0);
    let ids: Vec<String> = env
        .session_files()
        .iter()
        .map(|p| p.file_stem().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(ids.len(), 8);
    let prefix: String = (0..)
        .map_while(|i| {
            let c = ids[0].as_bytes().get(i)?;
            ids.iter().all(|id| id.as_bytes().get(i) == Some(c)).then_some(*c as char)
        })
        .collect();
    assert!(!prefix.is_empty(), "{ids:?}");

    // In this project the prefix names its one session, whatever other projects hold.
    let (code, _, stderr) = run(&mut env.oneshot("and then?", &["--resume", &prefix]));
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(texts(&env, 8), ["mine", "ok", "and then?"]);

    // Where it matches several, the newest few are named and the rest counted.
    let elsewhere = tempfile::tempdir().unwrap();
    let (code, _, stderr) =
        run(&mut env
            .oneshot("x", &["--resume", &prefix, "--cwd", elsewhere.path().to_str().unwrap()]));
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("is ambiguous") && stderr.contains(" and 3 more;"), "{stderr}");
    let mut newest = ids.clone();
    newest.sort_unstable_by(|a, b| b.cmp(a));
    assert!(stderr.contains(&newest[..5].join(", ")), "{stderr}");
    assert!(!stderr.contains(&newest[5]), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
}
