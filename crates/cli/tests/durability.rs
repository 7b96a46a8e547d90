//! End-to-end: a session survives however its process ends (SIGTERM, SIGHUP,
//! kill -9), one process writes it at a time, damaged lines do not lock the
//! user out of it, and no tool result can flood the context or the file.
//! The scripted server is strict here: a tool call without its result is
//! answered 400, as the real APIs do.

use crate::common;

use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use common::{Env, Wire, run};
use ferroclaw_testkit::{Fault, ServerOptions, Step, Turn};
use serde_json::json;

fn strict(wire: Wire, script: Vec<Step>) -> Env {
    Env::with_options(wire, script, ServerOptions { strict: true, ..Default::default() })
}

/// Waits until `f` holds (a guard against hangs, not a timing assertion).
fn wait_for(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Whether any live (not zombie) process is in group `pgid`.
fn group_alive(pgid: i32) -> bool {
    std::fs::read_dir("/proc").into_iter().flatten().flatten().any(|entry| {
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            return false;
        };
        let Some((_, rest)) = stat.rsplit_once(')') else {
            return false;
        };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        fields.len() > 2 && fields[0] != "Z" && fields[2] == pgid.to_string()
    })
}

fn signal(pid: u32, sig: &str) {
    let status = std::process::Command::new("kill").args([sig, &pid.to_string()]).status().unwrap();
    assert!(status.success());
}

/// `ferroclaw -p PROMPT --yes ARGS` running in the background.
fn spawn(env: &Env, prompt: &str, args: &[&str]) -> Child {
    env.std_cmd()
        .args(["-p", prompt, "--yes"])
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// The process group id the bash call wrote to `sleep.pid`, once written.
fn wait_for_pid_file(ws: &Path) -> i32 {
    let file = ws.join("sleep.pid");
    let mut pgid = 0;
    wait_for("the bash call to start", || {
        pgid = std::fs::read_to_string(&file).ok().and_then(|t| t.trim().parse().ok()).unwrap_or(0);
        pgid > 0
    });
    pgid
}

fn sleeping_bash() -> Step {
    Turn::tool("bash", json!({"command": "echo $$ > sleep.pid; sleep 30"})).into()
}

#[test]
fn sigterm_mid_tool_kills_its_process_group_saves_the_session_and_continue_works() {
    for (wire, sig, code) in [(Wire::Anthropic, "-TERM", 143), (Wire::OpenAi, "-HUP", 129)] {
        let env = strict(wire, vec![sleeping_bash(), Turn::text("picked up").into()]);
        let child = spawn(&env, "run the slow thing", &[]);
        let pgid = wait_for_pid_file(env.ws());
        signal(child.id(), sig);
        let out = child.wait_with_output().unwrap();
        assert_eq!(out.status.code(), Some(code), "{}", String::from_utf8_lossy(&out.stderr));
        wait_for("the tool's process group to be gone", || !group_alive(pgid));

        let (code, stdout, stderr) = run(&mut env.oneshot("what happened?", &["--continue"]));
        assert_eq!(code, 0, "{stderr}");
        assert_eq!(stdout, "picked up\n");
        let results = common::tool_results(&env.request_body(1));
        assert_eq!(results.len(), 1, "{results:?}");
    }
}

#[test]
fn a_session_killed_with_sigkill_mid_tool_is_repaired_on_load() {
    for wire in [Wire::Anthropic, Wire::OpenAi] {
        let env = strict(wire, vec![sleeping_bash(), Turn::text("carrying on").into()]);
        let mut child = spawn(&env, "run the slow thing", &[]);
        let pgid = wait_for_pid_file(env.ws());
        signal(child.id(), "-KILL");
        child.wait().unwrap();
        // kill -9 leaves the tool running: clean it up ourselves.
        let _ =
            std::process::Command::new("kill").args(["-KILL", "--", &format!("-{pgid}")]).status();

        let (code, stdout, stderr) = run(&mut env.oneshot("still there?", &["--continue"]));
        assert_eq!(code, 0, "{stderr}");
        assert_eq!(stdout, "carrying on\n");
        let results = common::tool_results(&env.request_body(1));
        assert_eq!(results.len(), 1, "{results:?}");
        assert!(results[0].0.contains("interrupted"), "{results:?}");
        if wire == Wire::Anthropic {
            assert!(results[0].1, "an interrupted call is an error result");
        }
    }
}

#[test]
fn a_second_process_on_a_session_in_use_is_refused_and_the_session_stays_whole() {
    let env = strict(
        Wire::Anthropic,
        vec![
            Turn::text("first answer").into(),
            Fault::Stall { after_text: "Thinking".into() }.into(),
            Turn::text("whole again").into(),
        ],
    );
    assert_eq!(run(&mut env.oneshot("one", &[])).0, 0);
    let holder = spawn(&env, "two", &["--continue"]);
    wait_for("the first process to send its request", || env.server.requests().len() == 2);

    let (code, _, stderr) = run(&mut env.oneshot("three", &["--continue"]));
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("in use by another ferroclaw process"), "{stderr}");
    assert_eq!(env.server.requests().len(), 2, "the refused run sent nothing");

    signal(holder.id(), "-TERM");
    assert_eq!(holder.wait_with_output().unwrap().status.code(), Some(143));
    let (code, stdout, stderr) = run(&mut env.oneshot("four", &["--continue"]));
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(stdout, "whole again\n");
    assert_eq!(env.session_files().len(), 1);
}

