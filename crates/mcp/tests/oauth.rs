//! OAuth against an in-process fake (`ferroclaw_testkit::oauth`): an MCP server that answers 401 without
//! a bearer token, and the authorization server it names (protected
//! resource metadata, authorization server metadata, dynamic client
//! registration, authorization code with PKCE, refresh tokens). In step-up
//! mode its tool calls need the scope `files:write` on top of `files:read`,
//! and it answers a token without it with 403 `insufficient_scope`.

use std::sync::Arc;

use ferroclaw_mcp::{
    ClientHooks, Consent, HubOptions, McpConfig, McpHub, ServerConfig, TokenStore, ToolServer,
};
use ferroclaw_testkit::oauth::{FakeOAuth, OAuthOptions, READ_SCOPE as READ, WRITE_SCOPE as WRITE};
use ferroclaw_tools::{ToolContext, ToolRegistry};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use serde_json::json;

/// Starts the fake (in step-up mode when `step_up`; never granting [`WRITE`]
/// when `withhold_write`) in front of an MCP server with ferroclaw's `read`
/// tool; the first access token each login buys is already expired.
fn start_fake(step_up: bool, withhold_write: bool) -> FakeOAuth {
    let options = OAuthOptions { step_up, withhold_write, first_token_expired: true };
    FakeOAuth::start(options, |base| {
        let mut tools = ToolRegistry::new();
        let builtins = ferroclaw_tools::builtin_tools();
        tools.register_arc(Arc::clone(builtins.get("read").unwrap()));
        let server = ToolServer::new(tools, ToolContext::new("/"), Arc::new(|_, _| Ok(())));
        let host = base.trim_start_matches("http://").to_string();
        let service = StreamableHttpService::new(
            move || Ok(server.clone()),
            LocalSessionManager::default().into(),
            StreamableHttpServerConfig::default()
                .with_allowed_hosts([host, "127.0.0.1".to_string()]),
        );
        axum::Router::new().nest_service("/mcp", service)
    })
}

async fn start_hub(url: &str, tokens: &TokenStore) -> McpHub {
    start_hub_consenting(url, tokens, None).await
}

/// A hub whose user grants more scopes as `consent` says (`None`: nobody can).
async fn start_hub_consenting(url: &str, tokens: &TokenStore, consent: Option<Consent>) -> McpHub {
    McpHub::start(
        McpConfig { servers: vec![ServerConfig::http("web", url)], ..Default::default() },
        HubOptions {
            workspace: std::env::temp_dir(),
            tokens: Some(tokens.clone()),
            hooks: ClientHooks { scope_consent: consent, ..Default::default() },
            ..Default::default()
        },
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_answers_401_needs_login_then_works_with_refreshed_tokens() {
    let fake = start_fake(false, false);
    let url = format!("{}/mcp", fake.url());
    let home = tempfile::tempdir().unwrap();
    let tokens = TokenStore::new(home.path().join("mcp-tokens"));

    let hub = start_hub(&url, &tokens).await;
    assert_eq!(
        hub.problems(),
        ["mcp server web needs you to log in (OAuth): run `ferroclaw mcp login web`"]
    );
    hub.shutdown().await;

    ferroclaw_mcp::login("web", &url, &tokens, Consent::Headless, None, &Default::default(), &[])
        .await
        .unwrap();
    assert_eq!(fake.registrations(), 1);
    assert!(tokens.has_tokens("web", &url));
    assert!(!tokens.has_tokens("web", "http://127.0.0.1:1/other"));
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(tokens.path("web")).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "tokens are readable by the user only");
    }

    let hub = start_hub(&url, &tokens).await;
    assert!(hub.problems().is_empty(), "{:?}", hub.problems());
    let mut registry = ToolRegistry::new();
    hub.register_tools(&mut registry);
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.txt"), "behind oauth\n").unwrap();
    let out = registry
        .get("mcp__web__read")
        .unwrap()
        .execute(json!({"path": dir.path().join("a.txt")}), &ToolContext::new("/"))
        .await
        .unwrap();
    assert!(out.joined_text().contains("behind oauth"), "{out:?}");
    assert_eq!(fake.refreshes(), 1, "the expired access token was refreshed once");
    let saved = std::fs::read_to_string(tokens.path("web")).unwrap();
    assert!(saved.contains("refreshed-"), "the refreshed token is saved: {saved}");
    hub.shutdown().await;

    assert!(tokens.remove("web").unwrap());
    let hub = start_hub(&url, &tokens).await;
    assert_eq!(hub.problems().len(), 1, "logged out: {:?}", hub.problems());
    hub.shutdown().await;
}

