//! The temp files of atomic writes: their names, and the sweep of the ones
//! a killed process left behind.
//!
//! An atomic write ([`Beneath::write_atomic`](crate::beneath::Beneath))
//! writes `.ferroclaw-write-PID-N-NANOS` beside its target, then renames it
//! over the target. A process killed (`kill -9`, power loss) between the two
//! leaves the temp file there. The next write into the same folder deletes
//! such leftovers: only names of exactly that pattern, only regular files
//! (never a link or folder by that name), and only those untouched for
//! [`STALE_AFTER`], so another process's write in flight (written and
//! renamed within moments) is never taken from under it.

use std::ffi::{CStr, CString};
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::time::{Duration, SystemTime};

/// What every temp file's name starts with.
const PREFIX: &str = ".ferroclaw-write-";

/// How long a temp file must have been untouched before a write sweeps it.
/// A write in flight touches its temp file within moments of creating it
/// (the bytes are in memory; the longest step is one fsync), so ten minutes
/// is far beyond any live write, and short enough that leftovers go the
/// same session.
pub(crate) const STALE_AFTER: Duration = Duration::from_secs(10 * 60);

/// The name of a new temp file: `.ferroclaw-write-PID-N-NANOS`.
pub(crate) fn name(pid: u32, n: u64, nanos: u32) -> String {
    format!("{PREFIX}{pid}-{n}-{nanos}")
}

/// True for exactly the names [`name`] makes: the prefix, then three runs
/// of digits joined by `-`.
pub(crate) fn is_temp_name(name: &[u8]) -> bool {
    let Some(rest) = name.strip_prefix(PREFIX.as_bytes()) else { return false };
    let parts: Vec<&[u8]> = rest.split(|&b| b == b'-').collect();
    parts.len() == 3 && parts.iter().all(|p| !p.is_empty() && p.iter().all(u8::is_ascii_digit))
}

/// Deletes the stale temp files of atomic writes in `dir` (see the module
/// docs); returns how many went. Best effort: what cannot be listed or
/// deleted stays, and the write that called this has succeeded anyway.
pub(crate) fn sweep_stale(dir: BorrowedFd<'_>, now: SystemTime) -> usize {
    let names = match temp_names(dir) {
        Ok(names) => names,
        Err(e) => {
            tracing::debug!("atomic write leftovers not looked for: {e}");
            return 0;
        }
    };
    let mut swept = 0;
    for name in names {
        let Some(modified) = regular_file_mtime(dir, &name) else { continue };
        if now.duration_since(modified).is_ok_and(|age| age >= STALE_AFTER) {
            // SAFETY: valid descriptor and NUL-terminated name.
            if unsafe { libc::unlinkat(dir.as_raw_fd(), name.as_ptr(), 0) } == 0 {
                swept += 1;
            }
        }
    }
    if swept > 0 {
        tracing::info!(files = swept, "deleted temp files an interrupted write left behind");
    }
    swept
}

/// The entries of `dir` whose names are temp files' names.
fn temp_names(dir: BorrowedFd<'_>) -> std::io::Result<Vec<CString>> {
    // A descriptor of its own (its own read position) for the listing.
    // SAFETY: valid descriptor and NUL-terminated name; the result is checked.
    let fd = unsafe {
        libc::openat(
            dir.as_raw_fd(),
            c".".as_ptr(),
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: fd is a new descriptor; fdopendir takes it over on success.
    let stream = unsafe { libc::fdopendir(fd) };
    if stream.is_null() {
        let e = std::io::Error::last_os_error();
        // SAFETY: still ours when fdopendir failed.
        drop(unsafe { OwnedFd::from_raw_fd(fd) });
        return Err(e);
    }
    let mut names = Vec::new();
    loop {
        // SAFETY: stream is a valid DIR* until closedir below.
        let entry = unsafe { libc::readdir(stream) };
        if entry.is_null() {
            break;
        }
        // SAFETY: readdir returned a valid dirent whose name is NUL-terminated.
        let name = unsafe { CStr::from_ptr((*entry).d_name.as_ptr()) };
        if is_temp_name(name.to_bytes()) {
            names.push(name.to_owned());
        }
    }
    // SAFETY: stream came from fdopendir and is closed once (with its descriptor).
    unsafe { libc::closedir(stream) };
    Ok(names)
}

/// When `name` in `dir` was last written, if it is a regular file (a link
/// is not followed: a link or folder by a temp file's name is not ours).
fn regular_file_mtime(dir: BorrowedFd<'_>, name: &CStr) -> Option<SystemTime> {
    // SAFETY: stat is plain data, filled in by the kernel on success.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: valid descriptor, name and out pointer.
    let r = unsafe {
        libc::fstatat(dir.as_raw_fd(), name.as_ptr(), &raw mut st, libc::AT_SYMLINK_NOFOLLOW)
    };
    if r != 0 || st.st_mode & libc::S_IFMT != libc::S_IFREG {
        return None;
    }
    let secs = u64::try_from(st.st_mtime).ok()?;
    let nanos = u32::try_from(st.st_mtime_nsec).unwrap_or(0);
    Some(SystemTime::UNIX_EPOCH + Duration::new(secs, nanos))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_names_of_the_exact_pattern_are_temp_files() {
        assert!(is_temp_name(name(4242, 0, 123_456_789).as_bytes()));
        for other in [
            ".ferroclaw-write-",
            ".ferroclaw-write-1-2",
            ".ferroclaw-write-1-2-3-4",
            ".ferroclaw-write-1-2-x",
            ".ferroclaw-write-notes.txt",
            "ferroclaw-write-1-2-3",
            ".ferroclaw-write-1--3",
        ] {
            assert!(!is_temp_name(other.as_bytes()), "{other}");
        }
    }
}
