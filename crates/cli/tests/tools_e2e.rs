//! End-to-end: the scripted model creates, edits and searches files and runs
//! commands in a temporary git repository through the real binary.

use crate::common;

use common::{Env, Wire, run, tool_results};
use ferroclaw_testkit::{ScriptedToolCall, Turn};
use serde_json::json;

#[test]
fn the_model_creates_edits_searches_and_runs_commands_in_a_git_repo() {
    let env = Env::new(
        Wire::Anthropic,
        vec![
            Turn::tool(
                "write",
                json!({"path": "src/lib.rs", "content": "pub fn answer() -> u32 {\n    41\n}\n"}),
            )
            .into(),
            Turn::tool(
                "edit",
                json!({"path": "src/lib.rs", "old_string": "41", "new_string": "42"}),
            )
            .into(),
            Turn::tools(vec![
                ScriptedToolCall::new(
                    "grep",
                    json!({"pattern": "fn answer", "output_mode": "content"}),
                ),
                ScriptedToolCall::new("glob", json!({"pattern": "**/*.rs"})),
                ScriptedToolCall::new("read", json!({"path": "src/lib.rs"})),
            ])
            .into(),
            Turn::tool(
                "bash",
                json!({"command": "git add -A && git status --short && cd src && pwd"}),
            )
            .into(),
            Turn::tool("bash", json!({"command": "pwd && ls"})).into(),
            Turn::tool(
                "edit",
                json!({"path": "src/lib.rs", "old_string": "nothing like this", "new_string": "x"}),
            )
            .into(),
            Turn::text("Done: answer() returns 42.").into(),
        ],
    );
    let git = |args: &[&str]| {
        let ok = std::process::Command::new("git")
            .args(args)
            .current_dir(env.ws())
            .output()
            .unwrap()
            .status
            .success();
        assert!(ok, "git {args:?}");
    };
    git(&["init", "-q"]);
    std::fs::write(env.ws().join(".gitignore"), "target/\n").unwrap();
    std::fs::create_dir_all(env.ws().join("target")).unwrap();
    std::fs::write(env.ws().join("target/junk.rs"), "fn answer() {}\n").unwrap();

    let (code, stdout, stderr) = run(&mut env.oneshot("make answer() return 42", &["--yes"]));
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(stdout, "Done: answer() returns 42.\n");
    assert_eq!(
        std::fs::read_to_string(env.ws().join("src/lib.rs")).unwrap(),
        "pub fn answer() -> u32 {\n    42\n}\n"
    );

    let searched = tool_results(&env.request_body(3));
    let (grep, glob, read) = (&searched[2].0, &searched[3].0, &searched[4].0);
    assert!(grep.contains("src/lib.rs") && grep.contains("fn answer"), "{grep}");
    assert!(!grep.contains("junk"), "gitignored files are not searched: {grep}");
    assert!(glob.contains("src/lib.rs") && !glob.contains("junk"), "{glob}");
    assert!(read.contains("2\t    42"), "numbered lines: {read}");

    let ran = tool_results(&env.request_body(4));
    assert!(ran[5].0.contains("A  src/lib.rs"), "{:?}", ran[5]);
    let cd = tool_results(&env.request_body(5));
    assert!(
        cd[6].0.contains("/src\n") && cd[6].0.contains("lib.rs"),
        "cd sticks between calls: {:?}",
        cd[6]
    );

    let failed = tool_results(&env.request_body(6));
    assert!(failed[7].1 && failed[7].0.contains("not found"), "{:?}", failed[7]);
    assert_eq!(
        std::fs::read_to_string(env.ws().join("src/lib.rs")).unwrap(),
        "pub fn answer() -> u32 {\n    42\n}\n",
        "a failed edit writes nothing"
    );
}

#[test]
fn paths_outside_the_workspace_are_refused_and_nothing_is_written() {
    let outside = tempfile::tempdir().unwrap();
    let target = outside.path().join("evil.txt");
    let env = Env::new(
        Wire::OpenAi,
        vec![
            Turn::tools(vec![
                ScriptedToolCall::new(
                    "write",
                    json!({"path": target.to_string_lossy(), "content": "x"}),
                ),
                ScriptedToolCall::new("read", json!({"path": "../../../../etc/passwd"})),
            ])
            .into(),
            Turn::text("refused").into(),
        ],
    );
    let (code, _, _) = run(&mut env.oneshot("escape", &["--yes"]));
    assert_eq!(code, 0);
    assert!(!target.exists());
    let results = tool_results(&env.request_body(1));
    assert!(results[0].0.contains("outside"), "{results:?}");
    assert!(results[1].0.contains("outside"), "{results:?}");
}

