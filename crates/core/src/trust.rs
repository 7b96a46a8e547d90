//! Workspace trust, as editors have it: the settings in a project's own
//! files that matter for security (permission mode, sandbox, allowed
//! folders, allow rules, providers, MCP servers, hooks, web access, gateway)
//! and what its commands and agent types grant (`allowed-tools`, `model`,
//! replacing a built-in agent type) are ignored until the user trusts that
//! project. Trust is remembered in `$FERROCLAW_HOME/trust.json` (mode 0600)
//! by project path and a SHA-256 of every file that grants or runs
//! ([`covered_files`]), so a changed file asks again. A project with none of
//! them has nothing to trust, which is not the same as trusted: a command
//! file that appears later grants nothing until the user says so.
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

mod covered;

pub use covered::{
    MAX_COVERED_FILES, PROJECT_FILES, PROJECT_FOLDERS, SKILL_FOLDERS, covered_files,
};
use ferroclaw_tools::own_file::{self, MAX_STATE_FILE_BYTES};

/// Most bytes of covered files read for one hash (a hostile checkout can
/// link a command folder to a large tree); past it files count by name and
/// size. Far above any real project's commands, agents and settings.
pub const MAX_HASHED_BYTES: u64 = 32 * 1024 * 1024;

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

/// Where a project stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TrustState {
    /// None of the files trust covers exist: nothing is granted, nothing to ask.
    NothingToTrust,
    /// The user trusted the project with its files as they are now.
    Trusted,
    /// Never trusted.
    Untrusted,
    /// Trusted once, but a covered file changed since (or one was added).
    ChangedSinceTrusted,
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

    /// Where `workspace` stands with its files as they are now.
    pub fn state(&self, workspace: &Path) -> TrustState {
        let Some(hash) = project_hash(workspace) else { return TrustState::NothingToTrust };
        let known = self.read().ok().and_then(|f| f.projects.get(&key(workspace)).cloned());
        match known {
            Some(r) if r.hash == hash => TrustState::Trusted,
            Some(_) => TrustState::ChangedSinceTrusted,
            None => TrustState::Untrusted,
        }
    }

    /// True when `workspace` is trusted with its files as they are now
    /// (false when it has nothing to trust: see [`TrustState::NothingToTrust`]).
    pub fn is_trusted(&self, workspace: &Path) -> bool {
        self.state(workspace) == TrustState::Trusted
    }

    /// True when the project was trusted once but its files changed since.
    pub fn changed_since_trusted(&self, workspace: &Path) -> bool {
        self.state(workspace) == TrustState::ChangedSinceTrusted
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
        let max = MAX_STATE_FILE_BYTES;
        let text = match own_file::read_text(&self.path, max) {
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

/// SHA-256 over the covered files that exist (name, length, content; a file
/// that cannot be read counts by its name), or `None` when there are none.
pub fn project_hash(workspace: &Path) -> Option<String> {
    let files = covered_files(workspace);
    if files.is_empty() {
        return None;
    }
    let mut hasher = Sha256::new();
    hasher.update((files.len() as u64).to_le_bytes());
    let mut budget = MAX_HASHED_BYTES;
    for rel in &files {
        let max = ferroclaw_tools::repo_file::MAX_REPO_FILE_BYTES.min(budget);
        let name = rel.to_string_lossy();
        hasher.update((name.len() as u64).to_le_bytes());
        hasher.update(name.as_bytes());
        match ferroclaw_tools::repo_file::read_repo_file(&workspace.join(rel), max) {
            Ok(bytes) => {
                budget -= bytes.len() as u64;
                hasher.update((bytes.len() as u64).to_le_bytes());
                hasher.update(&bytes);
            }
            // Unreadable, or past the budget: counted by name and size.
            Err(_) => {
                let len = std::fs::metadata(workspace.join(rel)).map_or(u64::MAX, |m| m.len());
                hasher.update(u64::MAX.to_le_bytes());
                hasher.update(len.to_le_bytes());
            }
        }
    }
    Some(hasher.finalize().iter().map(|b| format!("{b:02x}")).collect())
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
    fn a_project_without_files_has_nothing_to_trust_which_is_not_trusted() {
        let home = tempfile::tempdir().unwrap();
        let ws = tempfile::tempdir().unwrap();
        let store = TrustStore::new(home.path());
        assert_eq!(store.state(ws.path()), TrustState::NothingToTrust);
        assert!(!store.is_trusted(ws.path()));
    }

    #[test]
    fn a_command_file_alone_needs_trust_and_a_changed_one_asks_again() {
        let home = tempfile::tempdir().unwrap();
        let ws = tempfile::tempdir().unwrap();
        let cmd = ws.path().join(".claude/commands/x.md");
        std::fs::create_dir_all(cmd.parent().unwrap()).unwrap();
        std::fs::write(&cmd, "---\nallowed-tools: Bash\n---\nclean up\n").unwrap();
        let store = TrustStore::new(home.path());
        assert_eq!(store.state(ws.path()), TrustState::Untrusted);
        store.trust(ws.path()).unwrap();
        assert!(store.is_trusted(ws.path()));
        std::fs::write(&cmd, "---\nallowed-tools: Bash\n---\nrm -rf ~\n").unwrap();
        assert_eq!(store.state(ws.path()), TrustState::ChangedSinceTrusted);
        store.trust(ws.path()).unwrap();
        std::fs::create_dir_all(ws.path().join(".agent/agents")).unwrap();
        std::fs::write(ws.path().join(".agent/agents/explore.md"), "x").unwrap();
        assert!(!store.is_trusted(ws.path()), "a new agent type asks again");
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
