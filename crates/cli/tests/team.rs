//! Agent teams end to end: the real binary as the lead, teammates as agents
//! in the same process, each answered by its own script (the scripted server
//! routes a request by the `teammate "NAME"` identity in its system prompt).
//! Waiting is done by the lead's own bash calls on the team's files, never by
//! timed assertions.

use crate::common;

use std::path::Path;

use common::{Env, Wire, run};
use ferroclaw_testkit::{LAST_USER_TASK_ID, ScriptedServer, ServerOptions, Step, Turn};
use serde_json::{Value, json};

/// Fast polling. The idle time is long: a one-shot lead's idle teammates
/// shut down as soon as it has answered, and a short one let a teammate on a
/// busy machine give up before the message it was waiting for arrived.
const TEAM_CONFIG: &str = "[retry]\nmax_attempts = 3\nbase_delay_ms = 10\nmax_delay_ms = 50\n\
    [team]\npoll_secs = 0.05\nidle_timeout_secs = 30\n";

fn marker(name: &str) -> String {
    format!("teammate \"{name}\"")
}

/// An env whose main script is the lead's and whose routes are teammates'.
fn team_env(lead: Vec<Step>, teammates: Vec<(&str, Vec<Step>)>) -> Env {
    let routes = teammates.into_iter().map(|(name, steps)| (marker(name), steps)).collect();
    let env = Env {
        home: tempfile::tempdir().unwrap(),
        workspace: tempfile::tempdir().unwrap(),
        server: ScriptedServer::start_with(lead, ServerOptions { routes, ..Default::default() }),
        wire: Wire::Anthropic,
    };
    env.write_home_config(TEAM_CONFIG);
    env
}

fn tool(name: &str, args: Value) -> Step {
    Turn::tool(name, args).into()
}

fn text(t: &str) -> Step {
    Turn::text(t).into()
}

fn spawn(name: &str, prompt: &str) -> ferroclaw_testkit::ScriptedToolCall {
    ferroclaw_testkit::ScriptedToolCall::new(
        "spawn_teammate",
        json!({"name": name, "role": "helper", "prompt": prompt}),
    )
}

/// A bash call that returns once `condition` (a shell test) holds.
fn wait_until(condition: &str) -> Step {
    tool(
        "bash",
        json!({"command": format!("for i in $(seq 1 600); do {condition} && break; sleep 0.05; done; echo waited")}),
    )
}

/// A shell test: the lead's inbox has at least `n` lines.
fn lead_inbox_has(n: usize) -> String {
    format!("[ \"$(cat .agent/team/inbox/lead.jsonl 2>/dev/null | wc -l)\" -ge {n} ]")
}

/// A shell test: at least `n` teammates are idle.
fn idle_count(n: usize) -> String {
    format!("[ \"$(grep -c '\"idle\"' .agent/team/config.json)\" -ge {n} ]")
}

/// Every request's body whose system prompt is `name`'s (or the lead's for `None`).
fn requests_of(env: &Env, name: Option<&str>) -> Vec<Value> {
    env.server
        .requests()
        .into_iter()
        .map(|r| r.body)
        .filter(|b| {
            let system = b["system"].to_string();
            match name {
                Some(n) => system.contains(&marker(n).replace('"', "\\\"")),
                None => !system.contains("<identity>You are teammate"),
            }
        })
        .collect()
}

fn any_contains(bodies: &[Value], needle: &str) -> bool {
    bodies.iter().any(|b| b["messages"].to_string().contains(needle))
}

fn team_config(ws: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(ws.join(".agent/team/config.json")).unwrap()).unwrap()
}

fn status_of(ws: &Path, name: &str) -> String {
    let config = team_config(ws);
    let member = config["members"].as_array().unwrap().iter().find(|m| m["name"] == name).cloned();
    member.map(|m| m["status"].as_str().unwrap().to_string()).unwrap_or_default()
}

