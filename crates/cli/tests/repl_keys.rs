//! End-to-end on a pseudo-terminal: Esc interrupts the request in flight
//! and does not leak into the next command.

use crate::common;

use std::io::{Read, Write};
use std::os::fd::{FromRawFd, OwnedFd};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{Env, Wire};
use ferroclaw_testkit::{Fault, Turn};
use serde_json::json;

/// The terminal's side of the REPL: what it printed, and a way to type.
struct Terminal {
    master: std::fs::File,
    screen: Arc<Mutex<Vec<u8>>>,
}

impl Terminal {
    fn typed(&mut self, keys: &[u8]) {
        self.master.write_all(keys).unwrap();
        self.master.flush().unwrap();
    }

    /// Waits until the screen shows `text` (a hang guard, not a timing check).
    fn wait_for(&self, text: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let screen = String::from_utf8_lossy(&self.screen.lock().unwrap()).into_owned();
            if screen.contains(text) {
                return screen;
            }
            assert!(Instant::now() < deadline, "never showed {text:?}; screen:\n{screen}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

fn open_terminal(env: &Env) -> (Terminal, std::process::Child) {
    open_terminal_sized(env, None, &[])
}

/// The same, on a terminal `columns` wide (unset: a size of zero, unknown),
/// with `args`.
fn open_terminal_sized(
    env: &Env,
    columns: Option<u16>,
    args: &[&str],
) -> (Terminal, std::process::Child) {
    let (mut master, mut slave) = (0, 0);
    let size = columns.map(|c| libc::winsize { ws_row: 40, ws_col: c, ws_xpixel: 0, ws_ypixel: 0 });
    let size_ptr = size.as_ref().map_or(std::ptr::null(), |s| s as *const libc::winsize);
    // SAFETY: openpty fills in two new descriptors we then own; it only reads the size.
    let rc = unsafe {
        libc::openpty(
            &raw mut master,
            &raw mut slave,
            std::ptr::null_mut(),
            std::ptr::null(),
            size_ptr,
        )
    };
    assert_eq!(rc, 0);
    // SAFETY: both descriptors were just opened and are owned here.
    let (master, slave) = unsafe { (OwnedFd::from_raw_fd(master), OwnedFd::from_raw_fd(slave)) };
    let mut cmd = env.std_cmd();
    cmd.args(args);
    cmd.env("TERM", "xterm")
        .stdin(Stdio::from(slave.try_clone().unwrap()))
        .stdout(Stdio::from(slave.try_clone().unwrap()))
        .stderr(Stdio::from(slave));
    let child = cmd.spawn().unwrap();
    let master = std::fs::File::from(master);
    let screen = Arc::new(Mutex::new(Vec::new()));
    {
        let (mut reader, mut answer) = (master.try_clone().unwrap(), master.try_clone().unwrap());
        let screen = screen.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = reader.read(&mut buf) {
                if n == 0 {
                    break;
                }
                // Answer a cursor position query as a terminal would.
                if buf[..n].windows(4).any(|w| w == b"\x1b[6n") {
                    let _ = answer.write_all(b"\x1b[1;1R");
                }
                screen.lock().unwrap().extend_from_slice(&buf[..n]);
            }
        });
    }
    (Terminal { master, screen }, child)
}

#[test]
fn esc_interrupts_the_request_and_the_next_command_still_runs() {
    let env = Env::new(
        Wire::Anthropic,
        vec![Fault::Stall { after_text: "thinking about".into() }.into()],
    );
    let (mut term, mut child) = open_terminal(&env);
    term.wait_for("/help for commands");
    term.typed(b"a long question\r");
    term.wait_for("thinking about");
    term.typed(b"\x1b");
    term.wait_for("(interrupted)");
    term.typed(b"/usage\r");
    let screen = term.wait_for("cache write tokens");
    assert!(!screen.contains("^["), "Esc is not echoed: {screen}");
    assert!(!screen.contains("about\x1b[2m(interrupted)"), "glued to the answer: {screen}");
    term.typed(b"/exit\r");
    let status = child.wait().unwrap();
    assert!(status.success());
    assert_eq!(env.server.requests().len(), 1, "/usage did not go to the model");
}

#[test]
fn ctrl_c_at_an_approval_question_cancels_the_request_and_gives_the_prompt_back() {
    let env = Env::new(
        Wire::Anthropic,
        vec![Turn::tool("bash", json!({"command": "touch ran.txt"})).into()],
    );
    let (mut term, mut child) = open_terminal(&env);
    term.wait_for("/help for commands");
    term.typed(b"make a file\r");
    term.wait_for("[y/N]");
    term.typed(b"\x03");
    term.wait_for("(interrupted)");
    term.typed(b"/usage\r");
    term.wait_for("cache write tokens");
    term.typed(b"/exit\r");
    assert!(child.wait().unwrap().success());
    assert!(!env.ws().join("ran.txt").exists(), "the command did not run");
    assert_eq!(env.server.requests().len(), 1, "the request ended at the question");
}

/// A retry notice starts its own line: the spinner on the line it interrupts
/// is cleared first, not left glued in front of the notice.
#[test]
fn a_retry_notice_replaces_the_spinner_line_instead_of_being_glued_to_it() {
    let env = Env::new(
        Wire::Anthropic,
        vec![Fault::Stall { after_text: String::new() }.into(), Turn::text("second try").into()],
    );
    // The stalled stream counts as broken after a second of silence, while
    // the spinner runs, and the request is retried.
    env.write_home_config(
        "[retry]\nbase_delay_ms = 10\nmax_delay_ms = 50\n[timeouts]\nidle_secs = 1\n",
    );
    let (mut term, mut child) = open_terminal(&env);
    term.wait_for("/help for commands");
    term.typed(b"hello\r");
    let screen = term.wait_for("second try");
    let at = screen.find("⟳ retrying").expect(&screen);
    let before = screen[..at].trim_end_matches("\x1b[33m");
    assert!(
        before.ends_with("\r\x1b[2K") || before.ends_with('\n'),
        "the notice is glued to what came before it: {:?}",
        &screen[at.saturating_sub(80)..at + 20]
    );
    term.typed(b"/exit\r");
    assert!(child.wait().unwrap().success());
}

/// Tab after `@` completes a path from the workspace, a folder at a time,
/// and the completed mention includes the file.
#[test]
fn tab_completes_an_at_file_mention_from_the_workspace() {
    let env = Env::new(Wire::Anthropic, vec![Turn::text("read it").into()]);
    std::fs::create_dir(env.ws().join("src")).unwrap();
    std::fs::write(env.ws().join("src/main.rs"), "fn main() { println!(\"kiwi\"); }\n").unwrap();
    let (mut term, mut child) = open_terminal(&env);
    term.wait_for("/help for commands");
    term.typed(b"explain @sr\t");
    term.wait_for("explain @src/");
    term.typed(b"ma\t");
    term.wait_for("explain @src/main.rs");
    term.typed(b"\r");
    term.wait_for("read it");
    term.typed(b"/exit\r");
    assert!(child.wait().unwrap().success());
    let body = env.request_body(0).to_string();
    assert!(body.contains("println!(\\\"kiwi\\\")"), "the file went with the request: {body}");
}

/// `/sessions` fits each row to the terminal: a long first request is cut
/// to the width left, so rows do not wrap into each other.
#[test]
fn sessions_rows_fit_the_terminal_width() {
    let env = Env::new(Wire::Anthropic, vec![Turn::text("noted").into()]);
    let long = format!("please remember {}", "the long request ".repeat(8));
    assert_eq!(common::run(&mut env.oneshot(&long, &[])).0, 0);
    let (mut term, mut child) = open_terminal_sized(&env, Some(120), &[]);
    term.wait_for("/help for commands");
    term.typed(b"/sessions\r");
    let screen = term.wait_for("please remember");
    let row = screen.split(['\r', '\n']).find(|l| l.contains("please remember")).unwrap();
    assert!(row.chars().count() <= 120, "{} characters: {row:?}", row.chars().count());
    assert!(row.ends_with('…'), "the request is cut, and says so: {row:?}");
    term.typed(b"/exit\r");
    assert!(child.wait().unwrap().success());
}

/// Ctrl-C at `--resume`'s question leaves (130) without opening a session;
/// it used to resume the first one listed.
#[test]
fn ctrl_c_at_the_resume_question_leaves_without_resuming() {
    let env = Env::new(Wire::Anthropic, vec![Turn::text("noted").into()]);
    assert_eq!(common::run(&mut env.oneshot("alpha", &[])).0, 0);
    let (mut term, mut child) = open_terminal_sized(&env, None, &["--resume"]);
    term.wait_for("resume which? [1]");
    term.typed(b"\x03");
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130));
    let screen = String::from_utf8_lossy(&term.screen.lock().unwrap()).into_owned();
    assert!(!screen.contains("resumed"), "{screen}");
    assert_eq!(env.server.requests().len(), 1);
}

