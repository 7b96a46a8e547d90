//! Specifications of the built-in tools, exercised through the registry as
//! the agent loop uses them: validate the arguments, then execute.

mod bash;
mod edit;
mod glob;
mod grep;
mod list_dir;
#[path = "../support/process.rs"]
mod process;
mod race;
mod race_file;
mod read;
mod web_fetch;
mod web_search;
mod write;

use std::path::PathBuf;

use ferroclaw_tools::{ToolContext, ToolError, ToolOutput, ToolRegistry, builtin_tools};
use serde_json::Value;

/// A temporary workspace with the built-in tools.
pub struct Ws {
    pub dir: tempfile::TempDir,
    pub ctx: ToolContext,
    pub tools: ToolRegistry,
}

/// A fresh, empty workspace.
pub fn workspace() -> Ws {
    let dir = tempfile::tempdir().expect("temp dir");
    let ctx = ToolContext::new(dir.path());
    let mut tools = builtin_tools();
    // The test servers listen on 127.0.0.1, which web_fetch refuses unless allowed.
    tools.register(
        ferroclaw_tools::WebFetchTool::allowing_private(&["127.0.0.1".to_string()])
            .expect("valid allow list"),
    );
    Ws { dir, ctx, tools }
}

impl Ws {
    /// The absolute path of `rel` in the workspace.
    pub fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    /// Creates `rel` (and its folders) with `content`.
    pub fn write(&self, rel: &str, content: impl AsRef<[u8]>) {
        let path = self.path(rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).expect("mkdir");
        }
        std::fs::write(path, content).expect("write");
    }

    /// Creates `rel` with `content` and reads it with the `read` tool, as a
    /// model does before it edits a file.
    pub async fn write_and_read(&self, rel: &str, content: impl AsRef<[u8]>) {
        self.write(rel, content);
        self.ok("read", serde_json::json!({"path": rel})).await;
    }

    /// The text of `rel`.
    pub fn read(&self, rel: &str) -> String {
        std::fs::read_to_string(self.path(rel)).expect("read")
    }

    /// Validates `input` and runs tool `name`, as the agent loop does.
    pub async fn call(&self, name: &str, input: Value) -> Result<ToolOutput, ToolError> {
        self.tools.validate(name, &input).map_err(ToolError::InvalidArguments)?;
        let tool = self.tools.get(name).expect("builtin tool");
        tool.execute(input, &self.ctx).await
    }

    /// Runs tool `name` without schema validation (to test its own checks).
    pub async fn call_unvalidated(
        &self,
        name: &str,
        input: Value,
    ) -> Result<ToolOutput, ToolError> {
        let tool = self.tools.get(name).expect("builtin tool");
        tool.execute(input, &self.ctx).await
    }

    /// The text of a successful call; panics on an error.
    pub async fn ok(&self, name: &str, input: Value) -> String {
        match self.call(name, input.clone()).await {
            Ok(out) if !out.is_error => out.joined_text(),
            Ok(out) => panic!("{name} {input} returned an error result: {}", out.joined_text()),
            Err(e) => panic!("{name} {input} failed: {e}"),
        }
    }

    /// The message of a failed call (an `Err` or an `is_error` result).
    pub async fn err(&self, name: &str, input: Value) -> String {
        match self.call(name, input.clone()).await {
            Ok(out) if out.is_error => out.joined_text(),
            Ok(out) => panic!("{name} {input} should fail, got: {}", out.joined_text()),
            Err(e) => e.to_string(),
        }
    }
}
