//! The outside programs and files some tests run against, and what a test
//! does when one is not there.
//!
//! `scripts/test` installs every [`Component`] first (through
//! `scripts/install-test-components`, pinned, cached under `~/.cache`), so
//! the suite runs whole on a fresh machine. A test that cannot reach its
//! component FAILS and says what is missing and how to install it: a missing
//! component never passes as a silent early return.
//!
//! A developer who wants to do without some of them says so, knowingly, in
//! one variable: `FERROCLAW_TEST_SKIP=chromium,postgres` (or `all`) makes the
//! tests that need those components skip, each with a notice on stderr that
//! the test harness does not capture. CI never sets it. The same list names
//! the components `scripts/test` drives from the shell, `conformance` (the
//! MCP conformance suite) and `acpx`, and `scripts/install-test-components`
//! installs none of the components it names.
//!
//! ```no_run
//! use ferroclaw_testkit::components::{self, Component};
//!
//! let Some(model) = components::require(Component::TestModel, components::test_model()) else {
//!     return; // FERROCLAW_TEST_SKIP names "model": skipped, with a notice
//! };
//! ```

use std::io::Write;
use std::path::PathBuf;

/// The variable that lists the components a developer does without.
pub const SKIP_VAR: &str = "FERROCLAW_TEST_SKIP";

/// An outside component of the test suite.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Component {
    /// The official MCP reference servers (npm `@modelcontextprotocol/server-everything`
    /// and `-filesystem`), in `$FERROCLAW_MCP_SERVERS_DIR` or `~/.cache/ferroclaw-npm`.
    McpServers,
    /// The pinned Claude Code (npm `@anthropic-ai/claude-code`), in
    /// `$FERROCLAW_CLAUDE_CODE_DIR` or `~/.cache/ferroclaw-claude-code`.
    ClaudeCode,
    /// The pinned Claude Agent SDK (npm `@anthropic-ai/claude-agent-sdk`), in
    /// `$FERROCLAW_AGENT_SDK_DIR` or `~/.cache/ferroclaw-agent-sdk`.
    AgentSdk,
    /// SmolLM2-135M (GGUF), at `$FERROCLAW_TEST_GGUF` or
    /// `~/.cache/ferroclaw-models/SmolLM2-135M-Instruct.Q4_1.gguf`.
    TestModel,
    /// Headless Chromium, for the web chat's browser tests.
    Chromium,
    /// PostgreSQL's server binaries (`initdb`, `pg_ctl`), for the scale-out gateway.
    Postgres,
    /// `strace`, for the exec oracle and the fault suite.
    Strace,
    /// `python3` with the official `openai` package, for the OpenAI-compatible API.
    PythonOpenAi,
}

impl Component {
    /// The name `FERROCLAW_TEST_SKIP` and `scripts/install-test-components` use.
    pub fn name(self) -> &'static str {
        match self {
            Component::McpServers => "mcp-servers",
            Component::ClaudeCode => "claude-code",
            Component::AgentSdk => "agent-sdk",
            Component::TestModel => "model",
            Component::Chromium => "chromium",
            Component::Postgres => "postgres",
            Component::Strace => "strace",
            Component::PythonOpenAi => "python-openai",
        }
    }
}

/// True when `FERROCLAW_TEST_SKIP` names `component` (or `all`).
pub fn opted_out(component: Component) -> bool {
    let list = std::env::var(SKIP_VAR).unwrap_or_default();
    names_component(&list, component)
}

fn names_component(list: &str, component: Component) -> bool {
    list.split([',', ' ']).map(str::trim).any(|n| n == "all" || n == component.name())
}

/// What a test needs from `component`: `found` when it is there (`Err` says
/// why it is not). `None` only when the developer opted out with
/// `FERROCLAW_TEST_SKIP` (after a notice on stderr); the caller then returns.
///
/// # Panics
/// When the component is missing and not opted out: the test fails with
/// the reason and how to install it.
#[track_caller]
pub fn require<T>(component: Component, found: Result<T, String>) -> Option<T> {
    if opted_out(component) {
        let name = component.name();
        // The test harness names each test's thread after the test.
        let test = std::thread::current().name().unwrap_or("a test").to_string();
        notice(&format!("\n*** SKIPPED {test}: it needs {name}, which {SKIP_VAR} names ***"));
        return None;
    }
    Some(present(component, found))
}

/// `found`, or a failure that says what is missing and the two ways out.
#[track_caller]
fn present<T>(component: Component, found: Result<T, String>) -> T {
    let name = component.name();
    match found {
        Ok(found) => found,
        Err(why) => panic!(
            "the test component {name:?} is missing: {why}\n\
             scripts/test installs it (scripts/install-test-components {name}); \
             to do without it knowingly, set {SKIP_VAR}={name}"
        ),
    }
}

