//! End-to-end: `ferroclaw index` and `ferroclaw code ...` on a small project.

mod common;

use common::{Env, Wire, run, tool_results};
use ferroclaw_testkit::Turn;
use serde_json::json;

fn write(root: &std::path::Path, rel: &str, text: &str) {
    let path = root.join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

fn project() -> Env {
    let env = Env::new(Wire::Anthropic, vec![]);
    write(env.ws(), "app/util.py", "def helper():\n    return 1\n");
    write(
        env.ws(),
        "app/main.py",
        "from app.util import helper\n\n\ndef main():\n    return helper()\n",
    );
    env
}

#[test]
fn index_then_callers_cite_the_call_site_and_follow_an_edit() {
    let env = project();
    let (code, stdout, stderr) = run(env.cmd().arg("index"));
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.starts_with("indexed 2 files (2 parsed, 0 removed)"), "{stdout}");

    let (code, stdout, _) = run(env.cmd().args(["code", "callers", "helper"]));
    assert_eq!(code, 0);
    assert!(stdout.contains("app/main.py:5 function main -> helper [exact]"), "{stdout}");

    // The callee moves; the next question sees it without a new `index`.
    write(env.ws(), "app/util.py", "\n\ndef helper():\n    return 1\n");
    let (_, stdout, _) = run(env.cmd().args(["code", "definition", "helper"]));
    assert!(stdout.contains("app/util.py:3-4 function helper"), "{stdout}");
    let (_, stdout, _) = run(env.cmd().args(["code", "callers", "helper"]));
    assert!(
        stdout.contains("callers of helper (app/util.py:3): 1 edges (1 exact, 0 heuristic)"),
        "{stdout}"
    );
}

#[test]
fn an_unknown_symbol_is_one_clear_error() {
    let env = project();
    let (code, stdout, stderr) = run(env.cmd().args(["code", "callers", "nope"]));
    assert_eq!(code, 1);
    assert!(stdout.is_empty(), "{stdout}");
    assert!(stderr.contains("no symbol `nope` in the code index"), "{stderr}");
}

#[test]
fn the_model_asks_code_callers_once_the_project_is_indexed() {
    let env = Env::new(Wire::Anthropic, vec![Turn::text("no index yet").into()]);
    write(env.ws(), "app/util.py", "def helper():\n    return 1\n");
    // Before `ferroclaw index` the tools are not offered.
    let (code, _, stderr) = run(&mut env.oneshot("who calls helper?", &[]));
    assert_eq!(code, 0, "{stderr}");
    assert!(!env.request_body(0).to_string().contains("code_callers"), "offered without an index");

    let env = Env::new(
        Wire::Anthropic,
        vec![
            Turn::tool("code_callers", json!({"symbol": "helper"})).into(),
            Turn::text("main calls helper").into(),
        ],
    );
    write(env.ws(), "app/util.py", "def helper():\n    return 1\n");
    write(
        env.ws(),
        "app/main.py",
        "from app.util import helper\n\n\ndef main():\n    return helper()\n",
    );
    let (code, _, stderr) = run(env.cmd().arg("index"));
    assert_eq!(code, 0, "{stderr}");
    let (code, stdout, stderr) = run(&mut env.oneshot("who calls helper?", &[]));
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("main calls helper"), "{stdout}");
    let results = tool_results(&env.request_body(1));
    let (text, is_error) = &results[0];
    assert!(!is_error, "{text}");
    assert!(text.contains("app/main.py:5 function main -> helper [exact]"), "{text}");
}
