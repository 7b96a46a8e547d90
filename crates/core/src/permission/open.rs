//! The deny rules a file tool's opens answer to ([`OpenRules`]).
//!
//! The gate judges a call on its path as it resolves when the call is
//! decided, which may be long before the tool runs (an approval prompt, a
//! hook). What the tool opens is judged again, on the path it opens: the
//! tool's root joined with a path of plain names, opened without following
//! any link. So this judgement follows no link either: it reads the path
//! as text against the workspace (itself resolved once, here), and what it
//! judges is the file the open reaches, not where a link pointed a moment
//! before or after.

use std::path::Path;

use ferroclaw_tools::OpenRules;

use super::{Permissions, Rule, home, is_file_tool};

impl Permissions {
    /// The deny rules that cover `tool` (by any name), as the opens of one
    /// of its calls ask them; none for a tool that is not a file tool or
    /// when no deny rule names a path for it.
    pub fn open_rules(&self, tool: &str) -> OpenRules {
        let tool = ferroclaw_tools::canonical_tool_name(tool);
        if !is_file_tool(tool) {
            return OpenRules::default();
        }
        let deny: Vec<Rule> = self
            .deny
            .iter()
            .filter(|r| r.covers_tool(tool) && r.pattern.is_some())
            .cloned()
            .collect();
        if deny.is_empty() {
            return OpenRules::default();
        }
        let workspace = std::fs::canonicalize(&self.workspace)
            .unwrap_or_else(|_| ferroclaw_tools::normalize_path(&self.workspace));
        let home = home();
        OpenRules::new(move |path| denied(&deny, &workspace, home.as_deref(), path))
    }
}

/// The rule of `deny` that covers `path` (absolute, no link followed), as
/// the refusal the tool gives.
fn denied(deny: &[Rule], workspace: &Path, home: Option<&str>, path: &Path) -> Option<String> {
    let abs = path.to_string_lossy();
    let rel = path.strip_prefix(workspace).ok().map(|r| {
        let parts: Vec<_> = r.components().map(|c| c.as_os_str().to_string_lossy()).collect();
        if parts.is_empty() { ".".to_string() } else { parts.join("/") }
    });
    let rule = deny.iter().find(|r| r.matches_path(rel.as_deref(), &abs, home, true))?;
    let shown = rel.unwrap_or_else(|| abs.into_owned());
    Some(format!("denied by the rule {rule} in config (the file opened is {shown})"))
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use crate::permission::{PermissionMode, Permissions};

    fn perms(ws: &Path, deny: &[&str]) -> Permissions {
        let deny: Vec<String> = deny.iter().map(ToString::to_string).collect();
        Permissions::new(PermissionMode::Default, &[], &deny).unwrap().with_workspace(ws)
    }

    #[test]
    fn the_path_a_tool_opens_is_judged_by_the_deny_rules_of_its_tool() {
        let ws = tempfile::tempdir().unwrap();
        let ws = std::fs::canonicalize(ws.path()).unwrap();
        let p = perms(&ws, &["Read(secrets/**)", "Edit(./config/prod.toml)", "Read(.env)"]);
        let key = ws.join("secrets/key");
        for tool in ["read", "Read", "grep", "glob", "list_dir"] {
            let refused = p.open_rules(tool).check(&key).unwrap_err().to_string();
            assert!(refused.contains("read(secrets/**) in config"), "{tool}: {refused}");
        }
        // `secrets/**` is what is inside: a search may open the folder (and
        // the workspace), never a file in it.
        assert!(p.open_rules("grep").check(&ws.join("secrets")).is_ok());
        assert!(p.open_rules("grep").check(&ws.join("secrets/deep/er")).is_err());
        // A `.env` anywhere, as the gate judges it.
        assert!(p.open_rules("read").check(&ws.join("sub/.env")).is_err());
        assert!(p.open_rules("read").check(&ws.join("x/key")).is_ok());
        // Edit rules bind the editing tools, read rules the reading ones.
        for tool in ["write", "edit", "multi_edit"] {
            assert!(p.open_rules(tool).check(&ws.join("config/prod.toml")).is_err(), "{tool}");
            assert!(p.open_rules(tool).check(&key).is_ok(), "{tool}");
        }
        assert!(p.open_rules("read").check(&ws.join("config/prod.toml")).is_ok());
        assert!(!p.open_rules("bash").is_some());
    }

    #[test]
    fn the_opened_path_is_judged_as_written_not_through_a_link_met_at_judging_time() {
        // `secrets` is a link to a harmless folder while the open is judged:
        // the open follows no link, so what it would reach by that name is
        // the denied path itself, and it is refused all the same.
        let ws = tempfile::tempdir().unwrap();
        let ws = std::fs::canonicalize(ws.path()).unwrap();
        std::fs::create_dir(ws.join("public")).unwrap();
        std::fs::write(ws.join("public/key"), "public").unwrap();
        std::os::unix::fs::symlink(ws.join("public"), ws.join("secrets")).unwrap();
        let p = perms(&ws, &["Read(./secrets/key)"]);
        assert!(p.open_rules("read").check(&ws.join("secrets/key")).is_err());
        assert!(p.open_rules("read").check(&ws.join("public/key")).is_ok());
    }
}
