//! The repo map: the most referenced symbols first, within the token
//! budget, and cached by the index's files and hashes (never by a prompt).

use std::fs;
use std::path::Path;

use ferroclaw_codegraph::CodeIndex;

fn write(root: &Path, rel: &str, text: &str) {
    fs::write(root.join(rel), text).unwrap();
}

/// `core` is called from everywhere, `mid` from two places, `leaf` from one.
fn project() -> (tempfile::TempDir, tempfile::TempDir) {
    let root = tempfile::tempdir().unwrap();
    write(root.path(), "core.py", "def core():\n    \"\"\"The heart.\"\"\"\n    return 1\n");
    write(
        root.path(),
        "mid.py",
        "from core import core\n\ndef mid():\n    return core()\n\ndef leaf():\n    return core()\n",
    );
    write(
        root.path(),
        "top.py",
        "from core import core\nfrom mid import mid, leaf\n\ndef a():\n    return mid() + core()\n\ndef b():\n    return mid() + leaf() + core()\n",
    );
    (root, tempfile::tempdir().unwrap())
}

#[test]
fn the_map_lists_the_most_referenced_symbols_by_file_within_the_budget() {
    let (root, home) = project();
    let mut index = CodeIndex::open(root.path(), home.path()).unwrap();
    index.update().unwrap();
    let map = index.repo_map(1_024).unwrap();
    assert!(map.starts_with("# Repo map\n"), "{map}");
    let core = map.find("core.py:\n  1 def core()").expect(&map);
    let mid = map.find("mid.py:\n  3 def mid()").expect(&map);
    assert!(core < mid, "the most referenced file comes first: {map}");
    assert!(!map.contains("def a()"), "nothing refers to a: {map}");

    // A budget too small for everything keeps the best-ranked symbols.
    let small = index.repo_map(40).unwrap();
    assert!(small.len() <= 40 * 4, "{} chars: {small}", small.len());
    assert!(small.contains("def core()"), "{small}");
    assert!(!small.contains("def leaf()"), "{small}");
}

#[test]
fn the_map_is_cached_by_the_files_and_rebuilt_when_one_changes() {
    let (root, home) = project();
    let mut index = CodeIndex::open(root.path(), home.path()).unwrap();
    index.update().unwrap();
    let first = index.repo_map(1_024).unwrap();
    // A second handle (another process) gets the cached map, byte for byte.
    let reader = CodeIndex::open_existing(root.path(), home.path()).unwrap();
    assert_eq!(reader.repo_map(1_024).unwrap(), first);

    write(root.path(), "core.py", "def core(x=0):\n    return x\n");
    index.reindex_file(Path::new("core.py")).unwrap();
    let second = reader.repo_map(1_024).unwrap();
    assert!(second.contains("def core(x=0)"), "{second}");
    assert_ne!(second, first);
}
