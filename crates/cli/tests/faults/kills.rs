//! kill -9 at seeded points of a `-p --continue` run that writes, edits,
//! runs bash and reads, then `--continue`: the session loads, no request the
//! provider gets breaks the tool pairing, and every file the tools wrote is
//! whole (the old content or the new, never a part).
//!
//! Two kinds of point: at a system call (`strace -e inject=SYSCALL:
//! signal=KILL:when=N`: the Nth write, fsync, rename or open of a thread,
//! exactly there) and after the provider got request K (plus a seeded
//! delay of a few milliseconds, landing in tool runs and session appends).

use std::path::Path;
use std::time::{Duration, Instant};

use ferroclaw_testkit::{ScriptedToolCall, ServerOptions, Step, Turn};
use serde_json::json;

use super::harness;
use crate::common::{Env, Wire};

/// The lines of the file the killed run writes, then edits.
const LINES: usize = 20_000;
/// How many points CI tries (`FERROCLAW_FAULT_KILLS` for more).
const DEFAULT_POINTS: usize = 16;

/// Where a run is killed.
#[derive(Debug, Clone)]
enum Point {
    /// At the `n`th call of `syscall` by one thread (strace injects SIGKILL).
    Syscall { syscall: &'static str, n: u32 },
    /// `delay_ms` after the provider received the run's request `k`.
    AfterRequest { k: usize, delay_ms: u64 },
}

/// The system calls a kill lands on: appends and their syncs, the tools'
/// temp files, renames and opens.
const SYSCALLS: [(&str, u32); 5] = [
    ("write", 60),
    ("fdatasync", 3),
    ("fsync", 3),
    ("rename,renameat,renameat2", 3),
    ("openat", 80),
];

fn points(seed: u64, count: usize) -> Vec<Point> {
    let mut rng = fastrand::Rng::with_seed(seed);
    (0..count)
        .map(|i| {
            if i % 2 == 0 {
                let (syscall, max) = SYSCALLS[rng.usize(..SYSCALLS.len())];
                Point::Syscall { syscall, n: rng.u32(1..=max) }
            } else {
                Point::AfterRequest { k: rng.usize(1..=5), delay_ms: rng.u64(0..40) }
            }
        })
        .collect()
}

fn original() -> String {
    (0..LINES).map(|i| format!("alpha {i:05}\n")).collect()
}

fn edited() -> String {
    original().replacen("alpha 00007\n", "beta 00007\n", 1)
}

/// The killed run's steps, then the answer of the run that continues.
fn script() -> Vec<Step> {
    vec![
        Turn::text("zero answered").into(),
        Turn::tool("write", json!({"path": "big.txt", "content": original()})).into(),
        Turn::tool(
            "edit",
            json!({"path": "big.txt", "old_string": "alpha 00007\n", "new_string": "beta 00007\n"}),
        )
        .into(),
        Turn::tool("bash", json!({"command": "seq 1 3000; echo done > marker.txt"})).into(),
        Turn::tools(vec![
            ScriptedToolCall::new("read", json!({"path": "big.txt", "limit": 50})),
            ScriptedToolCall::new("write", json!({"path": "small.txt", "content": "hello\n"})),
        ])
        .into(),
        Turn::text("done").into(),
        Turn::text("after").into(),
    ]
}

/// What one point left, for the tally.
#[derive(Default)]
struct Held {
    killed: usize,
    resumed: usize,
    whole: usize,
    inconsistent: Vec<String>,
    temp_left: usize,
}

#[test]
fn kill_9_at_seeded_points_leaves_a_session_that_continues_and_whole_files() {
    let seed = harness::seed();
    let strace = harness::strace();
    let mut held = Held::default();
    let points: Vec<Point> = points(seed, harness::count("KILLS", DEFAULT_POINTS))
        .into_iter()
        .filter(|p| strace || matches!(p, Point::AfterRequest { .. }))
        .collect();
    let started = Instant::now();
    for (i, point) in points.iter().enumerate() {
        let wire = if i % 2 == 0 { Wire::Anthropic } else { Wire::OpenAi };
        one_point(wire, point, &mut held);
    }
    harness::report(&format!(
        "kill -9 (seed {seed}): {} points tried ({} at system calls), {} killed mid-run, {} resumed \
         with --continue, files whole {}/{}, {} inconsistent requests, {} tool temp files left, \
         {:.1} s",
        points.len(),
        points.iter().filter(|p| matches!(p, Point::Syscall { .. })).count(),
        held.killed,
        held.resumed,
        held.whole,
        points.len(),
        held.inconsistent.len(),
        held.temp_left,
        started.elapsed().as_secs_f64(),
    ));
    assert!(held.inconsistent.is_empty(), "{:?}", held.inconsistent);
    assert_eq!(held.resumed, points.len());
    assert_eq!(held.whole, points.len());
}

fn one_point(wire: Wire, point: &Point, held: &mut Held) {
    let options = ServerOptions { strict: true, ..Default::default() };
    let env = Env::with_options(wire, script(), options);
    let first = harness::run_measured(prompt(&env, "zero", &[]), |_| {});
    assert_eq!(first.code, 0, "{point:?}: {}", first.stderr);

    let work = prompt(&env, "work", &["--continue", "--yes"]);
    let killed = match point {
        Point::Syscall { syscall, n } => {
            let args = [
                "-e".to_string(),
                format!("trace={syscall}"),
                "-e".to_string(),
                format!("inject={syscall}:signal=KILL:when={n}"),
            ];
            harness::run_measured(harness::under_strace(&work, &args), |_| {})
        }
        Point::AfterRequest { k, delay_ms } => {
            let target = 1 + k;
            harness::run_measured(work, |pid| {
                wait_until(|| env.server.requests().len() >= target || ended(pid));
                std::thread::sleep(Duration::from_millis(*delay_ms));
                harness::kill_9(pid);
            })
        }
    };
    if killed.code != 0 {
        held.killed += 1;
    }

    let again = harness::run_measured(prompt(&env, "go on", &["--continue", "--yes"]), |_| {});
    let answer = again.stdout.trim();
    assert_eq!(again.code, 0, "{point:?} ({wire:?}): {}", again.stderr);
    assert!(answer == "done" || answer == "after", "{point:?}: {answer}");
    let last = env.server.requests().len() - 1;
    let sent = env.request_body(last)["messages"].to_string();
    if sent.contains("zero") && sent.contains("go on") {
        held.resumed += 1;
    }
    if files_whole(env.ws(), point) {
        held.whole += 1;
    }
    held.temp_left += temp_files(env.ws());
    held.inconsistent.extend(
        harness::inconsistent_requests(&env.server).into_iter().map(|p| format!("{point:?}: {p}")),
    );
    for session in env.session_files() {
        let broken = harness::broken_lines(&session);
        assert!(broken.is_empty(), "{point:?}: {broken:?}");
    }
}

/// The binary, `-p PROMPT ARGS`, as a plain command.
fn prompt(env: &Env, text: &str, args: &[&str]) -> std::process::Command {
    let mut cmd = env.std_cmd();
    cmd.args(["-p", text]).args(args);
    cmd
}

/// Whether process `pid` (our child, not reaped yet) has ended.
fn ended(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).map_or(true, |stat| {
        stat.rsplit_once(')').is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'))
    })
}

/// Waits until `f` holds (a guard against a hang, not a timing assertion).
fn wait_until(mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for a kill point");
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// The files the tools wrote are each absent, or whole in one of the
/// versions the tools wrote.
fn files_whole(ws: &Path, point: &Point) -> bool {
    let big = std::fs::read_to_string(ws.join("big.txt")).ok();
    let small = std::fs::read_to_string(ws.join("small.txt")).ok();
    let big_ok = big.as_ref().is_none_or(|t| *t == original() || *t == edited());
    let small_ok = small.as_deref().is_none_or(|t| t == "hello\n");
    if !(big_ok && small_ok) {
        eprintln!("{point:?}: big.txt {:?} bytes, small.txt {small:?}", big.map(|b| b.len()));
    }
    big_ok && small_ok
}

/// Temp files of an atomic write left in the workspace by the kill.
fn temp_files(ws: &Path) -> usize {
    std::fs::read_dir(ws)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(".ferroclaw-write-"))
        .count()
}
