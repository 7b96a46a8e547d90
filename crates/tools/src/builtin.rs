//! The built-in tool set, and the names other agents use for the same tools.

use crate::{
    BashTool, EditTool, GlobTool, GrepTool, ListDirTool, MultiEditTool, ReadTool, ToolRegistry,
    WebFetchTool, WriteTool,
};

/// A registry with ferroclaw's built-in tools, in this order: read, write,
/// edit, multi_edit, glob, grep, list_dir, bash, web_fetch.
pub fn builtin_tools() -> ToolRegistry {
    let mut tools = ToolRegistry::new();
    register_builtins(&mut tools);
    tools
}

/// Adds the built-in tools to `tools` (replacing tools of the same names).
pub fn register_builtins(tools: &mut ToolRegistry) {
    tools.register(ReadTool);
    tools.register(WriteTool);
    tools.register(EditTool);
    tools.register(MultiEditTool);
    tools.register(GlobTool);
    tools.register(GrepTool);
    tools.register(ListDirTool);
    tools.register(BashTool::new());
    tools.register(WebFetchTool::new());
}

/// Ferroclaw's name for a tool name used by other agents (Claude Code's
/// `Read`, through [`crate::claude`]'s table; nanobot's `read_file`,
/// OpenClaw's `exec`, ...); other names are returned unchanged.
pub fn canonical_tool_name(name: &str) -> &str {
    if let Some(ours) = crate::claude::ours_name(name) {
        return ours;
    }
    match name {
        "read_file" => "read",
        "write_file" => "write",
        "edit_file" => "edit",
        "ls" | "list_files" => "list_dir",
        "exec" => "bash",
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtins_come_in_the_documented_order() {
        assert_eq!(
            builtin_tools().names(),
            [
                "read",
                "write",
                "edit",
                "multi_edit",
                "glob",
                "grep",
                "list_dir",
                "bash",
                "web_fetch"
            ]
        );
    }

    #[test]
    fn only_the_inspecting_tools_are_read_only() {
        let tools = builtin_tools();
        let read_only: Vec<&str> = tools
            .names()
            .into_iter()
            .filter(|n| tools.get(n).is_some_and(|t| t.read_only()))
            .collect();
        assert_eq!(read_only, ["read", "glob", "grep", "list_dir", "web_fetch"]);
    }

    #[test]
    fn every_builtin_schema_compiles() {
        let tools = builtin_tools();
        for name in tools.names() {
            // An empty object is either valid or refused for a missing field, never a bad schema.
            if let Err(e) = tools.validate(name, &serde_json::json!({})) {
                assert!(!e.contains("invalid input schema"), "{name}: {e}");
            }
        }
    }

    #[test]
    fn aliases_from_other_agents_map_to_builtins() {
        let tools = builtin_tools();
        for alias in [
            "Read",
            "read_file",
            "Write",
            "write_file",
            "Edit",
            "edit_file",
            "MultiEdit",
            "Glob",
            "Grep",
            "ls",
            "LS",
            "list_files",
            "Bash",
            "exec",
            "WebFetch",
        ] {
            let name = canonical_tool_name(alias);
            assert!(tools.get(name).is_some(), "{alias} -> {name} is not a builtin");
        }
        assert_eq!(canonical_tool_name("todo"), "todo");
    }
}
