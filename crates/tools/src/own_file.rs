//! Opening the files ferroclaw reads for itself (session files and turn
//! journals, config files, `.mcp.json`, settings, skills, commands,
//! `CLAUDE.md`/`AGENTS.md` and other instruction files, its own state)
//! without ever blocking on one.
//!
//! Any of them can be something other than a file: a cloned repository's
//! `AGENTS.md` linked to `/dev/zero`, a session file replaced by a FIFO. A
//! plain `open` of a FIFO waits for a writer forever, and a read of one
//! opened read-write never ends; either way the process hangs, and a thread
//! stuck in that read cannot even hear SIGTERM. [`open`] is the one way in:
//! it opens with `O_NONBLOCK` (a FIFO's open returns at once; regular files
//! ignore the flag), looks at what it opened (`fstat`, so a link swapped in
//! after a check is caught too), and refuses anything but a regular file
//! with an error that names the path and what it is.
//!
//! ```
//! let dir = tempfile::tempdir().unwrap();
//! let path = dir.path().join("notes.md");
//! std::fs::write(&path, "hello").unwrap();
//! assert_eq!(ferroclaw_tools::own_file::read_text(&path, 100).unwrap(), "hello");
//! let err = ferroclaw_tools::own_file::open(dir.path()).unwrap_err();
//! assert!(err.to_string().ends_with("is a folder, not a regular file"), "{err}");
//! ```

use std::fs::{File, OpenOptions};
use std::io::{Error, ErrorKind, Read};
use std::path::Path;

/// The most bytes read whole from a file ferroclaw writes itself (its state,
/// memory, trust list): far above what it writes, a bound on one gone wrong.
pub const MAX_STATE_FILE_BYTES: u64 = 64 * 1024 * 1024;

/// Opens `path` (links followed) to read; an error of kind `NotFound` when it
/// is missing, `InvalidInput` when it is not a regular file.
pub fn open(path: &Path) -> std::io::Result<File> {
    let mut options = OpenOptions::new();
    options.read(true);
    open_with(path, options)
}

/// Opens `path` with `options` (read and append, for a session being
/// continued) as [`open`] does: without blocking, regular files only.
pub fn open_with(path: &Path, mut options: OpenOptions) -> std::io::Result<File> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        // O_NOCTTY: a terminal device opened here never becomes ours.
        options.custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY);
    }
    let file = options.open(path)?;
    let kind = file.metadata()?.file_type();
    if kind.is_file() {
        return Ok(file);
    }
    Err(Error::new(
        ErrorKind::InvalidInput,
        format!("{} is {}, not a regular file", path.display(), describe(kind)),
    ))
}

/// The bytes of the file at `path`, opened as [`open`] does: `InvalidInput`
/// when it is over `max` bytes.
pub fn read(path: &Path, max: u64) -> std::io::Result<Vec<u8>> {
    read_capped(open(path)?, path, max)
}

/// The bytes of `file`, already opened (as [`open`] does, or beneath a
/// folder) from `path`: at most `max`, refused with [`over_cap`] beyond,
/// from its size before reading and from what a growing one gave.
pub fn read_capped(file: File, path: &Path, max: u64) -> std::io::Result<Vec<u8>> {
    let len = file.metadata()?.len();
    if len > max {
        return Err(over_cap(path, len, max));
    }
    let mut bytes = Vec::with_capacity(len as usize);
    file.take(max.saturating_add(1)).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > max {
        return Err(over_cap(path, bytes.len() as u64, max));
    }
    Ok(bytes)
}

/// The refusal of file `path`, `len` bytes (or more), over the cap `max`:
/// it names the file, its size and the cap, so whoever shows it (a config
/// error, an MCP problem, a skill warning) says why the file was left out.
pub fn over_cap(path: &Path, len: u64, max: u64) -> Error {
    Error::new(
        ErrorKind::InvalidInput,
        format!(
            "{} is {} ({len} bytes), over the {} cap on files ferroclaw reads for itself; \
             it was not read",
            path.display(),
            crate::file_limit::human_size(len),
            crate::file_limit::human_size(max)
        ),
    )
}

/// [`read`] as UTF-8 text (`InvalidData` when it is not).
pub fn read_text(path: &Path, max: u64) -> std::io::Result<String> {
    String::from_utf8(read(path, max)?).map_err(|_| {
        Error::new(ErrorKind::InvalidData, format!("{} is not UTF-8 text", path.display()))
    })
}

/// What a file that is not a regular one is, in words.
fn describe(kind: std::fs::FileType) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if kind.is_fifo() {
            return "a FIFO (named pipe)";
        }
        if kind.is_socket() {
            return "a socket";
        }
        if kind.is_char_device() {
            return "a character device";
        }
        if kind.is_block_device() {
            return "a block device";
        }
    }
    if kind.is_dir() { "a folder" } else { "something other than a file" }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mkfifo(path: &Path) {
        assert!(std::process::Command::new("mkfifo").arg(path).status().unwrap().success());
    }

    #[test]
    fn a_fifo_is_refused_at_once_whether_opened_to_read_or_to_append() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("s.jsonl");
        mkfifo(&fifo);
        let err = open(&fifo).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidInput);
        assert_eq!(
            err.to_string(),
            format!("{} is a FIFO (named pipe), not a regular file", fifo.display())
        );
        // Read-write never blocks on open; the refusal keeps the read from blocking forever.
        let mut options = OpenOptions::new();
        options.read(true).append(true);
        let err = open_with(&fifo, options).unwrap_err();
        assert!(err.to_string().contains("FIFO"), "{err}");
    }

    #[test]
    fn devices_sockets_and_folders_are_named_as_what_they_are() {
        let err = read(Path::new("/dev/zero"), 100).unwrap_err();
        assert_eq!(err.to_string(), "/dev/zero is a character device, not a regular file");
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("sock");
        let _listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
        // A socket cannot be opened at all; the error still names it.
        assert!(open(&socket).is_err());
        let err = open(dir.path()).unwrap_err();
        assert!(err.to_string().ends_with("is a folder, not a regular file"), "{err}");
    }

    #[test]
    fn a_regular_file_through_a_link_is_read_and_a_big_one_refused() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.md"), "hello").unwrap();
        std::os::unix::fs::symlink(dir.path().join("a.md"), dir.path().join("link.md")).unwrap();
        assert_eq!(read_text(&dir.path().join("link.md"), 100).unwrap(), "hello");
        let err = read(&dir.path().join("a.md"), 4).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidInput);
        let missing = open(&dir.path().join("b.md")).unwrap_err();
        assert_eq!(missing.kind(), ErrorKind::NotFound);
    }
}
