//! Finds the official MCP servers installed from npm by `.ci/run`.
#![allow(dead_code)]

use std::path::PathBuf;

/// `$FERROCLAW_MCP_SERVERS_DIR`, else `~/.cache/ferroclaw-npm` (where `.ci/run`
/// installs `@modelcontextprotocol/server-everything` and `-filesystem`).
pub fn servers_dir() -> PathBuf {
    match std::env::var_os("FERROCLAW_MCP_SERVERS_DIR") {
        Some(d) => PathBuf::from(d),
        None => {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/ferroclaw-npm")
        }
    }
}

/// The path of an npm server binary (`mcp-server-everything`, ...). Without
/// it a test is skipped loudly on a developer machine and FAILS in CI.
pub fn npm_server(bin: &str) -> Option<PathBuf> {
    let path = servers_dir().join("node_modules/.bin").join(bin);
    if path.exists() {
        return Some(path);
    }
    let advice = format!(
        "{} is missing: run .ci/run, or `npm install --prefix {} @modelcontextprotocol/server-everything @modelcontextprotocol/server-filesystem`, or set FERROCLAW_MCP_SERVERS_DIR",
        path.display(),
        servers_dir().display()
    );
    if std::env::var_os("CI").is_some() {
        panic!("{advice}");
    }
    eprintln!("SKIPPED (MCP test servers not installed): {advice}");
    None
}
