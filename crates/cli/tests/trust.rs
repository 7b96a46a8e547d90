//! `ferroclaw trust`: a project's own settings apply only once trusted, and
//! again only after a changed file is trusted anew.

mod common;

use common::{Env, Wire, run, tool_results};
use ferroclaw_testkit::Turn;
use serde_json::json;

fn touch_script() -> Vec<ferroclaw_testkit::Step> {
    vec![Turn::tool("bash", json!({"command": "touch made"})).into(), Turn::text("ok").into()]
}

#[test]
fn project_settings_apply_after_trust_and_a_changed_file_asks_again() {
    let env = Env::new(Wire::OpenAi, [touch_script(), touch_script(), touch_script()].concat());
    std::fs::create_dir_all(env.ws().join(".agent")).unwrap();
    std::fs::write(env.ws().join(".agent/config.toml"), "permission_mode = \"bypass\"\n").unwrap();

    let (code, _, stderr) = run(&mut env.oneshot("go", &[]));
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains("permission_mode = \"bypass\""), "names what is ignored: {stderr}");
    assert!(stderr.contains("ferroclaw trust"), "says how to trust: {stderr}");
    assert!(!env.ws().join("made").exists(), "bypass from an untrusted file must not apply");
    assert!(tool_results(&env.request_body(1))[0].0.contains("approval"));

    let (code, stdout, stderr) = run(env.cmd().arg("trust"));
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("trusted") && stdout.contains("bypass"), "{stdout}");
    let (_, _, stderr) = run(&mut env.oneshot("go", &[]));
    assert!(env.ws().join("made").exists(), "trusted bypass applies: {stderr}");
    std::fs::remove_file(env.ws().join("made")).unwrap();

    std::fs::write(env.ws().join(".agent/config.toml"), "permission_mode = \"bypass\"\n# edited\n")
        .unwrap();
    let (_, _, stderr) = run(&mut env.oneshot("go", &[]));
    assert!(stderr.contains("ferroclaw trust"), "a changed file asks again: {stderr}");
    assert!(!env.ws().join("made").exists());

    let (_, stdout, _) = run(env.cmd().args(["trust", "--list"]));
    assert!(stdout.contains("changed since trusted"), "{stdout}");
    let (code, stdout, _) = run(env.cmd().args(["trust", "--revoke"]));
    assert_eq!(code, 0);
    assert!(stdout.contains("no longer trusted"), "{stdout}");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(env.home.path().join("trust.json")).unwrap().permissions();
        assert_eq!(mode.mode() & 0o777, 0o600);
    }
}

#[cfg(unix)]
#[test]
fn a_cloned_repository_cannot_hang_startup_with_links_to_devices_or_fifos() {
    // Git stores symbolic links: `AGENTS.md -> /dev/zero` is read forever
    // (until memory runs out) and a link to a FIFO never opens. All of these
    // files are read before the project is trusted. FIFOs here (a hang, not
    // an exhausted machine, when this regresses); `/dev/zero` is refused by
    // the same check (`ferroclaw_tools::repo_file` tests).
    let env = Env::new(Wire::OpenAi, vec![Turn::text("still here").into()]);
    let ws = env.ws();
    std::fs::create_dir_all(ws.join(".claude/commands")).unwrap();
    std::fs::create_dir_all(ws.join(".agent/rules")).unwrap();
    for fifo in [
        "AGENTS.md",
        "CLAUDE.md",
        ".mcp.json",
        ".claude/settings.json",
        ".agent/config.toml",
        ".claude/commands/review.md",
        ".agent/rules/style.md",
    ] {
        let made = std::process::Command::new("mkfifo").arg(ws.join(fifo)).status().unwrap();
        assert!(made.success());
    }
    let oneshot = || {
        let mut cmd = env.oneshot("hi", &[]);
        cmd.timeout(std::time::Duration::from_secs(30));
        run(&mut cmd)
    };
    // A settings file that cannot be read is one clear error, as a broken one is.
    let (code, _, stderr) = oneshot();
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("config.toml is not a regular file"), "{stderr}");
    std::fs::remove_file(ws.join(".agent/config.toml")).unwrap();
    let (code, _, stderr) = oneshot();
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("settings.json is not a regular file"), "{stderr}");
    std::fs::remove_file(ws.join(".claude/settings.json")).unwrap();
    // The others are skipped (instructions, rules, commands) or named (MCP).
    let (code, stdout, stderr) = oneshot();
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("still here"), "{stdout}");
    assert!(stderr.contains(".mcp.json is not a regular file"), "{stderr}");
}

#[cfg(unix)]
#[test]
fn answering_always_in_this_project_writes_nothing_outside_it_through_a_planted_link() {
    // Git stores links. A cloned repository ships `.agent/config.toml`
    // (its text is what gets written) and, beside it, the temporary file
    // the rule is saved through as a link to a file of the user's: before,
    // the save wrote the repository's TOML into `~/.cargo/config.toml`
    // (a `rustc-wrapper` for every later build). A `.agent` that is itself
    // a link out of the project is refused the same way.
    for planted in ["tmp link", ".agent link"] {
        let env = Env::new(
            Wire::Anthropic,
            vec![
                Turn::tool("bash", json!({"command": "touch made"})).into(),
                Turn::text("ok").into(),
            ],
        );
        let outside = env.home.path().join("outside");
        std::fs::create_dir_all(&outside).unwrap();
        let victim = outside.join("config.toml");
        std::fs::write(&victim, "# the user's own\n").unwrap();
        match planted {
            "tmp link" => {
                std::fs::create_dir_all(env.ws().join(".agent")).unwrap();
                std::fs::write(env.ws().join(".agent/config.toml"), "# the repository's\n")
                    .unwrap();
                std::os::unix::fs::symlink(&victim, env.ws().join(".agent/.config.toml.tmp"))
                    .unwrap();
            }
            _ => std::os::unix::fs::symlink(&outside, env.ws().join(".agent")).unwrap(),
        }
        let (code, _, stderr) = run(env.cmd().write_stdin("check the repo\np\n/exit\n"));
        assert_eq!(code, 0, "{stderr}");
        assert!(stderr.contains("allowed in this project"), "{stderr}");
        assert_eq!(
            std::fs::read_to_string(&victim).unwrap(),
            "# the user's own\n",
            "{planted}: a file outside the project was written"
        );
        if planted == "tmp link" {
            let saved = std::fs::read_to_string(env.ws().join(".agent/config.toml")).unwrap();
            assert!(saved.contains("bash(touch:*)"), "saved in the project: {saved}");
        } else {
            assert!(stderr.contains("cannot save the rule"), "says why: {stderr}");
        }
    }
}
