//! A provider that does not stop: text deltas without end, and an answer
//! far over `max_tokens`, on both wires. The answer is cut and marked as
//! cut (to the user and in the session), the run's memory stays bounded by
//! the cut, not the stream, the stored line is small, and `--continue` then
//! sends a small request.

use ferroclaw_testkit::{Fault, Step, Turn};

use super::harness;
use crate::common::{Env, Wire};

/// Peak memory a cut answer may cost (the Done-when bound of issue 30).
const PEAK_MIB: u64 = 300;
/// Bytes a session may hold after one cut answer.
const STORED_BYTES: u64 = 1024 * 1024;

fn huge_answer() -> Step {
    // 20 MB in 1 KB words: 20,000 deltas, each far from the bound alone.
    Turn::text(format!("{} ", "y".repeat(1023)).repeat(20 * 1024)).into()
}

#[test]
fn endless_and_huge_answers_are_cut_marked_and_stored_small_on_both_wires() {
    let mut lines = Vec::new();
    let mut problems = Vec::new();
    for wire in [Wire::Anthropic, Wire::OpenAi] {
        let endless = Fault::Endless { text: "and on ".into() }.into();
        for (what, step) in [("endless stream", endless), ("20 MB answer", huge_answer())] {
            let env = Env::new(wire, vec![step, Turn::text("short again").into()]);
            let mut cmd = env.std_cmd();
            cmd.args(["-p", "talk", "--output-format", "json"]);
            let run = harness::run_measured(cmd, |_| {});
            let v = run.json().unwrap_or_default();
            let result = v["result"].as_str().unwrap_or_default();
            if !(run.code == 1 && v["is_error"] == true && result.contains("max_tokens")) {
                problems.push(format!("{wire:?} {what}: exit {}: {}", run.code, run.stdout));
            }
            let session = env.session_files().remove(0);
            let stored = std::fs::metadata(&session).unwrap().len();
            let text = std::fs::read_to_string(&session).unwrap();
            if !text.contains("[the answer was cut off:") {
                problems.push(format!("{wire:?} {what}: not marked as cut in the session"));
            }
            if stored > STORED_BYTES || run.peak_mib() > PEAK_MIB {
                problems.push(format!(
                    "{wire:?} {what}: {stored} bytes stored, {} MiB peak",
                    run.peak_mib()
                ));
            }
            let (code, stdout, stderr) =
                crate::common::run(&mut env.oneshot("go on", &["--continue"]));
            let sent = serde_json::to_vec(&env.request_body(1)).unwrap().len();
            if code != 0 || stdout != "short again\n" || sent as u64 > STORED_BYTES {
                problems.push(format!(
                    "{wire:?} {what}: --continue: exit {code}, {sent} bytes sent: {stderr}"
                ));
            }
            lines.push(format!(
                "{wire:?} {what}: cut, {} KiB stored, {} MiB peak, {} KiB sent on --continue",
                stored / 1024,
                run.peak_mib(),
                sent / 1024
            ));
        }
    }
    harness::report(&format!(
        "provider answers without end ({}); {} problems",
        lines.join("; "),
        problems.len()
    ));
    assert!(problems.is_empty(), "{problems:#?}");
}
