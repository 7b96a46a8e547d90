//! End-to-end: `ferroclaw doctor` checks everything it can, goes on after a
//! failure, and exits non-zero when something is broken.

mod common;

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
