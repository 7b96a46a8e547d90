//! The table both ways, checked against what Claude Code 2.1.332 itself
//! sent its hooks for the same calls (copied from a run against the
//! scripted server).

use std::path::Path;

use serde_json::json;

use super::response::{FileChange, structured_patch, tool_response};
use super::*;

const WS: &str = "/tmp/proj";

fn ws() -> &'static Path {
    Path::new(WS)
}

#[test]
fn file_tools_get_absolute_file_paths_and_claudes_defaults() {
    let cases = [
        ("read", json!({"path": "a.txt"}), "Read", json!({"file_path": "/tmp/proj/a.txt"})),
        (
            "write",
            json!({"path": "./new.txt", "content": "hi\n"}),
            "Write",
            json!({"file_path": "/tmp/proj/new.txt", "content": "hi\n"}),
        ),
        (
            "edit",
            json!({"path": "a.txt", "old_string": "hello", "new_string": "howdy"}),
            "Edit",
            json!({"file_path": "/tmp/proj/a.txt", "old_string": "hello", "new_string": "howdy", "replace_all": false}),
        ),
        (
            "multi_edit",
            json!({"path": "src/../a.txt", "edits": [{"old_string": "a", "new_string": "b"}]}),
            "MultiEdit",
            json!({"file_path": "/tmp/proj/a.txt", "edits": [{"old_string": "a", "new_string": "b", "replace_all": false}]}),
        ),
        ("list_dir", json!({"path": "src"}), "LS", json!({"path": "/tmp/proj/src"})),
        (
            "grep",
            json!({"pattern": "x", "path": "src", "-n": true, "output_mode": "content"}),
            "Grep",
            json!({"pattern": "x", "path": "/tmp/proj/src", "-n": true, "output_mode": "content"}),
        ),
        ("glob", json!({"pattern": "*.txt"}), "Glob", json!({"pattern": "*.txt"})),
        (
            "bash",
            json!({"command": "echo out; echo err >&2", "description": "say things"}),
            "Bash",
            json!({"command": "echo out; echo err >&2", "description": "say things"}),
        ),
        (
            "background_run",
            json!({"command": "npm run dev", "timeout": 30}),
            "Bash",
            json!({"command": "npm run dev", "timeout": 30000, "run_in_background": true}),
        ),
        (
            "todo_write",
            json!({"items": [{"content": "x", "status": "pending", "active_form": "xing"}]}),
            "TodoWrite",
            json!({"todos": [{"content": "x", "status": "pending", "activeForm": "xing"}]}),
        ),
        (
            "task",
            json!({"description": "d", "prompt": "p", "agent_type": "explore"}),
            "Agent",
            json!({"description": "d", "prompt": "p", "subagent_type": "Explore", "run_in_background": false}),
        ),
        ("web_fetch", json!({"url": "https://x.org"}), "WebFetch", json!({"url": "https://x.org"})),
    ];
    for (ours, input, claude, expected) in cases {
        let (name, shown) = to_claude(ours, &input, ws());
        assert_eq!((name.as_str(), &shown), (claude, &expected), "{ours}");
        let (back, _) = from_claude(claude, &shown, ws());
        assert_eq!(back, ours, "{claude} maps back to {ours}");
    }
}

#[test]
fn claude_shaped_calls_become_ours_and_drop_what_we_have_no_use_for() {
    let (name, input) =
        from_claude("Read", &json!({"file_path": "/tmp/proj/.env", "offset": 2, "limit": 5}), ws());
    assert_eq!(
        (name.as_str(), input),
        ("read", json!({"path": "/tmp/proj/.env", "offset": 2, "limit": 5}))
    );
    let (name, input) =
        from_claude("WebFetch", &json!({"url": "https://x.org", "prompt": "summarise"}), ws());
    assert_eq!((name.as_str(), input), ("web_fetch", json!({"url": "https://x.org"})));
    let (name, input) =
        from_claude("Bash", &json!({"command": "ls", "run_in_background": false}), ws());
    assert_eq!((name.as_str(), input), ("bash", json!({"command": "ls"})));
    let (name, input) = from_claude(
        "Bash",
        &json!({"command": "sleep 9", "run_in_background": true, "timeout": 1500}),
        ws(),
    );
    assert_eq!(
        (name.as_str(), input),
        ("background_run", json!({"command": "sleep 9", "timeout": 2}))
    );
    assert_eq!(from_claude("Task", &json!({"prompt": "p"}), ws()).0, "task");
    assert_eq!(
        from_claude(
            "Agent",
            &json!({"prompt": "p", "subagent_type": "general-purpose", "run_in_background": false}),
            ws()
        ),
        ("task".into(), json!({"prompt": "p", "agent_type": "general"}))
    );
    assert_eq!(
        from_claude("Agent", &json!({"subagent_type": "reviewer"}), ws()).1,
        json!({"agent_type": "reviewer"})
    );
    assert_eq!(
        from_claude("mcp__gh__search", &json!({"q": 1}), ws()),
        ("mcp__gh__search".into(), json!({"q": 1}))
    );
}