/// Teammates spawned in one answer start together: the first one's first
/// message to the second finds it on the team even when the second's spawn
/// is slow (here a PreToolUse hook that sleeps on it; a local model answers
/// the first teammate long before).
#[test]
fn a_teammate_spawned_beside_another_can_message_it_at_once() {
    let env = team_env(
        vec![
            Turn::tools(vec![spawn("alice", "Greet bob."), spawn("bob", "Wait for alice.")]).into(),
            wait_until(&lead_inbox_has(1)),
            text("The team has talked."),
        ],
        vec![
            (
                "alice",
                vec![
                    tool("send_message", json!({"to": "bob", "content": "hello bob from alice"})),
                    tool("send_message", json!({"to": "lead", "content": "alice reporting"})),
                    text("alice done"),
                ],
            ),
            ("bob", vec![text("bob here")]),
        ],
    );
    let claude = env.home.path().join(".claude");
    std::fs::create_dir_all(&claude).unwrap();
    let slow_bob = r#"jq -r .tool_input.name | grep -qx bob && sleep 2; exit 0"#;
    let settings = json!({"hooks": {"PreToolUse": [{"matcher": "*", "hooks": [{"type": "command", "command": slow_bob}]}]}});
    std::fs::write(claude.join("settings.json"), settings.to_string()).unwrap();

    let (code, out, err) = run(&mut env.oneshot("Form a team", &["--yes"]));
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("The team has talked."));
    let alice = requests_of(&env, Some("alice"));
    assert!(!any_contains(&alice, "not on the team"), "alice's message to bob was refused");
    assert!(any_contains(&requests_of(&env, Some("bob")), "hello bob from alice"));
}

#[test]
fn two_teammates_exchange_messages_and_a_broadcast_and_report_to_the_lead() {
    let env = team_env(
        vec![
            Turn::tools(vec![spawn("alice", "Greet bob."), spawn("bob", "Greet alice.")]).into(),
            wait_until(&lead_inbox_has(2)),
            text("The team has talked."),
        ],
        vec![
            (
                "alice",
                vec![
                    tool("send_message", json!({"to": "bob", "content": "hello bob from alice"})),
                    // Teammates broadcast through send_message's msg_type.
                    tool(
                        "send_message",
                        json!({"to": "everyone", "content": "alice to everyone", "msg_type": "broadcast"}),
                    ),
                    text("alice done"),
                ],
            ),
            (
                "bob",
                vec![
                    tool("send_message", json!({"to": "alice", "content": "hi alice from bob"})),
                    tool("send_message", json!({"to": "lead", "content": "bob reporting"})),
                    text("bob done"),
                ],
            ),
        ],
    );
    let (code, out, err) = run(&mut env.oneshot("Form a team", &["--yes"]));
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("The team has talked."));
    let lead = requests_of(&env, None);
    assert!(any_contains(&lead, "bob reporting"), "the lead got bob's report");
    assert!(any_contains(&lead, "alice to everyone"), "the lead got the broadcast");
    let bob = requests_of(&env, Some("bob"));
    assert!(any_contains(&bob, "hello bob from alice"));
    assert!(any_contains(&bob, "alice to everyone"), "bob got the broadcast");
    assert!(any_contains(&requests_of(&env, Some("alice")), "hi alice from bob"));
    assert!(
        !any_contains(&requests_of(&env, Some("alice")), "[broadcast] from alice"),
        "a broadcast does not come back to its sender"
    );
    // Each teammate has its own session file beside the lead's, and the
    // one-shot lead ended only after both went idle and shut down.
    for name in ["alice", "bob"] {
        assert_eq!(status_of(env.ws(), name), "shutdown");
        let config = team_config(env.ws());
        let member = config["members"].as_array().unwrap().iter().find(|m| m["name"] == name);
        let id = member.unwrap()["session_id"].as_str().unwrap().to_string();
        assert!(env.session_files().iter().any(|p| p.to_string_lossy().contains(&id)));
    }
    let (_, shown, _) = run(env.cmd().arg("team"));
    assert!(
        shown.contains("alice") && shown.contains("bob") && shown.contains("shutdown"),
        "{shown}"
    );
}

