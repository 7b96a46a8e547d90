//! End-to-end: bad configuration and usage give one clear line and exit 2.

use crate::common;

use common::{Env, Wire, run};
use ferroclaw_testkit::Turn;

#[test]
fn no_api_key_names_the_variables_and_init() {
    let env = Env::new(Wire::Anthropic, vec![]);
    // A newcomer's home: no config file yet.
    std::fs::remove_file(env.home.path().join("config.toml")).unwrap();
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
fn a_key_missing_for_the_chosen_provider_is_named_with_the_config_file_that_exists() {
    let env = Env::new(Wire::Anthropic, vec![]);
    let (code, _, stderr) = run(env.cmd().args(["-p", "hi", "--model", "groq/llama"]));
    assert_eq!(code, 2);
    let config = env.home.path().join("config.toml");
    assert!(
        stderr.contains(&format!(
            "provider groq needs an API key: set GROQ_API_KEY (or api_key_env in \
             [providers.groq] of {})",
            config.display()
        )),
        "{stderr}"
    );
    assert!(!stderr.contains("ferroclaw init"), "the config exists already: {stderr}");
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

#[test]
fn max_turns_zero_and_an_mcp_server_name_with_spaces_are_refused_when_given() {
    let env = Env::new(Wire::Anthropic, vec![Turn::text("never").into()]);
    let (code, _, stderr) = run(env.cmd().args(["-p", "hi", "--max-turns", "0"]));
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("--max-turns must be at least 1"), "{stderr}");
    assert!(env.server.requests().is_empty());
    let (code, _, stderr) = run(env.cmd().args(["mcp", "add", "my server", "--", "npx", "srv"]));
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("invalid mcp server name \"my server\""), "{stderr}");
    assert!(!env.ws().join(".mcp.json").exists());
}

#[test]
fn mcp_add_to_the_user_config_keeps_the_templates_model_line_at_the_top_level() {
    let env = Env::new(Wire::Anthropic, vec![Turn::text("fine").into()]);
    std::fs::remove_file(env.home.path().join("config.toml")).unwrap();
    assert_eq!(run(env.cmd().arg("init")).0, 0);
    let (code, _, stderr) =
        run(env.cmd().args(["mcp", "add", "fs", "--scope", "user", "--", "true"]));
    assert_eq!(code, 0, "{stderr}");
    // The user then uncomments the template's model line, as it invites.
    let path = env.home.path().join("config.toml");
    let text = std::fs::read_to_string(&path).unwrap();
    let model_line = text.lines().find(|l| l.starts_with("# model = ")).unwrap().to_string();
    std::fs::write(&path, text.replacen(&model_line, &model_line[2..], 1)).unwrap();
    let config: toml::Table = toml::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert!(config.contains_key("model"), "model stays a top-level key");
    assert!(!config["mcp_servers"]["fs"].as_table().unwrap().contains_key("model"));
}

#[test]
fn a_closed_stdout_ends_a_command_quietly() {
    let env = Env::new(Wire::Anthropic, vec![]);
    for args in [&["status"][..], &["sessions", "list"], &["context"]] {
        let mut child = env
            .std_cmd()
            .args(args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        drop(child.stdout.take()); // `| head` that already left
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        assert_ne!(out.status.code(), Some(101), "{args:?}: {stderr}");
    }
}

#[test]
fn a_top_level_key_that_landed_in_a_table_names_that_table() {
    let env = Env::new(Wire::Anthropic, vec![]);
    env.write_home_config("[retry]\nmax_attempts = 3\nmodel = \"anthropic/claude-test\"\n");
    let (code, _, stderr) = run(env.cmd().args(["-p", "hi"]));
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("config.toml:3:1"), "{stderr}");
    assert!(stderr.contains("landed inside [retry]"), "{stderr}");
}

#[test]
fn a_model_name_that_is_not_provider_slash_model_names_the_aliases() {
    let env = Env::new(Wire::Anthropic, vec![]);
    let (code, _, stderr) = run(env.cmd().args(["-p", "hi", "--model", "claude"]));
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("model \"claude\" is not PROVIDER/MODEL"), "{stderr}");
    assert!(stderr.contains("or an alias: sonnet, opus, haiku"), "{stderr}");
    assert!(env.server.requests().is_empty());
}

#[test]
fn config_values_that_cannot_work_are_refused_with_their_line_before_any_request() {
    let env = Env::new(Wire::Anthropic, vec![Turn::text("never").into()]);
    for (text, said) in [
        ("max_turns = 0\n", "config.toml:1:13: max_turns = 0: must be at least 1"),
        ("max_tokens = 0\n", "config.toml:1:14: max_tokens = 0: must be at least 1"),
        (
            "max_tokens = 1000000000\n",
            "config.toml:1:14: max_tokens = 1000000000: must be at most 128000",
        ),
        ("context_window = 0\n", "config.toml:1:18: context_window = 0: must be at least 1"),
        (
            "compaction_threshold = 7\n",
            "config.toml:1:24: compaction_threshold = 7: must be above 0 and at most 1",
        ),
        ("[timeouts]\nidle_secs = 0\n", "config.toml:2:13: idle_secs = 0: must be at least 1"),
        (
            "[timeouts]\nconnect_secs = 0\n",
            "config.toml:2:16: connect_secs = 0: must be at least 1",
        ),
    ] {
        env.write_home_config(text);
        let (code, _, stderr) = run(&mut env.oneshot("hi", &[]));
        assert_eq!(code, 2, "{text}: {stderr}");
        assert!(stderr.contains(said), "{text}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
    }
    assert!(env.server.requests().is_empty());
}

#[test]
fn max_turns_zero_from_the_environment_is_refused_before_any_request() {
    let env = Env::new(Wire::Anthropic, vec![Turn::text("never").into()]);
    let (code, _, stderr) = run(env.oneshot("hi", &[]).env("FERROCLAW_MAX_TURNS", "0"));
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("FERROCLAW_MAX_TURNS=\"0\": expected a whole number, at least 1"),
        "{stderr}"
    );
    assert!(env.server.requests().is_empty());
}

