//! What the loop tests share: an agent talking to the scripted LLM server,
//! with every part a test does not care about set to a plain default.

// Each test file uses only some of these.
#![allow(dead_code)]

use std::path::Path;
use std::sync::Arc;

use ferroclaw_core::session::SessionLog;
use ferroclaw_core::{
    Agent, AgentParts, Approver, NoOneToAsk, PermissionMode, Permissions, SessionStore,
};
use ferroclaw_llm::{ProviderConfig, WireFormat};
use ferroclaw_testkit::ScriptedServer;
use ferroclaw_tools::ToolRegistry;

/// The parts of an agent on `server` (Anthropic wire, model `m`) with
/// `tools`, in bypass mode with nobody to ask, a new session under `home`
/// and `home` as its workspace. Override a field with
/// `AgentParts { approver, ..parts(...) }`.
pub(crate) fn parts(server: &ScriptedServer, home: &Path, tools: ToolRegistry) -> AgentParts {
    let session = SessionStore::new(home).create(home, "anthropic/m").unwrap();
    parts_with_session(server, home, tools, session)
}

/// An agent on `server` with `tools` in permission `mode`, asking
/// `approver` when a call needs approval (the rest as [`parts`]).
pub(crate) fn agent(
    server: &ScriptedServer,
    home: &Path,
    tools: ToolRegistry,
    mode: PermissionMode,
    approver: Arc<dyn Approver>,
) -> Agent {
    Agent::new(AgentParts {
        permissions: permissions(mode),
        approver,
        ..parts(server, home, tools)
    })
}

/// The agent most tests want: default permission mode, nobody to ask (a
/// call that needs approval is refused).
pub(crate) fn default_agent(server: &ScriptedServer, home: &Path, tools: ToolRegistry) -> Agent {
    agent(server, home, tools, PermissionMode::Default, Arc::new(NoOneToAsk))
}

/// [`parts`] writing to an existing `session` (a resumed one, say).
pub(crate) fn parts_with_session(
    server: &ScriptedServer,
    home: &Path,
    tools: ToolRegistry,
    session: SessionLog,
) -> AgentParts {
    let mut config = ProviderConfig::new("anthropic", WireFormat::Anthropic, server.url());
    config.api_key = Some("k".into());
    AgentParts {
        provider: ferroclaw_llm::connect(config),
        model: "m".into(),
        model_spec: "anthropic/m".into(),
        system: "test".into(),
        tools,
        permissions: permissions(PermissionMode::Bypass),
        approver: Arc::new(NoOneToAsk),
        session,
        messages: Vec::new(),
        workspace: home.to_path_buf(),
        allowed_dirs: Vec::new(),
        max_turns: 10,
        max_tokens: 1000,
        todos: Default::default(),
        jobs: None,
        sandbox: Default::default(),
        compaction: ferroclaw_core::agent::Compaction::for_model("m"),
        remembering: Default::default(),
        turn_hook: None,
    }
}

/// Permissions in `mode` with no allow or deny rules.
pub(crate) fn permissions(mode: PermissionMode) -> Arc<Permissions> {
    Arc::new(Permissions::new(mode, &[], &[]).unwrap())
}
