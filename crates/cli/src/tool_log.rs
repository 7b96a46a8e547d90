//! What the terminal shows of a tool call besides its events: each call's
//! full output (first lines shown, `/expand` for the rest) and, for file
//! tools, the file as it was before the call (for the diff shown after it).
//!
//! [`observe`] wraps every tool of a registry; the wrapper records into a
//! shared [`ToolLog`] before and after delegating, so the renderer finds the
//! record when the call's `tool_call_finished` event arrives. The model sees
//! exactly what the tool returned.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;
use ferroclaw_tools::{Around, Tool, ToolContext, ToolError, ToolOutput, ToolRegistry, Wrapped};
use serde_json::Value;

/// Largest file kept as the "before" of a diff; bigger files get no diff.
pub(crate) const MAX_SNAPSHOT_BYTES: u64 = 1024 * 1024;

/// Tools whose calls change one file named by `path`.
pub(crate) const FILE_TOOLS: &[&str] = &["write", "edit", "multi_edit"];

/// One finished call, as recorded.
#[derive(Debug, Clone, Default)]
pub(crate) struct Record {
    /// The file the call changed, absolute (file tools only).
    pub path: Option<PathBuf>,
    /// The file's text before the call; `None` when it did not exist (or
    /// was too big or not text to diff).
    pub before: Option<String>,
    /// The output's text, whole.
    pub output: String,
}

/// Records of this process's tool calls by call id, and the latest one.
#[derive(Debug, Default)]
pub(crate) struct ToolLog {
    records: Mutex<HashMap<String, Record>>,
    last: Mutex<Option<String>>,
}

impl ToolLog {
    /// The record of call `id`, if it ran.
    pub(crate) fn get(&self, id: &str) -> Option<Record> {
        self.records.lock().unwrap_or_else(PoisonError::into_inner).get(id).cloned()
    }

    /// The most recent call's record (for `/expand`).
    pub(crate) fn last(&self) -> Option<Record> {
        let id = self.last.lock().unwrap_or_else(PoisonError::into_inner).clone()?;
        self.get(&id)
    }

    /// Records call `id` as the latest.
    pub(crate) fn put(&self, id: &str, record: Record) {
        self.records.lock().unwrap_or_else(PoisonError::into_inner).insert(id.to_string(), record);
        *self.last.lock().unwrap_or_else(PoisonError::into_inner) = Some(id.to_string());
    }
}

/// The registry with every tool wrapped to record into `log`.
pub(crate) fn observe(tools: &ToolRegistry, log: &Arc<ToolLog>) -> ToolRegistry {
    let mut out = ToolRegistry::new();
    for name in tools.names() {
        if let Some(inner) = tools.get(name) {
            out.register(Wrapped { inner: inner.clone(), around: Observed(log.clone()) });
        }
    }
    out
}

/// A file's text if it exists, is small enough and is UTF-8.
pub(crate) fn read_text(path: &Path) -> Option<String> {
    ferroclaw_tools::own_file::read_text(path, MAX_SNAPSHOT_BYTES).ok()
}

/// The absolute path a file tool's input names.
pub(crate) fn input_path(input: &Value, workspace: &Path) -> Option<PathBuf> {
    let raw = input["path"].as_str().or_else(|| input["file_path"].as_str())?;
    let raw = match raw.strip_prefix("~/") {
        Some(rest) => PathBuf::from(std::env::var_os("HOME")?).join(rest),
        None => PathBuf::from(raw),
    };
    Some(workspace.join(raw))
}

struct Observed(Arc<ToolLog>);

#[async_trait]
impl Around for Observed {
    async fn run(
        &self,
        inner: &dyn Tool,
        input: Value,
        ctx: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        let name = inner.name().to_string();
        let path = FILE_TOOLS
            .contains(&name.as_str())
            .then(|| input_path(&input, &ctx.workspace))
            .flatten();
        let before = path.as_deref().and_then(read_text);
        let result = inner.execute(input, ctx).await;
        let output = match &result {
            Ok(out) => out.joined_text(),
            Err(e) => e.to_string(),
        };
        self.0.put(&ctx.call_id, Record { path, before, output });
        result
    }
}
