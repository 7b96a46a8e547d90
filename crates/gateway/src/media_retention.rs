//! How long media is kept: files people sent, saved in the workspace's
//! `inbox/` (every gateway, files or database), and the files the agent
//! sent, kept in the database's `media` table (gateways sharing one), are
//! deleted once older than `[gateway] media_keep_days` (default
//! [`DEFAULT_MEDIA_KEEP_DAYS`]; `0` keeps them for ever). Pictures people
//! send stay in their conversation, which is never pruned.
//!
//! The inbox is pruned through a handle on the folder opened without
//! following links, and each file is looked at and removed relative to it:
//! an `inbox` the agent replaced with a link to somewhere else is left
//! alone, and a swap while the pruner works cannot point it elsewhere.

use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::time::{Duration, SystemTime};

use crate::media::INBOX;

/// Days media is kept unless `[gateway] media_keep_days` says otherwise: a
/// month, so that last week's pictures still show in history.
pub const DEFAULT_MEDIA_KEEP_DAYS: f64 = 30.0;

/// Deletes the regular files directly in `workspace/inbox/` last changed
/// longer than `keep` ago; how many went. No inbox (or one that is a link)
/// deletes nothing; folders and links inside it are left alone.
pub fn prune_inbox(workspace: &Path, keep: Duration) -> std::io::Result<usize> {
    let dir = workspace.join(INBOX);
    let Some(cut) = SystemTime::now().checked_sub(keep) else { return Ok(0) };
    let cut = cut.duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64);
    let path = CString::new(dir.as_os_str().as_bytes()).map_err(std::io::Error::other)?;
    let flags = libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC;
    // SAFETY: `path` is a valid NUL-terminated string.
    let fd = unsafe { libc::open(path.as_ptr(), flags) };
    if fd < 0 {
        let e = std::io::Error::last_os_error();
        return match e.raw_os_error() {
            // Missing, or a link (O_NOFOLLOW) or a file where the folder should be.
            Some(libc::ENOENT | libc::ELOOP | libc::ENOTDIR) => Ok(0),
            _ => Err(e),
        };
    }
    // SAFETY: `fd` was just opened and is owned by nothing else.
    let folder = unsafe { OwnedFd::from_raw_fd(fd) };
    let mut gone = 0;
    // The names come from the opened folder itself.
    for entry in std::fs::read_dir(format!("/proc/self/fd/{}", folder.as_raw_fd()))? {
        let Ok(entry) = entry else { continue };
        let Ok(name) = CString::new(entry.file_name().as_bytes()) else { continue };
        // SAFETY: a zeroed `stat` is a valid value for fstatat to fill.
        let mut stat: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: the folder's fd is open, `name` is NUL-terminated, `stat` is writable.
        let found = unsafe {
            libc::fstatat(
                folder.as_raw_fd(),
                name.as_ptr(),
                &raw mut stat,
                libc::AT_SYMLINK_NOFOLLOW,
            )
        };
        if found != 0 || stat.st_mode & libc::S_IFMT != libc::S_IFREG || stat.st_mtime >= cut {
            continue;
        }
        // SAFETY: as above; 0 removes a file, never a folder.
        if unsafe { libc::unlinkat(folder.as_raw_fd(), name.as_ptr(), 0) } == 0 {
            gone += 1;
        }
    }
    Ok(gone)
}

#[cfg(test)]
mod tests {
    use super::*;

    const DAY: Duration = Duration::from_secs(86_400);

    fn aged(path: &Path, days: u64) {
        let file = std::fs::File::options().write(true).open(path).unwrap();
        file.set_modified(SystemTime::now() - DAY * days as u32).unwrap();
    }

    #[test]
    fn files_in_the_inbox_older_than_the_keep_time_go_and_the_rest_stays() {
        let ws = tempfile::tempdir().unwrap();
        let inbox = ws.path().join(INBOX);
        std::fs::create_dir(&inbox).unwrap();
        for name in ["old.pdf", "new.pdf"] {
            std::fs::write(inbox.join(name), b"%PDF").unwrap();
        }
        aged(&inbox.join("old.pdf"), 40);
        std::fs::create_dir(inbox.join("old-folder")).unwrap();
        // A file the user keeps outside the inbox is not the pruner's.
        std::fs::write(ws.path().join("notes.txt"), b"mine").unwrap();
        aged(&ws.path().join("notes.txt"), 400);
        assert_eq!(prune_inbox(ws.path(), DAY * 30).unwrap(), 1);
        assert!(!inbox.join("old.pdf").exists());
        assert!(inbox.join("new.pdf").exists());
        assert!(inbox.join("old-folder").is_dir());
        assert!(ws.path().join("notes.txt").exists());
        assert_eq!(prune_inbox(ws.path(), DAY * 30).unwrap(), 0);
    }

    #[test]
    fn an_inbox_that_is_a_link_elsewhere_or_missing_prunes_nothing() {
        let ws = tempfile::tempdir().unwrap();
        assert_eq!(prune_inbox(ws.path(), Duration::ZERO).unwrap(), 0, "no inbox");
        let elsewhere = tempfile::tempdir().unwrap();
        std::fs::write(elsewhere.path().join("keep.txt"), b"keep").unwrap();
        aged(&elsewhere.path().join("keep.txt"), 400);
        std::os::unix::fs::symlink(elsewhere.path(), ws.path().join(INBOX)).unwrap();
        assert_eq!(prune_inbox(ws.path(), Duration::ZERO).unwrap(), 0);
        assert!(elsewhere.path().join("keep.txt").exists());
        // Inside a real inbox, a link to an old file elsewhere is left too.
        std::fs::remove_file(ws.path().join(INBOX)).unwrap();
        std::fs::create_dir(ws.path().join(INBOX)).unwrap();
        let link = ws.path().join(INBOX).join("link.txt");
        std::os::unix::fs::symlink(elsewhere.path().join("keep.txt"), &link).unwrap();
        assert_eq!(prune_inbox(ws.path(), Duration::ZERO).unwrap(), 0);
        assert!(elsewhere.path().join("keep.txt").exists());
    }
}
