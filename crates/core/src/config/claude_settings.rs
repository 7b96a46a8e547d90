//! Claude Code's settings files read as Claude Code reads them, for what
//! ferroclaw uses of them besides hooks ([`crate::hooks::settings`] reads
//! those): `permissions.allow`, `.deny`, `.ask`, `.additionalDirectories`,
//! `.defaultMode`, and `env` (set for the commands ferroclaw starts: `bash`,
//! background jobs, MCP servers and hooks, as Claude Code sets it for its own).
//!
//! Files, in Claude Code's order of precedence, lowest first:
//! `~/.claude/settings.json` (or `$CLAUDE_CONFIG_DIR/settings.json`), then
//! the project's `.claude/settings.json`, then `.claude/settings.local.json`.
//! Rule lists add up across files; `defaultMode` of a later file wins.
//! A project's deny and ask rules apply at once (they only restrict); the
//! rest of a project's file only once the project is trusted.
//!
//! Rules are written as Claude Code writes them (`Read(./.env)`,
//! `Edit(/src/**)`, `Read(//etc/hosts)`, `Read(~/.ssh/**)`,
//! `Bash(npm run test:*)`, `WebFetch(domain:example.com)`,
//! `mcp__github__create_issue`, `mcp__github`); tool names go through
//! [`ferroclaw_tools::canonical_tool_name`] ([`crate::permission::Rule::parse`]).
//!
//! ```
//! use ferroclaw_core::config::claude_settings::ClaudeSettings;
//! let s = ClaudeSettings::parse(
//!     r#"{"permissions": {"deny": ["Read(./.env)", "Bash(rm:*)"]}, "model": "opus"}"#,
//! ).unwrap();
//! assert_eq!(s.deny, ["read(./.env)", "bash(rm:*)"]);
//! assert_eq!(s.unused, ["model"]);
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::permission::{PermissionMode, READ_FAMILY, Rule};

/// Keys ferroclaw reads elsewhere (so they are not named as unused).
const READ_ELSEWHERE: &[&str] = &["$schema", "hooks"];

/// What one settings file says, in ferroclaw's terms.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ClaudeSettings {
    /// The file, once read from disk.
    pub path: PathBuf,
    /// `permissions.allow`, as ferroclaw rules (`bash(npm run test:*)`).
    pub allow: Vec<String>,
    /// `permissions.deny`: refused in every mode, trusted or not.
    pub deny: Vec<String>,
    /// `permissions.ask`: asked even where an allow rule or the mode would allow.
    pub ask: Vec<String>,
    /// `permissions.additionalDirectories`, as written.
    pub additional_directories: Vec<String>,
    /// `permissions.defaultMode`.
    pub default_mode: Option<PermissionMode>,
    /// `env`: variables set for every command ferroclaw starts (on top of
    /// the allow-listed environment), the user's file at once, a project's
    /// once trusted ([`crate::Config::claude_env`]).
    pub env: BTreeMap<String, String>,
    /// The hooks object is there (read by [`crate::hooks`]).
    pub has_hooks: bool,
    /// Keys (`model`, `permissions.disableBypassPermissionsMode`) and values
    /// (a rule that does not read, `defaultMode: "dontAsk"`) not used.
    pub unused: Vec<String>,
}

impl ClaudeSettings {
    /// The settings of one file's text; an error when it is not a JSON object.
    pub fn parse(text: &str) -> Result<ClaudeSettings, serde_json::Error> {
        let value: Value = serde_json::from_str(text)?;
        let mut s = ClaudeSettings::default();
        let Value::Object(top) = value else {
            s.unused.push("(the file is not a JSON object)".into());
            return Ok(s);
        };
        for (key, value) in &top {
            match key.as_str() {
                "permissions" => s.read_permissions(value),
                "env" => match value.as_object() {
                    Some(vars) => {
                        for (name, v) in vars {
                            let v = v.as_str().map_or_else(|| v.to_string(), str::to_string);
                            s.env.insert(name.clone(), v);
                        }
                    }
                    None => s.unused.push("env (not an object)".into()),
                },
                "hooks" => s.has_hooks = !value.is_null(),
                k if READ_ELSEWHERE.contains(&k) => {}
                other => s.unused.push(other.to_string()),
            }
        }
        Ok(s)
    }

