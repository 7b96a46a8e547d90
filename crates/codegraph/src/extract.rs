//! One file's syntax tree turned into what the index stores: the symbols it
//! defines, the call and inheritance sites it contains (by name, resolved
//! later), and the names it imports.

mod go;
mod js;
mod python;
mod rust;

use std::collections::HashSet;

use tree_sitter::{Node, Parser};

use crate::lang::Lang;

/// What kind of thing a symbol is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SymbolKind {
    Function,
    Method,
    Class,
    Struct,
    Enum,
    /// A Rust trait, a TypeScript or Go interface.
    Trait,
    Module,
    Constant,
}

impl SymbolKind {
    /// The name stored in the index and shown in answers.
    pub fn as_str(self) -> &'static str {
        match self {
            SymbolKind::Function => "function",
            SymbolKind::Method => "method",
            SymbolKind::Class => "class",
            SymbolKind::Struct => "struct",
            SymbolKind::Enum => "enum",
            SymbolKind::Trait => "trait",
            SymbolKind::Module => "module",
            SymbolKind::Constant => "constant",
        }
    }

    /// The kind named `s` (`interface` is a trait).
    pub fn parse(s: &str) -> Option<SymbolKind> {
        Some(match s {
            "function" | "fn" => SymbolKind::Function,
            "method" => SymbolKind::Method,
            "class" => SymbolKind::Class,
            "struct" => SymbolKind::Struct,
            "enum" => SymbolKind::Enum,
            "trait" | "interface" => SymbolKind::Trait,
            "module" | "mod" | "namespace" => SymbolKind::Module,
            "constant" | "const" => SymbolKind::Constant,
            _ => return None,
        })
    }
}

/// What a site refers to its target for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SiteKind {
    /// A call (or `new X()`, or a Rust `Type::function()` path call).
    Calls,
    /// A base class, an implemented trait or interface.
    Inherits,
    /// An import of a project symbol (`use crate::store::open`,
    /// `from app.models import User`): which files depend on it.
    Imports,
    /// A type named where it is used (a parameter, a field, a return type,
    /// an annotation): kept once per name in each function or type.
    References,
}

impl SiteKind {
    /// The name stored in the index.
    pub fn as_str(self) -> &'static str {
        match self {
            SiteKind::Calls => "calls",
            SiteKind::Inherits => "inherits",
            SiteKind::Imports => "imports",
            SiteKind::References => "references",
        }
    }
}

/// A symbol defined in the file.
#[derive(Debug, Clone, PartialEq)]
pub struct SymbolDef {
    pub kind: SymbolKind,
    pub name: String,
    /// Containers within the file and the name (`Store::open`, `Repo.save`).
    pub qualified: String,
    /// Index of the containing symbol in [`Parsed::symbols`].
    pub parent: Option<usize>,
    /// 1-based, inclusive.
    pub start_line: u32,
    pub end_line: u32,
    /// The declaration up to its body, on one line.
    pub signature: String,
    /// The first line of its doc comment or docstring.
    pub doc: Option<String>,
    /// A test function (`#[test]`, `test_*`, `TestX`).
    pub is_test: bool,
}

/// A place that refers to another symbol by name.
#[derive(Debug, Clone, PartialEq)]
pub struct Site {
    pub kind: SiteKind,
    /// The name referred to (`open` in `store.open()`).
    pub name: String,
    /// What came before it (`store` in `store.open()`, `self`, `Store`).
    pub qualifier: Option<String>,
    /// Index of the enclosing symbol in [`Parsed::symbols`]; `None` at top level.
    pub caller: Option<usize>,
    pub line: u32,
}

/// A name brought into the file by an import.
#[derive(Debug, Clone, PartialEq)]
pub struct Import {
    /// The name the file uses (`open`, `np`, `*` for a glob import).
    pub alias: String,
    /// The full path it stands for (`crate::store::open`, `numpy`, `./util.helper`).
    pub path: String,
    pub line: u32,
}

/// Everything one file contributes to the index.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Parsed {
    pub symbols: Vec<SymbolDef>,
    pub sites: Vec<Site>,
    pub imports: Vec<Import>,
}

/// Nodes whose type identifiers are what they define or declare (the type
/// itself, a type parameter, an `impl` header), not uses of another type.
const DEFINES_TYPE: &[&str] = &[
    "struct_item",
    "enum_item",
    "union_item",
    "trait_item",
    "type_item",
    "impl_item",
    "type_parameters",
    "constrained_type_parameter",
    "type_parameter",
    "class_declaration",
    "abstract_class_declaration",
    "interface_declaration",
    "type_alias_declaration",
    "enum_declaration",
    "type_spec",
    "type_parameter_declaration",
];