#[test]
fn a_message_sent_mid_turn_reaches_the_lead_before_its_turn_ends() {
    let env = team_env(
        vec![
            tool("spawn_teammate", json!({"name": "alice", "role": "scout", "prompt": "Report."})),
            wait_until(&lead_inbox_has(1)),
            text("Got the news."),
        ],
        vec![(
            "alice",
            vec![tool("send_message", json!({"to": "lead", "content": "mid-turn news"}))],
        )],
    );
    let (code, _, err) = run(&mut env.oneshot("Start a scout", &["--yes"]));
    assert_eq!(code, 0, "{err}");
    let lead = requests_of(&env, None);
    assert_eq!(lead.len(), 3, "one turn of three model calls");
    // A later call of the same turn carries the inbox, once.
    let last = lead[2]["messages"].to_string();
    assert!(last.contains("<inbox through="), "{last}");
    assert!(last.contains("[message] from alice: mid-turn news"));
    assert_eq!(last.matches("mid-turn news").count(), 1, "delivered once");
}

#[test]
fn a_message_to_an_unknown_name_is_refused_with_the_members_and_makes_no_inbox() {
    let env = team_env(
        vec![
            tool("send_message", json!({"to": "bobb", "content": "hello?"})),
            text("Nobody by that name."),
        ],
        vec![],
    );
    let (code, _, err) = run(&mut env.oneshot("Message bobb", &["--yes"]));
    assert_eq!(code, 0, "{err}");
    let results = common::tool_results(&env.request_body(1));
    assert!(results[0].1, "an error result");
    assert!(
        results[0].0.contains("\"bobb\" is not on the team; members: lead"),
        "{:?}",
        results[0]
    );
    assert!(!env.ws().join(".agent/team/inbox/bobb.jsonl").exists());
}

#[test]
fn a_shutdown_request_is_approved_by_one_teammate_and_refused_with_a_reason_by_another() {
    let env = team_env(
        vec![
            Turn::tools(vec![spawn("alice", "Stand by."), spawn("bob", "Stand by.")]).into(),
            wait_until(&idle_count(2)),
            Turn::tools(vec![
                ferroclaw_testkit::ScriptedToolCall::new(
                    "shutdown_request",
                    json!({"teammate": "alice"}),
                ),
                ferroclaw_testkit::ScriptedToolCall::new(
                    "shutdown_request",
                    json!({"teammate": "bob"}),
                ),
            ])
            .into(),
            wait_until(&lead_inbox_has(2)),
            text("Asked both."),
        ],
        vec![
            (
                "alice",
                vec![
                    text("standing by"),
                    tool("shutdown_response", json!({"approve": true, "reason": "all done"})),
                    text("bye"),
                ],
            ),
            (
                "bob",
                vec![
                    text("standing by"),
                    tool("shutdown_response", json!({"approve": false, "reason": "still testing"})),
                    text("carrying on"),
                ],
            ),
        ],
    );
    let (code, out, err) =
        run(&mut env.oneshot("Shut the team down", &["--yes", "--output-format", "stream-json"]));
    assert_eq!(code, 0, "{err}");
    let requests: Value =
        serde_json::from_slice(&std::fs::read(env.ws().join(".agent/team/requests.json")).unwrap())
            .unwrap();
    let status = |to: &str| {
        requests.as_array().unwrap().iter().find(|r| r["to"] == to).unwrap()["status"].clone()
    };
    assert_eq!(status("alice"), "approved");
    assert_eq!(status("bob"), "rejected");
    let lead = requests_of(&env, None);
    assert!(any_contains(&lead, "[shutdown_response] from bob"));
    assert!(any_contains(&lead, "rejected: still testing"));
    // The stream shows alice stopping because she agreed.
    assert!(
        out.lines().any(|l| l.contains("\"type\":\"team\"")
            && l.contains("\"name\":\"alice\"")
            && l.contains("shutdown approved")),
        "{out}"
    );
}

