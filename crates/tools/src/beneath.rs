//! Opening files beneath a root folder without ever leaving it, with no
//! window between a check and the use of a path.
//!
//! [`Sandbox::resolve`](crate::Sandbox::resolve) checks a path and gives a
//! clear refusal; the file tools then open what it returned through a
//! [`Beneath`]: a descriptor of the root and a path relative to it, opened
//! with `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)`
//! (Linux 5.6+), or, on older kernels, one `openat(O_NOFOLLOW)` per component.
//! The resolved path is canonical, so a symlink met while opening it means
//! someone swapped a folder for a link after the check: the open fails
//! instead of following it.
//!
//! Writes go the same way: parents are created with `mkdirat` and opened
//! without following links, the temp file is created in the confined folder
//! descriptor and renamed within it.

use std::ffi::CString;
use std::fs::File;
use std::io::Write;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};

use crate::ToolError;

// linux/openat2.h
const RESOLVE_NO_MAGICLINKS: u64 = 0x02;
const RESOLVE_NO_SYMLINKS: u64 = 0x04;
const RESOLVE_BENEATH: u64 = 0x08;

/// `struct open_how` (linux/openat2.h).
#[repr(C)]
struct OpenHow {
    flags: u64,
    mode: u64,
    resolve: u64,
}

/// Whether this kernel has `openat2`: 0 unknown, 1 yes, 2 no.
static OPENAT2: AtomicU8 = AtomicU8::new(0);

/// A root folder, held open, under which relative paths are opened.
#[derive(Debug)]
pub struct Beneath {
    root: OwnedFd,
    root_path: PathBuf,
    /// Use the per-component walk even where `openat2` exists (tests).
    walk_only: bool,
}

impl Beneath {
    /// Opens the root folder `root` (a trusted, canonical path).
    pub fn open(root: &Path) -> Result<Self, ToolError> {
        let c = cstring(root)?;
        // SAFETY: c is a valid NUL-terminated string; the result is checked.
        let fd =
            unsafe { libc::open(c.as_ptr(), libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC) };
        if fd < 0 {
            return Err(ToolError::io(
                format!("cannot open {}", root.display()),
                std::io::Error::last_os_error(),
            ));
        }
        // SAFETY: a new descriptor we own.
        let root_fd = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(Self { root: root_fd, root_path: root.to_path_buf(), walk_only: false })
    }

    /// The same root, opened by walking one component at a time (as on
    /// kernels without `openat2`).
    #[cfg(test)]
    pub(crate) fn walking(mut self) -> Self {
        self.walk_only = true;
        self
    }

    /// The root folder's path.
    pub fn root(&self) -> &Path {
        &self.root_path
    }

