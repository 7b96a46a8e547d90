//! The languages the index knows: which files are which, and their grammars.

use std::path::Path;

/// A language with a tree-sitter grammar compiled in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Lang {
    Rust,
    Python,
    TypeScript,
    Tsx,
    JavaScript,
    Go,
}

impl Lang {
    /// The language of `path` by its extension; `None` for anything else
    /// (such files are skipped, not an error).
    pub fn of(path: &Path) -> Option<Lang> {
        let ext = path.extension()?.to_str()?;
        Some(match ext {
            "rs" => Lang::Rust,
            "py" | "pyi" => Lang::Python,
            "ts" | "mts" | "cts" => Lang::TypeScript,
            "tsx" => Lang::Tsx,
            "js" | "mjs" | "cjs" | "jsx" => Lang::JavaScript,
            "go" => Lang::Go,
            _ => return None,
        })
    }

    /// The name stored in the index.
    pub fn name(self) -> &'static str {
        match self {
            Lang::Rust => "rust",
            Lang::Python => "python",
            Lang::TypeScript => "typescript",
            Lang::Tsx => "tsx",
            Lang::JavaScript => "javascript",
            Lang::Go => "go",
        }
    }

    /// Languages whose code can call each other (TypeScript imports
    /// JavaScript and the other way round).
    pub fn family(self) -> &'static str {
        match self {
            Lang::TypeScript | Lang::Tsx | Lang::JavaScript => "js",
            other => other.name(),
        }
    }

    /// The family of a stored language name.
    pub fn family_of(name: &str) -> &str {
        match name {
            "typescript" | "tsx" | "javascript" => "js",
            other => other,
        }
    }

    /// What joins the parts of a qualified name (`Store::open`, `Store.open`).
    pub fn separator(self) -> &'static str {
        match self {
            Lang::Rust => "::",
            _ => ".",
        }
    }

    /// The tree-sitter grammar.
    pub fn grammar(self) -> tree_sitter::Language {
        match self {
            Lang::Rust => tree_sitter_rust::LANGUAGE.into(),
            Lang::Python => tree_sitter_python::LANGUAGE.into(),
            Lang::TypeScript => tree_sitter_typescript::LANGUAGE_TYPESCRIPT.into(),
            Lang::Tsx => tree_sitter_typescript::LANGUAGE_TSX.into(),
            Lang::JavaScript => tree_sitter_javascript::LANGUAGE.into(),
            Lang::Go => tree_sitter_go::LANGUAGE.into(),
        }
    }

    /// True when the file itself holds tests by its name or folder
    /// (`tests/`, `test_x.py`, `x_test.go`, `x.test.ts`).
    pub fn is_test_path(self, rel: &str) -> bool {
        let file = rel.rsplit('/').next().unwrap_or(rel);
        let in_test_dir = rel.split('/').any(|d| d == "tests" || d == "test" || d == "__tests__");
        in_test_dir
            || match self {
                Lang::Rust => false,
                Lang::Python => file.starts_with("test_") || file.ends_with("_test.py"),
                Lang::Go => file.ends_with("_test.go"),
                _ => file.contains(".test.") || file.contains(".spec."),
            }
    }
}
