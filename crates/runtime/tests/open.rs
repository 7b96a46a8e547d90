//! `Runtime::open` against the scripted model: agents share what the runtime
//! loaded, a session damaged in the middle opens with what can be read, and
//! cancelling a parent cancels its sub-agents.

use std::sync::Arc;
use std::time::Duration;

use ferroclaw_core::{Config, NoOneToAsk, Outcome, Overrides};
use ferroclaw_mcp::McpHub;
use ferroclaw_protocol::{AgentEvent, ContentBlock, Message};
use ferroclaw_runtime::{Resume, Runtime, SessionOptions};
use ferroclaw_testkit::{Fault, ScriptedServer, Step, Turn};
use serde_json::json;
use tokio_util::sync::CancellationToken;

/// A home whose only model is the scripted server; no MCP servers.
struct Setup {
    _home: tempfile::TempDir,
    workspace: tempfile::TempDir,
    server: ScriptedServer,
    runtime: Arc<Runtime>,
}

fn setup(script: Vec<Step>) -> Setup {
    let server = ScriptedServer::start(script);
    let home = tempfile::tempdir().unwrap();
    let workspace = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("config.toml"),
        format!(
            "model = \"scripted/m\"\n\n[providers.scripted]\nwire = \"anthropic\"\nbase_url = \"{}\"\napi_key = \"k\"\n",
            server.url()
        ),
    )
    .unwrap();
    let config = Config::load(
        home.path().to_path_buf(),
        workspace.path().canonicalize().unwrap(),
        &Overrides::default(),
    )
    .unwrap();
    let runtime = Runtime::with_hub(config, McpHub::empty()).unwrap();
    Setup { _home: home, workspace, server, runtime }
}

fn open(runtime: &Arc<Runtime>, resume: Resume) -> ferroclaw_runtime::Opened {
    runtime.open(resume, Arc::new(NoOneToAsk), SessionOptions::default()).unwrap()
}

async fn ask(agent: &mut ferroclaw_core::Agent, text: &str) -> ferroclaw_core::Report {
    let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
    agent.run(Message::user(text), &tx, &CancellationToken::new()).await
}

#[tokio::test]
async fn agents_opened_from_one_runtime_share_the_prompt_and_each_have_their_own_session() {
    let s = setup(vec![]);
    let a = open(&s.runtime, Resume::New).agent;
    let b = open(&s.runtime, Resume::New).agent;
    assert!(std::ptr::eq(a.system().as_ptr(), b.system().as_ptr()), "one prompt, shared");
    assert_ne!(a.session().meta().id, b.session().meta().id);
    assert_eq!(a.tools().names(), b.tools().names());
    let specs = a.tools().shared_specs();
    assert!(Arc::ptr_eq(&specs, &b.tools().shared_specs()), "tool specs built once, shared");
    assert!(a.tools().get("task").is_some() && a.tools().get("read").is_some());
    // A change to what the prompt is made of is picked up by the next agent.
    std::fs::write(s.workspace.path().join("AGENTS.md"), "Always answer in haiku.").unwrap();
    let c = open(&s.runtime, Resume::New).agent;
    assert!(c.system().contains("Always answer in haiku."), "{}", c.system());
    assert!(!a.system().contains("haiku"));
}

#[tokio::test]
async fn a_model_request_shares_the_conversation_prompt_and_tool_specs_instead_of_copying_them() {
    let s = setup(vec![Turn::text("first answer").into(), Turn::text("second answer").into()]);
    let mut agent = open(&s.runtime, Resume::New).agent;
    assert_eq!(ask(&mut agent, "one").await.outcome, Outcome::Answered);
    let (a, b) = (agent.request(), agent.request());
    assert!(Arc::ptr_eq(&a.messages, &b.messages), "the conversation is shared, not copied");
    assert!(Arc::ptr_eq(&a.system, &b.system), "so is the system prompt");
    assert!(Arc::ptr_eq(&a.tools, &agent.tools().shared_specs()), "and the tools' specs");
    assert_eq!(a.messages.len(), 2);
    drop((a, b));
    // Once no request holds it, the next turn appends in place.
    let before = Arc::as_ptr(&agent.request().messages);
    assert_eq!(ask(&mut agent, "two").await.outcome, Outcome::Answered);
    let after = agent.request();
    assert_eq!(after.messages.len(), 4);
    assert_eq!(Arc::as_ptr(&after.messages), before, "appended to the same conversation");
    assert!(Arc::ptr_eq(&after.tools, &agent.tools().shared_specs()), "specs not rebuilt per turn");
}

#[tokio::test]
async fn a_session_damaged_in_the_middle_opens_with_the_rest_and_names_the_skipped_lines() {
    let s = setup(vec![Turn::text("first answer").into(), Turn::text("second answer").into()]);
    let mut agent = open(&s.runtime, Resume::New).agent;
    assert_eq!(ask(&mut agent, "one").await.outcome, Outcome::Answered);
    assert_eq!(ask(&mut agent, "two").await.outcome, Outcome::Answered);
    let id = agent.session().meta().id.clone();
    let path = agent.session().path().to_path_buf();
    drop(agent);
    // The line of the first answer is overwritten with garbage.
    let text = std::fs::read_to_string(&path).unwrap();
    let mut lines: Vec<&str> = text.lines().collect();
    let at = lines.iter().position(|l| l.contains("first answer")).unwrap();
    assert!(at > 0 && at + 2 < lines.len(), "in the middle: {text}");
    lines[at] = "{\"type\": \"message\", \"message\": {oops";
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();

    let opened = open(&s.runtime, Resume::Id(id));
    assert!(opened.resumed);
    assert_eq!(opened.skipped_lines.len(), 1, "{:?}", opened.skipped_lines);
    let expected = format!("line {}: ", at + 1);
    assert!(opened.skipped_lines[0].starts_with(&expected), "{:?}", opened.skipped_lines);
    let texts: Vec<String> = opened.agent.messages().iter().map(Message::text).collect();
    assert!(texts.iter().any(|t| t == "second answer"), "{texts:?}");
    assert!(texts.iter().any(|t| t.contains("two")), "{texts:?}");
    assert!(!texts.iter().any(|t| t == "first answer"), "{texts:?}");
    assert_eq!(s.server.requests().len(), 2);
}

#[tokio::test]
async fn cancelling_the_parent_cancels_its_sub_agents() {
    let s = setup(vec![
        Turn::tool("task", json!({"description": "wait", "prompt": "think forever"})).into(),
        Fault::Stall { after_text: "pondering".into() }.into(),
    ]);
    let mut parent = open(&s.runtime, Resume::New).agent;
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let cancel = CancellationToken::new();
    let c = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(400)).await;
        c.cancel();
    });
    let report = parent.run(Message::user("delegate"), &tx, &cancel).await;
    assert_eq!(report.outcome, Outcome::Cancelled);
    drop(tx);
    let mut saw_child_text = false;
    while let Some(e) = rx.recv().await {
        if let AgentEvent::SubAgent { event, .. } = e
            && matches!(*event, AgentEvent::TextDelta { .. })
        {
            saw_child_text = true;
        }
    }
    assert!(saw_child_text, "the child's events reached the parent's stream");
    let result = parent
        .messages()
        .iter()
        .flat_map(|m| m.content.iter())
        .find_map(|b| match b {
            ContentBlock::ToolResult { content, is_error, .. } => {
                Some((content.iter().filter_map(|p| p.as_text()).collect::<String>(), *is_error))
            }
            _ => None,
        })
        .unwrap();
    assert!(result.1 && result.0.contains("cancelled"), "{result:?}");
}
