//! Scratch folders for sandbox tests.

use std::path::Path;

/// A new empty folder outside `/tmp` and `/var/tmp` (which every sandboxed
/// command may write), wherever the repository is checked out: in
/// `/dev/shm` or, failing that, the user's home. `None` when there is no
/// such place (the test should then say it skipped).
pub fn dir_outside_temp() -> Option<tempfile::TempDir> {
    let outside_temp = |p: &Path| !p.starts_with("/tmp") && !p.starts_with("/var/tmp");
    let candidates = [Some(std::path::PathBuf::from("/dev/shm")), std::env::home_dir()];
    candidates
        .into_iter()
        .flatten()
        .filter(|dir| outside_temp(dir) && dir.is_dir())
        .find_map(|dir| tempfile::Builder::new().prefix("ferroclaw-test-").tempdir_in(dir).ok())
}
