//! A disk that refuses writes: full (a small tmpfs holding the home and
//! the workspace, filled to seeded levels) and failing (EIO injected with
//! `strace` into the session file's writes and syncs). A request whose
//! lines were not all stored fails (exit 1, `is_error: true`), nothing
//! reports success, and once the disk works again the session file has
//! only whole lines and `--continue` sends a request the API accepts.

use std::path::{Path, PathBuf};
use std::process::Command;

use ferroclaw_testkit::{ServerOptions, Step, Turn};
use serde_json::json;

use super::harness::{self, Measured, TinyDisk};
use crate::common::{Env, Wire};

/// Free bytes left on the disk before the request, picked by the seed.
const LEAVE: [u64; 8] = [0, 4096, 8192, 16_384, 24_576, 40_960, 131_072, 262_144];
/// The request's answer as its session line holds it.
const ANSWER: &str = r#"{"type":"text","text":"done"}"#;
/// Full-disk points CI tries.
const DEFAULT_POINTS: usize = 8;

/// The request's steps: a tool whose result is a long line, a file
/// written, an answer; then the answer of the run that continues.
fn script(free_space_first: bool) -> Vec<Step> {
    let mut steps: Vec<Step> = vec![Turn::text("zero answered").into()];
    if free_space_first {
        // Space comes back within the request: the model's first call frees it.
        steps.push(Turn::tool("bash", json!({"command": "rm -f filler"})).into());
    }
    steps.extend([
        Turn::tool("bash", json!({"command": "seq 1 3000"})).into(),
        Turn::tool("write", json!({"path": "out.txt", "content": "o".repeat(6000)})).into(),
        Turn::text("done").into(),
        Turn::text("after").into(),
    ]);
    steps
}

/// A home and a workspace on one small tmpfs, and the scripted server.
struct FullDisk {
    env: Env,
    disk: TinyDisk,
    root: PathBuf,
}

impl FullDisk {
    fn new(wire: Wire, script: Vec<Step>) -> Option<FullDisk> {
        let env =
            Env::with_options(wire, script, ServerOptions { strict: true, ..Default::default() });
        let root = env.home.path().join("disk");
        std::fs::create_dir(&root).unwrap();
        let disk = TinyDisk::mount(&root, "1m")?;
        std::fs::create_dir_all(root.join("home")).unwrap();
        std::fs::create_dir_all(root.join("ws")).unwrap();
        std::fs::copy(env.home.path().join("config.toml"), root.join("home/config.toml")).unwrap();
        Some(FullDisk { env, disk, root })
    }

    fn prompt(&self, text: &str, args: &[&str]) -> Command {
        let home = self.root.join("home");
        let mut cmd = self.env.std_cmd();
        cmd.env("HOME", &home).env("FERROCLAW_HOME", &home).current_dir(self.root.join("ws"));
        cmd.args(["-p", text]).args(args);
        cmd
    }

    fn sessions(&self) -> Vec<PathBuf> {
        session_files(&self.root.join("home/sessions"))
    }
}

fn session_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for project in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        out.extend(
            std::fs::read_dir(project.path()).into_iter().flatten().flatten().map(|f| f.path()),
        );
    }
    out
}

/// The request failed and said so, or it succeeded with its answer stored:
/// never a success over lost lines.
fn honest(run: &Measured, stored: &str) -> Result<bool, String> {
    let v = run.json();
    match run.code {
        0 if stored.contains(ANSWER) => Ok(true),
        0 => Err(format!("exit 0 but the answer is not stored: {}", run.stdout)),
        // Nothing of the request after the lost line is stored (no hole).
        1 if stored.contains(ANSWER) => {
            Err(format!("failed, but lines after the lost one stored: {stored}"))
        }
        1 if v.as_ref().is_some_and(|v| v["is_error"] == true) => Ok(false),
        // A request refused before it starts (its first line not written)
        // says so on stderr with exit 2, and prints no result.
        2 if run.stdout.is_empty() && run.stderr.contains("No space left") => Ok(false),
        code => Err(format!("exit {code}: {} {}", run.stdout, run.stderr)),
    }
}

