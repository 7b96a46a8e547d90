//! The client the MCP conformance suite (`@modelcontextprotocol/conformance
//! client`) drives, built from ferroclaw's hub: `conformance_client URL`,
//! with the scenario's name in `MCP_CONFORMANCE_SCENARIO`. It connects as
//! ferroclaw does, logs in headlessly when the server answers 401 (OAuth
//! with dynamic client registration and PKCE), then calls every tool the
//! server offers with arguments made from its schema; elicitation is
//! answered with the schema's defaults, and a 403 `insufficient_scope` gets
//! a headless scope step-up. `scripts/conformance` runs it.

use std::error::Error;
use std::sync::Arc;

use async_trait::async_trait;
use ferroclaw_mcp::{
    ClientHooks, Consent, Elicitation, Elicitor, HubOptions, McpConfig, McpHub, OAuthClient,
    ServerConfig, TokenStore,
};
use ferroclaw_tools::{ToolContext, ToolRegistry};
use serde_json::{Map, Value, json};

/// The server's name in the hub (tools are `mcp__conformance__TOOL`).
const SERVER: &str = "conformance";

/// Accepts every elicitation with the defaults of the requested schema.
struct Defaults;

#[async_trait]
impl Elicitor for Defaults {
    async fn elicit(&self, _server: &str, _message: &str, schema: &Value) -> Elicitation {
        let defaults: Map<String, Value> = schema["properties"]
            .as_object()
            .into_iter()
            .flatten()
            .filter_map(|(k, p)| p.get("default").map(|d| (k.clone(), d.clone())))
            .collect();
        Elicitation::Accept(Value::Object(defaults))
    }
}

/// Arguments for a tool: a plausible value for each required property.
fn arguments(schema: &Value) -> Value {
    let mut args = Map::new();
    let required: Vec<&str> =
        schema["required"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
    for (name, prop) in schema["properties"].as_object().into_iter().flatten() {
        if !required.contains(&name.as_str()) {
            continue;
        }
        let value = match prop["type"].as_str() {
            Some("number" | "integer") => json!(2),
            Some("boolean") => json!(true),
            Some("array") => json!([]),
            Some("object") => json!({}),
            _ => json!("test"),
        };
        args.insert(name.clone(), value);
    }
    Value::Object(args)
}

async fn start(url: &str, tokens: &TokenStore, client: &OAuthClient) -> McpHub {
    let mut server = ServerConfig::http(SERVER, url);
    server.oauth = client.clone();
    McpHub::start(
        McpConfig { servers: vec![server], ..Default::default() },
        HubOptions {
            workspace: std::env::temp_dir(),
            hooks: ClientHooks {
                elicitor: Some(Arc::new(Defaults)),
                sampler: None,
                scope_consent: Some(Consent::Headless),
            },
            tokens: Some(tokens.clone()),
            sandbox: Default::default(),
        },
    )
    .await
}

/// The OAuth client a user would configure for the scenario: the
/// pre-registered id and secret the suite hands over in
/// `MCP_CONFORMANCE_CONTEXT` (as `oauth_client_id` and
/// `oauth_client_secret_env` would), or the suite's client ID metadata
/// document address (as `oauth_client_metadata_url` would).
fn client(scenario: &str) -> OAuthClient {
    let context: Value = std::env::var("MCP_CONFORMANCE_CONTEXT")
        .ok()
        .and_then(|c| serde_json::from_str(&c).ok())
        .unwrap_or_default();
    let text = |key: &str| context[key].as_str().map(str::to_string);
    OAuthClient {
        client_id: text("client_id"),
        client_secret: text("client_secret"),
        client_metadata_url: (scenario == "auth/basic-cimd")
            .then(|| "https://conformance-test.local/client-metadata.json".to_string()),
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    let url = std::env::args()
        .next_back()
        .filter(|a| a.starts_with("http"))
        .ok_or("usage: conformance_client SERVER_URL")?;
    let scenario = std::env::var("MCP_CONFORMANCE_SCENARIO").unwrap_or_default();
    eprintln!("conformance_client: scenario {scenario:?} at {url}");
    let home = std::env::temp_dir().join(format!("ferroclaw-conformance-{}", std::process::id()));
    // The tokens stay until the end: a step-up mid-run reads and replaces them.
    let result = run(&url, &TokenStore::new(&home), &client(&scenario)).await;
    let _ = std::fs::remove_dir_all(&home);
    result
}

/// Connects (logging in first when the server asks), then calls every tool.
async fn run(url: &str, tokens: &TokenStore, client: &OAuthClient) -> Result<(), Box<dyn Error>> {
    let mut hub = start(url, tokens, client).await;
    if hub.problems().iter().any(|p| p.contains("mcp login")) {
        hub.shutdown().await;
        ferroclaw_mcp::login(SERVER, url, tokens, Consent::Headless, None, client, &[]).await?;
        hub = start(url, tokens, client).await;
    }
    if let Some(problem) = hub.problems().first() {
        return Err(problem.clone().into());
    }
    let mut registry = ToolRegistry::new();
    hub.register_tools(&mut registry);
    let context = ToolContext::new(std::env::temp_dir());
    for (name, _) in hub.tools_of(SERVER) {
        let Some(tool) = registry.get(&name) else {
            continue;
        };
        let input = arguments(&tool.input_schema());
        let output = tool.execute(input.clone(), &context).await?;
        eprintln!(
            "conformance_client: {name}({input}) -> {}{}",
            if output.is_error { "error: " } else { "" },
            output.joined_text()
        );
    }
    hub.shutdown().await;
    Ok(())
}
