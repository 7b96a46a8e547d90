//! Reading the small files a repository configures ferroclaw with
//! (`.agent/config.toml`, `.mcp.json`, `.claude/settings.json`, `AGENTS.md`,
//! rules, commands, skills) without letting a hostile checkout hang or
//! exhaust the process.
//!
//! Git stores symbolic links, so a cloned repository can make `AGENTS.md`
//! point at `/dev/zero` (read forever: memory grows until the process is
//! killed) or at a FIFO (opening blocks forever). These files are read
//! before the project is trusted, so [`read_repo_file`] opens without
//! blocking, takes only regular files (see [`crate::own_file`]) and stops
//! at a size cap.

use std::path::Path;

/// The most bytes read from one such file: far above any real config,
/// instructions file or skill, far below what hurts.
pub const MAX_REPO_FILE_BYTES: u64 = 4 * 1024 * 1024;

/// The bytes of the file at `path` (links followed): an error of kind
/// `NotFound` when missing, `InvalidInput` when it is not a regular file
/// (a device, FIFO, socket or folder) or is over `max` bytes.
pub fn read_repo_file(path: &Path, max: u64) -> std::io::Result<Vec<u8>> {
    crate::own_file::read(path, max)
}

/// [`read_repo_file`] as UTF-8 text (`InvalidData` when it is not).
pub fn read_repo_text(path: &Path, max: u64) -> std::io::Result<String> {
    crate::own_file::read_text(path, max)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_regular_file_is_read_and_a_missing_one_is_not_found() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.md"), "hello").unwrap();
        assert_eq!(read_repo_text(&dir.path().join("a.md"), 100).unwrap(), "hello");
        let missing = read_repo_file(&dir.path().join("b.md"), 100).unwrap_err();
        assert_eq!(missing.kind(), std::io::ErrorKind::NotFound);
    }

    #[test]
    fn a_file_over_the_cap_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("big"), "x".repeat(101)).unwrap();
        let err = read_repo_file(&dir.path().join("big"), 100).unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
        let said = err.to_string();
        assert!(said.contains("big is 101 bytes (101 bytes), over the 100 bytes cap"), "{said}");
    }

    #[cfg(unix)]
    #[test]
    fn links_to_devices_and_fifos_are_refused_without_reading_or_blocking() {
        let dir = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink("/dev/zero", dir.path().join("AGENTS.md")).unwrap();
        let err = read_repo_file(&dir.path().join("AGENTS.md"), MAX_REPO_FILE_BYTES).unwrap_err();
        assert!(err.to_string().contains("not a regular file"), "{err}");
        let fifo = dir.path().join("pipe");
        assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
        let err = read_repo_file(&fifo, MAX_REPO_FILE_BYTES).unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
    }
}
