use std::path::Path;

use ferroclaw_protocol::{ContentBlock, Message, ResultPart, Role, ToolCall, ToolSpec};
use serde_json::json;

use super::*;
use crate::session::Entry;

fn call(id: &str, name: &str) -> Message {
    Message {
        role: Role::Assistant,
        content: vec![ContentBlock::ToolCall(ToolCall {
            id: id.into(),
            name: name.into(),
            input: json!({"path": "src/lib.rs"}),
        })],
    }
}

fn result(id: &str, text: &str) -> Message {
    Message { role: Role::User, content: vec![ContentBlock::tool_result(id, text, false)] }
}

fn result_text(m: &Message) -> String {
    match &m.content[0] {
        ContentBlock::ToolResult { content, .. } => {
            content.iter().filter_map(ResultPart::as_text).collect()
        }
        _ => panic!("not a result"),
    }
}

/// user, then 5 rounds of (call, result) alternating grep and read, then an answer.
fn history() -> Vec<Message> {
    let mut m = vec![Message::user("find the bug")];
    for i in 0..5 {
        let name = if i % 2 == 0 { "grep" } else { "read" };
        m.push(call(&format!("c{i}"), name));
        m.push(result(&format!("c{i}"), &"x".repeat(500)));
    }
    m.push(result("c9", "short"));
    m.push(Message::assistant("found it"));
    m
}

#[test]
fn micro_compaction_replaces_old_long_results_but_keeps_reads_and_the_recent_ones() {
    let mut m = history();
    let replaced = micro_compact(&mut m, 3, 100);
    // Results: c0 grep, c1 read, c2 grep, c3 read, c4 grep, c9 short. The 3
    // newest (c3, c4, c9) stay; of c0..c2 the reads stay: c0 and c2 go.
    assert_eq!(replaced, 2);
    assert_eq!(result_text(&m[2]), "[Previous: used grep]");
    assert_eq!(result_text(&m[4]).len(), 500, "read results are kept");
    assert_eq!(result_text(&m[6]), "[Previous: used grep]");
    assert_eq!(result_text(&m[10]).len(), 500, "recent results are kept");
    assert_eq!(micro_compact(&mut m, 3, 100), 0, "idempotent");
}

#[test]
fn micro_compaction_keeps_short_results_and_names_unknown_calls_generically() {
    let mut m = vec![result("orphan", &"y".repeat(300)), result("c1", "tiny"), result("c2", "z")];
    let policy = MicroPolicy { keep_recent: 1, min_chars: 10, keep_tools: vec![] };
    assert_eq!(micro_compact_with(&mut m, &policy), 1);
    assert_eq!(result_text(&m[0]), "[Previous: used a tool]");
    assert_eq!(result_text(&m[1]), "tiny");
}

#[test]
fn token_estimates_count_system_messages_and_tools_at_four_chars_per_token() {
    let tools = vec![ToolSpec {
        name: "read".into(),
        description: "d".repeat(96),
        input_schema: json!({}),
    }];
    // 400 + 400 + (4 + 96 + 2) = 902 chars -> 226 tokens (rounded up).
    let est = estimate_tokens(&"s".repeat(400), &[Message::user("u".repeat(400))], &tools);
    assert_eq!(est, 226);
}

#[test]
fn the_estimator_learns_the_ratio_from_real_usage_within_bounds() {
    let mut e = TokenEstimator::default();
    let messages = [Message::user("u".repeat(4000))];
    assert_eq!(e.estimate("", &messages, &[]), 1000);
    e.observe(1000, 1300);
    assert_eq!(e.estimate("", &messages, &[]), 1300);
    e.observe(1000, 1_000_000);
    assert_eq!(e.ratio(), 4.0);
    e.observe(0, 5);
    assert_eq!(e.ratio(), 4.0, "an empty estimate teaches nothing");
}

#[test]
fn compaction_is_needed_at_the_threshold_share_of_the_window() {
    assert!(!needs_compaction(159_999, 200_000, 0.8));
    assert!(needs_compaction(160_000, 200_000, 0.8));
    assert!(needs_compaction(64_000, 64_000, 7.0), "shares above 1 are clamped");
}

#[test]
fn context_windows_come_from_config_then_the_table_then_the_default() {
    assert_eq!(context_window("claude-sonnet-4-5", None), 200_000);
    assert_eq!(context_window("anthropic/claude-opus-4", None), 200_000);
    assert_eq!(context_window("gpt-5-mini", None), 400_000);
    assert_eq!(context_window("gpt-4.1", None), 1_047_576);
    assert_eq!(context_window("deepseek-chat", None), 128_000);
    assert_eq!(context_window("deepseek-coder", None), 64_000);
    assert_eq!(context_window("llama3", None), DEFAULT_CONTEXT_WINDOW);
    assert_eq!(context_window("claude-x", Some(50_000)), 50_000);
}

#[test]
fn the_summary_request_renders_the_transcript_and_asks_for_the_sections() {
    let mut m = history();
    m.push(Message {
        role: Role::User,
        content: vec![ContentBlock::tool_result("c5", "e".repeat(3000), true)],
    });
    let r = summary_request(&m, Some("the parser"));
    assert!(r.system.contains("## Open tasks"), "{}", r.system);
    assert!(r.system.contains("## Current state"));
    assert_eq!(r.messages.len(), 1);
    let text = r.messages[0].text();
    assert!(text.contains("[user]\nfind the bug"), "{text}");
    assert!(text.contains("→ grep({\"path\":\"src/lib.rs\"})"), "{text}");
    assert!(text.contains("← error: "), "{text}");
    assert!(text.contains("[... cut at 2000 characters]"), "{text}");
    assert!(text.ends_with("Pay particular attention to: the parser"));
}

#[test]
fn the_compacted_history_is_one_user_message_naming_the_transcript_todos_and_identity() {
    let h = compacted_history(
        "## Goal\nfix it",
        Path::new("/home/u/.ferroclaw/sessions/p/s.jsonl"),
        Some("[ ] write test".into()),
        Some("You are alice, role tester".into()),
    );
    assert_eq!(h.len(), 1);
    assert_eq!(h[0].role, Role::User);
    let text = h[0].text();
    assert!(text.starts_with("<identity>You are alice, role tester</identity>"));
    assert!(text.contains("/home/u/.ferroclaw/sessions/p/s.jsonl"));
    assert!(text.contains("<summary>\n## Goal\nfix it\n</summary>"));
    assert!(text.contains("Your todo list:\n[ ] write test"));
    let bare = compacted_history("s", Path::new("t.jsonl"), None, Some("  ".into()));
    assert!(!bare[0].text().contains("identity") && !bare[0].text().contains("todo"));
}

#[test]
fn a_compacted_history_is_told_from_a_message_that_only_quotes_it() {
    let teammate = compacted_history("s", Path::new("t.jsonl"), None, Some("alice".into()));
    let plain = compacted_history("s", Path::new("t.jsonl"), None, None);
    assert!(is_compacted_history(&teammate[0]) && is_compacted_history(&plain[0]));
    let quoted = Message::user(format!("why does this say {}?", plain[0].text()));
    assert!(!is_compacted_history(&quoted));
    assert!(!is_compacted_history(&Message::assistant(plain[0].text())));
}

#[test]
fn the_compaction_entry_carries_the_replacement_text() {
    let h = compacted_history("S", Path::new("t.jsonl"), None, None);
    match compaction_entry(&h, 42) {
        Entry::Compaction { summary, replaced, .. } => {
            assert_eq!(summary, h[0].text());
            assert_eq!(replaced, 42);
        }
        other => panic!("{other:?}"),
    }
}
