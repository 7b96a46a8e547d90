//! End-to-end: todo list, plan mode, sub-agents — the scripted model drives
//! the real binary.

use crate::common;

use common::{Env, Wire, run, tool_results};
use ferroclaw_testkit::{Fault, ScriptedToolCall, Turn};
use serde_json::json;

fn tool_names(body: &serde_json::Value) -> Vec<String> {
    body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().or(t["function"]["name"].as_str()).unwrap().to_string())
        .collect()
}

#[test]
fn the_todo_list_allows_one_item_in_progress() {
    let two = json!({"items": [
        {"content": "a", "status": "in_progress"},
        {"content": "b", "status": "in_progress"}]});
    let one = json!({"items": [
        {"content": "a", "status": "in_progress", "active_form": "Doing a"},
        {"content": "b", "status": "pending"}]});
    let env = Env::new(
        Wire::Anthropic,
        vec![
            Turn::tool("todo_write", two).into(),
            Turn::tool("todo_write", one).into(),
            Turn::text("listed").into(),
        ],
    );
    let (code, stdout, _) =
        run(&mut env.oneshot("plan the work", &["--output-format", "stream-json"]));
    assert_eq!(code, 0);
    let first = tool_results(&env.request_body(1));
    assert!(first[0].1 && first[0].0.contains("only ONE item may be in_progress"), "{first:?}");
    let second = tool_results(&env.request_body(2));
    assert!(!second[1].1 && second[1].0.contains("[>] a"), "{second:?}");
    assert!(stdout.contains(r#""type":"todos""#), "the list change is an event");
}

#[test]
fn an_open_todo_list_left_alone_for_three_turns_gets_a_reminder_once() {
    let list = json!({"items": [{"content": "a", "status": "in_progress"}, {"content": "b", "status": "pending"}]});
    let glob = || Turn::tool("glob", json!({"pattern": "*"})).into();
    let env = Env::new(
        Wire::OpenAi,
        vec![
            Turn::tool("todo_write", list).into(),
            glob(),
            glob(),
            glob(),
            glob(),
            Turn::text("done").into(),
        ],
    );
    assert_eq!(run(&mut env.oneshot("work", &[])).0, 0);
    let has_reminder =
        |i: usize| env.request_body(i).to_string().matches("Update your todos").count();
    assert_eq!(has_reminder(3), 0, "two turns without an update: no reminder yet");
    assert_eq!(has_reminder(4), 1, "after the third turn without an update");
    assert_eq!(has_reminder(5), 1, "given once, not again the next turn");
}

#[test]
fn plan_mode_refuses_changes_until_the_user_approves_the_plan() {
    let env = Env::new(
        Wire::Anthropic,
        vec![
            Turn::tool("write", json!({"path": "a.txt", "content": "x"})).into(),
            Turn::tool("exit_plan_mode", json!({"plan": "1. write a.txt"})).into(),
            Turn::tool("exit_plan_mode", json!({"plan": "1. write b.txt instead"})).into(),
            Turn::tool("write", json!({"path": "b.txt", "content": "y"})).into(),
            Turn::text("written").into(),
        ],
    );
    // Prompt, reject with feedback, approve with accept-edits, leave.
    let input = "make the file\nn, use b.txt\ne\n/exit\n";
    let (code, stdout, stderr) =
        run(env.cmd().args(["--permission-mode", "plan"]).write_stdin(input));
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("written"), "{stdout}");
    let refused = tool_results(&env.request_body(1));
    assert!(refused[0].1 && refused[0].0.contains("plan mode"), "{refused:?}");
    assert!(!env.ws().join("a.txt").exists());
    let rejected = tool_results(&env.request_body(2));
    assert!(
        rejected[1].0.contains("did not approve") && rejected[1].0.contains("use b.txt"),
        "{rejected:?}"
    );
    let approved = tool_results(&env.request_body(3));
    assert!(approved[2].0.contains("approved"), "{approved:?}");
    assert_eq!(
        std::fs::read_to_string(env.ws().join("b.txt")).unwrap(),
        "y",
        "accept-edits lets the write run"
    );
    assert!(stderr.contains("carry out this plan"), "{stderr}");
}

#[test]
fn plan_mode_in_one_shot_cannot_be_approved_and_says_so() {
    let env = Env::new(
        Wire::OpenAi,
        vec![
            Turn::tool("exit_plan_mode", json!({"plan": "do it"})).into(),
            Turn::text("Plan: do it").into(),
        ],
    );
    let (code, stdout, _) = run(&mut env.oneshot("plan", &["--permission-mode", "plan"]));
    assert_eq!(code, 0);
    assert_eq!(stdout, "Plan: do it\n");
    assert!(tool_results(&env.request_body(1))[0].0.contains("non-interactive"));
    assert!(env.request_body(0).to_string().contains("Plan mode is on"), "the model is told");
}

#[test]
fn two_sub_agents_run_in_parallel_with_restricted_tools() {
    let slow = |text: &str| Fault::SlowFirstByte { delay_ms: 600, then: Turn::text(text) }.into();
    let env = Env::new(
        Wire::Anthropic,
        vec![
            Turn::tools(vec![
                ScriptedToolCall::new(
                    "task",
                    json!({"description": "one", "prompt": "look at one", "agent_type": "explore"}),
                ),
                ScriptedToolCall::new(
                    "task",
                    json!({"description": "two", "prompt": "look at two", "agent_type": "explore"}),
                ),
            ])
            .into(),
            slow("found A"),
            slow("found B"),
            Turn::text("both done").into(),
        ],
    );
    let (code, stdout, stderr) = run(&mut env.oneshot("investigate", &[]));
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(stdout, "both done\n");
    let reqs = env.server.requests();
    let (a, b) = (&reqs[1], &reqs[2]);
    assert!(
        b.received_at < a.finished_at.unwrap(),
        "the second child started before the first finished"
    );
    for child in [a, b] {
        let names = tool_names(&child.body);
        assert!(
            names.contains(&"read".to_string()) && names.contains(&"grep".to_string()),
            "{names:?}"
        );
        for banned in ["task", "write", "edit", "bash"] {
            assert!(!names.contains(&banned.to_string()), "explore has no {banned}: {names:?}");
        }
        assert!(child.body["messages"].as_array().unwrap().len() == 1, "a fresh context");
    }
    let results = tool_results(&reqs[3].body);
    let texts: Vec<&str> = results.iter().map(|r| r.0.as_str()).collect();
    assert!(
        texts.iter().any(|t| t.contains("found A")) && texts.iter().any(|t| t.contains("found B")),
        "{texts:?}"
    );
    assert!(texts[0].contains("explore sub-agent: 1 turn"), "{texts:?}");
    assert_eq!(env.session_files().len(), 3, "one transcript per child beside the parent's");
    let (_, listed, _) = run(env.cmd().args(["sessions", "list"]));
    assert_eq!(listed.lines().count(), 2, "children are not listed as sessions: {listed}");
}

#[test]
fn a_custom_agent_type_gets_its_instructions_and_only_its_tools() {
    let env = Env::new(
        Wire::OpenAi,
        vec![
            Turn::tool("spawn", json!({"description": "review", "prompt": "review main.rs", "agent_type": "reviewer"})).into(),
            Turn::text("looks fine").into(),
            Turn::text("the reviewer says it looks fine").into(),
        ],
    );
    let dir = env.ws().join(".agent/agents");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("reviewer.md"),
        "---\nname: reviewer\ndescription: reviews code for bugs\ntools: [read, grep]\n---\nYou are a strict code reviewer.\n",
    )
    .unwrap();
    // A project's agent type picks its model only once the project is trusted.
    assert_eq!(run(env.cmd().arg("trust")).0, 0);
    let (code, stdout, stderr) = run(&mut env.oneshot("review it", &[]));
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(stdout, "the reviewer says it looks fine\n");
    let child = env.request_body(1);
    let mut names = tool_names(&child);
    names.sort();
    assert_eq!(names, ["grep", "read", "todo_write"]);
    assert!(child["messages"][0]["content"].as_str().unwrap().contains("strict code reviewer"));
    let parent_tools = tool_names(&env.request_body(0));
    assert!(parent_tools.contains(&"task".to_string()));
}

