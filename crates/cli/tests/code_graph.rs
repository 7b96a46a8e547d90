//! End-to-end: `ferroclaw index` and `ferroclaw code ...` on a small project.

mod common;

use common::{Env, Wire, run};

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