    /// `path` relative to the root, or `None` when it is not beneath it.
    pub fn relative<'a>(&self, path: &'a Path) -> Option<&'a Path> {
        path.strip_prefix(&self.root_path).ok()
    }

    /// Opens a file beneath the root for reading; refuses anything that is
    /// not a regular file or a folder (devices, fifos, sockets).
    pub fn open_read(&self, rel: &Path) -> Result<File, ToolError> {
        let flags = libc::O_RDONLY | libc::O_NOCTTY | libc::O_NONBLOCK;
        let fd = self.open_at(self.root.as_raw_fd(), rel, flags, 0)?;
        let file = File::from(fd);
        let meta = file.metadata().map_err(|e| self.io(rel, e))?;
        if !meta.is_file() && !meta.is_dir() {
            return Err(ToolError::Refused(format!(
                "{} is not a regular file; file tools only open regular files and folders",
                rel.display()
            )));
        }
        Ok(file)
    }

    /// Opens a folder beneath the root (the root itself for an empty path).
    pub fn open_dir(&self, rel: &Path) -> Result<OwnedFd, ToolError> {
        self.open_at(self.root.as_raw_fd(), rel, libc::O_RDONLY | libc::O_DIRECTORY, 0)
    }

    /// Replaces `rel` with `bytes` atomically (temp file in the same folder,
    /// fsync, rename), creating missing parent folders, all beneath the root.
    /// Keeps an existing file's permissions. Returns true when it was new.
    /// Temp files a killed write left in that folder long ago are deleted
    /// ([`crate::write_temp`]).
    pub fn write_atomic(&self, rel: &Path, bytes: &[u8]) -> Result<bool, ToolError> {
        self.write(rel, bytes, true)
    }

    /// Writes `bytes` as `rel` only if nothing by that name is there (not
    /// even a link), deciding that and writing in one step (the complete
    /// temp file is hard-linked to its name, which fails on any existing
    /// entry), so a file or link that appears meanwhile is never replaced
    /// or followed. Returns false, having written nothing, when the name
    /// is taken.
    pub fn create_new(&self, rel: &Path, bytes: &[u8]) -> Result<bool, ToolError> {
        self.write(rel, bytes, false)
    }

    /// Opens `rel` to append to (read and write, every write at the end),
    /// creating it (mode 0600) and its missing folders, all beneath the root
    /// and never through a link; refuses anything but a regular file.
    pub fn open_append(&self, rel: &Path) -> Result<File, ToolError> {
        let shown = rel.display().to_string();
        let Some(Component::Normal(name)) = rel.components().next_back() else {
            return Err(ToolError::InvalidArguments(format!("{shown} is not a file path")));
        };
        let dir = self.make_dirs(rel.parent().unwrap_or(Path::new("")))?;
        let c_name = cstring(Path::new(name))?;
        let flags = libc::O_RDWR | libc::O_APPEND | libc::O_CREAT | libc::O_NONBLOCK;
        let fd = open_component(dir.as_fd_ref(), &c_name, flags, 0o600)
            .map_err(|e| self.walk_error(rel, e))?;
        let file = File::from(fd);
        if !file.metadata().map_err(|e| self.io(rel, e))?.is_file() {
            return Err(ToolError::Refused(format!("{shown} is not a regular file")));
        }
        Ok(file)
    }

    fn write(&self, rel: &Path, bytes: &[u8], replace: bool) -> Result<bool, ToolError> {
        let shown = rel.display().to_string();
        let name = match rel.components().next_back() {
            Some(Component::Normal(name)) => name.to_os_string(),
            _ => return Err(ToolError::InvalidArguments(format!("{shown} is not a file path"))),
        };
        let parent = rel.parent().unwrap_or(Path::new(""));
        let dir = self.make_dirs(parent)?;
        let c_name = cstring(Path::new(&name))?;
        let existing = match fstatat_nofollow(dir.as_fd_ref(), &c_name) {
            Ok(st) => Some(st),
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => None,
            Err(e) => return Err(self.io(rel, e)),
        };
        if existing.is_some() && !replace {
            return Ok(false);
        }
        if let Some(st) = &existing {
            match st.st_mode & libc::S_IFMT {
                libc::S_IFREG => {}
                libc::S_IFDIR => {
                    return Err(ToolError::InvalidArguments(format!(
                        "{shown} is a folder; give a file path"
                    )));
                }
                libc::S_IFLNK => return Err(swapped(&shown)),
                _ => {
                    return Err(ToolError::Refused(format!(
                        "{shown} is not a regular file; file tools only write regular files"
                    )));
                }
            }
        }
        let (temp_name, temp) = create_temp(&dir).map_err(|e| self.io(parent, e))?;
        let result = (|| {
            let mut temp = temp;
            temp.write_all(bytes)?;
            if let Some(st) = &existing {
                // SAFETY: fchmod on a descriptor we own.
                if unsafe { libc::fchmod(temp.as_raw_fd(), st.st_mode & 0o7777) } != 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            temp.sync_all()?;
            // SAFETY: valid descriptors and NUL-terminated names.
            let r = unsafe {
                if replace {
                    libc::renameat(
                        dir.as_raw_fd(),
                        temp_name.as_ptr(),
                        dir.as_raw_fd(),
                        c_name.as_ptr(),
                    )
                } else {
                    libc::linkat(
                        dir.as_raw_fd(),
                        temp_name.as_ptr(),
                        dir.as_raw_fd(),
                        c_name.as_ptr(),
                        0,
                    )
                }
            };
            if r != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        })();
        if !replace || result.is_err() {
            // SAFETY: valid descriptor and name; failure to clean up is harmless.
            unsafe { libc::unlinkat(dir.as_raw_fd(), temp_name.as_ptr(), 0) };
        }
        if let Err(e) = result {
            if !replace && e.raw_os_error() == Some(libc::EEXIST) {
                return Ok(false);
            }
            return Err(ToolError::io(format!("cannot write {shown}"), e));
        }
        // What a write killed mid-way left here goes now (stale ones only).
        crate::write_temp::sweep_stale(dir.as_fd_ref(), std::time::SystemTime::now());
        // Make the rename durable; a folder that cannot be fsynced is harmless.
        let _ = File::from(dir).sync_all();
        Ok(existing.is_none())
    }

    /// Opens (creating as needed) the folders of `rel` beneath the root and
    /// returns the last one, opened for reading (so it can be fsynced).
    fn make_dirs(&self, rel: &Path) -> Result<OwnedFd, ToolError> {
        // SAFETY: dup of a descriptor we own.
        let mut dir = self.root.try_clone().map_err(|e| self.io(rel, e))?;
        for part in rel.components() {
            let name = match part {
                Component::CurDir => continue,
                Component::Normal(name) => name,
                _ => return Err(outside(rel)),
            };
            let c = cstring(Path::new(name))?;
            // SAFETY: valid descriptor and name; EEXIST is expected.
            if unsafe { libc::mkdirat(dir.as_raw_fd(), c.as_ptr(), 0o777) } != 0 {
                let e = std::io::Error::last_os_error();
                if e.raw_os_error() != Some(libc::EEXIST) {
                    return Err(ToolError::io(
                        format!("cannot create folder {}", rel.display()),
                        e,
                    ));
                }
            }
            dir = open_component(dir.as_fd_ref(), &c, libc::O_PATH | libc::O_DIRECTORY, 0)
                .map_err(|e| self.walk_error(rel, e))?;
        }
        // Reopen for reading: an O_PATH descriptor cannot be fsynced.
        open_component(dir.as_fd_ref(), c".", libc::O_RDONLY | libc::O_DIRECTORY, 0)
            .map_err(|e| self.io(rel, e))
    }

    /// Opens `rel` beneath `dirfd` with `flags`, never through a link.
    fn open_at(&self, dirfd: i32, rel: &Path, flags: i32, mode: u32) -> Result<OwnedFd, ToolError> {
        if rel.components().any(|c| !matches!(c, Component::Normal(_) | Component::CurDir)) {
            return Err(outside(rel));
        }
        let rel_or_dot = if rel.as_os_str().is_empty() { Path::new(".") } else { rel };
        let c = cstring(rel_or_dot)?;
        if !self.walk_only && OPENAT2.load(Ordering::Relaxed) != 2 {
            match openat2(dirfd, &c, flags, mode) {
                Ok(fd) => {
                    OPENAT2.store(1, Ordering::Relaxed);
                    return Ok(fd);
                }
                Err(e) if matches!(e.raw_os_error(), Some(libc::ENOSYS | libc::EPERM)) => {
                    OPENAT2.store(2, Ordering::Relaxed);
                }
                Err(e) => return Err(self.walk_error(rel, e)),
            }
        }
        self.walk(dirfd, rel, flags, mode)
    }

    /// The fallback: one `openat(O_NOFOLLOW)` per component.
    fn walk(&self, dirfd: i32, rel: &Path, flags: i32, mode: u32) -> Result<OwnedFd, ToolError> {
        let parts: Vec<&std::ffi::OsStr> = rel
            .components()
            .filter_map(|c| match c {
                Component::Normal(n) => Some(n),
                _ => None,
            })
            .collect();
        // SAFETY: dirfd stays open for the duration of this call.
        let start = unsafe { BorrowedFd::borrow_raw(dirfd) };
        let Some((last, dirs)) = parts.split_last() else {
            return open_component(start, c".", flags, mode).map_err(|e| self.io(rel, e));
        };
        let mut current: Option<OwnedFd> = None;
        for name in dirs {
            let c = cstring(Path::new(name))?;
            let at = current.as_ref().map_or(start, |fd| fd.as_fd_ref());
            let next = open_component(at, &c, libc::O_PATH | libc::O_DIRECTORY, 0)
                .map_err(|e| self.walk_error(rel, e))?;
            current = Some(next);
        }
        let c = cstring(Path::new(last))?;
        let at = current.as_ref().map_or(start, |fd| fd.as_fd_ref());
        open_component(at, &c, flags, mode).map_err(|e| self.walk_error(rel, e))
    }

    /// An open error: a link or escape met on the way is a refusal.
    fn walk_error(&self, rel: &Path, e: std::io::Error) -> ToolError {
        match e.raw_os_error() {
            Some(libc::ELOOP | libc::EXDEV) => swapped(&rel.display().to_string()),
            Some(libc::ENOTDIR) => ToolError::Refused(format!(
                "path {} changed while it was being opened (a folder on the way is not a \
                 folder any more); nothing was read or written",
                rel.display()
            )),
            _ => self.io(rel, e),
        }
    }

    fn io(&self, rel: &Path, e: std::io::Error) -> ToolError {
        ToolError::io(format!("cannot open {}", rel.display()), e)
    }
}

