//! The agent loop against the scripted LLM server and the real providers:
//! parallel read-only calls, panicking tools, permission branches, events,
//! and deny rules judging the file a tool opens, not the path decided.

use crate::support;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use ferroclaw_core::{Agent, Approval, Approver, NoOneToAsk, Outcome, PermissionMode};
use ferroclaw_protocol::{AgentEvent, ContentBlock, Message, ToolCall};
use ferroclaw_testkit::{ScriptedServer, ScriptedToolCall, Step, Turn};
use ferroclaw_tools::{Tool, ToolContext, ToolError, ToolOutput, ToolRegistry};
use serde_json::{Value, json};
use tokio::sync::Barrier;
use tokio_util::sync::CancellationToken;

/// A read-only tool that waits until `n` calls of it are running at once.
struct Rendezvous(Arc<Barrier>);

#[async_trait]
impl Tool for Rendezvous {
    fn name(&self) -> &str {
        "rendezvous"
    }
    fn description(&self) -> &str {
        "waits for its twin"
    }
    fn input_schema(&self) -> Value {
        json!({"type": "object"})
    }
    fn read_only(&self) -> bool {
        true
    }
    async fn execute(&self, _input: Value, _ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        match tokio::time::timeout(Duration::from_secs(5), self.0.wait()).await {
            Ok(_) => Ok(ToolOutput::text("met")),
            Err(_) => Err(ToolError::Failed("ran alone".into())),
        }
    }
}

/// A tool with a bug.
struct Panics;

#[async_trait]
impl Tool for Panics {
    fn name(&self) -> &str {
        "panics"
    }
    fn description(&self) -> &str {
        "always panics"
    }
    fn input_schema(&self) -> Value {
        json!({"type": "object"})
    }
    async fn execute(&self, _input: Value, _ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        panic!("index out of bounds")
    }
}

struct AlwaysYes;

#[async_trait]
impl Approver for AlwaysYes {
    async fn approve(&self, _call: &ToolCall) -> Approval {
        Approval::Yes
    }
}

async fn run(agent: &mut Agent, prompt: &str) -> (ferroclaw_core::Report, Vec<AgentEvent>) {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let report = agent.run(Message::user(prompt), &tx, &CancellationToken::new()).await;
    drop(tx);
    let mut events = Vec::new();
    while let Some(e) = rx.recv().await {
        events.push(e);
    }
    (report, events)
}

