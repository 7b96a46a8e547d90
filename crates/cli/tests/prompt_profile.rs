//! End-to-end: the lean prompt profile for small models. A provider marked
//! lean gets a short system prompt, only the core tools with terse schemas,
//! and a short answer cap; `ferroclaw context` says which profile is in use.

use crate::common;

use common::{Env, Wire, run};
use ferroclaw_testkit::Turn;

/// The lean profile's budget for system prompt and tools, in tokens
/// (estimated as characters / 4, which overcounts JSON for SmolLM2's
/// tokenizer; the real count is checked by the local-model test).
const LEAN_CAP_TOKENS: usize = 1_200;

#[test]
fn a_provider_marked_lean_gets_a_short_prompt_and_only_the_core_tools() {
    let env = Env::new(Wire::Anthropic, vec![Turn::text("ok").into()]);
    env.write_home_config("[providers.anthropic]\nprompt_profile = \"lean\"\n");
    std::fs::write(env.ws().join("AGENTS.md"), "Use make.\n".repeat(500)).unwrap();
    assert_eq!(run(&mut env.oneshot("hi", &[])).0, 0);
    let body = env.request_body(0);
    let names: Vec<&str> =
        body["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["read", "write", "edit", "list_dir", "glob", "grep", "bash"]);
    let size = body["system"].to_string().len() + body["tools"].to_string().len();
    assert!(size / 4 < LEAN_CAP_TOKENS, "system + tools is ~{} tokens: {body}", size / 4);
    assert!(body["system"].to_string().contains("Use make."), "project files are kept, capped");
    assert_eq!(body["max_tokens"], 512, "small models get a short answer cap");
}

#[test]
fn the_full_profile_stays_the_default_for_remote_models_and_config_can_pick_either() {
    let env = Env::new(Wire::Anthropic, vec![Turn::text("ok").into(), Turn::text("ok").into()]);
    assert_eq!(run(&mut env.oneshot("hi", &[])).0, 0);
    let tools = env.request_body(0)["tools"].to_string();
    assert!(tools.contains("\"load_skill\""), "{tools}");
    let (_, stdout, _) = run(env.cmd().arg("context"));
    assert!(stdout.lines().any(|l| l == "profile: full"), "{stdout}");

    env.write_home_config("prompt_profile = \"lean\"\nmax_tokens = 300\n");
    assert_eq!(run(&mut env.oneshot("hi", &[])).0, 0);
    let body = env.request_body(1);
    assert!(!body["tools"].to_string().contains("\"load_skill\""), "{body}");
    assert_eq!(body["max_tokens"], 300, "a configured cap wins");
    let (_, stdout, _) = run(env.cmd().arg("context"));
    assert!(stdout.lines().any(|l| l == "profile: lean"), "{stdout}");
}