/// What a folder walk (which goes by path) found, looked at again beneath
/// the root: each entry is `fstatat`'d by name in its folder opened beneath
/// the root without following links, so a walk that went through a folder
/// swapped for a link shows nothing from outside, not even names or times.
pub(crate) struct Recheck<'a> {
    beneath: &'a Beneath,
    /// Folders (relative to the root) opened so far; `None` when that failed.
    dirs: std::collections::HashMap<PathBuf, Option<OwnedFd>>,
}

/// An entry as found beneath the root.
#[derive(Debug, Clone, Copy)]
pub(crate) struct EntryStat {
    pub kind: &'static str,
    pub size: u64,
    pub modified: std::time::SystemTime,
}

impl<'a> Recheck<'a> {
    pub(crate) fn new(beneath: &'a Beneath) -> Self {
        Self { beneath, dirs: std::collections::HashMap::new() }
    }

    /// `path` (absolute, as the walk gave it) as found beneath the root now;
    /// `None` when it is not there, or is another file than the walk saw
    /// (`ino`, where the walk knew it).
    pub(crate) fn stat(&mut self, path: &Path, ino: Option<u64>) -> Option<EntryStat> {
        let rel = self.beneath.relative(path)?;
        let name = cstring(Path::new(rel.file_name()?)).ok()?;
        let parent = rel.parent().unwrap_or(Path::new("")).to_path_buf();
        let beneath = self.beneath;
        let dir = self.dirs.entry(parent).or_insert_with_key(|p| beneath.open_dir(p).ok());
        let st = fstatat_nofollow(dir.as_ref()?.as_fd_ref(), &name).ok()?;
        if ino.is_some_and(|ino| ino != st.st_ino) {
            return None;
        }
        let kind = match st.st_mode & libc::S_IFMT {
            libc::S_IFDIR => "dir",
            libc::S_IFREG => "file",
            libc::S_IFLNK => "symlink",
            _ => "other",
        };
        let modified = std::time::UNIX_EPOCH
            + std::time::Duration::new(
                u64::try_from(st.st_mtime).unwrap_or(0),
                u32::try_from(st.st_mtime_nsec).unwrap_or(0),
            );
        Some(EntryStat { kind, size: u64::try_from(st.st_size).unwrap_or(0), modified })
    }
}