#[test]
fn a_background_job_result_arrives_exactly_once_while_the_model_keeps_working() {
    let env = Env::new(
        Wire::Anthropic,
        vec![
            Turn::tool("background_run", json!({"command": "sleep 0.3; echo bg-$((40 + 2))"}))
                .into(),
            Turn::tool("bash", json!({"command": "sleep 1; echo foreground"})).into(),
            Turn::tool("glob", json!({"pattern": "*"})).into(),
            Turn::text("all done").into(),
        ],
    );
    let (code, stdout, stderr) = run(&mut env.oneshot("work", &["--yes"]));
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(stdout, "all done\n");
    let count = |i: usize| env.request_body(i).to_string().matches("bg-42").count();
    assert_eq!(count(1), 0, "still running when the model was asked again");
    assert_eq!(count(2), 1, "delivered before the next request");
    assert_eq!(count(3), 1, "and never again");
    assert!(env.request_body(2).to_string().contains("<background-results>"));
}

#[test]
fn a_dependency_chain_is_completed_in_order_and_the_board_stays_consistent() {
    let update = |id: u64, extra: serde_json::Value| {
        let mut v = json!({"task_id": id});
        v.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        Turn::tool("task_update", v).into()
    };
    let env = Env::new(
        Wire::OpenAi,
        vec![
            Turn::tools(vec![
                ScriptedToolCall::new("task_create", json!({"subject": "design"})),
                ScriptedToolCall::new("task_create", json!({"subject": "build"})),
                ScriptedToolCall::new("task_create", json!({"subject": "ship"})),
            ])
            .into(),
            update(2, json!({"addBlockedBy": [1]})),
            update(3, json!({"addBlockedBy": [2]})),
            update(3, json!({"status": "in_progress"})),
            update(1, json!({"status": "completed"})),
            update(2, json!({"status": "completed"})),
            Turn::tool("task_list", json!({})).into(),
            Turn::text("shipped").into(),
        ],
    );
    let (code, _, stderr) = run(&mut env.oneshot("plan the release", &["--yes"]));
    assert_eq!(code, 0, "{stderr}");
    let refused = tool_results(&env.request_body(4));
    assert!(
        refused.last().unwrap().0.contains("blocked"),
        "ship cannot start before build: {refused:?}"
    );
    let task = |id: u64| -> serde_json::Value {
        serde_json::from_str(
            &std::fs::read_to_string(env.ws().join(format!(".agent/tasks/task_{id}.json")))
                .unwrap(),
        )
        .unwrap()
    };
    assert_eq!(task(1)["status"], "completed");
    assert_eq!(task(2)["status"], "completed");
    assert_eq!(task(3)["blockedBy"], json!([]), "completing unblocked it");
    assert_eq!(task(3)["status"], "pending");
    let (code, board, _) = run(env.cmd().arg("tasks"));
    assert_eq!(code, 0);
    assert!(board.contains("ship") && board.contains("design"), "{board}");
}