/// One line straight to the test's stderr, past the test harness's capture,
/// so a skip shows even when every test passes.
fn notice(line: &str) {
    let _ = writeln!(std::io::stderr().lock(), "{line}");
}

/// `$HOME/.cache/NAME`, where `scripts/install-test-components` puts what it
/// installs.
pub fn cache_dir(name: &str) -> PathBuf {
    PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache").join(name)
}

/// `$VAR` when set and not empty, else `default`.
fn dir_from(var: &str, default: impl FnOnce() -> PathBuf) -> PathBuf {
    std::env::var_os(var).filter(|v| !v.is_empty()).map(PathBuf::from).unwrap_or_else(default)
}

/// The binary `bin` (`mcp-server-everything`, ...) of the MCP reference servers.
pub fn mcp_server(bin: &str) -> Result<PathBuf, String> {
    let dir = dir_from("FERROCLAW_MCP_SERVERS_DIR", || cache_dir("ferroclaw-npm"));
    let path = dir.join("node_modules/.bin").join(bin);
    existing(path, "FERROCLAW_MCP_SERVERS_DIR")
}

/// The folder Claude Code is installed in (its `node_modules/` inside).
pub fn claude_code_dir() -> Result<PathBuf, String> {
    let dir = dir_from("FERROCLAW_CLAUDE_CODE_DIR", || cache_dir("ferroclaw-claude-code"));
    existing(dir.join("node_modules/.bin/claude"), "FERROCLAW_CLAUDE_CODE_DIR").map(|_| dir)
}

/// The folder the Claude Agent SDK is installed in (its `node_modules/` inside).
pub fn agent_sdk_dir() -> Result<PathBuf, String> {
    let dir = dir_from("FERROCLAW_AGENT_SDK_DIR", || cache_dir("ferroclaw-agent-sdk"));
    let package = dir.join("node_modules/@anthropic-ai/claude-agent-sdk/package.json");
    existing(package, "FERROCLAW_AGENT_SDK_DIR").map(|_| dir)
}

/// The test model's GGUF file.
pub fn test_model() -> Result<PathBuf, String> {
    let path = dir_from("FERROCLAW_TEST_GGUF", || {
        cache_dir("ferroclaw-models").join("SmolLM2-135M-Instruct.Q4_1.gguf")
    });
    existing(path, "FERROCLAW_TEST_GGUF")
}

/// The first of the usual Chromium binaries that exists.
pub fn chromium() -> Result<PathBuf, String> {
    const PLACES: [&str; 2] = ["/usr/bin/chromium", "/usr/bin/chromium-browser"];
    PLACES
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
        .ok_or_else(|| format!("none of {} exists", PLACES.join(", ")))
}

/// `strace`, when it runs and may trace (ptrace allowed).
pub fn strace() -> Result<(), String> {
    let status = std::process::Command::new("strace")
        .args(["-f", "-qq", "-o", "/dev/null", "-e", "trace=none", "true"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status();
    match status {
        Ok(s) if s.success() => Ok(()),
        Ok(s) => Err(format!("`strace true` failed ({s}): is ptrace allowed here?")),
        Err(e) => Err(format!("strace does not run: {e}")),
    }
}

/// `python3` that imports the official `openai` package.
pub fn python_openai() -> Result<(), String> {
    let out = std::process::Command::new("python3").args(["-c", "import openai"]).output();
    match out {
        Ok(o) if o.status.success() => Ok(()),
        Ok(o) => Err(format!(
            "python3 cannot import openai: {}",
            String::from_utf8_lossy(&o.stderr).trim()
        )),
        Err(e) => Err(format!("python3 does not run: {e}")),
    }
}

fn existing(path: PathBuf, var: &str) -> Result<PathBuf, String> {
    if path.exists() {
        Ok(path)
    } else {
        Err(format!("{} does not exist (set {var} to use another place)", path.display()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_opt_out_list_names_components_or_all() {
        assert!(names_component("chromium,postgres", Component::Postgres));
        assert!(names_component(" model , strace", Component::Strace));
        assert!(names_component("all", Component::McpServers));
        assert!(!names_component("", Component::Chromium));
        assert!(!names_component("chromium-extra", Component::Chromium));
    }

    #[test]
    fn a_missing_component_fails_with_the_reason_and_the_way_out() {
        let failure = std::panic::catch_unwind(|| {
            present::<()>(Component::TestModel, Err("/nowhere/m.gguf does not exist".into()));
        })
        .expect_err("a missing component fails the test");
        let message = failure.downcast_ref::<String>().cloned().unwrap_or_default();
        assert!(
            message.contains("\"model\" is missing: /nowhere/m.gguf does not exist"),
            "{message}"
        );
        assert!(message.contains("FERROCLAW_TEST_SKIP=model"), "{message}");
        assert_eq!(present(Component::TestModel, Ok(1)), 1);
    }
}