#[test]
fn a_teammate_that_needs_plan_approval_cannot_write_until_the_lead_approves() {
    let env = team_env(
        vec![
            tool(
                "spawn_teammate",
                json!({"name": "alice", "role": "writer", "prompt": "Write notes.txt.", "plan_required": true}),
            ),
            wait_until(&format!("{} && {}", idle_count(1), lead_inbox_has(1))),
            tool("plan_approval", json!({"approve": true, "feedback": "go ahead"})),
            wait_until("[ -s notes.txt ]"),
            text("Approved and written."),
        ],
        vec![(
            "alice",
            vec![
                tool("write", json!({"path": "notes.txt", "content": "too early\n"})),
                tool("submit_plan", json!({"plan": "Write one line to notes.txt."})),
                text("waiting for approval"),
                tool("write", json!({"path": "notes.txt", "content": "approved line\n"})),
                text("written"),
            ],
        )],
    );
    let (code, _, err) = run(&mut env.oneshot("Have alice write", &["--yes"]));
    assert_eq!(code, 0, "{err}");
    let alice = requests_of(&env, Some("alice"));
    let first_write = common::tool_results(&alice[1]);
    assert!(first_write[0].1, "refused: {first_write:?}");
    assert!(first_write[0].0.contains("refused until the lead approves your plan"));
    assert!(any_contains(&alice, "[plan_approval_response] from lead"));
    assert_eq!(std::fs::read_to_string(env.ws().join("notes.txt")).unwrap(), "approved line\n");
}

#[test]
fn three_teammates_claim_five_dependent_tasks_and_each_is_done_exactly_once() {
    let create =
        |s: &str| ferroclaw_testkit::ScriptedToolCall::new("task_create", json!({"subject": s}));
    let update = |id: u64, after: Vec<u64>| {
        ferroclaw_testkit::ScriptedToolCall::new(
            "task_update",
            json!({"task_id": id, "addBlockedBy": after}),
        )
    };
    // Each teammate: a first turn, then per claimed task: complete it, report.
    let worker = || {
        let mut steps = vec![text("ready for tasks")];
        for _ in 0..5 {
            steps.push(tool(
                "task_update",
                json!({"task_id": LAST_USER_TASK_ID, "status": "completed"}),
            ));
            steps.push(text("task done"));
        }
        steps
    };
    let env = team_env(
        vec![
            Turn::tools(vec![
                create("schema"),
                create("api"),
                create("handlers"),
                create("docs"),
                create("release"),
                update(3, vec![1, 2]),
                update(5, vec![3, 4]),
            ])
            .into(),
            Turn::tools(vec![
                spawn("a", "Work the board."),
                spawn("b", "Work the board."),
                spawn("c", "Work the board."),
            ])
            .into(),
            wait_until("[ \"$(grep -l '\"completed\"' .agent/tasks/task_*.json | wc -l)\" -ge 5 ]"),
            text("All five done."),
        ],
        vec![("a", worker()), ("b", worker()), ("c", worker())],
    );
    let (code, _, err) = run(&mut env.oneshot("Split the work", &["--yes"]));
    assert_eq!(code, 0, "{err}");
    let (_, board, _) = run(env.cmd().arg("tasks"));
    assert!(board.contains("Tasks (5/5 completed)"), "{board}");
    // Every task was claimed once, by one teammate, in its session.
    let mut claims = Vec::new();
    for file in env.session_files() {
        let text = std::fs::read_to_string(&file).unwrap();
        for (at, _) in text.match_indices("You claimed task #") {
            let rest = &text[at + "You claimed task #".len()..];
            claims.push(rest.chars().take_while(char::is_ascii_digit).collect::<String>());
        }
    }
    claims.sort();
    assert_eq!(claims, ["1", "2", "3", "4", "5"], "each task claimed exactly once");
    for id in 1..=5 {
        let task: Value = serde_json::from_slice(
            &std::fs::read(env.ws().join(format!(".agent/tasks/task_{id}.json"))).unwrap(),
        )
        .unwrap();
        assert!(["a", "b", "c"].contains(&task["owner"].as_str().unwrap()), "{task}");
    }
}

