//! End-to-end: `ferroclaw index` and `ferroclaw code ...` on a small project.

use crate::common;

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
fn an_unknown_symbol_or_kind_is_one_clear_error_naming_what_to_type() {
    let env = project();
    for args in [["code", "callers", "nope"], ["code", "definition", "nope"]] {
        let (code, stdout, stderr) = run(env.cmd().args(args));
        assert_eq!(code, 1);
        assert!(stdout.is_empty(), "{stdout}");
        assert_eq!(
            stderr,
            "ferroclaw: no symbol `nope` in the code index (try `ferroclaw code find` with part \
             of the name)\n"
        );
    }
    let (code, _, stderr) = run(env.cmd().args(["code", "find", "help", "--kind", "func"]));
    assert_eq!(code, 1);
    assert!(stderr.contains("unknown kind \"func\"; kinds: function, method,"), "{stderr}");
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

#[test]
fn ferroclaw_context_shows_the_repo_map_when_asked_for() {
    let env = project();
    env.write_home_config("[context]\nrepo_map = true\n");
    // No index yet: no map, and no error.
    let (code, stdout, stderr) = run(env.cmd().arg("context"));
    assert_eq!(code, 0, "{stderr}");
    assert!(!stdout.contains("# Repo map"), "{stdout}");

    let (code, _, stderr) = run(env.cmd().arg("index"));
    assert_eq!(code, 0, "{stderr}");
    let (code, stdout, stderr) = run(env.cmd().arg("context"));
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("──── repo_map · ~"), "{stdout}");
    assert!(stdout.contains("app/util.py:\n  1 def helper()"), "{stdout}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_serve_offers_the_code_tools_once_the_project_is_indexed() {
    use ferroclaw_mcp::{HubOptions, McpConfig, McpHub, ServerConfig, Transport};
    let env = project();
    let (code, _, stderr) = run(env.cmd().arg("index"));
    assert_eq!(code, 0, "{stderr}");
    let mut config =
        ServerConfig::stdio("ferro", env!("CARGO_BIN_EXE_ferroclaw"), &["mcp", "serve"]);
    if let Transport::Stdio { env: vars, cwd, .. } = &mut config.transport {
        vars.insert("FERROCLAW_HOME".into(), env.home.path().display().to_string());
        *cwd = Some(env.ws().to_path_buf());
    }
    let hub = McpHub::start(
        McpConfig { servers: vec![config], ..Default::default() },
        HubOptions { workspace: env.ws().to_path_buf(), ..Default::default() },
    )
    .await;
    assert!(hub.problems().is_empty(), "{:?}", hub.problems());
    let mut tools = ferroclaw_tools::ToolRegistry::new();
    hub.register_tools(&mut tools);
    let callers = tools.get("mcp__ferro__code_callers").expect("code_callers offered");
    let out = callers
        .execute(json!({"symbol": "helper"}), &ferroclaw_tools::ToolContext::new("/"))
        .await
        .unwrap();
    assert!(!out.is_error, "{out:?}");
    assert!(out.joined_text().contains("app/main.py:5 function main -> helper [exact]"), "{out:?}");
    hub.shutdown().await;
}