#[test]
fn a_claude_code_agent_file_is_an_agent_type_with_its_tools_and_model_alias() {
    let env = Env::new(
        Wire::Anthropic,
        vec![
            Turn::tool("task", json!({"description": "review", "prompt": "review main.rs", "agent_type": "code-reviewer"})).into(),
            Turn::text("looks fine").into(),
            Turn::text("the reviewer says it looks fine").into(),
        ],
    );
    let dir = env.ws().join(".claude/agents");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("rev.md"),
        "---\nname: code-reviewer\ndescription: Reviews code for bugs\ntools: Read, Grep\nmodel: haiku\n---\nYou are a strict code reviewer.\n",
    )
    .unwrap();
    // A project's agent type picks its model only once the project is trusted.
    assert_eq!(run(env.cmd().arg("trust")).0, 0);
    let (code, stdout, stderr) = run(&mut env.oneshot("review it", &[]));
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(stdout, "the reviewer says it looks fine\n");
    let child = env.request_body(1);
    let mut names = tool_names(&child);
    names.sort();
    assert_eq!(names, ["grep", "read", "todo_write"], "Claude Code's tool names, mapped");
    assert_eq!(child["model"], "claude-haiku-4-5", "as Claude Code ran it on haiku");
    assert!(child["system"].to_string().contains("strict code reviewer"));
}