/// A teammate's message reaching an idle lead starts the lead's turn by
/// itself: the user sees who wrote what, then the lead's answer, and the
/// model got the message as an `<inbox>` block.
#[test]
fn a_teammates_message_at_an_idle_prompt_starts_the_leads_turn() {
    let env = Env::new(Wire::Anthropic, vec![Turn::text("Thanks alice, I will merge it.").into()]);
    env.write_home_config("[team]\npoll_secs = 0.05\nidle_timeout_secs = 60\n");
    let (mut term, mut child) = open_terminal(&env);
    term.wait_for("/help for commands");
    let inbox = env.ws().join(".agent/team/inbox");
    std::fs::create_dir_all(&inbox).unwrap();
    let message = json!({"id": "msg-1", "type": "message", "from": "alice", "to": "lead",
        "content": "The changelog is done.", "timestamp": "2026-12-01T00:00:00Z"});
    std::fs::write(inbox.join("lead.jsonl"), format!("{message}\n")).unwrap();
    term.wait_for("message from alice: The changelog is done.");
    term.wait_for("I will merge it.");
    term.typed(b"/exit\r");
    assert!(child.wait().unwrap().success());
    let requests = env.server.requests();
    assert_eq!(requests.len(), 1, "one turn, started by the message");
    let body = requests[0].body.to_string();
    assert!(
        body.contains("[message] from alice") && body.contains("The changelog is done."),
        "{body}"
    );
}