#[test]
fn damaged_lines_are_skipped_with_their_number_and_a_damaged_first_line_is_rebuilt() {
    let env = strict(
        Wire::Anthropic,
        vec![Turn::text("hi there").into(), Turn::text("still here").into()],
    );
    assert_eq!(run(&mut env.oneshot("hello", &[])).0, 0);
    let path = env.session_files().remove(0);
    let id = path.file_stem().unwrap().to_string_lossy().into_owned();
    let text = std::fs::read(&path).unwrap();
    let mut lines: Vec<Vec<u8>> =
        text.split_inclusive(|b| *b == b'\n').map(<[u8]>::to_vec).collect();
    lines[0] = b"{\"type\":\"meta\",\"id\":\"tr\xffuncated\n".to_vec();
    lines.insert(2, b"{\"type\":\"error\",\"ts\":1,\"message\":\"bad \xc3\x28 bytes\"}\n".to_vec());
    std::fs::write(&path, lines.concat()).unwrap();

    let (code, stdout, stderr) = run(env.cmd().args(["sessions", "show", &id]));
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("hello") && stdout.contains("hi there"), "{stdout}");
    assert!(stderr.contains("line 3 skipped") && stderr.contains("invalid UTF-8"), "{stderr}");

    let (code, stdout, _) = run(env.cmd().args(["sessions", "list"]));
    assert_eq!(code, 0);
    assert!(stdout.contains(&id) && stdout.contains("hello"), "{stdout}");

    let (code, stdout, stderr) = run(&mut env.oneshot("again", &["--continue"]));
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(stdout, "still here\n");
    assert!(stderr.contains("line 1 (the session metadata) is damaged"), "{stderr}");
    let sent = env.request_body(1)["messages"].to_string();
    assert!(
        sent.contains("hello") && sent.contains("hi there") && sent.contains("again"),
        "{sent}"
    );
}

#[test]
fn reading_a_file_of_long_lines_is_capped_and_the_session_file_stays_small() {
    let env = strict(
        Wire::Anthropic,
        vec![Turn::tool("read", json!({"path": "wide.txt"})).into(), Turn::text("read it").into()],
    );
    let line = "x".repeat(3_000);
    std::fs::write(env.ws().join("wide.txt"), format!("{line}\n").repeat(2_000)).unwrap();
    let (code, _, stderr) = run(&mut env.oneshot("read wide.txt", &["--yes"]));
    assert_eq!(code, 0, "{stderr}");
    let results = common::tool_results(&env.request_body(1));
    let text = &results[0].0;
    assert!(text.chars().count() < 120_000, "{} characters", text.chars().count());
    assert!(text.contains("call read with offset="), "the result says how to go on");
    let size = std::fs::metadata(&env.session_files()[0]).unwrap().len();
    assert!(size < 400_000, "session file of {size} bytes");
}

