//! Files under `$FERROCLAW_HOME` are private: folders 0700, files 0600,
//! whatever the umask. Sessions, `recall.db`, pairing and trust state, logs
//! and the model store hold conversations and secrets; other users of the
//! machine must not read them.
//!
//! ```
//! use ferroclaw_core::private_files;
//! let home = tempfile::tempdir().unwrap();
//! let dir = home.path().join("sessions/p");
//! private_files::create_dir_all(&dir).unwrap();
//! let _file = private_files::options().create(true).append(true).open(dir.join("s.jsonl")).unwrap();
//! ```

use std::fs::OpenOptions;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

/// Mode of folders ferroclaw creates under its home.
pub const DIR_MODE: u32 = 0o700;
/// Mode of files ferroclaw creates under its home.
pub const FILE_MODE: u32 = 0o600;

/// `OpenOptions` whose created files get mode 0600.
pub fn options() -> OpenOptions {
    let mut options = OpenOptions::new();
    options.mode(FILE_MODE);
    options
}

/// Creates `dir` and its missing parents with mode 0700. When `dir` lies
/// in a ferroclaw home not made yet, the home is made first by
/// [`create_home`], so the folders above it are not made private.
pub fn create_dir_all(dir: &Path) -> std::io::Result<()> {
    let home = crate::Config::default_home();
    if dir.starts_with(&home) && !home.is_dir() {
        create_home(&home)?;
    }
    std::fs::DirBuilder::new().recursive(true).mode(DIR_MODE).create(dir)
}

/// Creates the home folder 0700; its missing parents (`FERROCLAW_HOME=
/// ~/a/b/home`) get the umask's mode, as `mkdir -p` gives them: they are
/// the user's folders, not ferroclaw's.
pub fn create_home(home: &Path) -> std::io::Result<()> {
    if let Some(parent) = home.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)?;
    }
    std::fs::DirBuilder::new().recursive(true).mode(DIR_MODE).create(home)
}

/// Writes a whole file with mode 0600 (tightening an existing file's mode).
pub fn write(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let mut file = options().create(true).write(true).truncate(true).open(path)?;
    file.set_permissions(std::fs::Permissions::from_mode(FILE_MODE))?;
    file.write_all(bytes)
}

/// Sets `path`'s mode to 0600 (files) or 0700 (folders) when it is looser.
pub fn tighten(path: &Path) -> std::io::Result<()> {
    let meta = std::fs::symlink_metadata(path)?;
    let (mode, wanted) =
        (meta.permissions().mode() & 0o777, if meta.is_dir() { DIR_MODE } else { FILE_MODE });
    if meta.file_type().is_symlink() || mode & !wanted == 0 {
        return Ok(());
    }
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode & wanted))
}

/// Creates the home folder 0700, or tightens an existing one: with the home
/// at 0700, nothing inside is reachable by other users, whatever modes older
/// versions gave the files in it.
pub fn secure_home(home: &Path) -> std::io::Result<()> {
    create_home(home)?;
    tighten(home)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mode(path: &Path) -> u32 {
        std::fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn a_new_home_is_private_but_the_folders_made_above_it_are_not() {
        let root = tempfile::tempdir().unwrap();
        let plain = root.path().join("plain");
        std::fs::create_dir(&plain).unwrap();
        let home = root.path().join("a/b/home");
        secure_home(&home).unwrap();
        assert_eq!(mode(&home), 0o700);
        assert_eq!(mode(&root.path().join("a")), mode(&plain), "a parent gets the umask's mode");
        assert_eq!(mode(&root.path().join("a/b")), mode(&plain));
    }

    #[test]
    fn created_folders_and_files_are_private() {
        let home = tempfile::tempdir().unwrap();
        let dir = home.path().join("a/b");
        create_dir_all(&dir).unwrap();
        assert_eq!(mode(&home.path().join("a")), 0o700);
        assert_eq!(mode(&dir), 0o700);
        options().create(true).append(true).open(dir.join("f")).unwrap();
        assert_eq!(mode(&dir.join("f")), 0o600);
        write(&dir.join("g"), b"x").unwrap();
        assert_eq!(mode(&dir.join("g")), 0o600);
    }

    #[test]
    fn an_open_home_is_tightened() {
        let root = tempfile::tempdir().unwrap();
        let home = root.path().join("home");
        std::fs::create_dir(&home).unwrap();
        std::fs::set_permissions(&home, std::fs::Permissions::from_mode(0o755)).unwrap();
        secure_home(&home).unwrap();
        assert_eq!(mode(&home), 0o700);
    }
}
