use ferroclaw_protocol::ResultPart;
use serde_json::json;

use crate::workspace;

fn lines(n: usize) -> String {
    (1..=n).map(|i| format!("line {i}\n")).collect()
}

#[tokio::test]
async fn read_numbers_lines_like_cat_n() {
    let ws = workspace();
    ws.write("a.txt", "alpha\nbeta\n");
    let out = ws.ok("read", json!({"path": "a.txt"})).await;
    assert_eq!(out, "     1\talpha\n     2\tbeta\n");
}

#[tokio::test]
async fn read_shows_the_first_2000_lines_and_says_how_to_read_on() {
    let ws = workspace();
    ws.write("big.txt", lines(2500));
    let out = ws.ok("read", json!({"path": "big.txt"})).await;
    assert!(out.contains("  2000\tline 2000\n"));
    assert!(!out.contains("line 2001"));
    assert!(
        out.contains("Showing lines 1-2000 of 2500. 500 more lines; call read with offset=2001"),
        "{out}"
    );
}

#[tokio::test]
async fn read_honours_offset_and_limit_and_counts_what_remains() {
    let ws = workspace();
    ws.write("f.txt", lines(10));
    let out = ws.ok("read", json!({"path": "f.txt", "offset": 4, "limit": 3})).await;
    assert!(out.starts_with("     4\tline 4\n     5\tline 5\n     6\tline 6\n"), "{out}");
    assert!(
        out.contains("Showing lines 4-6 of 10. 4 more lines; call read with offset=7"),
        "{out}"
    );
}

#[tokio::test]
async fn read_to_the_end_has_no_trailer() {
    let ws = workspace();
    ws.write("f.txt", "a\nb\nc");
    let out = ws.ok("read", json!({"path": "f.txt", "offset": 2})).await;
    assert_eq!(out, "     2\tb\n     3\tc\n");
}

#[tokio::test]
async fn read_refuses_offset_zero_and_offset_past_the_end() {
    let ws = workspace();
    ws.write("f.txt", lines(3));
    let err = ws.call_unvalidated("read", json!({"path": "f.txt", "offset": 0})).await.unwrap_err();
    assert!(err.to_string().contains("1-based"), "{err}");
    let err = ws.call_unvalidated("read", json!({"path": "f.txt", "limit": -5})).await.unwrap_err();
    assert!(err.to_string().contains("`limit`"), "{err}");
    let err = ws.err("read", json!({"path": "f.txt", "offset": 9})).await;
    assert!(err.contains("past the end") && err.contains("3 lines"), "{err}");
}

#[tokio::test]
async fn read_refuses_a_folder_and_points_to_list_dir() {
    let ws = workspace();
    std::fs::create_dir(ws.path("src")).unwrap();
    let err = ws.err("read", json!({"path": "src"})).await;
    assert!(err.contains("folder") && err.contains("list_dir"), "{err}");
}

#[tokio::test]
async fn read_refuses_binary_files() {
    let ws = workspace();
    ws.write("prog.bin", b"\x7fELF\x02\x01\x00\x00binary");
    let err = ws.err("read", json!({"path": "prog.bin"})).await;
    assert!(err.contains("binary"), "{err}");
}

#[tokio::test]
async fn read_stops_before_nul_bytes_past_the_first_8_kb_and_never_shows_them() {
    let ws = workspace();
    let mut bytes = "text line\n".repeat(1000).into_bytes();
    bytes.extend_from_slice(&[0u8; 4096]);
    bytes.extend_from_slice(b"\nafter\n");
    ws.write("mixed.dat", &bytes);
    let out = ws.ok("read", json!({"path": "mixed.dat"})).await;
    assert!(out.contains("  1000\ttext line"), "{out}");
    assert!(out.contains("Line 1001 of mixed.dat has NUL bytes"), "{out}");
    assert!(!out.contains('\u{0}') && !out.contains("after"), "{out}");
    let err = ws.err("read", json!({"path": "mixed.dat", "offset": 1001})).await;
    assert!(err.contains("NUL bytes at line 1001"), "{err}");
}

#[tokio::test]
async fn read_returns_images_as_base64_image_parts() {
    let ws = workspace();
    let png = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR";
    ws.write("dot.png", png);
    let out = ws.call("read", json!({"path": "dot.png"})).await.unwrap();
    let image = out.content.iter().find_map(|p| match p {
        ResultPart::Image { media_type, data } => Some((media_type.clone(), data.clone())),
        ResultPart::Text { .. } => None,
    });
    let (media_type, data) = image.expect("an image part");
    assert_eq!(media_type, "image/png");
    assert_eq!(data, "iVBORw0KGgoAAAANSUhEUg==");
}

#[tokio::test]
async fn read_refuses_images_over_the_size_cap() {
    let ws = workspace();
    let mut gif = b"GIF89a".to_vec();
    gif.resize(6 * 1024 * 1024, 0);
    ws.write("huge.gif", gif);
    let err = ws.err("read", json!({"path": "huge.gif"})).await;
    assert!(err.contains("5 MB"), "{err}");
}

#[tokio::test]
async fn read_refuses_a_file_whose_image_extension_lies() {
    let ws = workspace();
    ws.write("fake.png", "just text");
    let err = ws.err("read", json!({"path": "fake.png"})).await;
    assert!(err.contains("not image/png"), "{err}");
}

#[tokio::test]
async fn read_decodes_invalid_utf8_lossily_with_a_note() {
    let ws = workspace();
    ws.write("latin1.txt", b"caf\xe9\n");
    let out = ws.ok("read", json!({"path": "latin1.txt"})).await;
    assert!(out.contains("caf\u{FFFD}"), "{out}");
    assert!(out.contains("not valid UTF-8"), "{out}");
}

#[tokio::test]
async fn read_cuts_very_long_lines() {
    let ws = workspace();
    ws.write("min.js", "x".repeat(5000));
    let out = ws.ok("read", json!({"path": "min.js"})).await;
    assert!(out.contains("[line cut: 5000 chars in all]"), "{}", &out[out.len() - 60..]);
    assert!(out.len() < 2100);
}

#[tokio::test]
async fn read_says_when_a_file_is_empty() {
    let ws = workspace();
    ws.write("empty.txt", "");
    assert!(ws.ok("read", json!({"path": "empty.txt"})).await.contains("empty"));
}

#[tokio::test]
async fn read_refuses_paths_outside_the_workspace() {
    let ws = workspace();
    let err = ws.err("read", json!({"path": "/etc/passwd"})).await;
    assert!(err.contains("outside the workspace"), "{err}");
}

#[tokio::test]
async fn read_of_a_missing_file_names_it() {
    let ws = workspace();
    let err = ws.err("read", json!({"path": "nope.txt"})).await;
    assert!(err.contains("nope.txt"), "{err}");
}
