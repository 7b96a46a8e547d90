//! End-to-end: `ferroclaw doctor` checks everything it can, goes on after a
//! failure, and exits non-zero when something is broken.

use crate::common;

use common::{Env, Wire, run};
use ferroclaw_testkit::{Fault, Turn};

#[test]
fn a_broken_config_fails_doctor_and_the_other_checks_still_run() {
    let env = Env::new(Wire::Anthropic, vec![]);
    env.write_home_config("modle = \"x\"\n");
    let (code, stdout, _) = run(env.cmd().arg("doctor"));
    assert_eq!(code, 1, "{stdout}");
    assert!(stdout.contains("!! config:") && stdout.contains("did you mean \"model\""), "{stdout}");
    assert!(stdout.contains(" sandbox: "), "the kernel check still runs: {stdout}");
    assert!(
        stdout.contains(" protected files: "),
        "says whether .git/config is read-only: {stdout}"
    );
}

#[test]
fn doctor_sends_a_real_request_to_the_provider() {
    let env = Env::new(Wire::OpenAi, vec![Turn::text("ok").into()]);
    let (_, stdout, _) = run(env.cmd().arg("doctor"));
    assert!(stdout.contains("ok provider: answered a test request"), "{stdout}");
    assert!(stdout.contains("ok skills:") && stdout.contains(" gateway: "), "{stdout}");
    assert_eq!(env.server.requests().len(), 1);

    let down = Env::new(
        Wire::OpenAi,
        vec![Fault::Status { status: 401, body: None, retry_after: None }.into()],
    );
    let (code, stdout, _) = run(down.cmd().arg("doctor"));
    assert_eq!(code, 1, "{stdout}");
    assert!(stdout.contains("!! provider:") && stdout.contains("HTTP 401"), "{stdout}");
    assert!(stdout.contains(" sandbox: "), "checks go on after the failure: {stdout}");
}

#[test]
fn a_broken_mcp_json_is_one_doctor_problem_said_once() {
    let env = Env::new(Wire::Anthropic, vec![Turn::text("ok").into()]);
    std::fs::write(env.ws().join(".mcp.json"), "{\"mcpServers\": {").unwrap();
    let (code, _, stderr) = run(env.cmd().arg("trust"));
    assert_eq!(code, 0, "{stderr}");
    let (code, stdout, stderr) = run(env.cmd().arg("doctor"));
    assert_eq!(code, 1, "{stdout}");
    let said = |text: &str| text.matches("invalid JSON").count();
    assert_eq!(said(&stdout), 1, "{stdout}");
    assert!(
        stdout.contains("!! mcp: ") && stdout.contains(".mcp.json:1:16: invalid JSON"),
        "{stdout}"
    );
    assert_eq!(said(&stderr), 0, "not repeated as a warning: {stderr}");
}
