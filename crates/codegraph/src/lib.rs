//! A code graph: the symbols of a project (functions, methods, classes,
//! structs, enums, traits and interfaces, modules, constants) and the edges
//! between them (calls, imports, inheritance, type references), parsed with tree-sitter and
//! kept in SQLite under `$FERROCLAW_HOME/index/<project key>.db`.
//!
//! grep finds names and text; the graph finds relations: who calls this,
//! what does this call, what breaks if this changes. Rust, Python,
//! TypeScript, JavaScript and Go are parsed; other files are skipped.
//!
//! The index is incremental by content hash: unchanged files are not parsed
//! again, deleted files are dropped, and every call site is kept by name so
//! that when a callee's file changes its callers are linked again.
//! Resolution says what it knows: an edge is `exact` when the same file or
//! an import names its target, otherwise it is a heuristic candidate with a
//! confidence (see [`resolve`](crate::resolve)).
//!
//! This crate is not a compiler: macros, trait dispatch and dynamic calls
//! are not followed, and types of receivers are not inferred.
//!
//! ```
//! use ferroclaw_codegraph::CodeIndex;
//!
//! let project = tempfile::tempdir().unwrap();
//! let home = tempfile::tempdir().unwrap();
//! std::fs::write(project.path().join("lib.py"), "def helper():\n    pass\n\ndef main():\n    helper()\n").unwrap();
//!
//! let mut index = CodeIndex::open(project.path(), home.path()).unwrap();
//! index.update().unwrap();
//! let callers = index.callers("helper", 1).unwrap();
//! assert_eq!(callers.edges[0].from.as_ref().unwrap().name, "main");
//! assert!(callers.edges[0].exact);
//! ```

mod extract;
mod index;
mod lang;
mod query;
pub mod render;
mod repo_map;
pub mod resolve;
mod store;
#[cfg(feature = "tools")]
mod tools;

use std::path::PathBuf;

pub use extract::{Import, Parsed, Site, SiteKind, SymbolDef, SymbolKind};
pub use index::{CodeIndex, MAX_FILE_BYTES, Staleness, UpdateStats};
pub use lang::Lang;
pub use query::{
    Counts, EdgeInfo, Graph, Impact, MAX_GRAPH_EDGES, MAX_IMPACT_DEPTH, SymbolInfo, Unresolved,
};
pub use repo_map::DEFAULT_REPO_MAP_TOKENS;
pub use store::{BUSY_TIMEOUT, SCHEMA_VERSION, db_path};
#[cfg(feature = "tools")]
pub use tools::{
    CodeQuery, CodeTool, EDITING_TOOLS, QUICK_BUILD_MAX_FILES, ReindexAfterEdit, SharedIndex,
    register_code_tools,
};

/// Why the index could not answer.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// `open_existing` found no index for the project.
    #[error("no code index at {} yet (run `ferroclaw index`)", .0.display())]
    NoIndex(PathBuf),
    /// Reading the project or creating the index folder failed.
    #[error("{0}: {1}")]
    Io(String, #[source] std::io::Error),
    /// SQLite refused (a locked or damaged database, a full disk).
    #[error("code index {0}: {1}")]
    Db(String, #[source] rusqlite::Error),
    /// `reindex_file` was given a path outside the project.
    #[error("{} is outside the project", .0.display())]
    OutsideProject(PathBuf),
    /// The path is not an indexed source file.
    #[error(
        "{0} is not in the code index (not a Rust, Python, TypeScript, JavaScript or Go file, ignored, or missing)"
    )]
    NotIndexed(String),
    /// No symbol matches.
    #[error("no symbol `{0}` in the code index (try code_find with part of the name)")]
    UnknownSymbol(String),
}