#[test]
fn a_full_disk_at_seeded_points_fails_the_request_and_leaves_only_whole_lines() {
    let mut rng = fastrand::Rng::with_seed(harness::seed());
    let points = harness::count("DISKS", DEFAULT_POINTS);
    let (mut failed, mut succeeded, mut whole, mut resumed) = (0, 0, 0, 0);
    let mut problems = Vec::new();
    for i in 0..points {
        // Every other point: the disk is full when the request starts and
        // the model's first tool call frees it.
        // The prompt's own line then needs a page the disk does not have.
        let free_space_first = i % 2 == 1;
        let leave = if free_space_first { 0 } else { LEAVE[rng.usize(..LEAVE.len())] };
        let prompt =
            if free_space_first { format!("work {}", "w".repeat(8192)) } else { "work".into() };
        let wire = if i % 4 < 2 { Wire::Anthropic } else { Wire::OpenAi };
        let Some(disk) = FullDisk::new(wire, script(free_space_first)) else { return };
        let first = harness::run_measured(disk.prompt("zero", &[]), |_| {});
        assert_eq!(first.code, 0, "{}", first.stderr);
        let filler = disk.root.join("ws/filler");
        disk.disk.fill_leaving(&filler, leave);
        let work = &["--continue", "--yes", "--output-format", "json"];
        let run = harness::run_measured(disk.prompt(&prompt, work), |_| {});
        let stored = std::fs::read_to_string(&disk.sessions()[0]).unwrap_or_default();
        match honest(&run, &stored) {
            Ok(true) => succeeded += 1,
            Ok(false) => failed += 1,
            Err(e) => problems.push(format!("leave {leave} B, frees {free_space_first}: {e}")),
        }
        // Space comes back.
        let _ = std::fs::remove_file(&filler);
        let again = harness::run_measured(disk.prompt("go on", &["--continue", "--yes"]), |_| {});
        if again.code == 0 {
            resumed += 1;
        } else {
            problems.push(format!("leave {leave} B: --continue failed: {}", again.stderr));
        }
        let broken: Vec<String> =
            disk.sessions().iter().flat_map(|s| harness::broken_lines(s)).collect();
        if broken.is_empty() {
            whole += 1;
        } else {
            problems.push(format!("leave {leave} B: {broken:?}"));
        }
        problems.extend(harness::inconsistent_requests(&disk.env.server));
    }
    harness::report(&format!(
        "full disk: {points} points tried, {failed} requests failed honestly, {succeeded} fit and \
         succeeded, 0 successes over lost lines; after space returned {resumed} continued, {whole} \
         session files only whole lines; {} problems",
        problems.len()
    ));
    assert!(problems.is_empty(), "{problems:#?}");
}

/// One EIO case: what strace injects into the session file's system calls.
struct Eio {
    what: &'static str,
    syscalls: &'static str,
    inject: &'static str,
    /// A line is lost (a write failed), not only left unsynced.
    loses_a_line: bool,
}

const EIO_CASES: [Eio; 4] = [
    Eio { what: "every write", syscalls: "write", inject: "write:error=EIO", loses_a_line: true },
    Eio {
        what: "the 2nd write",
        syscalls: "write",
        inject: "write:error=EIO:when=2",
        loses_a_line: true,
    },
    Eio {
        what: "the 5th write",
        syscalls: "write",
        inject: "write:error=EIO:when=5",
        loses_a_line: true,
    },
    Eio {
        what: "every fdatasync",
        syscalls: "fdatasync",
        inject: "fdatasync:error=EIO",
        loses_a_line: false,
    },
];

#[test]
fn io_errors_injected_into_the_session_file_fail_the_request_honestly() {
    if !harness::strace() {
        return;
    }
    let mut problems = Vec::new();
    let mut held = 0;
    for (i, case) in EIO_CASES.iter().enumerate() {
        let wire = if i % 2 == 0 { Wire::Anthropic } else { Wire::OpenAi };
        let options = ServerOptions { strict: true, ..Default::default() };
        let env = Env::with_options(wire, script(false), options);
        assert_eq!(crate::common::run(&mut env.oneshot("zero", &[])).0, 0);
        let session = env.session_files().remove(0);
        let mut work = env.std_cmd();
        work.args(["-p", "work", "--continue", "--yes", "--output-format", "json"]);
        let args = [
            "-P".to_string(),
            session.display().to_string(),
            "-e".to_string(),
            format!("trace={}", case.syscalls),
            "-e".to_string(),
            format!("inject={}", case.inject),
        ];
        let run = harness::run_measured(harness::under_strace(&work, &args), |_| {});
        let stored = std::fs::read_to_string(&session).unwrap_or_default();
        let v = run.json().unwrap_or_default();
        let result = v["result"].as_str().unwrap_or_default();
        let before = problems.len();
        if !(run.code == 1
            && v["is_error"] == true
            && result.contains("could not be saved")
            && result.contains("Input/output error"))
        {
            problems
                .push(format!("{}: exit {}: {} {}", case.what, run.code, run.stdout, run.stderr));
        }
        if case.loses_a_line && stored.contains(ANSWER) {
            problems.push(format!("{}: lines after the lost one stored: {stored}", case.what));
        }
        // The disk works again: the session continues, whole.
        let again = &mut env.oneshot("go on", &["--continue", "--yes"]);
        let (code, _, stderr) = crate::common::run(again);
        if code != 0 {
            problems.push(format!("{}: --continue failed: {stderr}", case.what));
        }
        let broken = harness::broken_lines(&session);
        if !broken.is_empty() {
            problems.push(format!("{}: {broken:?}", case.what));
        }
        problems.extend(harness::inconsistent_requests(&env.server));
        held += usize::from(problems.len() == before);
    }
    let tried: Vec<&str> = EIO_CASES.iter().map(|c| c.what).collect();
    harness::report(&format!(
        "injected EIO on the session file ({}): {} cases tried, {held} failed the request \
         honestly, stored nothing after the lost line and continued whole",
        tried.join(", "),
        tried.len(),
    ));
    assert!(problems.is_empty(), "{problems:#?}");
}
