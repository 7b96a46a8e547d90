//! Two writers (a second `ferroclaw index` while one runs) and readers
//! during writes: every update lands whole, readers always get an answer,
//! and the database file is never replaced.

use std::fs;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use ferroclaw_codegraph::CodeIndex;

fn write(root: &Path, rel: &str, text: &str) {
    let path = root.join(rel);
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, text).unwrap();
}

#[cfg(unix)]
fn inode(path: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    fs::metadata(path).unwrap().ino()
}

#[test]
fn concurrent_writers_and_readers_never_corrupt_or_replace_the_index() {
    let root = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    for i in 0..40 {
        write(
            root.path(),
            &format!("m{i}.py"),
            &format!("def f{i}():\n    return f{}()\n", (i + 1) % 40),
        );
    }
    let mut first = CodeIndex::open(root.path(), home.path()).unwrap();
    first.update().unwrap();
    let db = first.db_path().to_path_buf();
    #[cfg(unix)]
    let before = inode(&db);

    let done = Arc::new(AtomicBool::new(false));
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let (root, home, done) =
                (root.path().to_path_buf(), home.path().to_path_buf(), done.clone());
            std::thread::spawn(move || {
                let reader = CodeIndex::open_existing(&root, &home).unwrap();
                let mut answers = 0;
                while !done.load(Ordering::Relaxed) || answers == 0 {
                    // Every answer is a whole state: the call from f0, whose
                    // file is re-indexed again and again, is never missing.
                    let callers = reader.callers("f1", 1).unwrap();
                    let from_f0 = callers
                        .edges
                        .iter()
                        .filter(|e| e.from.as_ref().is_some_and(|f| f.name == "f0"))
                        .count();
                    assert_eq!(from_f0, 1, "{callers:?}");
                    answers += 1;
                }
                answers
            })
        })
        .collect();
    let writers: Vec<_> = (0..2)
        .map(|w| {
            let (root, home) = (root.path().to_path_buf(), home.path().to_path_buf());
            std::thread::spawn(move || {
                // A second index of its own, as a second process would open.
                let mut index = CodeIndex::open(&root, &home).unwrap();
                for round in 0..5 {
                    write(&root, &format!("w{w}.py"), &format!("def g{w}_{round}():\n    f1()\n"));
                    index.update().unwrap();
                    index.reindex_file(Path::new(&format!("m{round}.py"))).unwrap();
                }
            })
        })
        .collect();
    for w in writers {
        w.join().unwrap();
    }
    done.store(true, Ordering::Relaxed);
    for r in readers {
        assert!(r.join().unwrap() > 0);
    }

    #[cfg(unix)]
    assert_eq!(inode(&db), before, "the database file was replaced");
    first.update().unwrap();
    let integrity: String = rusqlite::Connection::open(&db)
        .unwrap()
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap();
    assert_eq!(integrity, "ok");
    // The final state is what a fresh build of the same files gives.
    let fresh_home = tempfile::tempdir().unwrap();
    let mut fresh = CodeIndex::open(root.path(), fresh_home.path()).unwrap();
    fresh.update().unwrap();
    assert_eq!(first.dump().unwrap(), fresh.dump().unwrap());
    let callers: Vec<String> = first
        .callers("f1", 1)
        .unwrap()
        .edges
        .iter()
        .filter_map(|e| e.from.as_ref().map(|f| f.qualified.clone()))
        .collect();
    assert_eq!(callers, ["f0", "g0_4", "g1_4"]);
}