#[test]
fn a_lead_killed_mid_team_continues_with_its_team_and_loses_no_message() {
    let env = team_env(
        vec![
            tool("spawn_teammate", json!({"name": "alice", "role": "scout", "prompt": "Report."})),
            tool("bash", json!({"command": "sleep 30"})),
            text("Resumed with the team."),
        ],
        vec![(
            "alice",
            vec![
                tool("send_message", json!({"to": "lead", "content": "kept safe"})),
                text("reported"),
            ],
        )],
    );
    // A long idle time: alice must still be on the team when the lead dies.
    env.write_home_config("[team]\npoll_secs = 0.05\nidle_timeout_secs = 60\n");
    let mut child = env.std_cmd().args(["-p", "Start", "--yes"]).spawn().unwrap();
    let inbox = env.ws().join(".agent/team/inbox/lead.jsonl");
    let config = env.ws().join(".agent/team/config.json");
    for _ in 0..1200 {
        let idle = std::fs::read_to_string(&config).unwrap_or_default().contains("\"idle\"");
        if idle && std::fs::metadata(&inbox).is_ok_and(|m| m.len() > 0) {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let session_before = team_config(env.ws())["members"][0]["session_id"].clone();
    assert_eq!(status_of(env.ws(), "alice"), "idle", "left as it was");

    env.write_home_config(TEAM_CONFIG);
    let (code, out, err) = run(&mut env.oneshot("What happened?", &["--continue", "--yes"]));
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("Resumed with the team."));
    let lead = requests_of(&env, None);
    let resumed = lead.last().unwrap()["messages"].to_string();
    assert_eq!(resumed.matches("[message] from alice: kept safe").count(), 1, "{resumed}");
    // alice was reattached (same session), not spawned again, and shut down
    // after her idle time.
    let config = team_config(env.ws());
    assert_eq!(config["members"].as_array().unwrap().len(), 1);
    assert_eq!(config["members"][0]["session_id"], session_before);
    assert_eq!(status_of(env.ws(), "alice"), "shutdown");
}

#[test]
fn a_name_already_on_the_team_and_a_teammate_past_the_cap_are_refused() {
    let env = team_env(
        vec![
            Turn::tools(vec![
                spawn("alice", "Wait."),
                spawn("alice", "Wait."),
                spawn("bob", "Wait."),
            ])
            .into(),
            text("Tried."),
        ],
        vec![("alice", vec![text("waiting")])],
    );
    env.write_home_config(&format!("{TEAM_CONFIG}max_teammates = 1\n"));
    let (code, _, err) = run(&mut env.oneshot("Spawn", &["--yes"]));
    assert_eq!(code, 0, "{err}");
    let results = common::tool_results(&requests_of(&env, None)[1]);
    assert!(!results[0].1, "{results:?}");
    assert!(
        results[1].1 && results[1].0.contains("\"alice\" is already on the team"),
        "{results:?}"
    );
    assert!(
        results[2].1 && results[2].0.contains("the team is full: 1 teammates at most"),
        "{results:?}"
    );
    assert_eq!(team_config(env.ws())["members"].as_array().unwrap().len(), 1);
}

#[test]
fn once_the_token_budget_is_spent_a_teammate_stops_and_the_lead_is_told() {
    let env = team_env(
        vec![
            tool("spawn_teammate", json!({"name": "alice", "role": "coder", "prompt": "Work."})),
            wait_until(&lead_inbox_has(1)),
            text("Out of budget."),
        ],
        vec![("alice", vec![text("one step"), text("never sent")])],
    );
    env.write_home_config(&format!("{TEAM_CONFIG}token_budget = 10\n"));
    let (code, _, err) = run(&mut env.oneshot("Work", &["--yes"]));
    assert_eq!(code, 0, "{err}");
    assert!(any_contains(&requests_of(&env, None), "token budget (10 tokens) is spent"));
    assert_eq!(requests_of(&env, Some("alice")).len(), 1, "no model call after the budget");
    assert_eq!(status_of(env.ws(), "alice"), "shutdown");
}

#[test]
fn the_repl_shows_the_team_and_the_leads_unread_messages() {
    let env = team_env(vec![], vec![]);
    let dir = env.ws().join(".agent/team/inbox");
    std::fs::create_dir_all(&dir).unwrap();
    let config = json!({"team_name": "demo", "lead": "lead", "members": [
        {"name": "alice", "role": "writer", "status": "shutdown", "session_id": null, "prompt": ""}]});
    std::fs::write(env.ws().join(".agent/team/config.json"), config.to_string()).unwrap();
    let message = json!({"id": "m1", "type": "message", "from": "alice", "to": "lead",
        "content": "draft is ready", "timestamp": "2026-11-30T12:00:00Z"});
    std::fs::write(dir.join("lead.jsonl"), format!("{message}\n")).unwrap();
    let (code, stdout, stderr) = run(env.cmd().write_stdin("/team\n/inbox\n/exit\n"));
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stdout.contains("Team demo (lead: lead") && stdout.contains("1 unread for the lead"),
        "{stdout}"
    );
    assert!(stdout.contains("alice") && stdout.contains("shutdown") && stdout.contains("writer"));
    assert!(stdout.contains("[message] from alice: draft is ready"), "{stdout}");
    assert!(env.server.requests().is_empty(), "showing makes no model call");
}

