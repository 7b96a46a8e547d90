//! Files the agent sent, kept where every gateway can serve them.
//!
//! One gateway on its own files serves a file the agent sent from its
//! workspace (`/api/files?path=P`), where the file is. Gateways that share a
//! database and no folder each have a workspace of their own: the process
//! whose agent sends a file (the `message` tool's `media`) keeps a copy of
//! its bytes in the database ([`keep`], at most
//! [`ferroclaw_store::MAX_MEDIA_BYTES`]) under its path in the workspace,
//! and any process serves it from there ([`find`]), so a picture sent
//! through one gateway shows on a page of another, live and in history.
//! Pictures people send are in the conversation itself
//! ([`crate::history::History::picture`]).

use std::path::{Component, Path};

use ferroclaw_store::{MAX_MEDIA_BYTES, PgStore, StoreError, StoredMedia};

use crate::media::Outgoing;

/// Why a file could not be kept for the other gateways.
#[derive(Debug, thiserror::Error)]
pub enum KeepError {
    #[error("{0}")]
    Read(#[from] crate::media::MediaError),
    #[error("{0}")]
    Store(#[from] StoreError),
    #[error("{0}: not inside the workspace")]
    Outside(String),
    #[error("reading the file stopped: {0}")]
    Task(String),
}

/// The name a file in `workspace` is kept under: its path inside it, with
/// `/` between parts (`reports/q3.pdf`). `path` is absolute (made real when
/// the agent asked to send it) or relative to the workspace; `None` when it
/// is not inside the workspace.
pub fn key(workspace: &Path, path: &str) -> Option<String> {
    let path = Path::new(path);
    let root = workspace.canonicalize().unwrap_or_else(|_| workspace.to_path_buf());
    let inside = match path.is_absolute() {
        true => path.strip_prefix(&root).or_else(|_| path.strip_prefix(workspace)).ok()?,
        false => path,
    };
    let mut parts = Vec::new();
    for part in inside.components() {
        match part {
            Component::Normal(p) => parts.push(p.to_str()?),
            Component::CurDir => {}
            Component::ParentDir => {
                parts.pop()?;
            }
            Component::RootDir | Component::Prefix(_) => return None,
        }
    }
    (!parts.is_empty()).then(|| parts.join("/"))
}

/// Keeps the workspace file at `real` (a real path inside `workspace`) in
/// the database, replacing what was kept under its path before.
pub async fn keep(store: &PgStore, workspace: &Path, real: &str) -> Result<(), KeepError> {
    let key = key(workspace, real).ok_or_else(|| KeepError::Outside(real.to_string()))?;
    let path = real.to_string();
    let cap = MAX_MEDIA_BYTES as u64;
    let file = tokio::task::spawn_blocking(move || Outgoing::load(&path, "the database", cap, cap))
        .await
        .map_err(|e| KeepError::Task(e.to_string()))??;
    let media =
        StoredMedia { media_type: file.media_type, name: file.file_name, bytes: file.bytes };
    store.put_media(&key, &media).await?;
    Ok(())
}

/// The kept file `asked` names (its path in the workspace, as the web app
/// asks for it), if one was kept.
pub async fn find(
    store: &PgStore,
    workspace: &Path,
    asked: &str,
) -> Result<Option<StoredMedia>, StoreError> {
    match key(workspace, asked) {
        Some(key) => store.media(&key).await,
        None => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_are_kept_under_their_path_in_the_workspace() {
        let ws = tempfile::tempdir().unwrap();
        let root = ws.path().canonicalize().unwrap();
        let abs = root.join("charts").join("q3.png");
        assert_eq!(key(ws.path(), abs.to_str().unwrap()).as_deref(), Some("charts/q3.png"));
        assert_eq!(key(ws.path(), "charts/./q3.png").as_deref(), Some("charts/q3.png"));
        assert_eq!(key(ws.path(), "a/../q3.png").as_deref(), Some("q3.png"));
        assert_eq!(key(ws.path(), "../outside.png"), None);
        assert_eq!(key(ws.path(), "/etc/passwd"), None);
        assert_eq!(key(ws.path(), ""), None);
    }
}