fn results(agent: &Agent) -> Vec<(String, bool)> {
    agent
        .messages()
        .iter()
        .flat_map(|m| m.content.iter())
        .filter_map(|b| match b {
            ContentBlock::ToolResult { content, is_error, .. } => {
                Some((content.iter().filter_map(|p| p.as_text()).collect(), *is_error))
            }
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn independent_read_only_calls_run_in_parallel_and_results_keep_call_order() {
    let server = ScriptedServer::start(vec![
        Turn::tools(vec![
            ScriptedToolCall::new("rendezvous", json!({})),
            ScriptedToolCall::new("rendezvous", json!({})),
        ])
        .into(),
        Turn::text("both met").into(),
    ]);
    let home = tempfile::tempdir().unwrap();
    let mut tools = ToolRegistry::new();
    tools.register(Rendezvous(Arc::new(Barrier::new(2))));
    let mut a = support::default_agent(&server, home.path(), tools);
    let (report, events) = run(&mut a, "meet").await;
    assert_eq!(report.outcome, Outcome::Answered);
    assert_eq!(results(&a), vec![("met".to_string(), false), ("met".to_string(), false)]);
    let finished =
        events.iter().filter(|e| matches!(e, AgentEvent::ToolCallFinished { .. })).count();
    assert_eq!(finished, 2);
}

#[tokio::test]
async fn a_panicking_tool_becomes_an_error_result_and_the_loop_goes_on() {
    let server = ScriptedServer::start(vec![
        Turn::tool("panics", json!({})).into(),
        Turn::text("recovered").into(),
    ]);
    let home = tempfile::tempdir().unwrap();
    let mut tools = ToolRegistry::new();
    tools.register(Panics);
    let mut a =
        support::agent(&server, home.path(), tools, PermissionMode::Bypass, Arc::new(NoOneToAsk));
    let (report, _) = run(&mut a, "go").await;
    assert_eq!(report.text, "recovered");
    let r = results(&a);
    assert!(r[0].1 && r[0].0.contains("panics crashed (index out of bounds)"), "{r:?}");
}

#[tokio::test]
async fn an_approved_call_runs_and_the_decision_is_logged_in_the_session() {
    let server = ScriptedServer::start(vec![
        Turn::tool("panics", json!({})).into(),
        Turn::text("ok").into(),
    ]);
    let home = tempfile::tempdir().unwrap();
    let mut tools = ToolRegistry::new();
    tools.register(Panics);
    let mut a =
        support::agent(&server, home.path(), tools, PermissionMode::Default, Arc::new(AlwaysYes));
    run(&mut a, "go").await;
    assert!(results(&a)[0].0.contains("crashed"), "it ran");
    let log = std::fs::read_to_string(a.session().path()).unwrap();
    assert!(
        log.contains(r#""type":"permission""#) && log.contains(r#""decision":"allow""#),
        "{log}"
    );
}

#[tokio::test]
async fn plan_mode_refuses_tools_that_change_things() {
    let server = ScriptedServer::start(vec![
        Turn::tool("panics", json!({})).into(),
        Turn::text("planned").into(),
    ]);
    let home = tempfile::tempdir().unwrap();
    let mut tools = ToolRegistry::new();
    tools.register(Panics);
    let mut a =
        support::agent(&server, home.path(), tools, PermissionMode::Plan, Arc::new(AlwaysYes));
    run(&mut a, "go").await;
    let r = results(&a);
    assert!(r[0].1 && r[0].0.contains("plan mode"), "{r:?}");
}

#[tokio::test]
async fn cancelling_before_the_answer_ends_the_request_without_losing_it() {
    let steps: Vec<Step> =
        vec![ferroclaw_testkit::Fault::Stall { after_text: "hmm".into() }.into()];
    let server = ScriptedServer::start(steps);
    let home = tempfile::tempdir().unwrap();
    let mut a = support::default_agent(&server, home.path(), ToolRegistry::new());
    let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
    let cancel = CancellationToken::new();
    let c = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        c.cancel();
    });
    let report = a.run(Message::user("think"), &tx, &cancel).await;
    assert_eq!(report.outcome, Outcome::Cancelled);
    assert_eq!(a.messages().len(), 2, "the request and the partial answer are kept");
    assert!(a.messages()[1].text().starts_with("hmm"));
}

/// Hands out one note at its second request (like a message arriving while
/// a tool runs) and counts commits; gives an identity after compaction.
#[derive(Default)]
struct Inbox {
    calls: std::sync::atomic::AtomicUsize,
    handed: std::sync::atomic::AtomicBool,
    commits: std::sync::atomic::AtomicUsize,
}

impl ferroclaw_core::agent::Injector for Inbox {
    fn before_request(&self) -> Option<String> {
        use std::sync::atomic::Ordering::SeqCst;
        if self.calls.fetch_add(1, SeqCst) == 1 {
            self.handed.store(true, SeqCst);
            return Some("<inbox>news from alice</inbox>".into());
        }
        None
    }
    fn has_uncommitted(&self) -> bool {
        self.handed.load(std::sync::atomic::Ordering::SeqCst)
    }
    fn committed(&self) {
        self.handed.store(false, std::sync::atomic::Ordering::SeqCst);
        self.commits.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }
    fn after_compaction(&self) -> Option<String> {
        Some("<identity>You are alice</identity>".into())
    }
}

#[tokio::test]
async fn injected_text_arrives_between_tool_calls_is_committed_and_identity_survives_compaction() {
    let home = tempfile::tempdir().unwrap();
    let server = ScriptedServer::start(vec![
        Turn::tool("rendezvous", json!({})).into(),
        Turn::text("done").into(),
        Turn::text("## Goal\nthe summary").into(),
    ]);
    let mut tools = ToolRegistry::new();
    tools.register(Rendezvous(Arc::new(Barrier::new(1))));
    let mut agent = support::default_agent(&server, home.path(), tools);
    let inbox = Arc::new(Inbox::default());
    agent.set_injector(Some(inbox.clone()));
    let (report, _) = run(&mut agent, "go").await;
    assert_eq!(report.outcome, Outcome::Answered);
    let bodies: Vec<String> =
        server.requests().iter().map(|r| r.body["messages"].to_string()).collect();
    assert!(!bodies[0].contains("news from alice"));
    assert!(bodies[1].contains("news from alice"), "delivered before the second call of the turn");
    assert_eq!(inbox.commits.load(std::sync::atomic::Ordering::SeqCst), 1, "committed once");
    let saved = std::fs::read_to_string(agent.session().path()).unwrap();
    assert!(saved.contains("news from alice"), "in the session file before the commit");

    let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
    agent.compact(None, &tx, &CancellationToken::new()).await.unwrap();
    let last = agent.messages().last().unwrap().text();
    assert!(last.contains("<identity>You are alice</identity>"), "{last}");
}

#[tokio::test]
async fn a_request_is_reported_finished_only_by_commit_turn_once_its_session_is_written() {
    let server = ScriptedServer::start(vec![Turn::text("the answer").into()]);
    let home = tempfile::tempdir().unwrap();
    let mut a = support::default_agent(&server, home.path(), ToolRegistry::new());
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let turn = a.run_turn(Message::user("ask"), &tx, &CancellationToken::new()).await;
    let mut before = Vec::new();
    while let Ok(e) = rx.try_recv() {
        before.push(e);
    }
    assert!(before.iter().any(|e| matches!(e, AgentEvent::TextDelta { .. })), "{before:?}");
    assert!(
        !before.iter().any(|e| matches!(e, AgentEvent::Finished { .. })),
        "not done before the commit: {before:?}"
    );
    let report = a.commit_turn(turn, &tx).await;
    assert_eq!(report.outcome, Outcome::Answered);
    assert!(
        matches!(rx.try_recv(), Ok(AgentEvent::Finished { result, .. }) if result == "the answer")
    );
    let saved = std::fs::read_to_string(a.session().path()).unwrap();
    assert!(saved.contains("the answer"), "{saved}");
}

/// A user who takes a while to answer: while asked, a background job swaps
/// the folder `x` for a link to `secrets`; then the answer is yes.
struct SwapsWhileAsked(std::path::PathBuf);

#[async_trait]
impl Approver for SwapsWhileAsked {
    async fn approve(&self, _call: &ToolCall) -> Approval {
        let x = self.0.join("x");
        std::fs::remove_dir_all(&x).unwrap();
        std::os::unix::fs::symlink("secrets", &x).unwrap();
        Approval::Yes
    }
}

/// Runs one call of `tool` with `input` in a workspace holding
/// `secrets/key` and a real folder `x`, under the `deny` and `ask` rules;
/// the call is decided while `x` is a folder and runs once it is a link to
/// `secrets`. Gives the call's result and the workspace.
async fn decided_then_swapped(
    deny: &str,
    ask: &[String],
    tool: &str,
    input: Value,
) -> ((String, bool), tempfile::TempDir) {
    let server =
        ScriptedServer::start(vec![Turn::tool(tool, input).into(), Turn::text("done").into()]);
    let home = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(home.path().join("secrets")).unwrap();
    std::fs::write(home.path().join("secrets/key"), "DENIED-API-KEY\n").unwrap();
    std::fs::create_dir_all(home.path().join("x")).unwrap();
    std::fs::write(home.path().join("x/key"), "public\n").unwrap();
    let permissions =
        ferroclaw_core::Permissions::new(PermissionMode::Default, &[], &[deny.to_string()])
            .unwrap()
            .with_workspace(home.path())
            .with_ask(ask)
            .unwrap();
    let mut a = Agent::new(ferroclaw_core::AgentParts {
        permissions: Arc::new(permissions),
        approver: Arc::new(SwapsWhileAsked(home.path().to_path_buf())),
        ..support::parts(&server, home.path(), ferroclaw_tools::builtin_tools())
    });
    let (report, _) = run(&mut a, "go").await;
    assert_eq!(report.outcome, Outcome::Answered);
    let result = results(&a).pop().unwrap();
    (result, home)
}

#[tokio::test]
async fn a_read_decided_before_its_folder_became_a_link_to_a_denied_one_is_refused() {
    let ask = vec!["Read(x/**)".to_string()];
    let input = json!({"path": "x/key"});
    let ((text, is_error), _ws) =
        decided_then_swapped("Read(secrets/**)", &ask, "read", input).await;
    assert!(is_error, "the read went through: {text}");
    assert!(!text.contains("DENIED-API-KEY"), "{text}");
    assert!(text.contains("read(secrets/**) in config"), "{text}");
}

#[tokio::test]
async fn a_write_decided_before_its_folder_became_a_link_to_a_denied_one_is_refused() {
    let input = json!({"path": "x/new.txt", "content": "planted\n"});
    let ((text, is_error), ws) =
        decided_then_swapped("Edit(./secrets/**)", &[], "write", input).await;
    assert!(is_error, "the write went through: {text}");
    assert!(text.contains("edit(./secrets/**) in config"), "{text}");
    assert!(!ws.path().join("secrets/new.txt").exists(), "a file landed in secrets/");
}
