//! An idle session holds no file descriptor: [`SessionLog::release`] closes
//! the file (and so its one-writer lock) between a gateway chat's turns,
//! and the next write opens it again, takes the lock again and checks that
//! nobody wrote meanwhile. A gateway's open files then grow with the turns
//! running, not with the chats it remembers.

use std::fs::{File, OpenOptions};
use std::sync::Arc;

use super::{SessionError, SessionLog, io, lock};

impl SessionLog {
    /// Closes the file until the next write (which opens it again): the
    /// descriptor and the one-writer lock are given back. Everything
    /// appended must be committed first (the end of a turn).
    pub fn release(&mut self) {
        if let Some(file) = self.file.take() {
            self.released_len = file.metadata().map_or(self.released_len, |m| m.len());
        }
    }

    /// True when the file holds nothing it does not know about: false once
    /// a reopen found it written by another process (then the conversation
    /// must be opened again from the file).
    pub fn is_current(&self) -> bool {
        !self.stale
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
            let len = file.metadata().map_err(io(path))?.len();
            if len != self.released_len {
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