    fn read_permissions(&mut self, value: &Value) {
        let Some(fields) = value.as_object() else {
            self.unused.push("permissions (not an object)".into());
            return;
        };
        for (key, value) in fields {
            match key.as_str() {
                "allow" => self.allow = self.rules("allow", value),
                "deny" => self.deny = self.rules("deny", value),
                "ask" => self.ask = self.rules("ask", value),
                "additionalDirectories" => {
                    self.additional_directories = strings(value);
                }
                "defaultMode" => match value.as_str().map(str::parse::<PermissionMode>) {
                    Some(Ok(mode)) => self.default_mode = Some(mode),
                    _ => self.unused.push(format!("permissions.defaultMode {value}")),
                },
                other => self.unused.push(format!("permissions.{other}")),
            }
        }
    }

    /// A rule list as ferroclaw rules; a rule that does not read is named
    /// in `unused` (Claude Code skips it too).
    fn rules(&mut self, list: &str, value: &Value) -> Vec<String> {
        let mut out = Vec::new();
        for text in strings(value) {
            match translate(&text) {
                Ok(rule) => out.push(rule),
                Err(e) => self.unused.push(format!("permissions.{list} {text:?} ({e})")),
            }
        }
        out
    }

    /// The file's name as shown: relative to `workspace` when inside it.
    fn shown(&self, workspace: &Path) -> String {
        self.path.strip_prefix(workspace).unwrap_or(&self.path).display().to_string()
    }

    /// What this file sets, one line, for `ferroclaw trust`.
    pub fn describe(&self, workspace: &Path) -> String {
        let mut parts = Vec::new();
        for (name, rules) in [("allow", &self.allow), ("deny", &self.deny), ("ask", &self.ask)] {
            if !rules.is_empty() {
                parts.push(format!("{name} {}", rules.join(", ")));
            }
        }
        if !self.additional_directories.is_empty() {
            parts.push(format!("additionalDirectories {}", self.additional_directories.join(", ")));
        }
        if let Some(mode) = self.default_mode {
            parts.push(format!("defaultMode {}", mode_name(mode)));
        }
        if self.has_hooks {
            parts.push("hooks".into());
        }
        if !self.env.is_empty() {
            let names: Vec<&str> = self.env.keys().map(String::as_str).collect();
            parts.push(format!("env {} (set for commands and hooks)", names.join(", ")));
        }
        if !self.unused.is_empty() {
            parts.push(format!("not used: {}", self.unused.join(", ")));
        }
        if parts.is_empty() {
            parts.push("nothing ferroclaw uses".into());
        }
        format!("{}: {}", self.shown(workspace), parts.join("; "))
    }

    /// The folders of `additionalDirectories`: `~/` from home, relative
    /// ones from the workspace.
    pub fn directories(&self, workspace: &Path) -> Vec<PathBuf> {
        let home = std::env::var_os("HOME").map(PathBuf::from);
        self.additional_directories
            .iter()
            .map(|d| match (d.strip_prefix("~/"), &home) {
                (Some(rest), Some(home)) => home.join(rest),
                _ => workspace.join(d),
            })
            .collect()
    }

    /// Lays a trusted file (or the user's own) over `file`: its rules add
    /// up, its folders are allowed, its `defaultMode` wins.
    pub fn apply(&self, file: &mut super::ConfigFile, workspace: &Path) {
        self.apply_restrictions(file);
        file.permissions.allow.extend(self.allow.iter().cloned());
        if !self.additional_directories.is_empty() {
            file.allowed_dirs.get_or_insert_with(Vec::new).extend(self.directories(workspace));
        }
        if self.default_mode.is_some() {
            file.permission_mode = self.default_mode;
        }
    }

