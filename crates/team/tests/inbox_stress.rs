//! The inbox under load: 8 writer processes send 1,000 messages each into one
//! inbox while its reader drains it (committing, compacting and reopening as
//! it goes); not one message is lost or delivered twice. The writers are
//! this test binary started again with `writer_process` as the only test.

use std::collections::HashSet;
use std::path::Path;
use std::process::{Child, Command};
use std::time::Instant;

use ferroclaw_team::inbox::{self, InboxMessage, InboxReader, MessageType};

const WRITERS: usize = 8;
const PER_WRITER: usize = 1_000;
/// Small, so the reader compacts the inbox many times during the run.
const COMPACT_AT: u64 = 64 * 1024;

/// One writer: runs only when started by the stress test.
#[test]
fn writer_process() {
    let (Ok(dir), Ok(writer)) =
        (std::env::var("FERROCLAW_STRESS_DIR"), std::env::var("FERROCLAW_STRESS_WRITER"))
    else {
        return;
    };
    for i in 0..PER_WRITER {
        let from = format!("w{writer}");
        let message =
            InboxMessage::new(MessageType::Message, &from, "sink", &format!("{writer}:{i}"));
        inbox::append(Path::new(&dir), &message).unwrap();
    }
}

#[test]
fn eight_writer_processes_lose_and_duplicate_nothing_while_a_reader_drains() {
    let dir = tempfile::tempdir().unwrap();
    let exe = std::env::current_exe().unwrap();
    let started = Instant::now();
    let mut writers: Vec<Child> = (0..WRITERS)
        .map(|w| {
            Command::new(&exe)
                .args(["--exact", "inbox_stress::writer_process", "--test-threads=1", "--quiet"])
                .env("FERROCLAW_STRESS_DIR", dir.path())
                .env("FERROCLAW_STRESS_WRITER", w.to_string())
                .stdout(std::process::Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    let open = || InboxReader::open(dir.path(), "sink").with_compact_at(COMPACT_AT);
    let mut reader = open();
    let mut got: Vec<String> = Vec::new();
    let mut reads = 0;
    loop {
        let done = writers.iter_mut().all(|c| c.try_wait().unwrap().is_some());
        let batch = reader.read().unwrap();
        assert_eq!(batch.skipped, 0, "no line is torn by a live writer");
        got.extend(batch.messages.into_iter().map(|m| m.content));
        reader.commit().unwrap();
        reads += 1;
        // Now and then the reader starts over from its saved cursor.
        if reads % 3 == 0 {
            reader = open();
        }
        if done && !reader.has_new() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    for mut w in writers {
        assert!(w.wait().unwrap().success(), "a writer failed");
    }
    let last = reader.read().unwrap();
    got.extend(last.messages.into_iter().map(|m| m.content));
    let elapsed = started.elapsed();
    let unique: HashSet<&String> = got.iter().collect();
    assert_eq!(unique.len(), got.len(), "a message was delivered twice");
    assert_eq!(got.len(), WRITERS * PER_WRITER, "a message was lost");
    // Each writer's messages arrive in the order it sent them.
    for w in 0..WRITERS {
        let order: Vec<usize> = got
            .iter()
            .filter_map(|c| c.strip_prefix(&format!("{w}:")))
            .map(|i| i.parse().unwrap())
            .collect();
        assert!(order.windows(2).all(|p| p[0] < p[1]), "writer {w} out of order");
    }
    let size = std::fs::metadata(dir.path().join("sink.jsonl")).unwrap().len();
    eprintln!(
        "inbox stress: {} messages from {WRITERS} processes in {:.2} s ({:.0}/s), {reads} reads, inbox left at {size} bytes",
        got.len(),
        elapsed.as_secs_f64(),
        got.len() as f64 / elapsed.as_secs_f64()
    );
    assert!(size < COMPACT_AT * 2, "the inbox was compacted, not left to grow");
}
