//! Permission rules: `tool`, `tool(pattern)`, Claude Code's `Tool(prefix:*)`,
//! and `web_fetch(domain:example.com)`. Tool names are resolved to
//! ferroclaw's own (`Bash` -> `bash`, `Read` -> `read`) when a rule is read.

use ferroclaw_tools::canonical_tool_name;

/// Tools that read files; a `read(...)` rule covers all of them.
pub const READ_FAMILY: &[&str] = &["read", "grep", "glob", "list_dir"];

/// Tools that change files in the workspace (and nothing else); an
/// `edit(...)` or `write(...)` rule covers all of them.
pub const EDIT_TOOLS: &[&str] = &["write", "edit", "multi_edit"];

/// One rule: `tool` or `tool(pattern)`, where the pattern is matched against
/// the call's subject (each simple command for `bash`, the resolved path for
/// file tools, the URL for `web_fetch`) and `*` matches anything, `/`
/// included. `prefix:*` matches the command `prefix` and `prefix ARGS...`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    pub tool: String,
    pub pattern: Option<String>,
}

impl Rule {
    /// Parses `bash(git status*)`, `Bash(git status:*)`, `edit(src/**)`,
    /// `web_fetch`, `web_fetch(domain:docs.rs)`, `mcp__github__*`.
    pub fn parse(text: &str) -> Result<Rule, String> {
        let text = text.trim();
        let (tool, pattern) = match text.split_once('(') {
            None if !text.is_empty() && !text.contains(')') => (text, None),
            Some((tool, rest)) if !tool.trim().is_empty() && rest.ends_with(')') => {
                (tool.trim(), Some(rest[..rest.len() - 1].to_string()))
            }
            _ => return Err(format!("bad permission rule {text:?}: write TOOL or TOOL(PATTERN)")),
        };
        let pattern = pattern.filter(|p| !p.is_empty() && p != "*" && p != ":*");
        Ok(Rule { tool: canonical_tool_name(tool).to_string(), pattern })
    }

    /// A rule for `tool` with `pattern`.
    pub fn new(tool: &str, pattern: Option<String>) -> Rule {
        Rule { tool: canonical_tool_name(tool).to_string(), pattern }
    }

    /// True when the rule names `tool` (by name, wildcard, or family).
    pub fn covers_tool(&self, tool: &str) -> bool {
        wildcard(&self.tool, tool)
            || (self.tool == "read" && READ_FAMILY.contains(&tool))
            || (matches!(self.tool.as_str(), "edit" | "write") && EDIT_TOOLS.contains(&tool))
    }

    /// True when the pattern (if any) matches one simple command's text.
    pub fn matches_command(&self, command: &str) -> bool {
        match &self.pattern {
            None => true,
            Some(p) => match p.strip_suffix(":*") {
                Some(prefix) => {
                    command == prefix
                        || command.strip_prefix(prefix).is_some_and(|r| r.starts_with(' '))
                }
                // `touch *` also covers a bare `touch` (as `touch:*` does).
                None => wildcard(p, command) || p.strip_suffix(" *") == Some(command),
            },
        }
    }

    /// True when the pattern (if any) matches a path: workspace-relative
    /// (`src/**`) or absolute (`/etc/**`, Claude's `//etc/**`, `~/x`).
    /// `loose` also lets a slash-free pattern match the file name anywhere
    /// (as .gitignore does); deny rules are read that way.
    pub fn matches_path(
        &self,
        rel: Option<&str>,
        abs: &str,
        home: Option<&str>,
        loose: bool,
    ) -> bool {
        let Some(p) = &self.pattern else { return true };
        let p = p.trim_start_matches("./");
        if let Some(rest) = p.strip_prefix("~/") {
            return home
                .is_some_and(|h| wildcard(&format!("{}/{rest}", h.trim_end_matches('/')), abs));
        }
        if p.starts_with('/') {
            let p = p.strip_prefix('/').filter(|rest| rest.starts_with('/')).unwrap_or(p);
            return wildcard(p, abs);
        }
        if rel.is_some_and(|r| wildcard(p, r) || wildcard(&format!("{p}/**"), r)) {
            return true;
        }
        loose && !p.contains('/') && abs.rsplit('/').next().is_some_and(|name| wildcard(p, name))
    }

