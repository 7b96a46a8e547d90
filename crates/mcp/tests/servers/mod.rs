//! Finds the official MCP servers that `scripts/test` installs from npm.

use std::path::PathBuf;

use ferroclaw_testkit::components::{self, Component};

/// The path of an npm server binary (`mcp-server-everything`, ...). Without
/// it the test fails and says how to install it; `None` only when the
/// developer opted out (`FERROCLAW_TEST_SKIP=mcp-servers`).
#[track_caller]
pub(crate) fn npm_server(bin: &str) -> Option<PathBuf> {
    components::require(Component::McpServers, components::mcp_server(bin))
}
