//! The questions the graph answers: outlines, finding, definitions,
//! callers, callees and impact, and answers paged within a budget.

use std::fs;
use std::path::Path;

use ferroclaw_codegraph::render::{Page, paginate};
use ferroclaw_codegraph::{CodeIndex, SymbolKind};

fn python_fixture() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/python")
}

fn indexed(root: &Path) -> (CodeIndex, tempfile::TempDir) {
    let home = tempfile::tempdir().unwrap();
    let mut index = CodeIndex::open(root, home.path()).unwrap();
    index.update().unwrap();
    (index, home)
}

#[test]
fn outline_lists_symbols_nested_in_source_order() {
    let (index, _home) = indexed(&python_fixture());
    let outline: Vec<(usize, String)> =
        index.outline("app/models.py").unwrap().into_iter().map(|(d, s)| (d, s.name)).collect();
    let names: Vec<(usize, &str)> = outline.iter().map(|(d, n)| (*d, n.as_str())).collect();
    assert_eq!(
        names,
        [
            (0, "MAX_ITEMS"),
            (0, "Base"),
            (1, "save"),
            (1, "validate"),
            (0, "User"),
            (1, "greet"),
            (0, "format_name")
        ]
    );
}

#[test]
fn find_ranks_exact_names_first_and_filters_by_kind() {
    let (index, _home) = indexed(&python_fixture());
    let found: Vec<String> =
        index.find("save", None, 10).unwrap().into_iter().map(|s| s.qualified).collect();
    assert_eq!(found, ["Base.save"]);
    let classes: Vec<String> =
        index.find("e", Some(SymbolKind::Class), 10).unwrap().into_iter().map(|s| s.name).collect();
    assert_eq!(classes, ["Base", "User"]);
}

#[test]
fn definition_accepts_qualified_names_and_paths() {
    let (index, _home) = indexed(&python_fixture());
    let by_qualified = index.definition("Base.save").unwrap();
    assert_eq!((by_qualified[0].path.as_str(), by_qualified[0].start_line), ("app/models.py", 6));
    assert_eq!(by_qualified[0].doc.as_deref(), Some("Saves the model."));
    let by_path = index.definition("app/service.py:register").unwrap();
    assert_eq!(by_path.len(), 1);
    assert!(index.definition("tests/test_service.py:register").unwrap().is_empty());
}

#[test]
fn impact_reaches_transitive_callers_and_their_tests() {
    let (index, _home) = indexed(&python_fixture());
    let impact = index.impact("format_name").unwrap();
    let callers: Vec<&str> = impact.callers.iter().map(|(_, s, _)| s.qualified.as_str()).collect();
    assert_eq!(callers, ["User.greet", "register", "test_register"]);
    assert_eq!(impact.files, ["app/models.py", "app/service.py", "tests/test_service.py"]);
    assert_eq!(impact.tests.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(), ["test_register"]);
}

#[test]
fn same_named_functions_without_an_import_are_heuristic_candidates() {
    let root = tempfile::tempdir().unwrap();
    fs::write(root.path().join("a.py"), "def process():\n    pass\n").unwrap();
    fs::write(root.path().join("b.py"), "def process():\n    pass\n").unwrap();
    fs::write(root.path().join("c.py"), "def main():\n    process()\n").unwrap();
    let (index, _home) = indexed(root.path());
    let callees = index.callees("main", 1).unwrap();
    let edges: Vec<(String, bool, f64)> =
        callees.edges.iter().map(|e| (e.to.path.clone(), e.exact, e.confidence)).collect();
    assert_eq!(edges, [("a.py".to_string(), false, 0.5), ("b.py".to_string(), false, 0.5)]);
}

#[test]
fn paging_shows_a_budget_of_lines_and_where_to_continue() {
    let lines: Vec<String> = (1..=10).map(|i| format!("line {i:02}")).collect();
    let first = paginate("header", &lines, Page { offset: 0, max_chars: 30 });
    assert_eq!(
        first,
        "header\nline 01\nline 02\nline 03\n[lines 1-3 of 10; call again with offset=3 for more]\n"
    );
    let last = paginate("header", &lines, Page { offset: 9, max_chars: 30 });
    assert_eq!(last, "header\nline 10\n[lines 10-10 of 10; end]\n");
}

#[test]
fn freshness_names_the_files_changed_since_the_last_update() {
    let root = tempfile::tempdir().unwrap();
    fs::write(root.path().join("a.py"), "def a():\n    pass\n").unwrap();
    fs::write(root.path().join("b.py"), "def b():\n    pass\n").unwrap();
    let (index, _home) = indexed(root.path());
    let fresh = ferroclaw_codegraph::render::freshness(
        &index.counts().unwrap(),
        &index.staleness().unwrap(),
    );
    assert!(fresh.starts_with("index: 2 files, 2 symbols, 0 edges (0 exact); updated "), "{fresh}");
    assert!(fresh.ends_with("; no files changed since"), "{fresh}");

    fs::write(root.path().join("a.py"), "def a():\n    return 1\n").unwrap();
    fs::write(root.path().join("c.py"), "def c():\n    pass\n").unwrap();
    let fresh = ferroclaw_codegraph::render::freshness(
        &index.counts().unwrap(),
        &index.staleness().unwrap(),
    );
    assert!(
        fresh.ends_with("; 2 files changed since (a.py, c.py): answers about them may be stale"),
        "{fresh}"
    );
}

