//! `write`: creates or replaces a file atomically; also the atomic write used
//! by `edit` and `multi_edit`.

use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use async_trait::async_trait;
use serde_json::{Value, json};

use crate::args::required_str;
use crate::{Sandbox, Tool, ToolContext, ToolError, ToolOutput};

/// Writes a whole file, creating parent folders.
#[derive(Debug, Default)]
pub struct WriteTool;

#[async_trait]
impl Tool for WriteTool {
    fn name(&self) -> &str {
        "write"
    }

    fn description(&self) -> &str {
        "Writes `content` to a file in the workspace, replacing it if it exists and creating \
         missing parent folders. The write is atomic (a crash never leaves half a file) and \
         keeps an existing file's permissions. Prefer `edit` for changing part of an existing \
         file; read a file before overwriting it.\n\
         Example: {\"path\": \"notes/todo.md\", \"content\": \"# TODO\\n- ship it\\n\"}"
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "File path, relative to the workspace or absolute inside it."},
                "content": {"type": "string", "description": "The complete new content of the file."}
            },
            "required": ["path", "content"],
            "additionalProperties": false
        })
    }

    async fn execute(&self, input: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let raw = required_str(&input, "path")?;
        let content = required_str(&input, "content")?.to_owned();
        let sandbox = Sandbox::from_context(ctx);
        let path = sandbox.resolve(raw)?;
        let shown = sandbox.display(&path);
        let created = tokio::task::spawn_blocking(move || atomic_write(&path, content.as_bytes()))
            .await
            .map_err(|e| ToolError::Failed(format!("write task failed: {e}")))??;
        let len = input["content"].as_str().map_or(0, str::len);
        let verb = if created { "Created" } else { "Overwrote" };
        Ok(ToolOutput::text(format!("{verb} {shown} ({len} bytes written)")))
    }
}

/// Replaces `path` with `bytes` atomically: a temp file in the same folder,
/// fsync, rename. Creates missing parent folders; keeps the permissions of
/// the file it replaces. Returns true when the file did not exist before.
pub(crate) fn atomic_write(path: &Path, bytes: &[u8]) -> Result<bool, ToolError> {
    let shown = path.display().to_string();
    let parent = path
        .parent()
        .ok_or_else(|| ToolError::InvalidArguments(format!("{shown} has no parent folder")))?;
    let existing = match std::fs::metadata(path) {
        Ok(meta) if meta.is_dir() => {
            return Err(ToolError::InvalidArguments(format!(
                "{shown} is a folder; give a file path"
            )));
        }
        Ok(meta) => Some(meta.permissions()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(ToolError::io(format!("cannot inspect {shown}"), e)),
    };
    std::fs::create_dir_all(parent)
        .map_err(|e| ToolError::io(format!("cannot create folder {}", parent.display()), e))?;
    // New files get 0o666 minus the umask, like any editor's; existing ones keep theirs below.
    let mut temp = tempfile::Builder::new()
        .prefix(".ferroclaw-write-")
        .permissions(std::fs::Permissions::from_mode(0o666))
        .tempfile_in(parent)
        .map_err(|e| {
            ToolError::io(format!("cannot create a temp file in {}", parent.display()), e)
        })?;
    let io = |e| ToolError::io(format!("cannot write {shown}"), e);
    temp.write_all(bytes).map_err(io)?;
    if let Some(permissions) = &existing {
        temp.as_file().set_permissions(permissions.clone()).map_err(io)?;
    }
    temp.as_file().sync_all().map_err(io)?;
    temp.persist(path).map_err(|e| io(e.error))?;
    // Make the rename itself durable; failing to open a folder for fsync is harmless.
    if let Ok(dir) = std::fs::File::open(parent) {
        let _ = dir.sync_all();
    }
    Ok(existing.is_none())
}