    /// Lays only what restricts (deny and ask rules) over `file`: what an
    /// untrusted project's file may do.
    pub fn apply_restrictions(&self, file: &mut super::ConfigFile) {
        file.permissions.deny.extend(self.deny.iter().cloned());
        file.permissions.ask.extend(self.ask.iter().cloned());
    }

    /// What an untrusted project's file asks for that waits for trust.
    pub fn untrusted_notes(&self, workspace: &Path) -> Vec<String> {
        let name = self.shown(workspace);
        let mut notes = Vec::new();
        if !self.allow.is_empty() {
            notes.push(format!("allow rules {} in {name}", self.allow.join(", ")));
        }
        if !self.additional_directories.is_empty() {
            notes.push(format!(
                "additionalDirectories {} in {name}",
                self.additional_directories.join(", ")
            ));
        }
        if let Some(mode) = self.default_mode {
            notes.push(format!("defaultMode {} in {name}", mode_name(mode)));
        }
        if !self.env.is_empty() {
            let names: Vec<&str> = self.env.keys().map(String::as_str).collect();
            notes.push(format!("env {} in {name}", names.join(", ")));
        }
        notes
    }
}

/// Claude Code's settings files that exist, lowest precedence first, each
/// with whether it is the project's (and so waits for trust).
pub fn files(workspace: &Path) -> Vec<(PathBuf, bool)> {
    let (user, project) = crate::hooks::settings::claude_files(workspace);
    let mut out = vec![(user, false)];
    out.extend(project.into_iter().map(|p| (p, true)));
    // Run from the home folder, the user's file is also "the project's": read it once, as the user's.
    let same = |a: &Path, b: &Path| {
        std::fs::canonicalize(a).ok().is_some_and(|a| std::fs::canonicalize(b).ok() == Some(a))
    };
    let user = out[0].0.clone();
    out.retain(|(p, in_project)| !in_project || !same(p, &user));
    out.into_iter().filter(|(p, _)| std::fs::symlink_metadata(p).is_ok()).collect()
}

/// Reads one settings file; `None` when it does not exist.
pub fn read(path: &Path) -> Result<Option<ClaudeSettings>, super::ConfigError> {
    let max = ferroclaw_tools::repo_file::MAX_REPO_FILE_BYTES;
    let text = match ferroclaw_tools::repo_file::read_repo_text(path, max) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => return Err(super::ConfigError::Read { path: path.to_path_buf(), source }),
    };
    let mut settings = ClaudeSettings::parse(&text).map_err(|e| super::ConfigError::Parse {
        path: path.to_path_buf(),
        line: e.line(),
        column: e.column(),
        message: format!("not valid JSON: {e}"),
    })?;
    settings.path = path.to_path_buf();
    Ok(Some(settings))
}

/// A Claude Code rule as a ferroclaw rule: tool names mapped, a file rule's
/// `/path` (Claude Code: from the project root) made workspace-relative, a
/// bare `mcp__server` widened to all of that server's tools.
pub fn translate(text: &str) -> Result<String, String> {
    let mut rule = Rule::parse(text)?;
    let file_rule = READ_FAMILY.contains(&rule.tool.as_str())
        || crate::permission::EDIT_TOOLS.contains(&rule.tool.as_str());
    if file_rule
        && let Some(p) = &rule.pattern
        && let Some(rest) = p.strip_prefix('/').filter(|r| !r.starts_with('/'))
    {
        rule.pattern = Some(rest.to_string());
    }
    if let Some(server) = rule.tool.strip_prefix("mcp__").filter(|s| !s.contains("__"))
        && !server.is_empty()
        && !server.contains('*')
    {
        rule.tool = format!("mcp__{server}__*");
    }
    Ok(rule.to_string())
}

