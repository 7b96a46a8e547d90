//! Unit tests of [`Beneath`]: reads, writes and refusals with and without
//! `openat2`, and the sweep of atomic writes' leftovers.

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
        assert!(matches!(b.write_atomic(Path::new("link/new"), b"x"), Err(ToolError::Refused(_))));
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