#[test]
fn impact_counts_files_that_only_import_the_symbol() {
    let root = tempfile::tempdir().unwrap();
    fs::write(root.path().join("a.py"), "def helper():\n    pass\n").unwrap();
    fs::write(root.path().join("b.py"), "from a import helper\n\nHANDLERS = [helper]\n").unwrap();
    let (index, _home) = indexed(root.path());
    assert!(index.callers("helper", 1).unwrap().edges.is_empty(), "an import is not a call");
    let impact = index.impact("helper").unwrap();
    assert!(impact.callers.is_empty());
    assert_eq!(impact.files, ["b.py"]);
}

/// Who refers to `symbol`: `path:line referrer kind exact`.
fn referrers(index: &CodeIndex, symbol: &str) -> Vec<String> {
    index
        .callers(symbol, 1)
        .unwrap()
        .edges
        .iter()
        .map(|e| {
            let from = e.from.as_ref().map_or("<top>".to_string(), |f| f.qualified.clone());
            format!("{}:{} {from} {} exact={}", e.site_path, e.site_line, e.kind, e.exact)
        })
        .collect()
}

#[test]
fn types_named_in_signatures_fields_and_annotations_are_references_with_sites() {
    let root = tempfile::tempdir().unwrap();
    let files = [
        (
            "src/store.rs",
            "pub struct Store;\n\nimpl Store {\n    pub fn open() -> Store {\n        Store\n    }\n}\n",
        ),
        (
            "src/lib.rs",
            "mod store;\nuse crate::store::Store;\n\npub struct Cache {\n    inner: Vec<Store>,\n}\n\npub fn keep<T>(s: &Store, t: T) -> Option<Store> {\n    let _: Option<Store> = None;\n    None\n}\n",
        ),
        ("models.py", "class User:\n    pass\n"),
        ("service.py", "from models import User\n\ndef save(u: User) -> None:\n    pass\n"),
        ("types.ts", "export interface Item {\n  id: number;\n}\n"),
        (
            "use.ts",
            "import { Item } from './types';\n\nexport function take(i: Item): Item[] {\n  return [i];\n}\n",
        ),
        ("go.mod", "module example.com/m\n"),
        ("store/store.go", "package store\n\ntype Box struct{}\n"),
        (
            "main.go",
            "package main\n\nimport \"example.com/m/store\"\n\nfunc run(b *store.Box) {}\n",
        ),
    ];
    for (rel, text) in files {
        let path = root.path().join(rel);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, text).unwrap();
    }
    let (index, _home) = indexed(root.path());
    // One site per referrer (the second `Option<Store>` in `keep` is not
    // repeated), the impl header is not a use, `T` names nothing.
    assert_eq!(
        referrers(&index, "Store"),
        [
            "src/lib.rs:5 Cache references exact=true",
            "src/lib.rs:8 keep references exact=true",
            "src/store.rs:4 Store::open references exact=true",
        ]
    );
    assert_eq!(referrers(&index, "User"), ["service.py:3 save references exact=true"]);
    assert_eq!(referrers(&index, "Item"), ["use.ts:3 take references exact=true"]);
    assert_eq!(referrers(&index, "Box"), ["main.go:5 run references exact=true"]);
    // Callees list the project types used; library types are not "unresolved calls".
    let callees = index.callees("keep", 1).unwrap();
    assert_eq!(callees.edges.len(), 1);
    assert!(callees.unresolved.is_empty(), "{:?}", callees.unresolved);
    // What breaks if `Store` changes reaches the users of the type and their callers.
    let impact = index.impact("Store").unwrap();
    assert!(impact.files.contains(&"src/lib.rs".to_string()), "{:?}", impact.files);
}

#[test]
fn a_self_import_or_a_call_chain_from_an_imported_module_still_links_method_calls() {
    let root = tempfile::tempdir().unwrap();
    let files = [
        ("src/list.rs", "pub struct List;\n"),
        (
            "src/runtime.rs",
            "pub struct Builder;\n\nimpl Builder {\n    pub fn new() -> Builder {\n        Builder\n    }\n\n    pub fn lifo(self) -> Builder {\n        self\n    }\n}\n",
        ),
        (
            "src/lib.rs",
            "mod list;\nmod runtime;\nuse crate::list::{self, List};\nuse crate::runtime;\n\npub struct Set;\n\nimpl Set {\n    pub fn needs_release(&self) -> bool {\n        true\n    }\n}\n\npub struct Holder {\n    set: Set,\n}\n\nimpl Holder {\n    fn release(&self) -> bool {\n        self.set.needs_release()\n    }\n}\n\nfn start() {\n    runtime::Builder::new()\n        .lifo();\n}\n",
        ),
    ];
    for (rel, text) in files {
        let path = root.path().join(rel);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, text).unwrap();
    }
    let (index, _home) = indexed(root.path());
    // `use crate::list::{self, ..}` made `self` an import, so `self.set.m()`
    // was looked up in a module named `self` and linked to nothing.
    let callers = index.callers("needs_release", 1).unwrap();
    let from: Vec<String> =
        callers.edges.iter().filter_map(|e| e.from.as_ref().map(|f| f.qualified.clone())).collect();
    assert_eq!(from, ["Holder::release"]);
    // `runtime::Builder::new().lifo()`: `runtime` is imported, but the
    // qualifier is a call chain, not a path into the module.
    let callers = index.callers("lifo", 1).unwrap();
    let from: Vec<String> =
        callers.edges.iter().filter_map(|e| e.from.as_ref().map(|f| f.qualified.clone())).collect();
    assert_eq!(from, ["start"]);
}
