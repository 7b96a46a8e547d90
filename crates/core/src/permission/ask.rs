//! Ask rules (Claude Code's `permissions.ask`): a call they cover is asked
//! in every mode, even where an allow rule, an "always" answer or the mode
//! would let it run. Deny rules still win over them.

use serde_json::Value;

use super::{Permissions, Rule, call_path, call_subject, home, is_file_tool, resolve};

impl Permissions {
    /// The same state with `ask` rules; a bad rule is an error naming it.
    pub fn with_ask(mut self, ask: &[String]) -> Result<Self, String> {
        self.ask = ask.iter().map(|r| Rule::parse(r)).collect::<Result<Vec<_>, _>>()?;
        Ok(self)
    }

    /// True when an ask rule covers this call of `tool` (already canonical):
    /// any simple command of a `bash` call (as written, unwrapped, or by the
    /// program's base name), a file tool's resolved path, a URL.
    pub(super) fn asks(&self, tool: &str, input: &Value) -> bool {
        let rules: Vec<&Rule> = self.ask.iter().filter(|r| r.covers_tool(tool)).collect();
        if rules.is_empty() {
            return false;
        }
        if rules.iter().any(|r| r.pattern.is_none()) {
            return true;
        }
        match tool {
            "bash" | "worktree_run" => {
                let command = input.get("command").and_then(Value::as_str).unwrap_or("").trim();
                let script = ferroclaw_tools::shell::parse(command);
                let mut texts = vec![command.to_string()];
                for cmd in &script.commands {
                    let unwrapped: Vec<&str> =
                        cmd.unwrapped().iter().map(|w| w.text.as_str()).collect();
                    let mut bare = unwrapped.clone();
                    if let Some(first) = bare.first_mut() {
                        *first = ferroclaw_tools::shell::basename(first);
                    }
                    texts.extend([cmd.text(), unwrapped.join(" "), bare.join(" ")]);
                }
                rules.iter().any(|r| texts.iter().any(|t| r.matches_command(t)))
            }
            _ if is_file_tool(tool) && call_path(tool, input).is_some() => {
                let given = call_path(tool, input).unwrap_or(".");
                let target = resolve(&self.workspace, given);
                let (abs, home) = (target.abs_text(), home());
                rules
                    .iter()
                    .any(|r| r.matches_path(target.rel.as_deref(), &abs, home.as_deref(), true))
            }
            "web_fetch" => {
                let url = input.get("url").and_then(Value::as_str).unwrap_or("").trim();
                let host = ferroclaw_tools::ssrf::url_host(url);
                rules.iter().any(|r| r.matches_url(url, host.as_deref()))
            }
            _ => {
                let subject = call_subject(input).map(|s| s.trim_start_matches("./"));
                rules.iter().any(|r| subject.is_some_and(|s| r.matches_command(s)))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Decision, PermissionMode};
    use super::*;
    use serde_json::json;

    #[test]
    fn an_ask_rule_asks_even_where_an_allow_rule_or_the_mode_would_allow() {
        let ws = tempfile::tempdir().unwrap();
        let p = Permissions::new(
            PermissionMode::Bypass,
            &["Bash(git:*)".into(), "Read".into()],
            &["Bash(rm:*)".into()],
        )
        .unwrap()
        .with_ask(&["Bash(git push:*)".into(), "Read(./secrets/**)".into(), "WebFetch".into()])
        .unwrap()
        .with_workspace(ws.path());
        let bash = |c: &str| p.decide("Bash", false, &json!({"command": c}));
        assert_eq!(bash("git status"), Decision::Allow);
        assert_eq!(bash("git push origin main"), Decision::Ask);
        assert_eq!(
            bash("cd sub && /usr/bin/git push"),
            Decision::Ask,
            "unwrapped and by base name"
        );
        assert!(matches!(bash("rm -rf x"), Decision::Deny(_)), "deny still wins");
        assert_eq!(p.decide("read", true, &json!({"path": "secrets/key"})), Decision::Ask);
        assert_eq!(p.decide("read", true, &json!({"path": "src/main.rs"})), Decision::Allow);
        assert_eq!(
            p.decide("web_fetch", true, &json!({"url": "https://x.example"})),
            Decision::Ask
        );
    }
}
