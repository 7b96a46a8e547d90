//! End-to-end: `ferroclaw eval tools` against the scripted model. This checks
//! the plumbing (fixtures, the agent run, the predicates, the report), not a
//! model: the script plays a model that solves two tasks and fails one.

use crate::common;

use common::{Env, Wire, run};
use ferroclaw_testkit::Turn;
use serde_json::json;

#[test]
fn eval_tools_runs_each_task_in_its_own_fixture_and_reports_the_pass_rate() {
    let env = Env::new(
        Wire::Anthropic,
        vec![
            // list-files: a real call, then an answer from its result.
            Turn::tool("list_dir", json!({})).into(),
            Turn::text("alpha.txt, beta.md and gamma.rs").into(),
            // read-answer: a guess without reading.
            Turn::text("I do not know.").into(),
            // create-file: a write, then a short answer.
            Turn::tool("write", json!({"path": "hello.txt", "content": "Hello, world!"})).into(),
            Turn::text("Created hello.txt.").into(),
        ],
    );
    // Tasks run in the eval's own order, whatever the order of --task.
    let (code, stdout, stderr) = run(env.cmd().args([
        "eval",
        "tools",
        "--task",
        "list-files",
        "--task",
        "create-file",
        "--task",
        "read-answer",
    ]));
    assert_eq!(code, 0, "{stderr}");
    let line = |name: &str| stdout.lines().find(|l| l.contains(name)).unwrap_or("").to_string();
    assert!(line("list-files").starts_with("PASS"), "{stdout}");
    assert!(line("list-files").contains("1 calls"), "{stdout}");
    assert!(line("create-file").starts_with("PASS"), "{stdout}");
    assert!(line("read-answer").starts_with("FAIL"), "{stdout}");
    assert!(stdout.contains("passed 2/3 (67%)"), "{stdout}");
    assert!(stdout.starts_with("eval tools: anthropic/claude-test, 3 tasks"), "{stdout}");
    // Tasks run in scratch folders, never in the user's project.
    assert!(!env.ws().join("hello.txt").exists());
    // The list the model got came from the fixture.
    let listed = common::tool_results(&env.request_body(1));
    assert!(listed[0].0.contains("gamma.rs"), "{listed:?}");
}

#[test]
fn an_unknown_task_name_is_one_clear_error() {
    let env = Env::new(Wire::Anthropic, vec![]);
    let (code, _, stderr) = run(env.cmd().args(["eval", "tools", "--task", "nope"]));
    assert_eq!(code, 2);
    assert!(stderr.contains("no eval task \"nope\"") && stderr.contains("list-files"), "{stderr}");
}
