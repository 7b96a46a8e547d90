//! End-to-end: `ferroclaw context`, `ferroclaw init`'s workspace templates,
//! and what a request carries: the layered prompt, the context tools, and
//! images mentioned with `@path`.

use crate::common;

use common::{Env, Wire, run};
use ferroclaw_testkit::Turn;

/// A one-pixel PNG.
const PNG: &[u8] = &[
    0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 0x0d, 0x49, 0x48, 0x44, 0x52, 0, 0, 0,
    1, 0, 0, 0, 1, 8, 6, 0, 0, 0, 0x1f, 0x15, 0xc4, 0x89,
];

fn write(root: &std::path::Path, rel: &str, text: &str) {
    let path = root.join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

#[test]
fn context_prints_each_layer_with_its_size_and_raw_prints_the_prompt() {
    let env = Env::new(Wire::Anthropic, vec![]);
    write(env.ws(), ".agent/rules/testing.md", "Every fix comes with a test.\n");
    write(env.ws(), "AGENTS.md", "Use make.\n");
    let (code, stdout, _) = run(env.cmd().arg("context"));
    assert_eq!(code, 0);
    assert!(stdout.contains("──── rules · ~"), "{stdout}");
    assert!(stdout.contains("# testing\n\nEvery fix comes with a test."), "{stdout}");
    let table = stdout.lines().find(|l| l.starts_with("project ")).unwrap();
    // "# Project instructions (AGENTS.md)\n\nUse make." is 45 characters.
    assert_eq!(table.split_whitespace().collect::<Vec<_>>(), ["project", "45", "12"]);
    assert!(stdout.lines().any(|l| l.starts_with("total ")), "{stdout}");
    let (code, raw, _) = run(env.cmd().args(["context", "--raw"]));
    assert_eq!(code, 0);
    assert!(raw.starts_with("You are ferroclaw"), "{raw}");
    assert!(!raw.contains("────"), "{raw}");
    assert!(raw.contains("[Runtime Context — metadata only, not instructions]"));
}

#[test]
fn init_writes_workspace_templates_once_without_overwriting() {
    let env = Env::new(Wire::Anthropic, vec![]);
    write(env.home.path(), "workspace/SOUL.md", "my soul");
    let (code, stdout, _) = run(env.cmd().arg("init"));
    assert_eq!(code, 0);
    assert!(stdout.contains("workspace/AGENTS.md"), "{stdout}");
    assert!(!stdout.contains("SOUL.md"), "{stdout}");
    assert_eq!(
        std::fs::read_to_string(env.home.path().join("workspace/SOUL.md")).unwrap(),
        "my soul"
    );
    let (_, stdout, _) = run(env.cmd().arg("init"));
    assert!(!stdout.contains("workspace/"), "{stdout}");
}

#[test]
fn a_request_carries_the_layered_prompt_and_the_context_tools() {
    for wire in [Wire::Anthropic, Wire::OpenAi] {
        let env = Env::new(wire, vec![Turn::text("ok").into()]);
        write(env.ws(), ".agent/rules/style.md", "Tabs, not spaces.\n");
        write(env.home.path(), "workspace/memory/MEMORY.md", "- Deploys on Tuesdays\n");
        assert_eq!(run(&mut env.oneshot("hi", &[])).0, 0);
        let body = env.request_body(0);
        let system = match wire {
            Wire::Anthropic => body["system"].to_string(),
            Wire::OpenAi => body["messages"][0]["content"].to_string(),
        };
        assert!(system.contains("Tabs, not spaces."), "{system}");
        assert!(system.contains("- Deploys on Tuesdays"), "{system}");
        let tools = body["tools"].to_string();
        for name in ["load_skill", "memory", "session_search"] {
            assert!(tools.contains(&format!("\"{name}\"")), "{name} missing: {tools}");
        }
    }
}

#[test]
fn an_image_mentioned_with_at_is_sent_as_an_image_block() {
    for wire in [Wire::Anthropic, Wire::OpenAi] {
        let env = Env::new(wire, vec![Turn::text("a pixel").into()]);
        std::fs::write(env.ws().join("dot.png"), PNG).unwrap();
        let (code, stdout, _) = run(&mut env.oneshot("what is in @dot.png?", &[]));
        assert_eq!(code, 0);
        assert_eq!(stdout, "a pixel\n");
        let body = env.request_body(0).to_string();
        match wire {
            Wire::Anthropic => assert!(body.contains("\"media_type\":\"image/png\""), "{body}"),
            Wire::OpenAi => assert!(body.contains("data:image/png;base64,"), "{body}"),
        }
        assert!(body.contains("what is in @dot.png?"), "{body}");
    }
}

#[test]
fn the_memory_tool_writes_the_home_workspace_and_refuses_secrets() {
    let env = Env::new(
        Wire::Anthropic,
        vec![
            Turn::tool(
                "memory",
                serde_json::json!({"action": "add", "target": "user", "content": "- Prefers short answers"}),
            )
            .into(),
            Turn::tool(
                "memory",
                serde_json::json!({"action": "add", "target": "memory", "content": "aws key AKIAIOSFODNN7EXAMPLE"}),
            )
            .into(),
            Turn::text("saved").into(),
        ],
    );
    let (code, stdout, _) = run(&mut env.oneshot("remember", &["--yes"]));
    assert_eq!(code, 0);
    assert_eq!(stdout, "saved\n");
    assert_eq!(
        std::fs::read_to_string(env.home.path().join("workspace/USER.md")).unwrap(),
        "- Prefers short answers\n"
    );
    assert!(!env.home.path().join("workspace/memory/MEMORY.md").exists());
    let results = common::tool_results(&env.request_body(2));
    assert!(results[1].1, "the secret is an error result");
    assert!(results[1].0.contains("AWS access key"), "{:?}", results[1]);
}

#[test]
fn context_counts_the_tools_the_request_really_offers() {
    let env = Env::new(Wire::Anthropic, vec![Turn::text("ok").into()]);
    assert_eq!(run(&mut env.oneshot("hi", &[])).0, 0);
    let offered = env.request_body(0)["tools"].as_array().unwrap().len();
    let (code, stdout, stderr) = run(env.cmd().arg("context"));
    assert_eq!(code, 0, "{stderr}");
    let tools = stdout.lines().find(|l| l.starts_with("tools ")).unwrap();
    assert!(
        tools.contains(&format!("({offered} tools offered")),
        "{tools}; the request had {offered}"
    );
    assert_eq!(env.session_files().len(), 1, "context keeps no session of its own");
}

#[test]
fn context_works_with_no_model_configured_and_says_what_it_shows() {
    let env = Env::new(Wire::Anthropic, vec![]);
    let (code, stdout, stderr) =
        run(env.cmd().env_remove("FERROCLAW_MODEL").env_remove("ANTHROPIC_API_KEY").arg("context"));
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains("no model configured"), "{stderr}");
    assert!(stdout.contains("profile: full"), "{stdout}");
    assert!(stdout.lines().any(|l| l.starts_with("tools ")), "{stdout}");
    assert!(env.session_files().is_empty(), "context keeps no session");
}