/// The longest signature kept, in characters.
const MAX_SIGNATURE_CHARS: usize = 200;

/// Parses `source` as `lang`; `None` when tree-sitter gives up.
pub(crate) fn parse(parser: &mut Parser, lang: Lang, source: &str) -> Option<Parsed> {
    parser.set_language(&lang.grammar()).ok()?;
    let tree = parser.parse(source, None)?;
    let mut walk = Walk {
        lang,
        src: source.as_bytes(),
        out: Parsed::default(),
        line_offset: 0,
        referenced: HashSet::new(),
    };
    walk.visit(tree.root_node(), &Scope::default());
    Some(walk.out)
}

/// Where the walk is: the symbol containers and the enclosing callable.
#[derive(Clone, Default)]
struct Scope {
    /// Qualified-name prefix (`Store`, `outer::inner`).
    prefix: String,
    /// The nearest enclosing symbol.
    parent: Option<usize>,
    /// The nearest enclosing function or method, which owns call sites.
    caller: Option<usize>,
    /// Inside a class, trait, interface or impl: functions are methods.
    in_type: bool,
    /// Inside a Rust `#[cfg(test)]` module.
    in_test_mod: bool,
}

struct Walk<'a> {
    lang: Lang,
    src: &'a [u8],
    out: Parsed,
    /// Rows before `src` in the file (a Rust macro body parsed on its own).
    line_offset: u32,
    /// (referrer, qualifier, name) of the references sites so far: one each.
    referenced: HashSet<(usize, Option<String>, String)>,
}