fn spawn_isolated(name: &str, worktree: &str) -> ferroclaw_testkit::ScriptedToolCall {
    ferroclaw_testkit::ScriptedToolCall::new(
        "spawn_teammate",
        json!({"name": name, "role": "coder", "prompt": "Write your notes.", "worktree": worktree}),
    )
}

fn writes_notes(name: &str) -> Vec<Step> {
    vec![
        tool("write", json!({"path": "notes.txt", "content": format!("notes of {name}\n")})),
        tool("send_message", json!({"to": "lead", "content": format!("{name} wrote notes")})),
        text("done"),
    ]
}

#[test]
fn two_teammates_in_their_own_worktrees_write_the_same_file_without_interfering() {
    let env = team_env(
        vec![
            Turn::tools(vec![spawn_isolated("alice", "wa"), spawn_isolated("bob", "wb")]).into(),
            wait_until(&lead_inbox_has(2)),
            text("Both wrote."),
        ],
        vec![("alice", writes_notes("alice")), ("bob", writes_notes("bob"))],
    );
    let ws = env.ws();
    ferroclaw_testkit::git::init_repo(ws, "README.md", "# project\n");
    let (code, out, err) = run(&mut env.oneshot("Split the work", &["--yes"]));
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("Both wrote."), "{out}");
    let read = |p: &str| std::fs::read_to_string(ws.join(p)).unwrap_or_default();
    assert_eq!(read(".agent/worktrees/wa/notes.txt"), "notes of alice\n");
    assert_eq!(read(".agent/worktrees/wb/notes.txt"), "notes of bob\n");
    assert!(!ws.join("notes.txt").exists(), "the main checkout is untouched");
    let config = team_config(ws);
    let trees: Vec<&str> = config["members"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["worktree"].as_str())
        .collect();
    assert_eq!(trees, ["wa", "wb"], "{config}");
}

#[test]
fn a_teammate_that_cannot_be_isolated_is_not_spawned_and_the_lead_is_told_why() {
    // Not a git repository: isolation cannot be set up, so no shared folder.
    let env = team_env(
        vec![
            tool(
                "spawn_teammate",
                json!({"name": "alice", "role": "coder", "prompt": "Work.", "worktree": "wa"}),
            ),
            text("ok"),
        ],
        vec![("alice", writes_notes("alice"))],
    );
    let (code, _, err) = run(&mut env.oneshot("Isolate alice", &["--yes"]));
    assert_eq!(code, 0, "{err}");
    let result = common::tool_results(&requests_of(&env, None)[1]);
    let (text, is_error) = result.last().unwrap();
    assert!(*is_error && text.contains("cannot isolate alice in worktree wa"), "{text}");
    assert!(text.contains("not a git repository") || text.contains("git"), "{text}");
    assert!(requests_of(&env, Some("alice")).is_empty(), "alice never ran");
    assert!(!env.ws().join("notes.txt").exists());
}

#[test]
fn without_a_team_the_hint_names_the_config_file_ferroclaw_reads() {
    let env = Env::new(Wire::Anthropic, vec![]);
    let elsewhere = tempfile::tempdir().unwrap();
    let (code, stdout, stderr) = run(env.cmd().arg("team").env("HOME", elsewhere.path()));
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.starts_with("No team in this workspace."), "{stdout}");
    let config = env.home.path().join("config.toml");
    assert!(stdout.contains(&format!("({} or .agent/config.toml)", config.display())), "{stdout}");
    assert!(!stdout.contains("~/.ferroclaw"), "{stdout}");
}

