//! Secrets through the real binary: commands get an allow-listed
//! environment, known secret values are redacted from session files, the
//! home is private, and `TMPDIR` does not widen where commands may write.

use crate::common;

use std::os::unix::fs::PermissionsExt;

use common::{Env, Wire, run, tool_results};
use ferroclaw_testkit::Turn;
use serde_json::json;

const SERVICE_TOKEN: &str = "tok-5f2a9c81e4d7b360";

#[test]
fn redteam_secrets_bash_gets_no_keys_or_tokens_unless_config_names_them() {
    let env = Env::new(
        Wire::Anthropic,
        vec![
            Turn::tool("bash", json!({"command": "env; echo TMPDIR is $TMPDIR"})).into(),
            Turn::text("done").into(),
        ],
    );
    env.write_home_config("[sandbox]\nenv = [\"PASSED_ON_TOKEN\"]\n");
    let mut cmd = env.oneshot("show the environment", &["--yes"]);
    cmd.env("MY_SERVICE_TOKEN", SERVICE_TOKEN)
        .env("PASSED_ON_TOKEN", "named-in-config-123")
        .env("TMPDIR", env.home.path());
    let (code, _, stderr) = run(&mut cmd);
    assert_eq!(code, 0, "{stderr}");
    let results = tool_results(&env.request_body(1));
    let out = &results[0].0;
    assert!(!out.contains("ANTHROPIC_API_KEY"), "provider key leaked: {out}");
    assert!(!out.contains("MY_SERVICE_TOKEN"), "token leaked: {out}");
    assert!(!out.contains("FERROCLAW_HOME"), "{out}");
    assert!(out.contains("PASSED_ON_TOKEN=named-in-config-123"), "{out}");
    assert!(out.contains("TMPDIR is /tmp"), "{out}");
}

#[test]
fn redteam_secrets_session_files_redact_known_secret_values_and_are_private() {
    let env = Env::new(
        Wire::Anthropic,
        vec![Turn::tool("read", json!({"path": "notes.txt"})).into(), Turn::text("read it").into()],
    );
    std::fs::write(env.ws().join("notes.txt"), format!("MY_SERVICE_TOKEN={SERVICE_TOKEN}\n"))
        .unwrap();
    let mut cmd = env.oneshot("read notes.txt", &["--yes"]);
    cmd.env("MY_SERVICE_TOKEN", SERVICE_TOKEN);
    let (code, _, stderr) = run(&mut cmd);
    assert_eq!(code, 0, "{stderr}");
    let files = env.session_files();
    assert_eq!(files.len(), 1, "{files:?}");
    let session = std::fs::read_to_string(&files[0]).unwrap();
    assert!(!session.contains(SERVICE_TOKEN), "the token is in the session file");
    assert!(session.contains("[REDACTED:MY_SERVICE_TOKEN]"), "{session}");
    for line in session.lines() {
        serde_json::from_str::<serde_json::Value>(line).expect("every line stays JSON");
    }
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&files[0]), 0o600, "session file");
    assert_eq!(mode(files[0].parent().unwrap()), 0o700, "project folder");
    assert_eq!(mode(&env.home.path().join("sessions")), 0o700, "sessions folder");
    assert_eq!(mode(env.home.path()), 0o700, "home");
}

#[test]
fn a_home_in_folders_not_made_yet_is_private_but_its_parents_get_the_usual_mode() {
    let env = Env::new(Wire::Anthropic, vec![Turn::text("fine").into()]);
    let root = tempfile::tempdir().unwrap();
    let usual = root.path().join("usual");
    std::fs::create_dir(&usual).unwrap();
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    for (name, args) in [("p", &["-p", "hi"][..]), ("init", &["init"])] {
        let home = root.path().join(name).join("deeper/home");
        let (code, _, stderr) = run(env.cmd().args(args).env("FERROCLAW_HOME", &home));
        assert_eq!(code, 0, "{name}: {stderr}");
        assert_eq!(mode(&home), 0o700, "{name}: the home");
        assert_eq!(mode(&root.path().join(name)), mode(&usual), "{name}: a parent");
        assert_eq!(mode(&root.path().join(name).join("deeper")), mode(&usual), "{name}");
    }
}

#[test]
fn redteam_confine_tmpdir_does_not_widen_where_bash_may_write() {
    if ferroclaw_tools::landlock::abi_version().is_none() {
        eprintln!("SKIP: this kernel has no Landlock");
        return;
    }
    let Some(elsewhere) = ferroclaw_testkit::scratch::dir_outside_temp() else {
        eprintln!("SKIP: no writable folder outside the temp folders");
        return;
    };
    let target = elsewhere.path().join("planted");
    let env = Env::new(
        Wire::Anthropic,
        vec![
            Turn::tool("bash", json!({"command": format!("echo x > {}", target.display())})).into(),
            Turn::text("done").into(),
        ],
    );
    let mut cmd = env.oneshot("write there", &["--yes"]);
    cmd.env("TMPDIR", elsewhere.path());
    let (code, _, stderr) = run(&mut cmd);
    assert_eq!(code, 0, "{stderr}");
    assert!(!target.exists(), "TMPDIR widened the sandbox");
}
