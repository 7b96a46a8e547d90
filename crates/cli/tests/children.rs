//! End-to-end: every process ferroclaw starts dies with it. A command's
//! shell dies at once when ferroclaw is killed (its parent-death signal);
//! what the shell started (`sleep &`, a pipeline) is killed when the session
//! ends, or, after a kill -9, when the session opens again, and the model is
//! told which background jobs were lost.

use crate::common;

use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use common::{Env, Wire, run};
use ferroclaw_testkit::{Fault, Step, Turn};
use serde_json::json;

/// Waits until `f` holds (a guard against hangs, not a timing assertion).
fn wait_for(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Whether process `pid` runs (exists and is not a zombie).
fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| s.rsplit_once(')').map(|(_, rest)| rest.trim_start().to_string()))
        .is_some_and(|rest| !rest.starts_with('Z'))
}

/// The pid written to `name` in the workspace, once written.
fn pid_file(ws: &Path, name: &str) -> i32 {
    let mut pid = 0;
    wait_for(&format!("{name} to be written"), || {
        pid = std::fs::read_to_string(ws.join(name))
            .ok()
            .and_then(|t| t.trim().parse().ok())
            .unwrap_or(0);
        pid > 0
    });
    pid
}

fn spawn(env: &Env, prompt: &str) -> Child {
    env.std_cmd()
        .args(["-p", prompt, "--yes"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

fn kill_9(child: &mut Child) {
    let status =
        std::process::Command::new("kill").args(["-KILL", &child.id().to_string()]).status();
    assert!(status.unwrap().success());
    child.wait().unwrap();
}

/// Kills `pid` should a failing test leave it running.
struct Cleanup(Vec<i32>);

impl Drop for Cleanup {
    fn drop(&mut self) {
        for pid in &self.0 {
            // SAFETY: signals a process this test started.
            unsafe { libc::kill(*pid, libc::SIGKILL) };
        }
    }
}

#[test]
fn a_killed_ferroclaw_takes_its_shell_at_once_and_the_rest_when_the_session_opens_again() {
    let command = "echo $$ > shell.pid; sleep 300 & echo $! > sleep.pid; wait";
    let env = Env::new(
        Wire::Anthropic,
        vec![Turn::tool("bash", json!({"command": command})).into(), Turn::text("back").into()],
    );
    let mut child = spawn(&env, "run the slow thing");
    let shell = pid_file(env.ws(), "shell.pid");
    let sleep = pid_file(env.ws(), "sleep.pid");
    let _cleanup = Cleanup(vec![shell, sleep]);
    kill_9(&mut child);
    wait_for("the shell to die with ferroclaw", || !alive(shell));

    let (code, stdout, stderr) = run(&mut env.oneshot("still there?", &["--continue"]));
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(stdout, "back\n");
    assert!(!alive(sleep), "what the shell started was killed when the session opened again");
}

#[test]
fn a_background_job_lost_with_a_killed_ferroclaw_is_killed_and_told_to_the_model() {
    let command = "echo $$ > job.pid; sleep 300 & echo $! > sleep.pid; wait";
    let script: Vec<Step> = vec![
        Turn::tool("background_run", json!({"command": command})).into(),
        Fault::Stall { after_text: "waiting".into() }.into(),
        Turn::text("I will run it again").into(),
    ];
    let env = Env::new(Wire::Anthropic, script);
    let mut child = spawn(&env, "build it in the background");
    let shell = pid_file(env.ws(), "job.pid");
    let sleep = pid_file(env.ws(), "sleep.pid");
    let _cleanup = Cleanup(vec![shell, sleep]);
    wait_for("the second request", || env.server.requests().len() == 2);
    kill_9(&mut child);
    wait_for("the job's shell to die with ferroclaw", || !alive(shell));

    let (code, stdout, stderr) = run(&mut env.oneshot("how did the build go?", &["--continue"]));
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(stdout, "I will run it again\n");
    assert!(!alive(sleep), "the job's processes were killed when the session opened again");
    let sent = env.request_body(2).to_string();
    assert!(sent.contains("<background-results>"), "{sent}");
    assert!(sent.contains("] lost: echo $$ > job.pid"), "the model hears the job was lost: {sent}");
}

#[test]
fn what_a_command_left_running_ends_with_the_session() {
    let env = Env::new(
        Wire::OpenAi,
        vec![
            Turn::tool("bash", json!({"command": "sleep 300 & echo $! > sleep.pid"})).into(),
            Turn::text("started").into(),
        ],
    );
    let (code, stdout, stderr) = run(&mut env.oneshot("start it", &["--yes"]));
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(stdout, "started\n");
    let sleep = pid_file(env.ws(), "sleep.pid");
    let _cleanup = Cleanup(vec![sleep]);
    wait_for("the left-behind sleep to end with the session", || !alive(sleep));
}

#[test]
fn a_detached_job_still_outlives_ferroclaw() {
    let command = "sleep 300 & echo $! > sleep.pid; wait";
    let env = Env::new(
        Wire::Anthropic,
        vec![
            Turn::tool("background_run", json!({"command": command, "detached": true})).into(),
            Turn::text("it runs on").into(),
            Turn::text("still running").into(),
        ],
    );
    let (code, _, stderr) = run(&mut env.oneshot("start the server", &["--yes"]));
    assert_eq!(code, 0, "{stderr}");
    let sleep = pid_file(env.ws(), "sleep.pid");
    let _cleanup = Cleanup(vec![sleep]);
    assert!(alive(sleep), "asked to outlive ferroclaw, it does");
    let (code, _, stderr) = run(&mut env.oneshot("and now?", &["--continue"]));
    assert_eq!(code, 0, "{stderr}");
    assert!(alive(sleep), "opening the session again leaves it alone");
}
