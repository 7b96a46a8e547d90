//! Keeping the index up to date: unchanged files are not parsed again,
//! edits are picked up, deleted files are dropped, and callers stay linked
//! when only the callee's file changes.

use std::fs;
use std::path::Path;

use ferroclaw_codegraph::CodeIndex;

fn write(root: &Path, rel: &str, text: &str) {
    let path = root.join(rel);
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, text).unwrap();
}

const LIB: &str = "mod store;\nuse crate::store::open;\n\npub fn run() -> u8 {\n    open()\n}\n";
const STORE: &str = "pub fn open() -> u8 {\n    1\n}\n";

fn project() -> (tempfile::TempDir, tempfile::TempDir) {
    let root = tempfile::tempdir().unwrap();
    write(root.path(), "src/lib.rs", LIB);
    write(root.path(), "src/store.rs", STORE);
    (root, tempfile::tempdir().unwrap())
}

fn callers_of(index: &CodeIndex, symbol: &str) -> Vec<String> {
    index
        .callers(symbol, 1)
        .unwrap()
        .edges
        .iter()
        .map(|e| {
            let from = e.from.as_ref().map_or("<top>".to_string(), |f| f.qualified.clone());
            format!(
                "{}:{} {from} -> {}:{} exact={}",
                e.site_path, e.site_line, e.to.path, e.to.start_line, e.exact
            )
        })
        .collect()
}

#[test]
fn callers_stay_linked_when_only_the_callee_file_changes() {
    let (root, home) = project();
    let mut index = CodeIndex::open(root.path(), home.path()).unwrap();
    index.update().unwrap();
    assert_eq!(callers_of(&index, "open"), ["src/lib.rs:5 run -> src/store.rs:1 exact=true"]);

    // The callee moves down two lines; the caller's file is untouched.
    write(root.path(), "src/store.rs", &format!("// moved\n\n{STORE}"));
    let stats = index.reindex_file(Path::new("src/store.rs")).unwrap();
    assert_eq!(stats.parsed, 1);
    assert_eq!(callers_of(&index, "open"), ["src/lib.rs:5 run -> src/store.rs:3 exact=true"]);

    // The same through a whole-project update.
    write(root.path(), "src/store.rs", &format!("// moved again\n\n\n{STORE}"));
    let stats = index.update().unwrap();
    assert_eq!(stats.parsed, 1, "only the changed file is parsed");
    assert_eq!(callers_of(&index, "open"), ["src/lib.rs:5 run -> src/store.rs:4 exact=true"]);
}

#[test]
fn a_callee_removed_then_restored_is_linked_again() {
    let (root, home) = project();
    let mut index = CodeIndex::open(root.path(), home.path()).unwrap();
    index.update().unwrap();

    write(root.path(), "src/store.rs", "pub fn close() {}\n");
    index.reindex_file(Path::new("src/store.rs")).unwrap();
    assert!(index.callers("open", 1).is_err(), "`open` no longer exists");
    let callees = index.callees("run", 1).unwrap();
    assert!(callees.edges.is_empty());
    assert_eq!(callees.unresolved[0].name, "open", "the call site is kept by name");

    write(root.path(), "src/store.rs", STORE);
    index.reindex_file(Path::new("src/store.rs")).unwrap();
    assert_eq!(callers_of(&index, "open"), ["src/lib.rs:5 run -> src/store.rs:1 exact=true"]);
}

#[test]
fn second_update_parses_nothing_and_edits_are_picked_up() {
    let (root, home) = project();
    let mut index = CodeIndex::open(root.path(), home.path()).unwrap();
    let first = index.update().unwrap();
    assert_eq!((first.files, first.parsed), (2, 2));
    let again = index.update().unwrap();
    assert_eq!((again.files, again.parsed, again.removed), (2, 0, 0));

    // An edit adds a call; re-indexing that one file shows it.
    write(
        root.path(),
        "src/lib.rs",
        &LIB.replace("    open()\n", "    open() + twice()\n}\n\nfn twice() -> u8 {\n    2\n"),
    );
    let stats = index.reindex_file(&root.path().join("src/lib.rs")).unwrap();
    assert_eq!(stats.parsed, 1);
    let callees: Vec<String> =
        index.callees("run", 1).unwrap().edges.iter().map(|e| e.to.qualified.clone()).collect();
    assert_eq!(callees, ["open", "twice"]);
    assert!(index.staleness().unwrap().changed.is_empty());
}

#[test]
fn deleted_files_are_dropped_with_their_edges() {
    let (root, home) = project();
    let mut index = CodeIndex::open(root.path(), home.path()).unwrap();
    index.update().unwrap();

    fs::remove_file(root.path().join("src/lib.rs")).unwrap();
    assert_eq!(index.staleness().unwrap().changed, ["src/lib.rs"]);
    let stats = index.update().unwrap();
    assert_eq!(stats.removed, 1);
    assert!(index.callers("open", 1).unwrap().edges.is_empty());
    assert!(index.definition("run").unwrap().is_empty());
    assert!(index.outline("src/lib.rs").is_err());
}

#[test]
fn files_without_a_grammar_and_ignored_files_are_skipped() {
    let (root, home) = project();
    write(root.path(), "notes.md", "# not code\n");
    write(root.path(), "script.lua", "print('no grammar')\n");
    write(root.path(), ".gitignore", "generated/\n");
    write(root.path(), "generated/big.rs", "pub fn generated() {}\n");
    let mut index = CodeIndex::open(root.path(), home.path()).unwrap();
    let stats = index.update().unwrap();
    assert_eq!(stats.files, 2);
    assert!(index.definition("generated").unwrap().is_empty());
}

#[test]
fn readers_see_the_index_while_a_second_handle_writes() {
    let (root, home) = project();
    let mut writer = CodeIndex::open(root.path(), home.path()).unwrap();
    writer.update().unwrap();
    let reader = CodeIndex::open_existing(root.path(), home.path()).unwrap();
    write(root.path(), "src/store.rs", &format!("\n{STORE}"));
    writer.update().unwrap();
    assert_eq!(callers_of(&reader, "open"), ["src/lib.rs:5 run -> src/store.rs:2 exact=true"]);
}

#[test]
fn a_new_same_named_function_elsewhere_turns_a_guess_into_candidates() {
    let root = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    write(root.path(), "a.py", "def process():\n    pass\n");
    write(root.path(), "main.py", "def main():\n    process()\n");
    let mut index = CodeIndex::open(root.path(), home.path()).unwrap();
    index.update().unwrap();
    let guess = |index: &CodeIndex| -> Vec<(String, bool, f64)> {
        let graph = index.callees("main", 1).unwrap();
        graph.edges.iter().map(|e| (e.to.path.clone(), e.exact, e.confidence)).collect()
    };
    assert_eq!(guess(&index), [("a.py".to_string(), false, 0.8)]);

    write(root.path(), "b.py", "def process():\n    pass\n");
    index.reindex_file(Path::new("b.py")).unwrap();
    assert_eq!(guess(&index), [("a.py".to_string(), false, 0.5), ("b.py".to_string(), false, 0.5)]);
}