fn strings(value: &Value) -> Vec<String> {
    value.as_array().into_iter().flatten().filter_map(Value::as_str).map(str::to_string).collect()
}

fn mode_name(mode: PermissionMode) -> &'static str {
    match mode {
        PermissionMode::Default => "default",
        PermissionMode::AcceptEdits => "acceptEdits",
        PermissionMode::Bypass => "bypassPermissions",
        PermissionMode::Plan => "plan",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_are_read_as_claude_code_writes_them() {
        let t = |s: &str| translate(s).unwrap();
        assert_eq!(t("Read(./.env)"), "read(./.env)");
        assert_eq!(t("Edit(/src/**)"), "edit(src/**)");
        assert_eq!(t("Read(//etc/hosts)"), "read(//etc/hosts)");
        assert_eq!(t("Read(~/.ssh/**)"), "read(~/.ssh/**)");
        assert_eq!(t("Bash(npm run test:*)"), "bash(npm run test:*)");
        assert_eq!(t("Bash"), "bash");
        assert_eq!(t("WebFetch(domain:example.com)"), "web_fetch(domain:example.com)");
        assert_eq!(t("mcp__github__create_issue"), "mcp__github__create_issue");
        assert_eq!(t("mcp__github"), "mcp__github__*");
        assert!(translate("Bash(oops").is_err());
    }

    #[test]
    fn deny_rules_refuse_what_claude_code_2_1_332_refuses() {
        // Seen with the pinned Claude Code against the scripted server, in
        // bypassPermissions mode: all three reads and the `rm` were refused.
        let ws = tempfile::tempdir().unwrap();
        for f in ["sub/a.txt", "sub/b.txt", "c.txt", ".env", "src/ok.rs"] {
            let p = ws.path().join(f);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, "x").unwrap();
        }
        let s = ClaudeSettings::parse(
            r#"{"permissions": {"deny": ["Read(/sub/a.txt)", "Read(b.txt)", "Read(./c.txt)",
                "Read(./.env)", "Bash(rm:*)"]}}"#,
        )
        .unwrap();
        let p = crate::permission::Permissions::new(PermissionMode::Bypass, &[], &s.deny)
            .unwrap()
            .with_workspace(ws.path());
        let read = |f: &str| p.decide("Read", true, &serde_json::json!({"file_path": f}));
        for f in ["sub/a.txt", "sub/b.txt", "c.txt", ".env"] {
            assert!(matches!(read(f), crate::Decision::Deny(_)), "{f}");
        }
        assert_eq!(read("src/ok.rs"), crate::Decision::Allow);
        let rm = p.decide("Bash", false, &serde_json::json!({"command": "rm victim"}));
        assert!(matches!(rm, crate::Decision::Deny(_)));
    }

    #[test]
    fn every_key_is_used_or_named_and_a_bad_rule_is_named_not_fatal() {
        let s = ClaudeSettings::parse(
            r#"{"$schema": "x", "model": "opus", "env": {"FOO": "1"}, "hooks": {},
                "permissions": {"allow": ["Bash(git diff:*)", "Bash(oops"], "ask": ["Bash(git push:*)"],
                  "defaultMode": "acceptEdits", "additionalDirectories": ["../docs"],
                  "disableBypassPermissionsMode": "disable"}}"#,
        )
        .unwrap();
        assert_eq!(s.allow, ["bash(git diff:*)"]);
        assert_eq!(s.ask, ["bash(git push:*)"]);
        assert_eq!(s.default_mode, Some(PermissionMode::AcceptEdits));
        assert_eq!(s.additional_directories, ["../docs"]);
        assert_eq!(s.env["FOO"], "1");
        assert!(s.has_hooks);
        let line = s.describe(Path::new("/ws"));
        for want in ["model", "disableBypassPermissionsMode", "Bash(oops", "env FOO", "hooks"] {
            assert!(line.contains(want), "{want}: {line}");
        }
        assert!(!line.contains("$schema"), "{line}");
    }
}
