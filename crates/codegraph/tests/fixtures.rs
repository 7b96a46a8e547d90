//! The symbols and edges found in a small fixture project per language,
//! pinned as snapshots: a change to extraction or resolution shows up here
//! as a readable diff.

use std::path::Path;

use ferroclaw_codegraph::CodeIndex;

fn dump_of(fixture: &str) -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(fixture);
    let home = tempfile::tempdir().unwrap();
    let mut index = CodeIndex::open(&root, home.path()).unwrap();
    index.update().unwrap();
    index.dump().unwrap()
}

#[test]
fn rust_fixture_symbols_and_edges() {
    insta::assert_snapshot!(dump_of("rust"));
}

#[test]
fn python_fixture_symbols_and_edges() {
    insta::assert_snapshot!(dump_of("python"));
}

#[test]
fn typescript_fixture_symbols_and_edges() {
    insta::assert_snapshot!(dump_of("typescript"));
}

#[test]
fn javascript_fixture_symbols_and_edges() {
    insta::assert_snapshot!(dump_of("javascript"));
}

#[test]
fn go_fixture_symbols_and_edges() {
    insta::assert_snapshot!(dump_of("go"));
}