#[test]
fn a_stream_cut_after_some_text_keeps_that_text_in_the_session() {
    let env =
        strict(Wire::OpenAi, vec![Fault::CutMidStream.into(), Turn::text("second try").into()]);
    let (code, _, _) = run(&mut env.oneshot("tell me", &[]));
    assert_eq!(code, 1);
    let (code, _, stderr) = run(&mut env.oneshot("go on", &["--continue"]));
    assert_eq!(code, 0, "{stderr}");
    let sent = env.request_body(env.server.requests().len() - 1)["messages"].to_string();
    assert!(sent.contains("cut off"), "the partial answer is kept, marked as cut: {sent}");
}

/// A tmpfs mounted on a folder for one test, unmounted when dropped.
struct TinyDisk(std::path::PathBuf);

impl TinyDisk {
    /// None (after a loud SKIP) where mounting is not allowed (not root).
    fn mount(dir: &Path, size: &str) -> Option<TinyDisk> {
        let ok = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir)
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            eprintln!(
                "\n*** SKIP: cannot mount a tmpfs here (needs root); full-disk test did not run ***\n"
            );
        }
        ok.then(|| TinyDisk(dir.to_path_buf()))
    }
}

impl Drop for TinyDisk {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg(&self.0).status();
    }
}

#[test]
fn a_full_disk_fails_the_request_in_one_line_and_leaves_no_empty_session_behind() {
    let env =
        Env::new(Wire::Anthropic, vec![Turn::text("first").into(), Turn::text("never").into()]);
    let home = env.home.path().join("tiny");
    std::fs::create_dir(&home).unwrap();
    let Some(_disk) = TinyDisk::mount(&home, "2m") else { return };
    let (code, _, stderr) = run(env.oneshot("hi", &[]).env("FERROCLAW_HOME", &home));
    assert_eq!(code, 0, "{stderr}");
    // Fill what is left of the disk.
    let mut filler = std::fs::File::create(home.join("filler")).unwrap();
    while std::io::Write::write_all(&mut filler, &[0u8; 4096]).is_ok() {}
    drop(filler);
    let sessions = || {
        let dir = std::fs::read_dir(home.join("sessions")).unwrap().next().unwrap().unwrap().path();
        std::fs::read_dir(dir).unwrap().count()
    };
    assert_eq!(sessions(), 1);
    let (code, _, stderr) = run(env.oneshot("again", &[]).env("FERROCLAW_HOME", &home));
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("No space left on device"), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert_eq!(sessions(), 1, "the failed request left no empty session file");
    assert_eq!(env.server.requests().len(), 1);
}

#[test]
fn a_full_disk_under_the_sessions_fails_the_request_instead_of_reporting_success() {
    let answer = "a long answer that does not fit on the disk ".repeat(1000);
    let env = Env::new(Wire::Anthropic, vec![Turn::text(&answer).into()]);
    let sessions = env.home.path().join("sessions");
    std::fs::create_dir_all(&sessions).unwrap();
    let Some(_disk) = TinyDisk::mount(&sessions, "256k") else { return };
    // Leave two pages: the metadata and the request fit, the answer does not.
    std::fs::write(sessions.join("filler"), vec![b'x'; 248 * 1024]).unwrap();
    let (code, stdout, stderr) = run(&mut env.oneshot("hi", &["--output-format", "json"]));
    assert_eq!(code, 1, "{stderr}");
    let v: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(v["is_error"], true);
    let result = v["result"].as_str().unwrap();
    assert!(result.contains("could not be saved"), "{result}");
    assert!(result.contains("No space left on device"), "{result}");
}
