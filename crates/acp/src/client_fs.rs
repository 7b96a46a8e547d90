//! File tools through the editor: when the client offers `fs/*`, `read`
//! reads through `fs/read_text_file` (so the model sees unsaved buffers),
//! `write` writes through `fs/write_text_file` (so the editor shows and can
//! undo the change), and `edit` and `multi_edit` do both: the replacement
//! applies to the buffer the model read, and the result goes back to the
//! editor. What the conversation knows of each file is the buffer's
//! content, so a buffer changed since the model read it is refused as the
//! disk copy would be (see `ferroclaw_tools::CHANGED_SINCE_READ`). Paths
//! are checked by the same sandbox as the local tools; images, and files
//! the client cannot read, are read and edited locally.

use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;
use ferroclaw_tools::{
    Around, Change, Sandbox, Tool, ToolContext, ToolError, ToolOutput, ToolRegistry, Wrapped,
};
use serde_json::{Value, json};

use crate::rpc::Peer;
use crate::wire::ClientCan;

/// Which session the requests name and who answers them.
#[derive(Clone)]
pub(crate) struct ClientFs {
    pub peer: Arc<Peer>,
    pub session_id: Arc<Mutex<String>>,
}

impl ClientFs {
    fn session(&self) -> String {
        self.session_id.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// The whole text of `path` as the editor has it (its unsaved buffer).
    async fn read_whole(&self, path: &Path) -> Result<String, String> {
        let params = json!({"sessionId": self.session(), "path": path});
        let result =
            self.peer.request("fs/read_text_file", params).await.map_err(|e| e.to_string())?;
        Ok(result["content"].as_str().unwrap_or_default().to_string())
    }

    async fn write_whole(&self, path: &Path, content: &str) -> Result<(), ToolError> {
        let params = json!({"sessionId": self.session(), "path": path, "content": content});
        self.peer
            .request("fs/write_text_file", params)
            .await
            .map(|_| ())
            .map_err(|e| ToolError::Failed(format!("the editor could not write the file: {e}")))
    }
}

/// `tools` with `read`, `write`, `edit` and `multi_edit` going through the
/// client where it can (editing needs both `fs/*` methods).
pub(crate) fn through_client(tools: &ToolRegistry, can: ClientCan, fs: &ClientFs) -> ToolRegistry {
    let mut out = ToolRegistry::new();
    for name in tools.names() {
        let Some(inner) = tools.get(name) else { continue };
        let inner = inner.clone();
        match name {
            "read" if can.read_files => {
                out.register(Wrapped { inner, around: ClientRead(fs.clone()) });
            }
            "write" if can.write_files => {
                let around = ClientWrite { fs: fs.clone(), reads_buffers: can.read_files };
                out.register(Wrapped { inner, around });
            }
            "edit" | "multi_edit" if can.write_files && can.read_files => {
                out.register(Wrapped { inner, around: ClientEdit(fs.clone()) });
            }
            _ => out.register_arc(inner),
        }
    }
    out
}

struct ClientRead(ClientFs);

#[async_trait]
impl Around for ClientRead {
    async fn run(
        &self,
        inner: &dyn Tool,
        input: Value,
        ctx: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        let raw = input["path"].as_str().unwrap_or_default();
        if is_image(raw) {
            return inner.execute(input, ctx).await;
        }
        let path = Sandbox::from_context(ctx).resolve(raw)?;
        let first = input["offset"].as_u64().unwrap_or(1).max(1) as usize;
        let limit =
            input["limit"].as_u64().unwrap_or(ferroclaw_tools::DEFAULT_READ_LINES as u64) as usize;
        match self.0.read_whole(&path).await {
            Ok(text) => {
                // The conversation now knows the buffer as it is.
                ctx.reads.wrote(&path, text.as_bytes());
                let shown: Vec<&str> = text.lines().skip(first - 1).take(limit).collect();
                Ok(ToolOutput::text(numbered(&shown.join("\n"), first)))
            }
            // A file the editor cannot read (binary, gone): ours says why.
            Err(e) => {
                tracing::info!("acp: fs/read_text_file {}: {e}; reading locally", path.display());
                inner.execute(input, ctx).await
            }
        }
    }
}

/// Images are read by our own tool (the editor reads text).
fn is_image(path: &str) -> bool {
    let ext = path.rsplit('.').next().unwrap_or_default().to_ascii_lowercase();
    matches!(ext.as_str(), "png" | "jpg" | "jpeg" | "gif" | "webp")
}

/// `cat -n` numbering from line `first`.
fn numbered(text: &str, first: usize) -> String {
    let mut out = String::new();
    for (i, line) in text.lines().enumerate() {
        out.push_str(&format!("{:>6}\t{line}\n", first + i));
    }
    if out.is_empty() {
        out.push_str("(empty)\n");
    }
    out
}

struct ClientWrite {
    fs: ClientFs,
    /// The client reads files too: the buffer is what a write checks
    /// against (else the disk copy).
    reads_buffers: bool,
}

#[async_trait]
impl Around for ClientWrite {
    async fn run(
        &self,
        _inner: &dyn Tool,
        input: Value,
        ctx: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        let sandbox = Sandbox::from_context(ctx);
        let path = sandbox.resolve(input["path"].as_str().unwrap_or_default())?;
        let content = input["content"].as_str().unwrap_or_default();
        // What the editor holds now (or the disk); a file it cannot read is new.
        let current = match (path.exists(), self.reads_buffers) {
            (false, _) => None,
            (true, true) => self.fs.read_whole(&path).await.ok().map(String::into_bytes),
            (true, false) => std::fs::read(&path).ok(),
        };
        ctx.reads.before_change(&path, current.as_deref(), Change::Whole)?;
        self.fs.write_whole(&path, content).await?;
        ctx.reads.wrote(&path, content.as_bytes());
        Ok(ToolOutput::text(format!(
            "Wrote {} ({} bytes written)",
            sandbox.display(&path),
            content.len()
        )))
    }
}

/// `edit` and `multi_edit` on the editor's buffer.
struct ClientEdit(ClientFs);

#[async_trait]
impl Around for ClientEdit {
    async fn run(
        &self,
        inner: &dyn Tool,
        input: Value,
        ctx: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        let sandbox = Sandbox::from_context(ctx);
        let path = sandbox.resolve(input["path"].as_str().unwrap_or_default())?;
        let original = match self.0.read_whole(&path).await {
            Ok(text) => text,
            // A file the editor cannot read: ours edits the disk copy or says why.
            Err(e) => {
                tracing::info!("acp: fs/read_text_file {}: {e}; editing locally", path.display());
                return inner.execute(input, ctx).await;
            }
        };
        let stale =
            ctx.reads.before_change(&path, Some(original.as_bytes()), Change::InPlace)?.is_stale();
        let shown = sandbox.display(&path);
        let (content, message) =
            ferroclaw_tools::edit_text(inner.name(), &input, &original, &shown, stale)?;
        self.0.write_whole(&path, &content).await?;
        ctx.reads.wrote(&path, content.as_bytes());
        Ok(ToolOutput::text(message))
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn numbering_starts_at_the_requested_line() {
        assert_eq!(super::numbered("a\nb", 7), "     7\ta\n     8\tb\n");
    }
}