    /// True when the pattern (if any) matches a URL (`domain:HOST` matches
    /// the host and its subdomains).
    pub fn matches_url(&self, url: &str, host: Option<&str>) -> bool {
        match &self.pattern {
            None => true,
            Some(p) => match p.strip_prefix("domain:") {
                Some(domain) => host.is_some_and(|h| {
                    let domain = domain.trim().to_ascii_lowercase();
                    h == domain || h.ends_with(&format!(".{domain}"))
                }),
                None => wildcard(p, url),
            },
        }
    }
}

impl std::fmt::Display for Rule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.pattern {
            Some(p) => write!(f, "{}({p})", self.tool),
            None => f.write_str(&self.tool),
        }
    }
}

/// `*` matches any run of characters (including `/`); everything else is literal.
pub fn wildcard(pattern: &str, text: &str) -> bool {
    let parts: Vec<&str> = pattern.split('*').collect();
    if parts.len() == 1 {
        return pattern == text;
    }
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if !text.starts_with(first) || text.len() < first.len() + last.len() || !text.ends_with(last) {
        return false;
    }
    let mut rest = &text[first.len()..text.len() - last.len()];
    for middle in &parts[1..parts.len() - 1] {
        match rest.find(middle) {
            Some(i) => rest = &rest[i + middle.len()..],
            None => return false,
        }
    }
    true
}

/// Programs whose second word names what they do (`git status`, `cargo test`):
/// an "always" answer covers that pair, not the whole program.
const SUBCOMMAND_PROGRAMS: &[&str] = &[
    "git",
    "cargo",
    "npm",
    "pnpm",
    "yarn",
    "bun",
    "go",
    "docker",
    "kubectl",
    "make",
    "just",
    "uv",
    "pip",
    "pip3",
    "poetry",
    "gradle",
    "mvn",
    "dotnet",
    "rustup",
    "brew",
    "apt",
    "gh",
    "terraform",
    "helm",
    "deno",
    "mix",
    "bundle",
    "rake",
    "npx",
    "systemctl",
    "journalctl",
];

/// Programs an "always" answer never widens past the exact command: they
/// delete, run other code, or reach out.
const EXACT_ONLY_PROGRAMS: &[&str] = &[
    "rm", "sudo", "doas", "sh", "bash", "zsh", "dash", "eval", "exec", "env", "xargs", "python",
    "python3", "node", "perl", "ruby", "curl", "wget", "ssh", "scp", "rsync", "dd", "chmod",
    "chown", "mv", "cp", "find", "nc", "ncat", "socat", "kill", "pkill", "killall", "tee",
];

/// The prefix an "always" answer allows for one simple command:
/// `git status -s` -> `git status:*`, `ls -la` -> `ls:*`; risky programs and
/// commands with leading assignments get the exact command.
pub fn command_prefix(words: &[String], has_assignments: bool) -> String {
    let exact = words.join(" ");
    let Some(program) = words.first() else { return exact };
    if has_assignments || program.contains('/') || EXACT_ONLY_PROGRAMS.contains(&program.as_str()) {
        return exact;
    }
    let second = words.get(1).filter(|w| {
        SUBCOMMAND_PROGRAMS.contains(&program.as_str())
            && !w.starts_with('-')
            && w.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == ':')
    });
    match second {
        Some(sub) => format!("{program} {sub}:*"),
        None => format!("{program}:*"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claude_code_rules_are_read_with_our_tool_names() {
        let r = Rule::parse("Bash(git status:*)").unwrap();
        assert_eq!(r.to_string(), "bash(git status:*)");
        assert!(r.matches_command("git status"));
        assert!(r.matches_command("git status -s"));
        assert!(!r.matches_command("git statusx"));
        assert_eq!(Rule::parse("Read").unwrap().tool, "read");
        assert!(Rule::parse("bash(oops").is_err());
    }

    #[test]
    fn an_always_prefix_keeps_risky_programs_exact() {
        let w = |s: &str| s.split(' ').map(str::to_string).collect::<Vec<_>>();
        assert_eq!(command_prefix(&w("git status -s"), false), "git status:*");
        assert_eq!(command_prefix(&w("ls -la"), false), "ls:*");
        assert_eq!(command_prefix(&w("rm -rf build"), false), "rm -rf build");
        assert_eq!(command_prefix(&w("cargo test -q"), false), "cargo test:*");
    }
}