/// The refusal when a link appeared on a checked path.
fn swapped(shown: &str) -> ToolError {
    ToolError::Refused(format!(
        "path {shown} changed while it was being opened (a link appeared on the way); \
         file tools never follow links out of the workspace, so nothing was read or written"
    ))
}

fn outside(rel: &Path) -> ToolError {
    ToolError::Refused(format!("path {} leaves its root folder", rel.display()))
}

fn cstring(path: &Path) -> Result<CString, ToolError> {
    CString::new(path.as_os_str().as_bytes()).map_err(|_| {
        ToolError::Refused(format!("path {:?} contains a NUL byte", path.display().to_string()))
    })
}

/// `BorrowedFd` from an owned one, for the helpers below.
trait AsFdRef {
    fn as_fd_ref(&self) -> BorrowedFd<'_>;
}

impl AsFdRef for OwnedFd {
    fn as_fd_ref(&self) -> BorrowedFd<'_> {
        std::os::fd::AsFd::as_fd(self)
    }
}

/// `openat2` beneath `dirfd`, refusing every symlink and magic link.
fn openat2(dirfd: i32, path: &CString, flags: i32, mode: u32) -> std::io::Result<OwnedFd> {
    let how = OpenHow {
        flags: (flags | libc::O_CLOEXEC) as u64,
        mode: u64::from(mode),
        resolve: RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
    };
    // SAFETY: how is a valid open_how of the size passed; path is NUL-terminated.
    let fd = unsafe {
        libc::syscall(libc::SYS_openat2, dirfd, path.as_ptr(), &raw const how, size_of::<OpenHow>())
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a new descriptor we own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

/// `openat` of one name in `dir`, never following a link.
fn open_component(
    dir: BorrowedFd<'_>,
    name: &std::ffi::CStr,
    flags: i32,
    mode: u32,
) -> std::io::Result<OwnedFd> {
    // SAFETY: valid descriptor and NUL-terminated name; the result is checked.
    let fd = unsafe {
        libc::openat(
            dir.as_raw_fd(),
            name.as_ptr(),
            flags | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            mode,
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a new descriptor we own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `fstatat(AT_SYMLINK_NOFOLLOW)` of one name in `dir`.
fn fstatat_nofollow(dir: BorrowedFd<'_>, name: &CString) -> std::io::Result<libc::stat> {
    // SAFETY: stat is plain data, filled in by the kernel on success.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: valid descriptor, name and out pointer.
    let r = unsafe {
        libc::fstatat(dir.as_raw_fd(), name.as_ptr(), &raw mut st, libc::AT_SYMLINK_NOFOLLOW)
    };
    if r != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(st)
}

/// Creates a fresh temp file in `dir`: `.ferroclaw-write-PID-N-NANOS`.
fn create_temp(dir: &OwnedFd) -> std::io::Result<(CString, File)> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    loop {
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let name = crate::write_temp::name(std::process::id(), n, nanos);
        let c = CString::new(name).map_err(std::io::Error::other)?;
        // New files get 0o666 minus the umask, like any editor's.
        match open_component(
            dir.as_fd_ref(),
            &c,
            libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL,
            0o666,
        ) {
            Ok(fd) => return Ok((c, File::from(fd))),
            Err(e) if e.raw_os_error() == Some(libc::EEXIST) => continue,
            Err(e) => return Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::os::unix::fs::symlink;

    fn both(root: &Path) -> [Beneath; 2] {
        [Beneath::open(root).unwrap(), Beneath::open(root).unwrap().walking()]
    }

    #[test]
    fn create_new_never_replaces_or_follows_what_is_already_there() {
        let ws = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let b = Beneath::open(ws.path()).unwrap();
        assert!(b.create_new(Path::new("in/a.txt"), b"first").unwrap());
        assert!(!b.create_new(Path::new("in/a.txt"), b"second").unwrap(), "name taken");
        assert_eq!(std::fs::read(ws.path().join("in/a.txt")).unwrap(), b"first");
        // A dangling link put there by someone else is not written through.
        symlink(outside.path().join("key"), ws.path().join("in/key")).unwrap();
        assert!(!b.create_new(Path::new("in/key"), b"evil").unwrap());
        assert!(!outside.path().join("key").exists());
        let left: Vec<_> = std::fs::read_dir(ws.path().join("in")).unwrap().flatten().collect();
        assert_eq!(left.len(), 2, "no temp file left behind: {left:?}");
    }

    /// Sets `path`'s modification time `age` into the past, without
    /// following a link.
    fn age(path: &Path, age: std::time::Duration) {
        let then = std::time::SystemTime::now() - age;
        let since = then.duration_since(std::time::UNIX_EPOCH).unwrap();
        let t = libc::timespec {
            tv_sec: since.as_secs() as libc::time_t,
            tv_nsec: i64::from(since.subsec_nanos()),
        };
        let c = cstring(path).unwrap();
        let times = [t, t];
        // SAFETY: valid path and two timespecs.
        let r = unsafe {
            libc::utimensat(libc::AT_FDCWD, c.as_ptr(), times.as_ptr(), libc::AT_SYMLINK_NOFOLLOW)
        };
        assert_eq!(r, 0, "{}", std::io::Error::last_os_error());
    }

    #[test]
    fn a_write_sweeps_temp_files_a_killed_write_left_and_leaves_fresh_ones_and_lookalikes() {
        let ws = tempfile::tempdir().unwrap();
        let dir = ws.path().join("src");
        std::fs::create_dir(&dir).unwrap();
        let hour = std::time::Duration::from_secs(3600);
        // Left by a write killed an hour ago (in this folder and another).
        let stale = dir.join(".ferroclaw-write-4242-0-123456789");
        let elsewhere = ws.path().join(".ferroclaw-write-4242-1-5");
        // Another process's write in flight: created a moment ago.
        let fresh = dir.join(".ferroclaw-write-4343-0-987654321");
        // Not ours, however old: a name off the pattern, a link, a folder.
        let notes = dir.join(".ferroclaw-write-notes.txt");
        let link = dir.join(".ferroclaw-write-4242-2-1");
        let folder = dir.join(".ferroclaw-write-4242-3-1");
        for file in [&stale, &elsewhere, &fresh, &notes] {
            std::fs::write(file, "partial").unwrap();
        }
        symlink(&notes, &link).unwrap();
        std::fs::create_dir(&folder).unwrap();
        for old in [&stale, &elsewhere, &notes, &link, &folder] {
            age(old, hour);
        }
        let b = Beneath::open(ws.path()).unwrap();
        assert!(b.write_atomic(Path::new("src/main.rs"), b"fn main() {}").unwrap());
        assert!(!stale.exists(), "the killed write's leftover is gone");
        for kept in [&elsewhere, &fresh, &notes, &link, &folder] {
            assert!(kept.symlink_metadata().is_ok(), "{} kept", kept.display());
        }
        // A write in the other folder sweeps that one too; create_new as well.
        assert!(b.create_new(Path::new("new.txt"), b"x").unwrap());
        assert!(!elsewhere.exists());
        assert_eq!(std::fs::read_to_string(dir.join("main.rs")).unwrap(), "fn main() {}");
    }

    #[test]
    fn reads_and_writes_beneath_the_root_with_and_without_openat2() {
        let ws = tempfile::tempdir().unwrap();
        for (i, b) in both(ws.path()).iter().enumerate() {
            let rel = PathBuf::from(format!("deep{i}/er/file.txt"));
            assert!(b.write_atomic(&rel, b"hello").unwrap(), "new file");
            assert!(!b.write_atomic(&rel, b"again").unwrap(), "replaced file");
            let mut text = String::new();
            b.open_read(&rel).unwrap().read_to_string(&mut text).unwrap();
            assert_eq!(text, "again");
        }
    }

    #[test]
    fn a_link_on_the_way_is_refused_with_and_without_openat2() {
        let ws = tempfile::tempdir().unwrap();
        let out = tempfile::tempdir().unwrap();
        std::fs::write(out.path().join("secret"), "s").unwrap();
        symlink(out.path(), ws.path().join("link")).unwrap();
        for b in both(ws.path()) {
            assert!(matches!(b.open_read(Path::new("link/secret")), Err(ToolError::Refused(_))));
            assert!(matches!(
                b.write_atomic(Path::new("link/new"), b"x"),
                Err(ToolError::Refused(_))
            ));
            assert!(matches!(b.open_read(Path::new("../x")), Err(ToolError::Refused(_))));
        }
        assert!(!out.path().join("new").exists());
    }

    #[test]
    fn writing_keeps_an_existing_files_mode_and_leaves_no_temp_file() {
        use std::os::unix::fs::PermissionsExt;
        let ws = tempfile::tempdir().unwrap();
        let path = ws.path().join("run.sh");
        std::fs::write(&path, "old").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o750)).unwrap();
        Beneath::open(ws.path()).unwrap().write_atomic(Path::new("run.sh"), b"new").unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o750);
        let names: Vec<_> = std::fs::read_dir(ws.path()).unwrap().collect();
        assert_eq!(names.len(), 1, "only the file itself is left");
    }
}