/// Logs in headlessly to the step-up fake and starts a hub on the tokens;
/// returns the hub, the tokens' directory and a file the tools can read.
async fn logged_in(
    fake: &FakeOAuth,
    tokens: &TokenStore,
    consent: Option<Consent>,
) -> (McpHub, tempfile::TempDir) {
    let url = format!("{}/mcp", fake.url());
    ferroclaw_mcp::login("web", &url, tokens, Consent::Headless, None, &Default::default(), &[])
        .await
        .unwrap();
    assert_eq!(fake.authorizations(), [READ], "the first login asks for read only");
    let hub = start_hub_consenting(&url, tokens, consent).await;
    assert!(hub.problems().is_empty(), "tools/list needs read only: {:?}", hub.problems());
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.txt"), "needs write scope\n").unwrap();
    (hub, dir)
}

/// Calls the fake's `read` tool (a `tools/call`, which needs [`WRITE`]).
async fn call_read(hub: &McpHub, dir: &tempfile::TempDir) -> ferroclaw_tools::ToolOutput {
    let mut registry = ToolRegistry::new();
    hub.register_tools(&mut registry);
    registry
        .get("mcp__web__read")
        .unwrap()
        .execute(json!({"path": dir.path().join("a.txt")}), &ToolContext::new("/"))
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_refused_with_403_insufficient_scope_steps_up_to_the_union_and_is_retried() {
    let fake = start_fake(true, false);
    let home = tempfile::tempdir().unwrap();
    let tokens = TokenStore::new(home.path().join("mcp-tokens"));
    let (hub, dir) = logged_in(&fake, &tokens, Some(Consent::Headless)).await;

    let out = call_read(&hub, &dir).await;
    assert!(!out.is_error && out.joined_text().contains("needs write scope"), "{out:?}");
    assert_eq!(
        fake.authorizations(),
        [READ.to_string(), format!("{READ} {WRITE}")],
        "one new authorization, for the scopes granted plus those demanded"
    );
    let url = format!("{}/mcp", fake.url());
    assert_eq!(tokens.granted_scopes("web", &url), [READ, WRITE], "the new token is saved");

    let again = call_read(&hub, &dir).await;
    assert!(!again.is_error, "{again:?}");
    assert_eq!(fake.authorizations().len(), 2, "the new token serves later calls");
    hub.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_still_refuses_after_a_step_up_gets_a_clear_error_not_a_loop() {
    let fake = start_fake(true, true);
    let home = tempfile::tempdir().unwrap();
    let tokens = TokenStore::new(home.path().join("mcp-tokens"));
    let (hub, dir) = logged_in(&fake, &tokens, Some(Consent::Headless)).await;

    let out = call_read(&hub, &dir).await;
    assert!(out.is_error, "{out:?}");
    assert_eq!(
        out.joined_text(),
        "mcp server web refused the call of read: it needs the OAuth scope(s) files:read \
         files:write; it still refused after ferroclaw was granted files:read, so ferroclaw \
         gives up (the authorization server may not grant them to you)"
    );
    let again = call_read(&hub, &dir).await;
    assert!(again.joined_text().contains("does not ask again"), "{again:?}");
    assert_eq!(
        fake.authorizations().len(),
        2,
        "the login and one step-up: no second step-up for scopes refused after one"
    );
    hub.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_anyone_to_consent_a_403_names_the_login_command_that_grants_the_scopes() {
    let fake = start_fake(true, false);
    let home = tempfile::tempdir().unwrap();
    let tokens = TokenStore::new(home.path().join("mcp-tokens"));
    let (hub, dir) = logged_in(&fake, &tokens, None).await;

    let out = call_read(&hub, &dir).await;
    assert!(out.is_error, "{out:?}");
    assert!(
        out.joined_text().ends_with(
            "run `ferroclaw mcp login web --scopes \"files:read files:write\"` to grant them"
        ),
        "{out:?}"
    );
    assert_eq!(fake.authorizations().len(), 1, "no authorization without consent");
    hub.shutdown().await;
}
