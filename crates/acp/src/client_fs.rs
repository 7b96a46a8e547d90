//! File tools through the editor: when the client offers `fs/*`, `read`
//! reads through `fs/read_text_file` (so the model sees unsaved buffers) and
//! `write` writes through `fs/write_text_file` (so the editor shows and can
//! undo the change). Paths are checked by the same sandbox as the local
//! tools; images, and files the client cannot read, are read locally.

use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;
use ferroclaw_tools::{
    Around, Sandbox, Tool, ToolContext, ToolError, ToolOutput, ToolRegistry, Wrapped,
};
use serde_json::{Value, json};

use crate::rpc::Peer;
use crate::wire::ClientCan;

/// Which session the requests name and who answers them.
#[derive(Clone)]
pub struct ClientFs {
    pub peer: Arc<Peer>,
    pub session_id: Arc<Mutex<String>>,
}

impl ClientFs {
    fn session(&self) -> String {
        self.session_id.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }
}

/// `tools` with `read` and `write` going through the client where it can.
pub fn through_client(tools: &ToolRegistry, can: ClientCan, fs: &ClientFs) -> ToolRegistry {
    let mut out = ToolRegistry::new();
    for name in tools.names() {
        let Some(inner) = tools.get(name) else { continue };
        let inner = inner.clone();
        match name {
            "read" if can.read_files => {
                out.register(Wrapped { inner, around: ClientRead(fs.clone()) });
            }
            "write" if can.write_files => {
                out.register(Wrapped { inner, around: ClientWrite(fs.clone()) });
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
        let first = input["offset"].as_u64().unwrap_or(1).max(1);
        let limit = input["limit"].as_u64().unwrap_or(ferroclaw_tools::DEFAULT_READ_LINES as u64);
        let params = json!({
            "sessionId": self.0.session(), "path": path, "line": first, "limit": limit,
        });
        match self.0.peer.request("fs/read_text_file", params).await {
            Ok(result) => {
                let text = result["content"].as_str().unwrap_or_default();
                Ok(ToolOutput::text(numbered(text, first as usize)))
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

struct ClientWrite(ClientFs);

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
        let params = json!({"sessionId": self.0.session(), "path": path, "content": content});
        self.0
            .peer
            .request("fs/write_text_file", params)
            .await
            .map_err(|e| ToolError::Failed(format!("the editor could not write the file: {e}")))?;
        Ok(ToolOutput::text(format!(
            "Wrote {} ({} bytes written)",
            sandbox.display(&path),
            content.len()
        )))
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn numbering_starts_at_the_requested_line() {
        assert_eq!(super::numbered("a\nb", 7), "     7\ta\n     8\tb\n");
    }
}
