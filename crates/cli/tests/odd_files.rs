//! Files ferroclaw reads for itself that are not files: a session file,
//! a config file or an instructions file that is a FIFO is refused or skipped
//! at once, with its path and what it is, never waited on; and no blocking
//! read (a stdin that never ends) makes ferroclaw deaf to SIGTERM.

use crate::common;

use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use common::{Env, Wire, run};
use ferroclaw_testkit::Turn;

fn mkfifo(path: &Path) {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).unwrap();
    }
    let _ = std::fs::remove_file(path);
    assert!(std::process::Command::new("mkfifo").arg(path).status().unwrap().success());
}

/// A hang guard for a command that must not block (today's failure mode is
/// waiting forever), not a timing check.
fn guarded(mut cmd: assert_cmd::Command) -> assert_cmd::Command {
    cmd.timeout(Duration::from_secs(30));
    cmd
}

/// The process's exit, or `None` (and it is killed) when it is still
/// running after a generous guard.
fn wait_guarded(child: &mut Child) -> Option<std::process::ExitStatus> {
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        if let Some(status) = child.try_wait().unwrap() {
            return Some(status);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
    None
}

fn wait_until(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_fifo_session_file_is_refused_by_resume_and_skipped_by_list_and_continue() {
    let env = Env::new(
        Wire::Anthropic,
        vec![Turn::text("Noted: 42.").into(), Turn::text("You said 42.").into()],
    );
    assert_eq!(run(&mut env.oneshot("remember 42", &[])).0, 0);
    let real = env.session_files().pop().expect("the session file");
    // Newer than the real one: `--continue` would pick it.
    let fifo = real.with_file_name("fifo-session.jsonl");
    mkfifo(&fifo);

    let (code, _, stderr) = run(&mut guarded(env.oneshot("hi", &["--resume", "fifo-session"])));
    assert_eq!(code, 2, "{stderr}");
    let said = format!("{} is a FIFO (named pipe), not a regular file", fifo.display());
    assert!(stderr.contains(&said), "{stderr}");

    let (code, stdout, stderr) = run(guarded(env.cmd()).args(["sessions", "list"]));
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(stdout.lines().count(), 2, "a header and the real session: {stdout}");
    assert!(stdout.contains("remember 42"), "{stdout}");
    let warnings: Vec<&str> = stderr.lines().filter(|l| l.contains("fifo-session")).collect();
    assert_eq!(warnings.len(), 1, "{stderr}");
    assert!(warnings[0].contains(&said), "{stderr}");

    let (code, stdout, stderr) = run(&mut guarded(env.oneshot("what did I say?", &["--continue"])));
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(stdout, "You said 42.\n");
}

#[test]
fn a_config_file_that_is_a_fifo_is_refused_naming_its_path_and_kind() {
    let env = Env::new(Wire::Anthropic, vec![]);
    let config = env.home.path().join("config.toml");
    mkfifo(&config);
    let (code, _, stderr) = run(&mut guarded(env.oneshot("hi", &[])));
    assert_eq!(code, 2, "{stderr}");
    let said = format!("{} is a FIFO (named pipe), not a regular file", config.display());
    assert!(stderr.contains(&said), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
}

#[test]
fn every_file_read_for_the_run_may_be_a_fifo_settings_are_refused_the_rest_skipped() {
    // (where, refused with the reason like a config file: else skipped)
    for (rel, refused) in [
        ("ws:.claude/settings.json", true),
        ("ws:.agent/config.toml", true),
        ("ws:AGENTS.md", false),
        ("ws:CLAUDE.md", false),
        ("ws:.mcp.json", false),
        ("ws:.claude/commands/fifo.md", false),
        ("ws:.agent/skills/fifo/SKILL.md", false),
        ("home:trust.json", false),
        ("home:workspace/memory/MEMORY.md", false),
        ("home:rules/fifo.md", false),
    ] {
        let env = Env::new(Wire::Anthropic, vec![Turn::text("Answered.").into()]);
        let (root, rel) = rel.split_once(':').unwrap();
        let path = if root == "ws" { env.ws().join(rel) } else { env.home.path().join(rel) };
        mkfifo(&path);
        let (code, stdout, stderr) = run(&mut guarded(env.oneshot("hi", &[])));
        if refused {
            assert_eq!(code, 2, "{rel}: {stderr}");
            let said = format!("{} is a FIFO (named pipe), not a regular file", path.display());
            assert!(stderr.contains(&said), "{rel}: {stderr}");
        } else {
            assert_eq!((code, stdout.as_str()), (0, "Answered.\n"), "{rel}: {stderr}");
        }
    }
}

#[test]
fn sigterm_ends_a_run_stuck_reading_a_stdin_that_never_ends() {
    let env = Env::new(Wire::Anthropic, vec![Turn::text("never asked").into()]);
    // A pipe on stdin whose writer (this test) neither writes nor closes it.
    let mut child = env
        .std_cmd()
        .args(["-p", "summarise this"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id();
    // SIGTERM is ferroclaw's (not the default action) and the main thread
    // is blocked reading the pipe: the case a handler on that thread misses.
    wait_until("ferroclaw to handle SIGTERM", || {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        let caught = status.lines().find_map(|l| l.strip_prefix("SigCgt:")).unwrap_or("0");
        u64::from_str_radix(caught.trim(), 16).unwrap_or(0) & (1 << (15 - 1)) != 0
    });
    wait_until("the read of stdin", || {
        std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/wchan"))
            .is_ok_and(|w| w.contains("pipe_read"))
    });
    let status = std::process::Command::new("kill").args(["-TERM", &pid.to_string()]).status();
    assert!(status.unwrap().success());
    let exit = wait_guarded(&mut child);
    assert_eq!(exit.and_then(|s| s.code()), Some(143), "ended by SIGTERM's own exit code");
    assert!(env.server.requests().is_empty());
}
