use serde_json::json;

use crate::{Ws, workspace};

fn project() -> Ws {
    let ws = workspace();
    ws.write("src/lib.rs", "pub fn parse() {}\nfn helper() {}\n// TODO: Parse more\n");
    ws.write("src/main.rs", "fn main() {\n    parse();\n}\n");
    ws.write("web/app.ts", "export function parse() {}\n");
    ws.write("notes.md", "parse everything\n");
    ws
}

#[tokio::test]
async fn grep_lists_matching_files_sorted_by_default() {
    let ws = project();
    let out = ws.ok("grep", json!({"pattern": "parse"})).await;
    assert_eq!(out, "notes.md\nsrc/lib.rs\nsrc/main.rs\nweb/app.ts\n");
}

#[tokio::test]
async fn grep_content_mode_shows_path_line_and_text() {
    let ws = project();
    let out = ws
        .ok("grep", json!({"pattern": "fn \\w+\\(\\)", "path": "src", "output_mode": "content"}))
        .await;
    assert_eq!(
        out,
        "src/lib.rs:1:pub fn parse() {}\nsrc/lib.rs:2:fn helper() {}\nsrc/main.rs:1:fn main() {\n"
    );
}

#[tokio::test]
async fn grep_content_without_line_numbers() {
    let ws = project();
    let out =
        ws.ok("grep", json!({"pattern": "helper", "output_mode": "content", "-n": false})).await;
    assert_eq!(out, "src/lib.rs:fn helper() {}\n");
}

#[tokio::test]
async fn grep_context_lines_use_dashes_and_breaks() {
    let ws = workspace();
    ws.write("f.txt", "a\nhit1\nb\nc\nd\ne\nhit2\nf\n");
    let out = ws.ok("grep", json!({"pattern": "hit", "output_mode": "content", "-C": 1})).await;
    assert_eq!(out, "f.txt-1-a\nf.txt:2:hit1\nf.txt-3-b\n--\nf.txt-6-e\nf.txt:7:hit2\nf.txt-8-f\n");
    let out =
        ws.ok("grep", json!({"pattern": "hit2", "output_mode": "content", "-B": 2, "-A": 0})).await;
    assert_eq!(out, "f.txt-5-d\nf.txt-6-e\nf.txt:7:hit2\n");
}

#[tokio::test]
async fn grep_count_mode_counts_matching_lines_per_file() {
    let ws = project();
    let out = ws.ok("grep", json!({"pattern": "fn", "output_mode": "count"})).await;
    assert_eq!(out, "src/lib.rs:2\nsrc/main.rs:1\n");
}

#[tokio::test]
async fn grep_case_insensitive_flag() {
    let ws = project();
    assert_eq!(
        ws.ok("grep", json!({"pattern": "TODO: parse"})).await,
        "No matches for \"TODO: parse\" (searched .)."
    );
    let out = ws.ok("grep", json!({"pattern": "TODO: parse", "-i": true})).await;
    assert_eq!(out, "src/lib.rs\n");
}

#[tokio::test]
async fn grep_filters_by_type_and_glob() {
    let ws = project();
    assert_eq!(
        ws.ok("grep", json!({"pattern": "parse", "type": "rust"})).await,
        "src/lib.rs\nsrc/main.rs\n"
    );
    assert_eq!(ws.ok("grep", json!({"pattern": "parse", "type": "ts"})).await, "web/app.ts\n");
    assert_eq!(
        ws.ok("grep", json!({"pattern": "parse", "glob": "*.{md,ts}"})).await,
        "notes.md\nweb/app.ts\n"
    );
    let err = ws.err("grep", json!({"pattern": "parse", "type": "klingon"})).await;
    assert!(err.contains("klingon"), "{err}");
}

#[tokio::test]
async fn grep_skips_binary_and_gitignored_files() {
    let ws = project();
    ws.write("blob.bin", b"parse\0\x01\x02");
    ws.write(".gitignore", "build/\n");
    ws.write("build/out.rs", "parse");
    let out = ws.ok("grep", json!({"pattern": "parse"})).await;
    assert!(!out.contains("blob.bin") && !out.contains("build/"), "{out}");
}

#[tokio::test]
async fn grep_on_one_binary_file_says_it_was_not_searched_rather_than_no_matches() {
    let ws = project();
    let mut bytes = "parse\n".repeat(100).into_bytes();
    bytes.push(0);
    ws.write("late.bin", &bytes);
    let out = ws.ok("grep", json!({"pattern": "parse", "path": "late.bin"})).await;
    assert!(out.contains("late.bin is a binary file") && out.contains("not searched"), "{out}");
}

#[tokio::test]
async fn grep_multiline_matches_across_lines() {
    let ws = project();
    let err = ws.err("grep", json!({"pattern": "main\\(\\) \\{\\n\\s+parse"})).await;
    assert!(err.contains("multiline"), "{err}");
    let out = ws
        .ok("grep", json!({"pattern": "main\\(\\) \\{\\n\\s+parse", "multiline": true, "output_mode": "content"}))
        .await;
    assert_eq!(out, "src/main.rs:1:fn main() {\nsrc/main.rs:2:    parse();\n");
}

#[tokio::test]
async fn grep_head_limit_caps_output_with_a_note() {
    let ws = workspace();
    ws.write("many.txt", "hit\n".repeat(300));
    let out = ws.ok("grep", json!({"pattern": "hit", "output_mode": "content"})).await;
    assert_eq!(out.lines().filter(|l| l.starts_with("many.txt:")).count(), 250);
    assert!(out.contains("50 more lines not shown"), "{out}");
    let out =
        ws.ok("grep", json!({"pattern": "hit", "output_mode": "content", "head_limit": 5})).await;
    assert!(out.contains("295 more lines not shown"), "{out}");
}

#[tokio::test]
async fn grep_searches_a_single_file_path() {
    let ws = project();
    let out = ws
        .ok("grep", json!({"pattern": "parse", "path": "src/main.rs", "output_mode": "content"}))
        .await;
    assert_eq!(out, "src/main.rs:2:    parse();\n");
}

#[tokio::test]
async fn grep_refuses_bad_regexes_and_paths_outside() {
    let ws = project();
    assert!(ws.err("grep", json!({"pattern": "(unclosed"})).await.contains("bad regex"));
    assert!(
        ws.err("grep", json!({"pattern": "x", "path": "/etc"}))
            .await
            .contains("outside the workspace")
    );
}