impl Walk<'_> {
    /// The 1-based line in the file where `node` starts.
    fn line(&self, node: Node) -> u32 {
        node.start_position().row as u32 + 1 + self.line_offset
    }

    fn text(&self, node: Node) -> &str {
        node.utf8_text(self.src).unwrap_or("")
    }

    fn field_text(&self, node: Node, field: &str) -> Option<String> {
        node.child_by_field_name(field).map(|n| self.text(n).to_string())
    }

    fn visit(&mut self, node: Node, scope: &Scope) {
        let inner = match self.lang {
            Lang::Rust => self.rust(node, scope),
            Lang::Python => self.python(node, scope),
            Lang::TypeScript | Lang::Tsx | Lang::JavaScript => self.js(node, scope),
            Lang::Go => self.go(node, scope),
        };
        let Some(inner) = inner else { return };
        let mut cursor = node.walk();
        for child in node.named_children(&mut cursor) {
            self.visit(child, &inner);
        }
    }

    /// Adds a symbol for `node` and returns the scope for its children.
    fn define(&mut self, node: Node, kind: SymbolKind, name: &str, scope: &Scope) -> Scope {
        let sep = self.lang.separator();
        let qualified = if scope.prefix.is_empty() {
            name.to_string()
        } else {
            format!("{}{sep}{name}", scope.prefix)
        };
        let is_test = self.is_test(node, kind, name, scope);
        self.out.symbols.push(SymbolDef {
            kind,
            name: name.to_string(),
            qualified: qualified.clone(),
            parent: scope.parent,
            start_line: self.line(node),
            end_line: node.end_position().row as u32 + 1 + self.line_offset,
            signature: self.signature(node),
            doc: self.doc(node),
            is_test,
        });
        let id = self.out.symbols.len() - 1;
        let callable = matches!(kind, SymbolKind::Function | SymbolKind::Method);
        Scope {
            prefix: qualified,
            parent: Some(id),
            caller: if callable { Some(id) } else { scope.caller },
            in_type: matches!(kind, SymbolKind::Class | SymbolKind::Struct | SymbolKind::Trait),
            in_test_mod: scope.in_test_mod || (kind == SymbolKind::Module && is_test),
        }
    }

    fn site(
        &mut self,
        kind: SiteKind,
        name: &str,
        qualifier: Option<String>,
        node: Node,
        scope: &Scope,
    ) {
        if name.is_empty() {
            return;
        }
        let caller = if kind == SiteKind::Inherits { scope.parent } else { scope.caller };
        self.out.sites.push(Site {
            kind,
            name: name.to_string(),
            qualifier,
            caller,
            line: self.line(node),
        });
    }

    /// A `references` site for the type `name` written at `node`, from the
    /// enclosing function or type (a type named at top level, in an `impl`
    /// header, or inside a definition's own name is not a use).
    fn reference(&mut self, name: &str, qualifier: Option<String>, node: Node, scope: &Scope) {
        let is_own_name = node.parent().is_some_and(|p| DEFINES_TYPE.contains(&p.kind()));
        // Type parameters (`T`) and `Self` name nothing in the project.
        if is_own_name || name.len() < 2 || name == "Self" {
            return;
        }
        let is_type = |i: &usize| {
            self.out.symbols.get(*i).is_some_and(|s| {
                matches!(
                    s.kind,
                    SymbolKind::Struct | SymbolKind::Enum | SymbolKind::Trait | SymbolKind::Class
                )
            })
        };
        let Some(referrer) = scope.caller.or(scope.parent.filter(is_type)) else { return };
        if !self.referenced.insert((referrer, qualifier.clone(), name.to_string())) {
            return;
        }
        self.out.sites.push(Site {
            kind: SiteKind::References,
            name: name.to_string(),
            qualifier,
            caller: Some(referrer),
            line: self.line(node),
        });
    }

    fn import(&mut self, alias: &str, path: String, node: Node) {
        // The imported name, linked to the symbol it names when the project has it.
        let split = path
            .rsplit_once("::")
            .or_else(|| path.rsplit_once('.').filter(|(_, n)| !n.contains('/')));
        if let Some((module, name)) = split.filter(|(_, n)| !n.is_empty() && alias != "*") {
            self.out.sites.push(Site {
                kind: SiteKind::Imports,
                name: name.to_string(),
                qualifier: Some(module.to_string()),
                caller: None,
                line: self.line(node),
            });
        }
        self.out.imports.push(Import { alias: alias.to_string(), path, line: self.line(node) });
    }

    /// The declaration from its start to its body, whitespace collapsed.
    fn signature(&self, node: Node) -> String {
        let end = node
            .child_by_field_name("body")
            .or_else(|| node.child_by_field_name("value").filter(|_| self.lang == Lang::Rust))
            .map_or(node.end_byte(), |b| b.start_byte());
        let raw = String::from_utf8_lossy(&self.src[node.start_byte()..end]);
        let first: String = raw.split_whitespace().collect::<Vec<_>>().join(" ");
        let trimmed = first.trim_end_matches(['{', ':', '=', ' ']).to_string();
        if trimmed.chars().count() > MAX_SIGNATURE_CHARS {
            let cut: String = trimmed.chars().take(MAX_SIGNATURE_CHARS).collect();
            format!("{cut}…")
        } else {
            trimmed
        }
    }

    /// The first line of the doc comment above `node` (or, in Python, of the
    /// docstring opening its body).
    fn doc(&self, node: Node) -> Option<String> {
        if self.lang == Lang::Python {
            let body = node.child_by_field_name("body")?;
            let first = body.named_child(0)?;
            let string =
                (first.kind() == "expression_statement").then(|| first.named_child(0)).flatten()?;
            if string.kind() != "string" {
                return None;
            }
            let text = self.text(string).trim_matches(|c| c == '"' || c == '\'');
            return first_line(text);
        }
        // Comments sit before the declaration, or before the `export` or
        // attribute that wraps it.
        let mut anchor = node;
        if let Some(p) = node.parent().filter(|p| p.kind() == "export_statement") {
            anchor = p;
        }
        let mut comments = Vec::new();
        let mut prev = anchor.prev_named_sibling();
        while let Some(p) = prev {
            match p.kind() {
                "attribute_item" => {}
                "line_comment" | "block_comment" | "comment" => comments.push(p),
                _ => break,
            }
            prev = p.prev_named_sibling();
        }
        let top = comments.last()?;
        let text = self.text(*top);
        if self.lang == Lang::Rust && !(text.starts_with("///") || text.starts_with("/**")) {
            return None;
        }
        let stripped = text
            .trim_end_matches("*/")
            .trim_start_matches('/')
            .trim_start_matches('*')
            .lines()
            .map(|l| l.trim().trim_start_matches('*').trim())
            .find(|l| !l.is_empty())?;
        first_line(stripped)
    }

    fn is_test(&self, node: Node, kind: SymbolKind, name: &str, scope: &Scope) -> bool {
        match self.lang {
            Lang::Rust => {
                let mut prev = node.prev_named_sibling();
                while let Some(p) = prev {
                    match p.kind() {
                        "attribute_item" => {
                            let t = self.text(p);
                            if t.contains("test") {
                                return true;
                            }
                        }
                        "line_comment" | "block_comment" => {}
                        _ => break,
                    }
                    prev = p.prev_named_sibling();
                }
                scope.in_test_mod
            }
            Lang::Python => {
                (matches!(kind, SymbolKind::Function | SymbolKind::Method)
                    && name.starts_with("test"))
                    || (kind == SymbolKind::Class && name.starts_with("Test"))
            }
            Lang::Go => kind == SymbolKind::Function && name.starts_with("Test"),
            _ => false,
        }
    }
}

fn first_line(text: &str) -> Option<String> {
    let line = text.lines().map(str::trim).find(|l| !l.is_empty())?;
    Some(line.chars().take(MAX_SIGNATURE_CHARS).collect())
}
