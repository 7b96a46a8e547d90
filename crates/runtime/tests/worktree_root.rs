//! An agent opened with `SessionOptions::workspace_root` works in that
//! folder (a git worktree) and cannot write the main checkout through
//! `write`, `edit` or `bash`.

use std::sync::Arc;

use ferroclaw_core::{Config, NoOneToAsk, Outcome, Overrides};
use ferroclaw_mcp::McpHub;
use ferroclaw_protocol::{ContentBlock, Message, ResultPart};
use ferroclaw_runtime::{Resume, Runtime, SessionOptions};
use ferroclaw_team::WorktreeManager;
use ferroclaw_testkit::git::init_repo;
use ferroclaw_testkit::{ScriptedServer, Step, Turn};
use serde_json::json;
use tokio_util::sync::CancellationToken;

/// The text and error flag of every tool result, in order.
fn tool_results(messages: &[Message]) -> Vec<(String, bool)> {
    messages
        .iter()
        .flat_map(|m| m.content.iter())
        .filter_map(|b| match b {
            ContentBlock::ToolResult { content, is_error, .. } => Some((
                content.iter().filter_map(ResultPart::as_text).collect::<String>(),
                *is_error,
            )),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn an_agent_rooted_in_a_worktree_cannot_write_the_main_checkout() {
    let home = tempfile::tempdir().unwrap();
    // Only Landlock keeps a command from writing outside its workspace, and
    // every command may write the temp folders: the escape is tried where
    // Landlock runs and the project lies outside them.
    let outside = match ferroclaw_tools::landlock::abi_version() {
        Some(_) => ferroclaw_testkit::scratch::dir_outside_temp(),
        None => None,
    };
    let escape_checked = outside.is_some();
    if !escape_checked {
        eprintln!("skipping the bash escape: no Landlock or no folder outside the temp folders");
    }
    let dir = outside.unwrap_or_else(|| tempfile::tempdir().unwrap());
    let main = dir.path().canonicalize().unwrap();
    init_repo(&main, "notes.txt", "main\n");
    let tree = WorktreeManager::open(&main).create("a", None, None).unwrap().path;
    std::fs::write(main.join("AGENTS.md"), "MAIN CHECKOUT RULES").unwrap();
    std::fs::write(tree.join("AGENTS.md"), "WORKTREE RULES").unwrap();

    let main_notes = main.join("notes.txt").to_string_lossy().into_owned();
    let mut script: Vec<Step> = vec![
        Turn::read_then(
            "edit",
            json!({"path": "notes.txt", "old_string": "main", "new_string": "from a"}),
        )
        .into(),
        Turn::tool("write", json!({"path": main_notes, "content": "pwned\n"})).into(),
        Turn::tool(
            "edit",
            json!({"path": "../../../notes.txt", "old_string": "main", "new_string": "pwned"}),
        )
        .into(),
        Turn::tool("bash", json!({"command": "echo bash-a > made.txt && pwd"})).into(),
    ];
    if escape_checked {
        let escape = format!("echo pwned > {main_notes}");
        script.push(Turn::tool("bash", json!({"command": escape})).into());
    }
    script.push(Turn::text("done").into());
    let server = ScriptedServer::start(script);
    std::fs::write(
        home.path().join("config.toml"),
        format!(
            "model = \"scripted/m\"\npermission_mode = \"bypass\"\n\n[providers.scripted]\nwire = \"anthropic\"\nbase_url = \"{}\"\napi_key = \"k\"\n",
            server.url()
        ),
    )
    .unwrap();
    let config =
        Config::load(home.path().to_path_buf(), main.clone(), &Overrides::default()).unwrap();
    let runtime = Runtime::with_hub(config, McpHub::empty()).unwrap();
    let options = SessionOptions { workspace_root: Some(tree.clone()), ..Default::default() };
    let mut agent = runtime.open(Resume::New, Arc::new(NoOneToAsk), options).unwrap().agent;
    assert_eq!(agent.workspace(), tree);
    assert!(agent.system().contains("WORKTREE RULES"), "its own folder's project files");
    assert!(!agent.system().contains("MAIN CHECKOUT RULES"));

    let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
    let report = agent.run(Message::user("work"), &tx, &CancellationToken::new()).await;
    assert_eq!(report.outcome, Outcome::Answered);
    // The first result is the read before the edit.
    let results = tool_results(agent.messages())[1..].to_vec();
    assert!(!results[0].1, "{results:?}");
    assert!(results[1].1 && results[1].0.contains("outside the workspace"), "{results:?}");
    assert!(results[2].1 && results[2].0.contains("outside the workspace"), "{results:?}");
    assert!(results[3].0.contains(&tree.to_string_lossy().into_owned()), "{results:?}");
    if escape_checked {
        assert!(results[4].1, "the shell could not write there: {results:?}");
    }
    assert_eq!(std::fs::read_to_string(main.join("notes.txt")).unwrap(), "main\n");
    assert!(!main.join("made.txt").exists());
    assert_eq!(std::fs::read_to_string(tree.join("notes.txt")).unwrap(), "from a\n");
    assert_eq!(std::fs::read_to_string(tree.join("made.txt")).unwrap(), "bash-a\n");
    // Its board is the project's: the team shares one.
    assert!(agent.tools().get("worktree_create").is_some());
}

#[tokio::test]
async fn a_workspace_root_that_is_not_a_folder_is_refused() {
    let home = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("config.toml"),
        "model = \"scripted/m\"\n\n[providers.scripted]\nwire = \"anthropic\"\nbase_url = \"http://127.0.0.1:9\"\napi_key = \"k\"\n",
    )
    .unwrap();
    let config = Config::load(
        home.path().to_path_buf(),
        dir.path().canonicalize().unwrap(),
        &Overrides::default(),
    )
    .unwrap();
    let runtime = Runtime::with_hub(config, McpHub::empty()).unwrap();
    let options =
        SessionOptions { workspace_root: Some(dir.path().join("missing")), ..Default::default() };
    let err = runtime.open(Resume::New, Arc::new(NoOneToAsk), options).err().unwrap();
    assert!(err.to_string().contains("workspace_root"), "{err}");
}
