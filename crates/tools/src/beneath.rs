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
//! descriptor (`O_EXCL`, so a name planted in advance, link or FIFO, is
//! skipped) and renamed within it. The rename replaces the name: a hard
//! link's other names (maybe outside) keep their content. As a rename goes
//! by name, the temp file's name is checked to hold our own file before it,
//! and the target's after it; a swap by another program is reported, never
//! passed off as the write. Appending refuses a file with hard links.
//! `beneath_races.rs` races all of this, with and without `openat2`.
//!
//! A `Beneath` a tool call opened through its sandbox also carries the
//! call's deny rules ([`OpenRules`]): every open asks them about the root
//! joined with the relative path, which, as no link is followed, is the
//! file opened.

use std::ffi::CString;
use std::fs::File;
use std::io::Write;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};

use crate::{OpenRules, ToolError};

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
    /// The deny rules every open here answers to (none by default).
    rules: OpenRules,
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
        Ok(Self {
            root: root_fd,
            root_path: root.to_path_buf(),
            walk_only: false,
            rules: OpenRules::default(),
        })
    }

    /// The same root, opened by walking one component at a time (as on
    /// kernels without `openat2`).
    #[cfg(test)]
    pub(crate) fn walking(mut self) -> Self {
        self.walk_only = true;
        self
    }

    /// The same root, every open of which is first judged by `rules` on
    /// the path it opens (the root joined with the relative path: the open
    /// follows no link, so that path is the file opened).
    pub fn judged_by(mut self, rules: OpenRules) -> Self {
        self.rules = rules;
        self
    }

    /// Refuses `rel` when the deny rules deny the path it names. `rel` has
    /// only plain components (the opens refuse `..`), so the path is exact.
    fn judge(&self, rel: &Path) -> Result<(), ToolError> {
        if !self.rules.is_some() {
            return Ok(());
        }
        self.rules.check(&crate::deny::normalize(&self.root_path.join(rel)))
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
        self.judge(rel)?;
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
        self.judge(rel)?;
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
        self.judge(rel)?;
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
        let meta = file.metadata().map_err(|e| self.io(rel, e))?;
        if !meta.is_file() {
            return Err(ToolError::Refused(format!("{shown} is not a regular file")));
        }
        // A hard link is not a symlink: appending through one would change
        // the file under its other names too, maybe outside the root.
        if std::os::unix::fs::MetadataExt::nlink(&meta) > 1 {
            return Err(ToolError::Refused(format!(
                "{shown} has other names (hard links); appending would change them too"
            )));
        }
        Ok(file)
    }

    fn write(&self, rel: &Path, bytes: &[u8], replace: bool) -> Result<bool, ToolError> {
        self.judge(rel)?;
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
        let mut temp_swapped = false;
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
            // The rename goes by name: whoever can write in this folder may
            // have put a link or another file under the temp file's name.
            // Rename only our own file, and check that it is what the name
            // holds afterwards (a swap between the two is caught there).
            let ours = file_id(&temp.metadata()?);
            if !holds(&dir, &temp_name, ours) {
                temp_swapped = true;
                return Err(std::io::Error::other("the temp file was swapped"));
            }
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
            if !holds(&dir, &c_name, ours) {
                temp_swapped = true;
                return Err(std::io::Error::other("the temp file was swapped"));
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
            if temp_swapped {
                return Err(ToolError::Refused(format!(
                    "{shown} changed while it was being written (another program replaced \
                     the temporary file); it may not hold what was written: read it again"
                )));
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

/// A file's identity: device and inode.
fn file_id(meta: &std::fs::Metadata) -> (u64, u64) {
    use std::os::unix::fs::MetadataExt;
    (meta.dev(), meta.ino())
}

/// Whether `name` in `dir` is (not a link to) the file `id`.
fn holds(dir: &OwnedFd, name: &CString, id: (u64, u64)) -> bool {
    fstatat_nofollow(dir.as_fd_ref(), name).is_ok_and(|st| (st.st_dev, st.st_ino) == id)
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
#[path = "beneath_races.rs"]
mod races;

#[cfg(test)]
#[path = "beneath_tests.rs"]
mod tests;
