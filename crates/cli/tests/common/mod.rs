//! Shared set-up for end-to-end tests: a temp home and workspace, the scripted
//! LLM server, and the real `ferroclaw` binary with a clean environment.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use assert_cmd::Command;
use ferroclaw_testkit::{ScriptedServer, ServerOptions, Step};

/// Which wire format a test drives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Wire {
    Anthropic,
    OpenAi,
}

/// A temp home + workspace + scripted server.
pub(crate) struct Env {
    pub home: tempfile::TempDir,
    pub workspace: tempfile::TempDir,
    pub server: ScriptedServer,
    pub wire: Wire,
}

impl Env {
    pub(crate) fn new(wire: Wire, script: Vec<Step>) -> Env {
        Self::with_options(wire, script, ServerOptions::default())
    }

    pub(crate) fn with_options(wire: Wire, script: Vec<Step>, options: ServerOptions) -> Env {
        let env = Env {
            home: tempfile::tempdir().unwrap(),
            workspace: tempfile::tempdir().unwrap(),
            server: ScriptedServer::start_with(script, options),
            wire,
        };
        // Fast retries so fault tests do not wait.
        env.write_home_config("[retry]\nmax_attempts = 3\nbase_delay_ms = 10\nmax_delay_ms = 50\n");
        env
    }

    /// Writes `$FERROCLAW_HOME/config.toml`.
    pub(crate) fn write_home_config(&self, text: &str) {
        std::fs::write(self.home.path().join("config.toml"), text).unwrap();
    }

    pub(crate) fn ws(&self) -> &Path {
        self.workspace.path()
    }

    pub(crate) fn model(&self) -> &'static str {
        match self.wire {
            Wire::Anthropic => "anthropic/claude-test",
            Wire::OpenAi => "openai/gpt-test",
        }
    }

    /// The binary with only the variables this test sets.
    pub(crate) fn cmd(&self) -> Command {
        let mut cmd = Command::from_std(self.std_cmd());
        cmd.timeout(std::time::Duration::from_secs(60));
        cmd
    }

    /// The same, as a plain `std::process::Command` (for tests that signal it).
    pub(crate) fn std_cmd(&self) -> std::process::Command {
        // FERROCLAW_BIN runs another build (the red-team suite against an
        // older binary: `FERROCLAW_BIN=/path/ferroclaw cargo test --test e2e redteam::`).
        let bin = std::env::var_os("FERROCLAW_BIN")
            .unwrap_or_else(|| env!("CARGO_BIN_EXE_ferroclaw").into());
        let mut cmd = std::process::Command::new(bin);
        // Nothing on stdin unless a test writes it (`-p` reads piped stdin).
        cmd.stdin(std::process::Stdio::null());
        cmd.env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", self.home.path())
            .env("FERROCLAW_HOME", self.home.path())
            .current_dir(self.workspace.path());
        match self.wire {
            Wire::Anthropic => {
                cmd.env("ANTHROPIC_API_KEY", "test-key")
                    .env("ANTHROPIC_BASE_URL", self.server.url());
            }
            Wire::OpenAi => {
                cmd.env("OPENAI_API_KEY", "test-key")
                    .env("OPENAI_BASE_URL", self.server.openai_base_url());
            }
        }
        cmd.env("FERROCLAW_MODEL", self.model());
        cmd
    }

    /// `ferroclaw -p PROMPT ARGS...`
    pub(crate) fn oneshot(&self, prompt: &str, args: &[&str]) -> Command {
        let mut cmd = self.cmd();
        cmd.arg("-p").arg(prompt).args(args);
        cmd
    }

    /// Every session file of this home.
    pub(crate) fn session_files(&self) -> Vec<PathBuf> {
        let mut out = Vec::new();
        for dir in
            std::fs::read_dir(self.home.path().join("sessions")).into_iter().flatten().flatten()
        {
            for f in std::fs::read_dir(dir.path()).into_iter().flatten().flatten() {
                out.push(f.path());
            }
        }
        out
    }

    /// The messages sent in request `i`, in the wire's own shape.
    pub(crate) fn request_body(&self, i: usize) -> serde_json::Value {
        self.server.requests()[i].body.clone()
    }
}

/// Runs `cmd` and returns (exit code, stdout, stderr).
pub(crate) fn run(cmd: &mut Command) -> (i32, String, String) {
    let out = cmd.output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The text of every tool result in a request body, either wire format.
pub(crate) fn tool_results(body: &serde_json::Value) -> Vec<(String, bool)> {
    let mut out = Vec::new();
    for m in body["messages"].as_array().into_iter().flatten() {
        if m["role"] == "tool" {
            out.push((m["content"].as_str().unwrap_or_default().to_string(), false));
        }
        for block in m["content"].as_array().into_iter().flatten() {
            if block["type"] == "tool_result" {
                let text = match &block["content"] {
                    serde_json::Value::String(s) => s.clone(),
                    v => v
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(|p| p["text"].as_str())
                        .collect(),
                };
                out.push((text, block["is_error"].as_bool().unwrap_or(false)));
            }
        }
    }
    out
}