/// A bash command that returns once `text` (two words joined by `-`) is in
/// a session file: the lead's answer. The pattern is split in two so that
/// the command itself, in the teammate's session, does not match it.
fn until_in_a_session(text: &str) -> String {
    let (a, b) = text.split_once('-').unwrap();
    format!(r#"for i in $(seq 1 600); do grep -rqs "{a}""-{b}" "$HOME" && break; sleep 0.05; done"#)
}

/// Idle teammates that would wait an hour for work: a one-shot run that
/// ends proves it shut them down instead of waiting (the command's own
/// timeout is the hang guard).
const PATIENT_TEAM_CONFIG: &str = "[retry]\nmax_attempts = 3\nbase_delay_ms = 10\n\
    max_delay_ms = 50\n[team]\npoll_secs = 0.05\nidle_timeout_secs = 3600\n";

#[test]
fn a_one_shot_lead_ends_once_it_has_answered_and_shuts_its_idle_teammate_down() {
    let env = team_env(
        vec![
            tool("spawn_teammate", json!({"name": "alice", "role": "helper", "prompt": "Say hi."})),
            wait_until(&idle_count(1)),
            text("The lead's answer."),
        ],
        vec![("alice", vec![text("hi")])],
    );
    env.write_home_config(PATIENT_TEAM_CONFIG);
    let (code, out, err) = run(&mut env.oneshot("Start alice", &["--yes"]));
    assert_eq!(code, 0, "{err}");
    assert_eq!(out.trim_end(), "The lead's answer.");
    assert_eq!(status_of(env.ws(), "alice"), "shutdown");
    assert!(!err.contains("waiting for teammates"), "nobody was working: {err}");
}

#[test]
fn a_one_shot_lead_waits_for_a_working_teammate_and_says_so() {
    let until_the_lead_answered =
        format!("{}; echo seen > seen.txt", until_in_a_session("LEAD-ANSWERED"));
    let env = team_env(
        vec![
            tool("spawn_teammate", json!({"name": "alice", "role": "helper", "prompt": "Work."})),
            text("LEAD-ANSWERED"),
        ],
        vec![(
            "alice",
            vec![tool("bash", json!({"command": until_the_lead_answered})), text("done")],
        )],
    );
    env.write_home_config(PATIENT_TEAM_CONFIG);
    let (code, out, err) = run(&mut env.oneshot("Start alice", &["--yes"]));
    assert_eq!(code, 0, "{err}");
    assert_eq!(out.trim_end(), "LEAD-ANSWERED");
    assert!(err.contains("waiting for teammates still working: alice"), "{err}");
    assert!(env.ws().join("seen.txt").exists(), "alice finished before the run ended");
    assert_eq!(status_of(env.ws(), "alice"), "shutdown");
}

#[test]
fn a_one_shot_lead_answers_a_teammates_plan_and_the_teammate_does_the_work() {
    let env = team_env(
        vec![
            tool(
                "spawn_teammate",
                json!({"name": "alice", "role": "writer", "prompt": "Write notes.txt.", "plan_required": true}),
            ),
            text("ALICE-STARTED"),
            // Woken by alice's plan, as the REPL's lead would be.
            tool("plan_approval", json!({"approve": true, "feedback": "go ahead"})),
            text("Plan approved."),
        ],
        vec![(
            "alice",
            vec![
                // The plan comes after the lead's answer.
                tool("bash", json!({"command": until_in_a_session("ALICE-STARTED")})),
                tool("submit_plan", json!({"plan": "Write one line to notes.txt."})),
                text("waiting for approval"),
                tool("write", json!({"path": "notes.txt", "content": "approved line\n"})),
                text("written"),
            ],
        )],
    );
    env.write_home_config(PATIENT_TEAM_CONFIG);
    let (code, out, err) = run(&mut env.oneshot("Have alice write", &["--yes"]));
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("plan_approval_request from alice"), "{err}");
    assert_eq!(out.trim_end(), "Plan approved.");
    assert_eq!(std::fs::read_to_string(env.ws().join("notes.txt")).unwrap(), "approved line\n");
    assert_eq!(status_of(env.ws(), "alice"), "shutdown");
}