#[test]
fn a_value_of_the_wrong_type_is_said_in_words_not_rust_types() {
    let env = Env::new(Wire::Anthropic, vec![]);
    env.write_home_config("max_turns = \"ten\"\n");
    let (code, _, stderr) = run(&mut env.oneshot("hi", &[]));
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("config.toml:1:13: invalid type: string \"ten\", expected a whole number"),
        "{stderr}"
    );
    assert!(!stderr.contains("u32"), "{stderr}");
}

#[test]
fn after_init_the_no_model_error_points_at_the_config_file_not_at_init() {
    let env = Env::new(Wire::Anthropic, vec![]);
    std::fs::remove_file(env.home.path().join("config.toml")).unwrap();
    let bare = || {
        let mut cmd = assert_cmd::Command::new(env!("CARGO_BIN_EXE_ferroclaw"));
        cmd.env_clear().env("FERROCLAW_HOME", env.home.path()).current_dir(env.ws());
        cmd
    };
    let (code, _, _) = run(bare().arg("init"));
    assert_eq!(code, 0);
    let (code, _, stderr) = run(bare().args(["-p", "hi"]));
    assert_eq!(code, 2, "{stderr}");
    let config = env.home.path().join("config.toml");
    assert!(
        stderr.contains(&format!("set model = \"PROVIDER/MODEL\" in {}", config.display())),
        "{stderr}"
    );
    assert!(!stderr.contains("ferroclaw init"), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
}

#[test]
fn with_no_model_nothing_starts_before_the_error_not_even_the_projects_mcp_servers() {
    let env = Env::new(Wire::Anthropic, vec![]);
    std::fs::remove_file(env.home.path().join("config.toml")).unwrap();
    let marker = env.ws().join("server-started");
    let config = serde_json::json!({"mcpServers": {"slow": {
        "command": "sh", "args": ["-c", format!("touch {}; sleep 30", marker.display())]
    }}});
    std::fs::write(env.ws().join(".mcp.json"), config.to_string()).unwrap();
    let bare = || {
        let mut cmd = assert_cmd::Command::new(env!("CARGO_BIN_EXE_ferroclaw"));
        cmd.env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("FERROCLAW_HOME", env.home.path())
            .current_dir(env.ws());
        cmd
    };
    assert_eq!(run(bare().arg("trust")).0, 0);
    for args in [&["-p", "hi"][..], &[]] {
        let (code, _, stderr) = run(bare().args(args).write_stdin(""));
        assert_eq!(code, 2, "{args:?}: {stderr}");
        assert!(stderr.starts_with("ferroclaw: no model configured"), "{stderr}");
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
    }
    assert!(!marker.exists(), "the MCP server was started for nothing");
    assert!(!env.home.path().join("recall.db").exists(), "nothing was written in the home");
}

#[test]
fn a_setup_error_under_output_format_json_still_prints_one_json_result_on_stdout() {
    let env = Env::new(Wire::Anthropic, vec![]);
    std::fs::remove_file(env.home.path().join("config.toml")).unwrap();
    let cases: [(&[&str], &str); 3] = [
        (&["--output-format", "json"], "result"),
        (&["--output-format", "stream-json", "--stream-format", "claude"], "result"),
        (&["--output-format", "stream-json"], "finished"),
    ];
    for (args, kind) in cases {
        let mut cmd = assert_cmd::Command::new(env!("CARGO_BIN_EXE_ferroclaw"));
        cmd.env_clear().env("FERROCLAW_HOME", env.home.path()).current_dir(env.ws());
        let (code, stdout, stderr) = run(cmd.args(["-p", "hi"]).args(args));
        assert_eq!(code, 2, "{args:?}: {stderr}");
        assert!(stderr.starts_with("ferroclaw: no model configured"), "{stderr}");
        assert_eq!(stdout.lines().count(), 1, "{args:?}: {stdout}");
        let result: serde_json::Value = serde_json::from_str(&stdout).unwrap();
        assert_eq!(result["type"], kind, "{stdout}");
        assert_eq!(result["is_error"], true, "{stdout}");
        let message = result["result"].as_str().unwrap_or_default();
        assert!(message.starts_with("no model configured"), "{stdout}");
    }
    // Text output keeps stdout empty.
    let mut cmd = assert_cmd::Command::new(env!("CARGO_BIN_EXE_ferroclaw"));
    cmd.env_clear().env("FERROCLAW_HOME", env.home.path()).current_dir(env.ws());
    let (code, stdout, _) = run(cmd.args(["-p", "hi"]));
    assert_eq!((code, stdout.as_str()), (2, ""));
}

#[test]
fn a_config_file_over_the_cap_is_an_error_naming_its_size_and_the_cap() {
    let env = Env::new(Wire::Anthropic, vec![Turn::text("never").into()]);
    let padding = format!("# {}\n", "x".repeat(5 * 1024 * 1024));
    env.write_home_config(&padding);
    let (code, _, stderr) = run(&mut env.oneshot("hi", &[]));
    assert_ne!(code, 0, "{stderr}");
    assert!(
        stderr.contains("config.toml is 5.0 MB (") && stderr.contains("over the 4 MB cap"),
        "{stderr}"
    );
    assert!(env.server.requests().is_empty());
}