#[test]
fn a_hooks_updated_input_keeps_the_models_spelling_where_the_hook_left_it() {
    let original = json!({"path": "a.txt", "old_string": "a", "new_string": "b"});
    let (_, shown) = to_claude("edit", &original, ws());
    assert_eq!(
        updated_input("edit", &shown, &original, ws()),
        json!({"path": "a.txt", "old_string": "a", "new_string": "b", "replace_all": false})
    );
    let moved = json!({"file_path": "/tmp/proj/b.txt", "old_string": "a", "new_string": "c"});
    assert_eq!(
        updated_input("edit", &moved, &original, ws()),
        json!({"path": "/tmp/proj/b.txt", "old_string": "a", "new_string": "c"})
    );
    // A hook written for ferroclaw's own shape still works.
    let ours = json!({"path": "c.txt", "content": "x"});
    assert_eq!(
        updated_input("write", &ours, &json!({"path": "a.txt", "content": "y"}), ws()),
        ours
    );
}

#[test]
fn tools_without_a_counterpart_keep_their_name_and_shape() {
    for name in ["memory", "task_create", "mcp__gh__search", "session_search"] {
        let input = json!({"path": "x", "n": 1});
        assert_eq!(to_claude(name, &input, ws()), (name.to_string(), input.clone()));
        assert_eq!(claude_name(name), None);
    }
    assert_eq!(tool_response("memory", &json!({}), "saved", None), json!({"content": "saved"}));
    assert_eq!(
        tool_response("mcp__gh__search", &json!({}), "found", None),
        json!([{"type": "text", "text": "found"}])
    );
}

#[test]
fn responses_have_the_fields_claude_code_sends() {
    // Claude Code: {"stdout": "out\nerr", "stderr": "", "interrupted": false, "isImage": false, "noOutputExpected": false}
    assert_eq!(
        tool_response("bash", &json!({}), "out\nerr\n[exit code 0]", None),
        json!({"stdout": "out\nerr", "stderr": "", "interrupted": false, "isImage": false, "noOutputExpected": false})
    );
    let timed_out =
        tool_response("bash", &json!({}), "x\n[timed out after 2 s; the command ...]", None);
    assert_eq!(
        (timed_out["stdout"].as_str(), timed_out["interrupted"].as_bool()),
        (Some("x"), Some(true))
    );

    let write = json!({"file_path": "/tmp/proj/new.txt", "content": "hi\n"});
    let created = FileChange { before: None, after: Some("hi\n".into()) };
    assert_eq!(
        tool_response("write", &write, "created", Some(&created)),
        json!({"type": "create", "filePath": "/tmp/proj/new.txt", "content": "hi\n", "structuredPatch": [], "originalFile": null, "userModified": false})
    );
    let edit = json!({"file_path": "/tmp/proj/a.txt", "old_string": "hello", "new_string": "howdy", "replace_all": false});
    let change = FileChange {
        before: Some("hello world\nsecond line\n".into()),
        after: Some("howdy world\nsecond line\n".into()),
    };
    assert_eq!(
        tool_response("edit", &edit, "edited", Some(&change)),
        json!({"filePath": "/tmp/proj/a.txt", "oldString": "hello", "newString": "howdy",
               "originalFile": "hello world\nsecond line\n",
               "structuredPatch": [{"oldStart": 1, "oldLines": 2, "newStart": 1, "newLines": 2,
                                    "lines": ["-hello world", "+howdy world", " second line"]}],
               "userModified": false, "replaceAll": false})
    );
    let read = json!({"file_path": "/tmp/proj/a.txt"});
    let file = FileChange { before: None, after: Some("hello world\nsecond line\n".into()) };
    assert_eq!(
        tool_response("read", &read, "1\thello world", Some(&file)),
        json!({"type": "text", "file": {"filePath": "/tmp/proj/a.txt", "content": "hello world\nsecond line\n",
                                        "numLines": 3, "startLine": 1, "totalLines": 3}})
    );
}

#[test]
fn a_rewrite_is_one_hunk_as_claude_code_reports_it() {
    assert_eq!(
        structured_patch("howdy world\nsecond line\n", "replaced\n"),
        json!([{"oldStart": 1, "oldLines": 2, "newStart": 1, "newLines": 1,
                "lines": ["-howdy world", "-second line", "+replaced"]}])
    );
}

#[test]
fn a_failed_command_reads_as_claude_codes_exit_code_line() {
    use super::response::tool_error;
    assert_eq!(tool_error("bash", "(no output)\n[exit code 3]"), "Exit code 3");
    assert_eq!(tool_error("bash", "boom\n[exit code 1]"), "Exit code 1\nboom");
    assert_eq!(tool_error("read", "no such file"), "no such file");
}

#[test]
fn a_sub_agents_response_is_its_answer_with_the_totals_of_our_summary() {
    let input = json!({"prompt": "look", "subagent_type": "Explore"});
    let text = "Found it.\n\n[explore sub-agent: 2 turns, 3 tool calls, 120 tokens, 1.5 s; transcript /t.jsonl]";
    let r = tool_response("task", &input, text, None);
    assert_eq!(r["content"], json!([{"type": "text", "text": "Found it."}]));
    assert_eq!((r["agentType"].as_str(), r["prompt"].as_str()), (Some("Explore"), Some("look")));
    assert_eq!((r["totalToolUseCount"].as_u64(), r["totalTokens"].as_u64()), (Some(3), Some(120)));
}
