//! [`Beneath`] against a racing attacker, with `openat2` and with the
//! per-component walk older kernels get (only unit tests can force it): a
//! thread flips the filesystem while the opens and writes run 2,000 times.
//! A secret in a folder outside stands for `~/.ssh`; each test fails only if
//! the race is ever won.

use std::io::{Read, Write};
use std::os::unix::fs::{MetadataExt, symlink};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use super::*;

const ROUNDS: usize = 2_000;
const SECRET: &str = "SECRET-OUTSIDE\n";

/// A fresh root, opened with `openat2` (`walk` false) or walked.
fn fresh_root(walk: bool) -> (tempfile::TempDir, Beneath) {
    let dir = tempfile::tempdir().unwrap();
    let b = Beneath::open(dir.path()).unwrap();
    (dir, if walk { b.walking() } else { b })
}

/// A folder outside holding `secret.txt`, and a check that nothing else
/// appeared there and the secret is unchanged.
fn outside() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("secret.txt"), SECRET).unwrap();
    dir
}

fn assert_untouched(outside: &Path) {
    let names: Vec<_> =
        std::fs::read_dir(outside).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(names, ["secret.txt"], "something landed outside");
    assert_eq!(std::fs::read_to_string(outside.join("secret.txt")).unwrap(), SECRET);
    assert_eq!(std::fs::metadata(outside.join("secret.txt")).unwrap().nlink(), 1);
}

/// Runs `flip` on a thread until the returned flag is set.
fn race(mut flip: impl FnMut() + Send + 'static) -> (Arc<AtomicBool>, std::thread::JoinHandle<()>) {
    let stop = Arc::new(AtomicBool::new(false));
    let s = Arc::clone(&stop);
    (
        stop,
        std::thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                flip();
            }
        }),
    )
}

/// Puts what `make` creates at `at` by a rename over it.
fn replace(root: &Path, at: &Path, make: impl FnOnce(&Path) -> std::io::Result<()>) {
    let staging = root.join(".staging");
    let _ = std::fs::remove_file(&staging);
    if make(&staging).is_ok() {
        let _ = std::fs::rename(&staging, at);
    }
}

#[test]
fn a_folder_swapped_for_a_link_out_is_never_followed_with_or_without_openat2() {
    for walk in [false, true] {
        let (ws, b) = fresh_root(walk);
        let out = outside();
        let root = ws.path().to_path_buf();
        std::fs::create_dir(root.join("d")).unwrap();
        std::fs::write(root.join("d/secret.txt"), "inside\n").unwrap();
        let (target, r) = (out.path().to_path_buf(), root.clone());
        let (stop, racer) = race(move || {
            let _ = std::fs::rename(r.join("d"), r.join("d.real"));
            let _ = symlink(&target, r.join("d"));
            std::thread::yield_now();
            let _ = std::fs::remove_file(r.join("d"));
            let _ = std::fs::rename(r.join("d.real"), r.join("d"));
        });
        for n in 0..ROUNDS {
            if let Ok(mut f) = b.open_read(Path::new("d/secret.txt")) {
                let mut text = String::new();
                let _ = f.read_to_string(&mut text);
                assert!(!text.contains("SECRET"), "walk={walk}: read the secret outside");
            }
            let _ = b.write_atomic(Path::new("d/new.txt"), b"payload");
            let _ = b.write_atomic(Path::new("d/sub/deeper.txt"), b"payload");
            let _ = b.create_new(Path::new(&format!("d/new-{n}.txt")), b"payload");
            if let Ok(mut f) = b.open_append(Path::new("d/log.txt")) {
                let _ = f.write_all(b"line\n");
            }
        }
        stop.store(true, Ordering::Relaxed);
        racer.join().unwrap();
        assert_untouched(out.path());
    }
}

#[test]
fn appending_never_writes_through_a_hard_link() {
    for walk in [false, true] {
        let (ws, b) = fresh_root(walk);
        let out = outside();
        std::fs::hard_link(out.path().join("secret.txt"), ws.path().join("inbox")).unwrap();
        let err = b.open_append(Path::new("inbox")).unwrap_err();
        assert!(err.to_string().contains("other names"), "{err}");
        std::fs::remove_file(ws.path().join("inbox")).unwrap();
        assert_untouched(out.path());
    }
}

#[test]
fn a_file_or_its_temp_file_swapped_for_a_link_is_never_written_through() {
    for walk in [false, true] {
        let (ws, b) = fresh_root(walk);
        let out = outside();
        let root = ws.path().to_path_buf();
        let secret = out.path().join("secret.txt");
        let (r, s) = (root.clone(), secret.clone());
        let mut turn = 0u8;
        let (stop, racer) = race(move || {
            turn = turn.wrapping_add(1);
            let file = r.join("t.txt");
            match turn % 3 {
                0 => replace(&r, &file, |p| symlink(&s, p)),
                1 => replace(&r, &file, |p| std::fs::hard_link(&s, p)),
                _ => {}
            }
            let Ok(entries) = std::fs::read_dir(&r) else { return };
            for e in entries.flatten() {
                if e.file_name().to_string_lossy().starts_with(".ferroclaw-write-") {
                    replace(&r, &e.path(), |p| symlink(&s, p));
                }
            }
        });
        for n in 0..ROUNDS {
            let _ = b.write_atomic(Path::new("t.txt"), format!("payload {n}").as_bytes());
        }
        stop.store(true, Ordering::Relaxed);
        racer.join().unwrap();
        drop(ws);
        assert_untouched(out.path());
    }
}