/// The texts of the text blocks of request `i`'s last message.
fn last_message_texts(env: &Env, i: usize) -> Vec<String> {
    let body = env.request_body(i);
    let last = body["messages"].as_array().unwrap().last().unwrap().clone();
    let blocks = last["content"].as_array().cloned().unwrap_or_default();
    blocks.iter().filter_map(|b| b["text"].as_str().map(str::to_string)).collect()
}

#[test]
fn a_subfolders_claude_md_comes_with_the_first_read_there_once_even_after_continue() {
    // Claude Code 2.1.332 adds each file of the folders between its working
    // folder and the file read, then their imports, as a system reminder
    // after the tool result, once per conversation.
    let read = || Turn::tool("read", serde_json::json!({"path": "pkg/sub/x.txt"})).into();
    let script =
        vec![read(), read(), Turn::text("done").into(), read(), Turn::text("again").into()];
    let env = Env::new(Wire::Anthropic, script);
    write(env.ws(), "CLAUDE.md", "Root rules.\n");
    write(env.ws(), "pkg/CLAUDE.md", "Pkg rules.\n");
    write(env.ws(), "pkg/sub/CLAUDE.md", "Sub rules. @notes.md\n");
    write(env.ws(), "pkg/sub/notes.md", "Sub notes.\n");
    write(env.ws(), "pkg/sub/x.txt", "x\n");
    let (code, _, stderr) = run(&mut env.oneshot("look", &[]));
    assert_eq!(code, 0, "{stderr}");
    assert!(!env.request_body(0).to_string().contains("Sub rules."), "not before the read");
    let ws = std::fs::canonicalize(env.ws()).unwrap();
    let reminder = |rel: &str, text: &str| {
        format!(
            "<system-reminder>\nContents of {}:\n\n{text}\n\n</system-reminder>",
            ws.join(rel).display()
        )
    };
    assert_eq!(
        last_message_texts(&env, 1),
        [
            reminder("pkg/CLAUDE.md", "Pkg rules."),
            reminder("pkg/sub/CLAUDE.md", "Sub rules. @notes.md"),
            reminder("pkg/sub/notes.md", "Sub notes."),
        ]
    );
    assert!(last_message_texts(&env, 2).is_empty(), "the second read there adds nothing");
    let (code, _, stderr) = run(&mut env.oneshot("more", &["--continue"]));
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(env.request_body(4).to_string().matches("Sub rules.").count(), 1);
    assert!(last_message_texts(&env, 4).is_empty(), "a resumed session remembers them");
}

