//! The `scripted-llm` binary: script file in, `listening on` line out, requests recorded.

mod raw_http;

use std::{
    io::{BufRead, BufReader},
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use serde_json::Value;

#[test]
fn binary_serves_a_script_file_and_appends_timed_records() {
    let dir = std::env::temp_dir().join(format!("scripted-llm-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (script, record) = (dir.join("script.json"), dir.join("record.jsonl"));
    std::fs::write(&script, r#"[{"kind": "reply", "text": "from a file"}]"#).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_scripted-llm"))
        .args([
            "--script",
            script.to_str().unwrap(),
            "--record",
            record.to_str().unwrap(),
            "--repeat",
        ])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let url = line
        .trim()
        .strip_prefix("listening on ")
        .unwrap_or_else(|| panic!("unexpected line {line:?}"));

    let answer = raw_http::post(url, "/v1/messages", r#"{"model":"m"}"#).json();
    assert_eq!(answer["content"][0]["text"], "from a file");
    let deadline = Instant::now() + Duration::from_secs(5);
    let records = loop {
        let text = std::fs::read_to_string(&record).unwrap_or_default();
        if !text.is_empty() || Instant::now() > deadline {
            break text;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    child.kill().unwrap();
    child.wait().unwrap();
    let _ = std::fs::remove_dir_all(&dir);

    let entry: Value = serde_json::from_str(records.lines().next().expect("one record")).unwrap();
    assert_eq!(
        (&entry["path"], &entry["body"]["model"]),
        (&Value::from("/v1/messages"), &Value::from("m"))
    );
    assert!(entry["finished_at"].as_u64().unwrap() >= entry["received_at"].as_u64().unwrap());
}

#[test]
fn binary_rejects_a_missing_script_with_usage() {
    let output = Command::new(env!("CARGO_BIN_EXE_scripted-llm")).output().unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("--script is required"));
}
