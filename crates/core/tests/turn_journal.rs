//! A journalled turn interrupted partway and resumed in a fresh agent
//! (another process, as far as the loop can tell): the finished steps are
//! replayed from the journal, so the model is asked only for what was
//! left and no recorded tool call runs again.

use crate::support;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use ferroclaw_core::journal::{FileJournal, Step, TurnJournal};
use ferroclaw_core::session::{RESUME_TAIL_BYTES, SessionLog};
use ferroclaw_core::{Agent, AgentParts, Outcome, SessionStore};
use ferroclaw_protocol::{Message, Role};
use ferroclaw_testkit::{Fault, ScriptedServer, Turn};
use ferroclaw_tools::{Tool, ToolContext, ToolError, ToolOutput, ToolRegistry};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

/// Appends its `line` to a file: a side effect a test can count.
struct Append(PathBuf);

#[async_trait]
impl Tool for Append {
    fn name(&self) -> &str {
        "append"
    }
    fn description(&self) -> &str {
        "appends a line to the log"
    }
    fn input_schema(&self) -> Value {
        json!({"type": "object", "properties": {"line": {"type": "string"}}, "required": ["line"]})
    }
    async fn execute(&self, input: Value, _ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        use std::io::Write;
        let line = input["line"].as_str().unwrap_or_default();
        let mut file = std::fs::OpenOptions::new().create(true).append(true).open(&self.0).unwrap();
        writeln!(file, "{line}").unwrap();
        Ok(ToolOutput::text(format!("appended {line}")))
    }
}

fn agent(
    server: &ScriptedServer,
    home: &Path,
    session: SessionLog,
    messages: Vec<Message>,
) -> Agent {
    let mut tools = ToolRegistry::new();
    tools.register(Append(home.join("side-effects.log")));
    let mut agent = Agent::new(AgentParts {
        messages,
        ..support::parts_with_session(server, home, tools, session)
    });
    agent.set_journal(Some(Arc::new(FileJournal::new(&SessionStore::new(home).project_dir(home)))));
    agent
}

async fn run_turn(agent: &mut Agent, turn: &str, prompt: &str) -> ferroclaw_core::Report {
    let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
    agent.journal_turn(turn.into(), json!({"from": "test"}));
    agent.run(Message::user(prompt), &tx, &CancellationToken::new()).await
}

#[tokio::test]
async fn a_resumed_turn_asks_the_model_only_for_unfinished_steps_and_reruns_no_recorded_tool() {
    let server = ScriptedServer::start(vec![
        Turn::tool("append", json!({"line": "one"})).into(),
        Turn::tool("append", json!({"line": "two"})).into(),
        // The process "dies" here: the third request never gets its answer.
        Fault::Status { status: 400, body: None, retry_after: None }.into(),
        Turn::text("Both lines are in.").into(),
    ]);
    let home = tempfile::tempdir().unwrap();
    let home = home.path();
    let session = SessionStore::new(home).create(home, "anthropic/m").unwrap();
    let path = session.path().to_path_buf();
    let mut first = agent(&server, home, session, Vec::new());
    let report = run_turn(&mut first, "chat-7", "write both lines").await;
    assert!(matches!(report.outcome, Outcome::Failed(_)), "{report:?}");
    assert_eq!(server.requests().len(), 3);
    drop(first);

    let journal = FileJournal::new(&SessionStore::new(home).project_dir(home));
    let session_id = path.file_stem().unwrap().to_string_lossy().into_owned();
    let recorded = journal.load(&session_id, "chat-7").await.unwrap();
    let kinds: Vec<&str> = recorded
        .steps
        .iter()
        .map(|s| match s {
            Step::Begin { .. } => "begin",
            Step::Model { .. } => "model",
            Step::Tool { .. } => "tool",
        })
        .collect();
    assert_eq!(kinds, ["begin", "model", "tool", "model", "tool"]);
    let open = journal.unfinished().await.unwrap();
    assert_eq!(open.len(), 1);
    assert_eq!(open[0].origin, json!({"from": "test"}));

    // Another process takes the turn up from the session file and the journal.
    let resumed = SessionLog::resume(&path, RESUME_TAIL_BYTES).unwrap();
    let mut second = agent(&server, home, resumed.log, resumed.messages);
    let report = run_turn(&mut second, "chat-7", "(the message, delivered again)").await;
    assert_eq!(report.outcome, Outcome::Answered, "{report:?}");
    assert_eq!(report.text, "Both lines are in.");
    assert_eq!(server.requests().len(), 4, "one request for the one unfinished step");
    let last = &server.requests()[3].body;
    let sent = last["messages"].to_string();
    assert!(sent.contains("appended one") && sent.contains("appended two"), "{sent}");
    assert!(!sent.contains("delivered again"), "the turn's own words are the recorded ones");
    let log = std::fs::read_to_string(home.join("side-effects.log")).unwrap();
    assert_eq!(log, "one\ntwo\n", "no recorded tool call ran again");

    // The session holds the turn once, as if it had never been interrupted.
    drop(second);
    let reloaded = SessionLog::resume(&path, RESUME_TAIL_BYTES).unwrap().messages;
    let roles: Vec<Role> = reloaded.iter().map(|m| m.role).collect();
    use Role::{Assistant as A, User as U};
    assert_eq!(roles, [U, A, U, A, U, A]);
    assert_eq!(reloaded[0].text(), "write both lines");
}

#[tokio::test]
async fn an_unjournalled_agent_records_nothing() {
    let server = ScriptedServer::start(vec![Turn::text("hi").into()]);
    let home = tempfile::tempdir().unwrap();
    let home = home.path();
    let session = SessionStore::new(home).create(home, "anthropic/m").unwrap();
    let id = session.meta().id.clone();
    let mut agent = agent(&server, home, session, Vec::new());
    let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
    // No turn named: the run is not journalled.
    let report = agent.run(Message::user("hello"), &tx, &CancellationToken::new()).await;
    assert_eq!(report.text, "hi");
    let journal = FileJournal::new(&SessionStore::new(home).project_dir(home));
    assert!(journal.unfinished().await.unwrap().is_empty());
    assert!(journal.load(&id, "anything").await.unwrap().steps.is_empty());
}
