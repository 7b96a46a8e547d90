//! End-to-end: the REPL driven through stdin, and Ctrl-C.

mod common;

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::time::Duration;

use common::{Env, Wire, run};
use ferroclaw_testkit::{Fault, Turn};

#[test]
fn the_repl_answers_lines_and_handles_slash_commands() {
    let env = Env::new(
        Wire::Anthropic,
        vec![Turn::text("hello human").into(), Turn::text("second answer").into()],
    );
    let input = "hi there\n/model\n/nonsense\n/help\nand again\n/exit\n";
    let (code, stdout, stderr) = run(env.cmd().write_stdin(input));
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("hello human") && stdout.contains("second answer"), "{stdout}");
    assert!(stdout.contains("anthropic/claude-test"), "/model prints the model: {stdout}");
    assert!(stdout.contains("/resume"), "/help lists commands: {stdout}");
    assert!(stderr.contains("unknown command /nonsense"), "{stderr}");
    assert_eq!(env.server.requests().len(), 2);
    let second = env.request_body(1);
    assert_eq!(second["messages"].as_array().unwrap().len(), 3, "the REPL keeps the conversation");
}

#[test]
fn clear_starts_a_new_conversation() {
    let env = Env::new(Wire::OpenAi, vec![Turn::text("one").into(), Turn::text("two").into()]);
    let (code, _, _) = run(env.cmd().write_stdin("first\n/clear\nsecond\n"));
    assert_eq!(code, 0);
    let body = env.request_body(1);
    let users: Vec<_> =
        body["messages"].as_array().unwrap().iter().filter(|m| m["role"] == "user").collect();
    assert_eq!(users.len(), 1);
    assert_eq!(env.session_files().len(), 2);
}

#[test]
fn ctrl_c_cancels_the_request_in_flight_and_keeps_the_session() {
    let env = Env::new(
        Wire::Anthropic,
        vec![Fault::Stall { after_text: "thinking about".into() }.into()],
    );
    let mut cmd = env.std_cmd();
    cmd.args(["-p", "a long question", "--output-format", "stream-json"]);
    let mut child = cmd.stdout(Stdio::piped()).stderr(Stdio::null()).spawn().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    // Wait until the model has started answering.
    for line in lines.by_ref() {
        if line.unwrap().contains("text_delta") {
            break;
        }
    }
    std::process::Command::new("kill").args(["-INT", &child.id().to_string()]).status().unwrap();
    let rest: Vec<String> = lines.map_while(Result::ok).collect();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130));
    let last: serde_json::Value = serde_json::from_str(rest.last().unwrap()).unwrap();
    assert_eq!(last["type"], "finished");
    assert_eq!(last["is_error"], true);
    let session = std::fs::read_to_string(&env.session_files()[0]).unwrap();
    assert!(session.contains("a long question"));
    assert!(session.contains("[interrupted by the user]"), "the partial answer is kept, marked");
    std::thread::sleep(Duration::from_millis(10));
}