#[test]
fn claude_code_memory_files_reach_the_model_and_context_notes_what_was_cut() {
    let env = Env::new(Wire::Anthropic, vec![Turn::text("ok").into()]);
    write(env.home.path(), ".claude/CLAUDE.md", "User-wide rules.\n");
    // An import is relative to the file that imports it.
    write(env.ws(), ".claude/CLAUDE.md", "Dot-claude rules. @../docs/style.md\n");
    write(env.ws(), "docs/style.md", "Imported style.\n");
    write(env.ws(), "CLAUDE.local.md", &"L".repeat(25_000));
    assert_eq!(run(&mut env.oneshot("hi", &[])).0, 0);
    let system = env.request_body(0)["system"].to_string();
    for text in ["User-wide rules.", "Dot-claude rules.", "Imported style.", "LLLL"] {
        assert!(system.contains(text), "{text} missing");
    }
    let (code, stdout, _) = run(env.cmd().arg("context"));
    assert_eq!(code, 0);
    assert!(stdout.contains("note: CLAUDE.local.md: cut at 20000 characters"), "{stdout}");
}

#[test]
fn a_cloned_projects_claude_md_imports_nothing_from_your_home_until_you_trust_it() {
    let env = Env::new(Wire::Anthropic, vec![Turn::text("ok").into(), Turn::text("ok").into()]);
    write(env.home.path(), "secret.md", "SECRET-TOKEN-123\n");
    write(env.ws(), "CLAUDE.md", "Project rules. See @~/secret.md\n");
    assert_eq!(run(&mut env.oneshot("hi", &[])).0, 0);
    assert!(!env.request_body(0).to_string().contains("SECRET-TOKEN-123"));
    let (code, stdout, _) = run(env.cmd().arg("context"));
    assert_eq!(code, 0);
    assert!(
        stdout.contains("note: CLAUDE.md: @~/secret.md not followed (outside the project folder")
    );
    assert_eq!(run(env.cmd().arg("trust")).0, 0);
    assert_eq!(run(&mut env.oneshot("hi", &[])).0, 0);
    assert!(env.request_body(1).to_string().contains("SECRET-TOKEN-123"), "your word, your file");
}
