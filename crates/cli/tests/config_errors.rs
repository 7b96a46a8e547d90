//! End-to-end: bad configuration and usage give one clear line and exit 2.

mod common;

use common::{Env, Wire, run};
use ferroclaw_testkit::Turn;

#[test]
fn no_api_key_names_the_variables_and_init() {
    let env = Env::new(Wire::Anthropic, vec![]);
    let mut cmd = assert_cmd::Command::new(env!("CARGO_BIN_EXE_ferroclaw"));
    cmd.env_clear().env("FERROCLAW_HOME", env.home.path()).current_dir(env.ws()).args(["-p", "hi"]);
    let (code, _, stderr) = run(&mut cmd);
    assert_eq!(code, 2);
    assert!(
        stderr.contains("ANTHROPIC_API_KEY")
            && stderr.contains("OPENAI_API_KEY")
            && stderr.contains("ferroclaw init"),
        "{stderr}"
    );
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
}

#[test]
fn a_key_missing_for_the_chosen_provider_is_named() {
    let env = Env::new(Wire::Anthropic, vec![]);
    let (code, _, stderr) = run(env.cmd().args(["-p", "hi", "--model", "groq/llama"]));
    assert_eq!(code, 2);
    assert!(stderr.contains("GROQ_API_KEY"), "{stderr}");
}

#[test]
fn unknown_provider_and_bad_model_syntax_list_the_valid_providers() {
    let env = Env::new(Wire::Anthropic, vec![]);
    for model in ["nosuch/model", "justamodel"] {
        let (code, _, stderr) = run(env.cmd().args(["-p", "hi", "--model", model]));
        assert_eq!(code, 2, "{stderr}");
        assert!(stderr.contains("anthropic, openai, openrouter"), "{stderr}");
    }
}

#[test]
fn a_bad_config_file_is_reported_with_its_path_and_line() {
    let env = Env::new(Wire::Anthropic, vec![Turn::text("unused").into()]);
    std::fs::create_dir_all(env.ws().join(".agent")).unwrap();
    std::fs::write(env.ws().join(".agent/config.toml"), "max_turns = 3\nmodle = \"x\"\n").unwrap();
    let (code, _, stderr) = run(&mut env.oneshot("hi", &[]));
    assert_eq!(code, 2);
    assert!(
        stderr.contains(".agent/config.toml:2:1: unknown key \"modle\" (did you mean \"model\"?)"),
        "{stderr}"
    );
    assert!(env.server.requests().is_empty());
}

#[test]
fn init_writes_a_config_that_loads() {
    let env = Env::new(Wire::Anthropic, vec![Turn::text("fine").into()]);
    std::fs::remove_file(env.home.path().join("config.toml")).unwrap();
    let (code, stdout, _) = run(env.cmd().arg("init"));
    assert_eq!(code, 0);
    assert!(stdout.contains("config.toml"));
    let (code, stdout, stderr) = run(&mut env.oneshot("hi", &[]));
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(stdout, "fine\n");
}

#[test]
fn bad_flags_are_usage_errors() {
    let env = Env::new(Wire::Anthropic, vec![]);
    let (code, _, stderr) = run(env.cmd().args(["-p", "x", "--output-format", "yaml"]));
    assert_eq!(code, 2, "{stderr}");
    let (code, _, stderr) = run(env.cmd().args(["-p", "x", "--permission-mode", "yolo"]));
    assert_eq!(code, 2);
    assert!(stderr.contains("accept-edits"), "{stderr}");
}
