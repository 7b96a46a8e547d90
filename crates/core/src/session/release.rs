//! An idle session holds no file descriptor: [`SessionLog::release`] closes
//! the file (and so its one-writer lock) between a gateway chat's turns,
//! and the next write opens it again, takes the lock again and checks that
//! nobody wrote meanwhile. A gateway's open files then grow with the turns
//! running, not with the chats it remembers.

use std::fs::{File, Metadata, OpenOptions};
use std::os::unix::fs::MetadataExt;
use std::sync::Arc;

use super::{SessionError, SessionLog, io, lock};

/// What a released file was: a file with the same stamp holds what the
/// log last wrote. Length alone would not do: a file cut back and written
/// to the same length by another process (a gateway bringing its copy up
/// to the database's) is another file.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Stamp {
    pub(super) len: u64,
    dev: u64,
    ino: u64,
    mtime_ns: i128,
    ctime_ns: i128,
}

impl Stamp {
    fn of(meta: &Metadata) -> Self {
        let ns = |secs: i64, nanos: i64| i128::from(secs) * 1_000_000_000 + i128::from(nanos);
        Stamp {
            len: meta.len(),
            dev: meta.dev(),
            ino: meta.ino(),
            mtime_ns: ns(meta.mtime(), meta.mtime_nsec()),
            ctime_ns: ns(meta.ctime(), meta.ctime_nsec()),
        }
    }
}

impl SessionLog {
    /// Closes the file until the next write (which opens it again): the
    /// descriptor and the one-writer lock are given back. Everything
    /// appended must be committed first (the end of a turn).
    pub fn release(&mut self) {
        if let Some(file) = self.file.take() {
            match file.metadata() {
                Ok(meta) => self.released = Stamp::of(&meta),
                // Unknown now: the next reopen finds it changed.
                Err(_) => self.released = Stamp { len: u64::MAX, ..Stamp::default() },
            }
        }
    }

    /// True when the file holds nothing it does not know about: false once
    /// a reopen found it written by another process (then the conversation
    /// must be opened again from the file).
    pub fn is_current(&self) -> bool {
        !self.stale
    }

    /// True when the released file is as this log left it (or the file is
    /// open): what a gateway asks before a turn of a conversation it keeps
    /// between turns, whose file another process may have written since.
    pub fn unchanged_on_disk(&self) -> bool {
        if self.stale {
            return false;
        }
        if self.file.is_some() {
            return true;
        }
        std::fs::metadata(&self.path).is_ok_and(|meta| Stamp::of(&meta) == self.released)
    }

    /// The open file, opened again (locked, checked) after a release.
    pub(super) fn handle(&mut self) -> Result<&Arc<File>, SessionError> {
        if self.stale {
            return Err(self.changed());
        }
        if self.file.is_none() {
            let path = &self.path;
            let file = OpenOptions::new().read(true).append(true).open(path).map_err(io(path))?;
            lock(&file, path, &self.meta.id)?;
            let meta = file.metadata().map_err(io(path))?;
            if Stamp::of(&meta) != self.released {
                self.stale = true;
                return Err(self.changed());
            }
            self.file = Some(Arc::new(file));
        }
        match &self.file {
            Some(file) => Ok(file),
            None => Err(self.changed()),
        }
    }

    fn changed(&self) -> SessionError {
        SessionError::Changed { id: self.meta.id.clone(), path: self.path.clone() }
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use ferroclaw_protocol::Message;

    use crate::session::{SessionLog, SessionStore};

    #[test]
    fn a_released_session_holds_no_descriptor_and_writes_on_after_reopening() {
        let dir = tempfile::tempdir().unwrap();
        let store = SessionStore::new(dir.path());
        let mut log = store.create(Path::new("/p"), "m/m").unwrap();
        log.append_message(&Message::user("one")).unwrap();
        log.sync().unwrap();
        let fds = || std::fs::read_dir("/proc/self/fd").unwrap().count();
        let before = fds();
        log.release();
        assert_eq!(fds(), before - 1, "the file is closed");
        // Released, the lock is free: another process could resume it.
        drop(SessionLog::resume(log.path(), 1 << 20).unwrap());
        log.append_message(&Message::assistant("two")).unwrap();
        log.sync().unwrap();
        let resumed = SessionLog::resume(log.path(), 1 << 20);
        assert!(resumed.is_err(), "reopened, the lock is held again");
        drop(log);
        let again = SessionLog::resume(&store.latest(Path::new("/p")).unwrap(), 1 << 20).unwrap();
        assert_eq!(again.messages.len(), 2);
    }

    #[test]
    fn a_released_file_cut_back_and_written_to_the_same_length_is_another_file() {
        // A gateway bringing its copy up to the database's cuts what its own
        // unstored attempt wrote and appends another process's turn: the
        // length may come out the same, the conversation is not.
        let dir = tempfile::tempdir().unwrap();
        let store = SessionStore::new(dir.path());
        let mut log = store.create(Path::new("/p"), "m/m").unwrap();
        log.append_message(&Message::user("one")).unwrap();
        log.append_message(&Message::assistant("mine")).unwrap();
        log.sync().unwrap();
        log.release();
        assert!(log.unchanged_on_disk());
        let text = std::fs::read_to_string(log.path()).unwrap();
        let replaced = text.replace("\"mine\"", "\"edge\"");
        assert_eq!(replaced.len(), text.len());
        std::thread::sleep(std::time::Duration::from_millis(20));
        std::fs::write(log.path(), replaced).unwrap();
        assert!(!log.unchanged_on_disk(), "same length, other lines");
        let err = log.append_message(&Message::user("two")).unwrap_err();
        assert!(err.to_string().contains("written by another ferroclaw process"), "{err}");
        assert!(!std::fs::read_to_string(log.path()).unwrap().contains("two"));
    }

    #[test]
    fn a_session_written_elsewhere_while_released_is_not_written_over() {
        let dir = tempfile::tempdir().unwrap();
        let store = SessionStore::new(dir.path());
        let mut log = store.create(Path::new("/p"), "m/m").unwrap();
        log.append_message(&Message::user("one")).unwrap();
        log.release();
        let mut other = SessionLog::resume(log.path(), 1 << 20).unwrap().log;
        other.append_message(&Message::user("from the terminal")).unwrap();
        drop(other);
        let err = log.append_message(&Message::assistant("stale")).unwrap_err();
        assert!(err.to_string().contains("written by another ferroclaw process"), "{err}");
        assert!(!log.is_current());
        let text = std::fs::read_to_string(log.path()).unwrap();
        assert!(!text.contains("stale"));
    }
}
