//! Workspace trust, as editors have it: the settings in a project's own
//! files that matter for security (permission mode, sandbox, allowed
//! folders, allow rules, providers, MCP servers, hooks, web access, gateway) are
//! ignored until the user trusts that project. Trust is remembered in
//! `$FERROCLAW_HOME/trust.json` (mode 0600) by project path and a SHA-256
//! of the project's files, so a changed file asks again.
//!
//! ```
//! let home = tempfile::tempdir().unwrap();
//! let ws = tempfile::tempdir().unwrap();
//! std::fs::write(ws.path().join(".mcp.json"), "{}").unwrap();
//! let store = ferroclaw_core::trust::TrustStore::new(home.path());
//! assert!(!store.is_trusted(ws.path()));
//! store.trust(ws.path()).unwrap();
//! assert!(store.is_trusted(ws.path()));
//! std::fs::write(ws.path().join(".mcp.json"), "{\"mcpServers\": {}}").unwrap();
//! assert!(!store.is_trusted(ws.path()), "a changed file asks again");
//! ```

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// The project files trust covers, relative to the workspace.
pub const PROJECT_FILES: &[&str] = &[
    ".agent/config.toml",
    ".agent/mcp.json",
    ".mcp.json",
    // Their hooks are commands (see `crate::hooks`).
    ".claude/settings.json",
    ".claude/settings.local.json",
];

/// The trust store's file name in `$FERROCLAW_HOME`.
pub const TRUST_FILE: &str = "trust.json";

/// A trust problem, said so the user can act.
#[derive(Debug, thiserror::Error)]
pub enum TrustError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot write {path}: {source}")]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} is damaged ({message}); delete it to forget every trusted project")]
    Damaged { path: PathBuf, message: String },
}

/// One trusted project.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TrustRecord {
    /// SHA-256 of the project files when they were trusted.
    pub hash: String,
    /// Unix seconds.
    pub trusted_at: u64,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct TrustFile {
    #[serde(default)]
    projects: BTreeMap<String, TrustRecord>,
}

/// The trust store of one `$FERROCLAW_HOME`.
#[derive(Debug, Clone)]
pub struct TrustStore {
    path: PathBuf,
}

impl TrustStore {
    /// The store in `home`.
    pub fn new(home: &Path) -> Self {
        Self { path: home.join(TRUST_FILE) }
    }

    /// True when `workspace` is trusted with its files as they are now, or
    /// when it has no project files at all (nothing to trust).
    pub fn is_trusted(&self, workspace: &Path) -> bool {
        let Some(hash) = project_hash(workspace) else { return true };
        self.read()
            .ok()
            .and_then(|f| f.projects.get(&key(workspace)).cloned())
            .is_some_and(|r| r.hash == hash)
    }

    /// True when the project was trusted once but its files changed since.
    pub fn changed_since_trusted(&self, workspace: &Path) -> bool {
        let known = self.read().ok().and_then(|f| f.projects.get(&key(workspace)).cloned());
        known.is_some() && !self.is_trusted(workspace)
    }

    /// Trusts `workspace` with its files as they are now.
    pub fn trust(&self, workspace: &Path) -> Result<TrustRecord, TrustError> {
        let mut file = self.read()?;
        let record = TrustRecord {
            hash: project_hash(workspace).unwrap_or_default(),
            trusted_at: crate::clock::unix_seconds(),
        };
        file.projects.insert(key(workspace), record.clone());
        self.write(&file)?;
        Ok(record)
    }

    /// Forgets `workspace`; false when it was not trusted.
    pub fn revoke(&self, workspace: &Path) -> Result<bool, TrustError> {
        let mut file = self.read()?;
        let removed = file.projects.remove(&key(workspace)).is_some();
        if removed {
            self.write(&file)?;
        }
        Ok(removed)
    }

    /// Every trusted project path with its record, by path.
    pub fn list(&self) -> Result<Vec<(String, TrustRecord)>, TrustError> {
        Ok(self.read()?.projects.into_iter().collect())
    }

    fn read(&self) -> Result<TrustFile, TrustError> {
        let text = match std::fs::read_to_string(&self.path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(TrustFile::default()),
            Err(source) => return Err(TrustError::Read { path: self.path.clone(), source }),
        };
        serde_json::from_str(&text)
            .map_err(|e| TrustError::Damaged { path: self.path.clone(), message: e.to_string() })
    }

    /// Atomic write (temp file + rename), readable by the owner only.
    fn write(&self, file: &TrustFile) -> Result<(), TrustError> {
        let err = |source| TrustError::Write { path: self.path.clone(), source };
        let dir = self.path.parent().unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir).map_err(err)?;
        let text = serde_json::to_string_pretty(file).unwrap_or_default();
        let mut tmp = tempfile::NamedTempFile::new_in(dir).map_err(err)?;
        tmp.write_all(text.as_bytes()).and_then(|()| tmp.as_file().sync_all()).map_err(err)?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o600))
                .map_err(err)?;
        }
        tmp.persist(&self.path).map_err(|e| err(e.error))?;
        Ok(())
    }
}

/// The store key of a workspace: its canonical path.
fn key(workspace: &Path) -> String {
    std::fs::canonicalize(workspace)
        .unwrap_or_else(|_| workspace.to_path_buf())
        .to_string_lossy()
        .into_owned()
}

/// SHA-256 over the project files that exist (name, length, content), or
/// `None` when there are none.
pub fn project_hash(workspace: &Path) -> Option<String> {
    let mut hasher = Sha256::new();
    let mut any = false;
    for name in PROJECT_FILES {
        let max = ferroclaw_tools::repo_file::MAX_REPO_FILE_BYTES;
        if let Ok(bytes) = ferroclaw_tools::repo_file::read_repo_file(&workspace.join(name), max) {
            any = true;
            hasher.update(name.as_bytes());
            hasher.update((bytes.len() as u64).to_le_bytes());
            hasher.update(&bytes);
        }
    }
    any.then(|| hasher.finalize().iter().map(|b| format!("{b:02x}")).collect())
}

/// The project's MCP server files that exist (`.mcp.json`, `.agent/mcp.json`).
pub fn project_mcp_files(workspace: &Path) -> Vec<PathBuf> {
    [".mcp.json", ".agent/mcp.json"]
        .iter()
        .map(|f| workspace.join(f))
        .filter(|p| p.exists())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_project_without_files_needs_no_trust() {
        let home = tempfile::tempdir().unwrap();
        let ws = tempfile::tempdir().unwrap();
        assert!(TrustStore::new(home.path()).is_trusted(ws.path()));
    }

    #[test]
    fn trust_is_kept_per_project_owner_only_and_can_be_revoked() {
        let home = tempfile::tempdir().unwrap();
        let ws = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(ws.path().join(".agent")).unwrap();
        std::fs::write(ws.path().join(".agent/config.toml"), "permission_mode = \"bypass\"\n")
            .unwrap();
        let store = TrustStore::new(home.path());
        assert!(!store.is_trusted(ws.path()));
        store.trust(ws.path()).unwrap();
        assert!(store.is_trusted(ws.path()));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode =
                std::fs::metadata(home.path().join(TRUST_FILE)).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        assert_eq!(store.list().unwrap().len(), 1);
        assert!(store.revoke(ws.path()).unwrap());
        assert!(!store.is_trusted(ws.path()));
        assert!(!store.revoke(ws.path()).unwrap());
    }
}
