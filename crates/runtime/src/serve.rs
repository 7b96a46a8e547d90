//! What `ferroclaw mcp serve` offers an MCP client: no agent, the built-in
//! tools (and the code graph's, where the project has an index) the
//! permission mode lets run without asking, behind the same
//! permission gate an agent's calls pass.

use std::collections::BTreeMap;
use std::sync::Arc;

use ferroclaw_core::{Config, Decision, PermissionMode, Permissions};
use ferroclaw_mcp::ToolServer;
use ferroclaw_tools::{ToolContext, ToolRegistry};
use serde_json::{Value, json};

use crate::RuntimeError;

/// The tool server for this workspace under `mode` (deny rules still apply).
pub fn tool_server(config: &Config, mode: PermissionMode) -> Result<ToolServer, RuntimeError> {
    let permissions = Arc::new(
        Permissions::new(mode, &config.file.permissions.allow, &config.file.permissions.deny)
            .map_err(RuntimeError::Other)?
            .with_workspace(config.workspace.clone()),
    );
    let mut offered = ferroclaw_tools::builtin_tools();
    // The code graph's tools once the project has an index (and its edits
    // re-indexed), as for an agent.
    if ferroclaw_codegraph::db_path(&config.home, &config.workspace).is_file() {
        ferroclaw_codegraph::register_code_tools(&mut offered, &config.workspace, &config.home);
    }
    let mut tools = ToolRegistry::new();
    for name in offered.names() {
        if let Some(tool) = offered.get(name)
            && permissions.decide(name, tool.read_only(), &json!({})) == Decision::Allow
        {
            tools.register_arc(Arc::clone(tool));
        }
    }
    let read_only: BTreeMap<String, bool> = tools
        .names()
        .into_iter()
        .filter_map(|n| tools.get(n).map(|t| (n.to_string(), t.read_only())))
        .collect();
    let gate: ferroclaw_mcp::Gate = Arc::new(move |name: &str, input: &Value| {
        match permissions.decide(name, read_only.get(name).copied().unwrap_or(false), input) {
            Decision::Allow => Ok(()),
            Decision::Deny(reason) => Err(reason),
            Decision::Ask => Err(format!(
                "{name} needs approval, which nobody can give to an MCP client here; restart `ferroclaw mcp serve` with --yes or --permission-mode, or add an allow rule"
            )),
        }
    });
    let mut context = ToolContext::new(&config.workspace);
    context.allowed_dirs = config.file.allowed_dirs.clone().unwrap_or_default();
    Ok(ToolServer::new(tools, context, gate))
}
