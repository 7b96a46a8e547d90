//! Memory consolidation against a scripted model: the request it sends and
//! the files it writes.

use ferroclaw_core::memory::{MemoryStore, Target, consolidate};
use ferroclaw_llm::{ProviderConfig, WireFormat};
use ferroclaw_protocol::Message;
use ferroclaw_testkit::{ScriptedServer, Turn};

#[tokio::test]
async fn consolidation_asks_the_model_and_writes_history_and_memory() {
    let server = ScriptedServer::start(vec![
        Turn::text(
            "```json\n{\"history_entry\": \"Moved CI to GitHub Actions.\", \"memory_update\": \"- CI runs on GitHub Actions\\n- The user prefers squash merges\"}\n```",
        )
        .into(),
    ]);
    let mut config = ProviderConfig::new("anthropic", WireFormat::Anthropic, server.url());
    config.api_key = Some("k".into());
    let home = tempfile::tempdir().unwrap();
    let store = MemoryStore::new(home.path());
    store.add(Target::Memory, "- The user prefers squash merges").unwrap();
    let older = vec![
        Message::user("move CI to GitHub Actions"),
        Message::assistant("Done: .github/workflows/ci.yml"),
    ];
    let done = consolidate(ferroclaw_llm::connect(config), "m".into(), store.clone(), older)
        .await
        .unwrap();
    assert!(done.memory_updated);
    assert_eq!(
        store.read(Target::Memory),
        "- CI runs on GitHub Actions\n- The user prefers squash merges\n"
    );
    let history = std::fs::read_to_string(store.history_path()).unwrap();
    assert!(history.ends_with("\n\nMoved CI to GitHub Actions.\n\n"), "{history}");
    let body = server.requests()[0].body.to_string();
    assert!(body.contains("move CI to GitHub Actions"), "{body}");
    assert!(body.contains("- The user prefers squash merges"), "{body}");
    assert!(!body.contains("\"tools\":[{"), "no tools are offered: {body}");
}

#[tokio::test]
async fn an_unusable_answer_is_an_error_and_changes_nothing() {
    let server = ScriptedServer::start(vec![Turn::text("I cannot do that.").into()]);
    let mut config = ProviderConfig::new("anthropic", WireFormat::Anthropic, server.url());
    config.api_key = Some("k".into());
    let home = tempfile::tempdir().unwrap();
    let store = MemoryStore::new(home.path());
    let err = consolidate(
        ferroclaw_llm::connect(config),
        "m".into(),
        store.clone(),
        vec![Message::user("hi")],
    )
    .await
    .unwrap_err();
    assert!(err.to_string().contains("no JSON object"), "{err}");
    assert!(!store.history_path().exists());
}
