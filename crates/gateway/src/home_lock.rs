//! `$FERROCLAW_HOME/gateway/lock`: one gateway per home on its files.
//!
//! A gateway on a home's files is the only writer of its chat sessions, turn
//! journal, pairing lists and cron jobs; a second one on the same home would
//! "resume" the first one's live turns and fight over its chats' session
//! files. So a gateway holds an exclusive `flock` on this file while it
//! runs, and writes its pid and web port into it; a second one is refused
//! with both. Gateways sharing a PostgreSQL database keep their state there
//! (a home's session files are working copies, each chat leased to one
//! process), so several may run on one home: they hold the lock shared,
//! which still keeps a gateway on files off that home, and them off a home
//! a gateway on files holds. The kernel drops the lock with the process,
//! however it ends: a `kill -9` leaves nothing stale behind.

use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use crate::files::{FILE_MODE, create_private_dir};

/// How a gateway uses its home.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HomeUse {
    /// On the home's files: the only gateway there.
    Files,
    /// Sharing a PostgreSQL database: other such gateways may use the home too.
    SharedDatabase,
}

/// Why the home could not be locked.
#[derive(Debug, thiserror::Error)]
pub enum HomeLockError {
    #[error(
        "another ferroclaw gateway ({holder}) runs on {home}; stop it first, or give this \
         one a home of its own (FERROCLAW_HOME=...)"
    )]
    Held { home: PathBuf, holder: String },
    #[error(
        "gateways sharing a database (FERROCLAW_DATABASE_URL or [gateway] store) run on {home}, \
         and a gateway on files would take their chats' working copies for its own; stop \
         them, or give this one a home of its own (FERROCLAW_HOME=...)"
    )]
    HeldByDatabaseGateways { home: PathBuf },
    #[error(
        "a ferroclaw gateway on this home's files ({holder}) runs on {home}; a gateway \
         sharing a database needs a home no gateway on files uses: stop it, or set \
         FERROCLAW_HOME"
    )]
    HeldByFilesGateway { home: PathBuf, holder: String },
    #[error("cannot lock {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// The lock, held until dropped (or the process ends).
#[derive(Debug)]
pub struct HomeLock {
    file: File,
    path: PathBuf,
    exclusive: bool,
}

impl HomeLock {
    /// Locks `home` for a gateway used as `how`, writing this process's pid
    /// and web port (`None`: no web chat) into the lock file when it is the
    /// only holder.
    pub fn acquire(
        home: &Path,
        how: HomeUse,
        port: Option<u16>,
    ) -> Result<HomeLock, HomeLockError> {
        let dir = home.join("gateway");
        let path = dir.join("lock");
        let io = |source| HomeLockError::Io { path: path.clone(), source };
        create_private_dir(&dir).map_err(io)?;
        // Opened without truncating: the holder's pid and port stay readable.
        let mut options = OpenOptions::new();
        options.read(true).write(true).create(true).truncate(false).mode(FILE_MODE);
        let file = ferroclaw_tools::own_file::open_with(&path, options).map_err(io)?;
        let exclusive = how == HomeUse::Files;
        let fd = file.as_raw_fd();
        // SAFETY: flock only reads the descriptor, which `file` keeps open.
        let flock = |operation| unsafe { libc::flock(fd, operation | libc::LOCK_NB) } == 0;
        if !flock(if exclusive { libc::LOCK_EX } else { libc::LOCK_SH }) {
            let e = std::io::Error::last_os_error();
            if e.raw_os_error() != Some(libc::EWOULDBLOCK) {
                return Err(io(e));
            }
            // Held shared: by gateways sharing a database (let go at once).
            let shared = exclusive && flock(libc::LOCK_SH) && flock(libc::LOCK_UN);
            let home = home.to_path_buf();
            let holder = holder(&file).unwrap_or_else(|| "pid unknown".into());
            return Err(match how {
                HomeUse::Files if shared => HomeLockError::HeldByDatabaseGateways { home },
                HomeUse::Files => HomeLockError::Held { home, holder },
                HomeUse::SharedDatabase => HomeLockError::HeldByFilesGateway { home, holder },
            });
        }
        let lock = HomeLock { file, path: path.clone(), exclusive };
        match exclusive {
            true => lock.set_port(port).map_err(io)?,
            // Names no one: a gateway on files that held it before is gone.
            false => lock.file.set_len(0).map_err(io)?,
        }
        Ok(lock)
    }

    /// Records the web port (once bound, when it was chosen by the system).
    pub fn set_port(&self, port: Option<u16>) -> std::io::Result<()> {
        if !self.exclusive {
            return Ok(());
        }
        let port = port.map_or_else(|| "-".to_string(), |p| p.to_string());
        self.file.set_len(0)?;
        let text = format!("pid {} port {port}\n", std::process::id());
        self.file.write_all_at(text.as_bytes(), 0)
    }

    /// The lock file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// The holder a lock file names, in words (`pid 123, port 18790`).
fn holder(file: &File) -> Option<String> {
    let mut bytes = [0u8; 128];
    let n = file.read_at(&mut bytes, 0).ok()?;
    let text = String::from_utf8_lossy(&bytes[..n]);
    let mut words = text.split_whitespace();
    let (Some("pid"), Some(pid), Some("port"), Some(port)) =
        (words.next(), words.next(), words.next(), words.next())
    else {
        return None;
    };
    Some(match port {
        "-" => format!("pid {pid}, no web chat"),
        port => format!("pid {pid}, port {port}"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_lock_on_files_is_refused_naming_the_first_pid_and_port() {
        let home = tempfile::tempdir().unwrap();
        let first = HomeLock::acquire(home.path(), HomeUse::Files, Some(18790)).unwrap();
        let err = HomeLock::acquire(home.path(), HomeUse::Files, Some(18791)).unwrap_err();
        let pid = std::process::id();
        assert!(err.to_string().contains(&format!("(pid {pid}, port 18790)")), "{err}");
        let err = HomeLock::acquire(home.path(), HomeUse::SharedDatabase, None).unwrap_err();
        assert!(matches!(err, HomeLockError::HeldByFilesGateway { .. }), "{err}");
        drop(first);
        HomeLock::acquire(home.path(), HomeUse::Files, None).unwrap();
    }

    #[test]
    fn gateways_sharing_a_database_share_the_home_and_keep_one_on_files_off_it() {
        let home = tempfile::tempdir().unwrap();
        let a = HomeLock::acquire(home.path(), HomeUse::SharedDatabase, Some(1)).unwrap();
        let b = HomeLock::acquire(home.path(), HomeUse::SharedDatabase, Some(2)).unwrap();
        let err = HomeLock::acquire(home.path(), HomeUse::Files, Some(3)).unwrap_err();
        assert!(matches!(err, HomeLockError::HeldByDatabaseGateways { .. }), "{err}");
        drop((a, b));
        HomeLock::acquire(home.path(), HomeUse::Files, Some(3)).unwrap();
    }

    #[test]
    fn a_lock_file_that_is_a_fifo_is_refused_not_waited_on() {
        let home = tempfile::tempdir().unwrap();
        let lock = home.path().join("gateway/lock");
        std::fs::create_dir_all(lock.parent().unwrap()).unwrap();
        assert!(std::process::Command::new("mkfifo").arg(&lock).status().unwrap().success());
        let err = HomeLock::acquire(home.path(), HomeUse::Files, None).unwrap_err();
        assert!(err.to_string().contains("is a FIFO (named pipe), not a regular file"), "{err}");
    }
}