#[test]
fn a_catastrophic_command_is_refused_before_it_runs() {
    let env = Env::new(
        Wire::Anthropic,
        vec![
            Turn::tool("bash", json!({"command": "rm -rf / --no-preserve-root"})).into(),
            Turn::text("ok").into(),
        ],
    );
    let (code, _, _) = run(&mut env.oneshot("clean up", &["--yes"]));
    assert_eq!(code, 0);
    let results = tool_results(&env.request_body(1));
    assert!(results[0].1 && results[0].0.contains("refused before running"), "{results:?}");
}

#[test]
fn accept_edits_mode_writes_files_but_still_refuses_commands_in_one_shot() {
    let env = Env::new(
        Wire::Anthropic,
        vec![
            Turn::tools(vec![
                ScriptedToolCall::new("write", json!({"path": "notes.md", "content": "hi"})),
                ScriptedToolCall::new("bash", json!({"command": "touch made-by-bash"})),
            ])
            .into(),
            Turn::text("ok").into(),
        ],
    );
    let (code, _, _) = run(&mut env.oneshot("go", &["--permission-mode", "accept-edits"]));
    assert_eq!(code, 0);
    assert!(env.ws().join("notes.md").exists());
    assert!(!env.ws().join("made-by-bash").exists());
    let session = std::fs::read_to_string(&env.session_files()[0]).unwrap();
    assert!(
        session.contains(r#""tool":"write","call_id""#)
            && session.contains(r#""decision":"allow""#),
        "{session}"
    );
    assert!(
        session.contains(r#""tool":"bash""#) && session.contains(r#""decision":"deny: "#),
        "decisions are logged"
    );
}

#[test]
fn deny_rules_in_project_config_win_over_yes() {
    let env = Env::new(
        Wire::OpenAi,
        vec![
            Turn::tool("bash", json!({"command": "curl http://example.com"})).into(),
            Turn::text("ok").into(),
        ],
    );
    std::fs::create_dir_all(env.ws().join(".agent")).unwrap();
    std::fs::write(
        env.ws().join(".agent/config.toml"),
        "[permissions]\ndeny = [\"bash(curl *)\"]\n",
    )
    .unwrap();
    let (code, _, _) = run(&mut env.oneshot("fetch", &["--yes"]));
    assert_eq!(code, 0);
    let results = tool_results(&env.request_body(1));
    assert!(results[0].0.contains("denied by the rule bash(curl *)"), "{results:?}");
}

#[test]
fn the_model_cannot_overwrite_a_file_changed_after_it_read_it_nor_one_it_never_read() {
    let env = Env::new(
        Wire::Anthropic,
        vec![
            Turn::tool("read", json!({"path": "notes.txt"})).into(),
            // The user saves the file while the model works.
            Turn::tool("bash", json!({"command": "echo 'the user line' >> notes.txt"})).into(),
            Turn::tools(vec![
                ScriptedToolCall::new("write", json!({"path": "notes.txt", "content": "agent\n"})),
                ScriptedToolCall::new("write", json!({"path": "todo.txt", "content": "agent\n"})),
            ])
            .into(),
            Turn::text("ok").into(),
        ],
    );
    std::fs::write(env.ws().join("notes.txt"), "v1\n").unwrap();
    std::fs::write(env.ws().join("todo.txt"), "the user's todo\n").unwrap();
    let (code, _, err) = run(&mut env.oneshot("rewrite the notes", &["--yes"]));
    assert_eq!(code, 0, "{err}");
    let results = tool_results(&env.request_body(3));
    let refused = |i: usize, why: &str| results[i].1 && results[i].0.ends_with(why);
    assert!(refused(2, ferroclaw_tools::CHANGED_SINCE_READ), "{results:?}");
    assert!(refused(3, ferroclaw_tools::NOT_READ_YET), "{results:?}");
    assert_eq!(std::fs::read_to_string(env.ws().join("notes.txt")).unwrap(), "v1\nthe user line\n");
    assert_eq!(std::fs::read_to_string(env.ws().join("todo.txt")).unwrap(), "the user's todo\n");
}

#[test]
fn edit_and_multi_edit_refuse_a_file_never_read_and_apply_after_any_read_or_own_write() {
    let edit = |path: &str| json!({"path": path, "old_string": "alpha", "new_string": "ALPHA"});
    let multi = |path: &str| json!({"path": path, "edits": [{"old_string": "alpha", "new_string": "ALPHA"}]});
    let env = Env::new(
        Wire::Anthropic,
        vec![
            Turn::tools(vec![
                ScriptedToolCall::new("edit", edit("blind.txt")),
                ScriptedToolCall::new("multi_edit", multi("blind.txt")),
            ])
            .into(),
            // A partial read counts, as in Claude Code; so does the agent's own write.
            Turn::tools(vec![
                ScriptedToolCall::new("read", json!({"path": "seen.txt", "offset": 2, "limit": 1})),
                ScriptedToolCall::new("write", json!({"path": "made.txt", "content": "alpha\n"})),
            ])
            .into(),
            Turn::tools(vec![
                ScriptedToolCall::new("edit", edit("seen.txt")),
                ScriptedToolCall::new("multi_edit", multi("made.txt")),
            ])
            .into(),
            Turn::text("ok").into(),
        ],
    );
    std::fs::write(env.ws().join("blind.txt"), "alpha\n").unwrap();
    std::fs::write(env.ws().join("seen.txt"), "alpha\nbeta\n").unwrap();
    let (code, _, err) = run(&mut env.oneshot("edit the files", &["--yes"]));
    assert_eq!(code, 0, "{err}");
    let results = tool_results(&env.request_body(3));
    for refused in &results[..2] {
        assert!(refused.1 && refused.0.ends_with(ferroclaw_tools::NOT_READ_YET), "{results:?}");
    }
    assert!(results[2..].iter().all(|(_, is_error)| !is_error), "{results:?}");
    let file = |name: &str| std::fs::read_to_string(env.ws().join(name)).unwrap();
    assert_eq!(file("blind.txt"), "alpha\n", "the file never read is left as it was");
    assert_eq!(file("seen.txt"), "ALPHA\nbeta\n");
    assert_eq!(file("made.txt"), "ALPHA\n");
}

#[test]
fn a_sub_agent_reads_a_file_before_editing_it_and_its_reads_do_not_count_for_the_parent() {
    let edit = json!({"path": "notes.txt", "old_string": "alpha", "new_string": "ALPHA"});
    let task = |prompt: &str| json!({"description": "notes", "prompt": prompt});
    let env = Env::new(
        Wire::Anthropic,
        vec![
            Turn::tool("read", json!({"path": "notes.txt"})).into(),
            Turn::tool("task", task("change alpha to ALPHA")).into(),
            // The sub-agent: the parent's read is not its own, as in Claude Code.
            Turn::tool("edit", edit.clone()).into(),
            Turn::text("not read").into(),
            Turn::tool("task", task("read todo.txt")).into(),
            Turn::tool("read", json!({"path": "todo.txt"})).into(),
            Turn::text("read it").into(),
            Turn::tools(vec![
                ScriptedToolCall::new("edit", edit),
                ScriptedToolCall::new(
                    "edit",
                    json!({"path": "todo.txt", "old_string": "alpha", "new_string": "ALPHA"}),
                ),
            ])
            .into(),
            Turn::text("ok").into(),
        ],
    );
    std::fs::write(env.ws().join("notes.txt"), "alpha\n").unwrap();
    std::fs::write(env.ws().join("todo.txt"), "alpha\n").unwrap();
    let (code, _, err) = run(&mut env.oneshot("edit the notes", &["--yes"]));
    assert_eq!(code, 0, "{err}");
    let child = tool_results(&env.request_body(3));
    assert!(child[0].1 && child[0].0.ends_with(ferroclaw_tools::NOT_READ_YET), "{child:?}");
    let parent = tool_results(&env.request_body(8));
    let last_two = &parent[parent.len() - 2..];
    assert!(!last_two[0].1, "the parent read notes.txt itself: {last_two:?}");
    assert!(last_two[1].1 && last_two[1].0.ends_with(ferroclaw_tools::NOT_READ_YET));
    let file = |name: &str| std::fs::read_to_string(env.ws().join(name)).unwrap();
    assert_eq!((file("notes.txt"), file("todo.txt")), ("ALPHA\n".into(), "alpha\n".into()));
}

#[test]
fn a_continued_session_still_knows_the_files_it_read_unless_they_changed_while_away() {
    let env = Env::new(
        Wire::Anthropic,
        vec![
            Turn::tools(vec![
                ScriptedToolCall::new("read", json!({"path": "kept.txt"})),
                ScriptedToolCall::new("read", json!({"path": "changed.txt"})),
            ])
            .into(),
            Turn::text("read both").into(),
            Turn::tools(vec![
                ScriptedToolCall::new("write", json!({"path": "kept.txt", "content": "agent\n"})),
                ScriptedToolCall::new(
                    "write",
                    json!({"path": "changed.txt", "content": "agent\n"}),
                ),
            ])
            .into(),
            Turn::text("ok").into(),
        ],
    );
    std::fs::write(env.ws().join("kept.txt"), "kept\n").unwrap();
    std::fs::write(env.ws().join("changed.txt"), "changed\n").unwrap();
    let (code, _, err) = run(&mut env.oneshot("read them", &["--yes"]));
    assert_eq!(code, 0, "{err}");
    // The user edits one file between the two runs (dated later than the
    // session file, whatever the clock's resolution).
    std::fs::write(env.ws().join("changed.txt"), "the user's edit\n").unwrap();
    let later = std::time::SystemTime::now() + std::time::Duration::from_secs(60);
    let file = std::fs::File::options().write(true).open(env.ws().join("changed.txt")).unwrap();
    file.set_modified(later).unwrap();
    let (code, _, err) = run(&mut env.oneshot("now write them", &["--yes", "--continue"]));
    assert_eq!(code, 0, "{err}");
    let results = tool_results(&env.request_body(3));
    let last_two = &results[results.len() - 2..];
    assert!(!last_two[0].1, "kept.txt is still known: {last_two:?}");
    assert!(last_two[1].1, "{last_two:?}");
    assert!(last_two[1].0.ends_with(ferroclaw_tools::CHANGED_SINCE_READ), "{last_two:?}");
    assert_eq!(std::fs::read_to_string(env.ws().join("kept.txt")).unwrap(), "agent\n");
    assert_eq!(std::fs::read_to_string(env.ws().join("changed.txt")).unwrap(), "the user's edit\n");
}

#[test]
fn file_tools_refuse_a_file_over_max_file_bytes_without_reading_it_and_binary_files_for_edit() {
    let env = Env::new(
        Wire::Anthropic,
        vec![
            // Read first: an edit of a file never read is refused before its size matters.
            Turn::tool("read", json!({"path": "small.txt"})).into(),
            Turn::tools(vec![
                ScriptedToolCall::new(
                    "edit",
                    json!({"path": "huge.log", "old_string": "x", "new_string": "y"}),
                ),
                ScriptedToolCall::new("read", json!({"path": "huge.log"})),
                ScriptedToolCall::new(
                    "edit",
                    json!({"path": "zeros.bin", "old_string": "\u{0}", "new_string": "a"}),
                ),
                ScriptedToolCall::new(
                    "multi_edit",
                    json!({"path": "small.txt", "edits": [
                        {"old_string": "a", "new_string": "bb", "replace_all": true}
                    ]}),
                ),
            ])
            .into(),
            Turn::text("ok").into(),
        ],
    );
    // A 1 GB sparse file: reading it would take a GB of memory at least.
    let huge = std::fs::File::create(env.ws().join("huge.log")).unwrap();
    huge.set_len(1 << 30).unwrap();
    std::fs::write(env.ws().join("zeros.bin"), vec![0u8; 800]).unwrap();
    // 600 bytes that an edit would grow past the configured limit.
    std::fs::write(env.ws().join("small.txt"), "a".repeat(600)).unwrap();
    env.write_home_config("max_file_bytes = 1000\n");
    let (code, _, err) = run(&mut env.oneshot("fix the log", &["--yes"]));
    assert_eq!(code, 0, "{err}");
    // After the read of small.txt.
    let results = tool_results(&env.request_body(2))[1..].to_vec();
    for (text, is_error) in &results[..2] {
        assert!(*is_error, "{results:?}");
        assert!(text.contains("huge.log is 1 GB (1073741824 bytes)"), "{text}");
        assert!(text.contains("`max_file_bytes`"), "{text}");
    }
    assert!(
        results[2].1 && results[2].0.contains("zeros.bin looks like a binary file"),
        "{results:?}"
    );
    assert!(
        results[3].1
            && results[3].0.contains("small.txt 1.2 KB (1200 bytes), over the 1000 bytes limit"),
        "{results:?}"
    );
    let meta = std::fs::metadata(env.ws().join("huge.log")).unwrap();
    assert_eq!(meta.len(), 1 << 30, "the huge file is left as it was");
    assert_eq!(std::fs::read(env.ws().join("zeros.bin")).unwrap(), vec![0u8; 800]);
    assert_eq!(std::fs::read_to_string(env.ws().join("small.txt")).unwrap(), "a".repeat(600));
}
