//! One file's syntax tree turned into what the index stores: the symbols it
//! defines, the call and inheritance sites it contains (by name, resolved
//! later), and the names it imports.

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
}

impl SiteKind {
    /// The name stored in the index.
    pub fn as_str(self) -> &'static str {
        match self {
            SiteKind::Calls => "calls",
            SiteKind::Inherits => "inherits",
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

/// The longest signature kept, in characters.
const MAX_SIGNATURE_CHARS: usize = 200;

/// Parses `source` as `lang`; `None` when tree-sitter gives up.
pub fn parse(parser: &mut Parser, lang: Lang, source: &str) -> Option<Parsed> {
    parser.set_language(&lang.grammar()).ok()?;
    let tree = parser.parse(source, None)?;
    let mut walk = Walk { lang, src: source.as_bytes(), out: Parsed::default() };
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
}

impl Walk<'_> {
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
            start_line: node.start_position().row as u32 + 1,
            end_line: node.end_position().row as u32 + 1,
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
            line: node.start_position().row as u32 + 1,
        });
    }

    fn import(&mut self, alias: &str, path: String, node: Node) {
        self.out.imports.push(Import {
            alias: alias.to_string(),
            path,
            line: node.start_position().row as u32 + 1,
        });
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

    // ---- Rust ----

    fn rust(&mut self, node: Node, scope: &Scope) -> Option<Scope> {
        let name = self.field_text(node, "name");
        let defined = |w: &mut Self, kind| name.as_deref().map(|n| w.define(node, kind, n, scope));
        match node.kind() {
            "function_item" | "function_signature_item" => {
                let kind = if scope.in_type { SymbolKind::Method } else { SymbolKind::Function };
                defined(self, kind)
            }
            "struct_item" | "union_item" => defined(self, SymbolKind::Struct),
            "enum_item" => defined(self, SymbolKind::Enum),
            "trait_item" => defined(self, SymbolKind::Trait),
            "mod_item" => defined(self, SymbolKind::Module),
            "const_item" | "static_item" => {
                defined(self, SymbolKind::Constant);
                Some(scope.clone())
            }
            "impl_item" => {
                let ty = node.child_by_field_name("type").map(|t| self.type_name(t))?;
                if let Some(tr) = node.child_by_field_name("trait") {
                    let tr_name = self.type_name(tr);
                    let owner = self.out.symbols.iter().rposition(|s| {
                        s.name == ty && matches!(s.kind, SymbolKind::Struct | SymbolKind::Enum)
                    });
                    let site_scope = Scope { parent: owner, ..scope.clone() };
                    let path = tr.child_by_field_name("path").map(|p| self.text(p).to_string());
                    self.site(SiteKind::Inherits, &tr_name, path, tr, &site_scope);
                }
                let sep = self.lang.separator();
                let prefix =
                    if scope.prefix.is_empty() { ty } else { format!("{}{sep}{ty}", scope.prefix) };
                Some(Scope { prefix, in_type: true, ..scope.clone() })
            }
            "call_expression" => {
                if let Some(f) = node.child_by_field_name("function") {
                    self.rust_call(f, scope);
                }
                Some(scope.clone())
            }
            "use_declaration" => {
                if let Some(arg) = node.child_by_field_name("argument") {
                    self.rust_use(arg, "", node);
                }
                None
            }
            "attribute_item" | "macro_definition" => None,
            _ => Some(scope.clone()),
        }
    }

    /// `Foo`, `Foo<T>`, `a::Foo` → `Foo`.
    fn type_name(&self, node: Node) -> String {
        match node.kind() {
            "generic_type" => {
                node.child_by_field_name("type").map_or_else(String::new, |t| self.type_name(t))
            }
            "scoped_type_identifier" | "scoped_identifier" => {
                self.field_text(node, "name").unwrap_or_default()
            }
            _ => self.text(node).to_string(),
        }
    }

    fn rust_call(&mut self, f: Node, scope: &Scope) {
        match f.kind() {
            "identifier" => {
                let name = self.text(f).to_string();
                self.site(SiteKind::Calls, &name, None, f, scope);
            }
            "scoped_identifier" => {
                let name = self.field_text(f, "name").unwrap_or_default();
                let path = f.child_by_field_name("path").map(|p| self.text(p).to_string());
                self.site(SiteKind::Calls, &name, path, f, scope);
            }
            "field_expression" => {
                let name = self.field_text(f, "field").unwrap_or_default();
                let value = f.child_by_field_name("value").map(|v| self.text(v).to_string());
                self.site(SiteKind::Calls, &name, value, f, scope);
            }
            "generic_function" => {
                if let Some(inner) = f.child_by_field_name("function") {
                    self.rust_call(inner, scope);
                }
            }
            _ => {}
        }
    }

    fn rust_use(&mut self, node: Node, prefix: &str, at: Node) {
        let join =
            |p: &str, s: &str| if p.is_empty() { s.to_string() } else { format!("{p}::{s}") };
        match node.kind() {
            "identifier" | "crate" | "self" | "super" => {
                let name = self.text(node).to_string();
                self.import(&name, join(prefix, &name), at);
            }
            "scoped_identifier" => {
                let name = self.field_text(node, "name").unwrap_or_default();
                self.import(&name, join(prefix, self.text(node)), at);
            }
            "use_as_clause" => {
                let path = self.field_text(node, "path").unwrap_or_default();
                let alias = self.field_text(node, "alias").unwrap_or_default();
                self.import(&alias, join(prefix, &path), at);
            }
            "use_wildcard" => {
                let path =
                    self.text(node).trim_end_matches("::*").trim_end_matches('*').to_string();
                self.import("*", join(prefix, &path), at);
            }
            "scoped_use_list" => {
                let path = self.field_text(node, "path").unwrap_or_default();
                let full = join(prefix, &path);
                if let Some(list) = node.child_by_field_name("list") {
                    self.rust_use(list, &full, at);
                }
            }
            "use_list" => {
                let mut cursor = node.walk();
                let items: Vec<Node> = node.named_children(&mut cursor).collect();
                for item in items {
                    self.rust_use(item, prefix, at);
                }
            }
            _ => {}
        }
    }

    // ---- Python ----

    fn python(&mut self, node: Node, scope: &Scope) -> Option<Scope> {
        match node.kind() {
            "function_definition" => {
                let name = self.field_text(node, "name")?;
                let kind = if scope.in_type { SymbolKind::Method } else { SymbolKind::Function };
                let mut inner = self.define(node, kind, &name, scope);
                inner.in_type = false;
                Some(inner)
            }
            "class_definition" => {
                let name = self.field_text(node, "name")?;
                let inner = self.define(node, SymbolKind::Class, &name, scope);
                if let Some(bases) = node.child_by_field_name("superclasses") {
                    let mut cursor = bases.walk();
                    let items: Vec<Node> = bases.named_children(&mut cursor).collect();
                    for base in items {
                        let (name, qualifier) = match base.kind() {
                            "identifier" => (self.text(base).to_string(), None),
                            "attribute" => (
                                self.field_text(base, "attribute").unwrap_or_default(),
                                self.field_text(base, "object"),
                            ),
                            _ => continue,
                        };
                        self.site(SiteKind::Inherits, &name, qualifier, base, &inner);
                    }
                }
                Some(inner)
            }
            "call" => {
                if let Some(f) = node.child_by_field_name("function") {
                    match f.kind() {
                        "identifier" => {
                            let name = self.text(f).to_string();
                            self.site(SiteKind::Calls, &name, None, f, scope);
                        }
                        "attribute" => {
                            let name = self.field_text(f, "attribute").unwrap_or_default();
                            let object = self.field_text(f, "object");
                            self.site(SiteKind::Calls, &name, object, f, scope);
                        }
                        _ => {}
                    }
                }
                Some(scope.clone())
            }
            "import_statement" => {
                let mut cursor = node.walk();
                let items: Vec<Node> = node.children_by_field_name("name", &mut cursor).collect();
                for item in items {
                    match item.kind() {
                        "dotted_name" => {
                            let path = self.text(item).to_string();
                            let alias = path.split('.').next().unwrap_or(&path).to_string();
                            self.import(&alias, alias.clone(), node);
                        }
                        "aliased_import" => {
                            let path = self.field_text(item, "name").unwrap_or_default();
                            let alias = self.field_text(item, "alias").unwrap_or_default();
                            self.import(&alias, path, node);
                        }
                        _ => {}
                    }
                }
                None
            }
            "import_from_statement" => {
                let module = self.field_text(node, "module_name").unwrap_or_default();
                let mut cursor = node.walk();
                let items: Vec<Node> = node.children_by_field_name("name", &mut cursor).collect();
                for item in items {
                    let (name, alias) = match item.kind() {
                        "dotted_name" => (self.text(item).to_string(), self.text(item).to_string()),
                        "aliased_import" => (
                            self.field_text(item, "name").unwrap_or_default(),
                            self.field_text(item, "alias").unwrap_or_default(),
                        ),
                        _ => continue,
                    };
                    self.import(&alias, format!("{module}.{name}"), node);
                }
                if node.named_children(&mut node.walk()).any(|c| c.kind() == "wildcard_import") {
                    self.import("*", module, node);
                }
                None
            }
            "expression_statement" if scope.parent.is_none() => {
                // Module-level `NAME = ...` in capitals is a constant.
                let assign = node.named_child(0).filter(|a| a.kind() == "assignment");
                if let Some(left) = assign.and_then(|a| a.child_by_field_name("left")) {
                    let name = self.text(left).to_string();
                    let is_const = left.kind() == "identifier"
                        && name.chars().any(|c| c.is_ascii_uppercase())
                        && !name.chars().any(|c| c.is_ascii_lowercase());
                    if is_const {
                        self.define(node, SymbolKind::Constant, &name, scope);
                    }
                }
                Some(scope.clone())
            }
            _ => Some(scope.clone()),
        }
    }

    // ---- TypeScript and JavaScript ----

    fn js(&mut self, node: Node, scope: &Scope) -> Option<Scope> {
        let name = self.field_text(node, "name");
        match node.kind() {
            "function_declaration" | "generator_function_declaration" => {
                let name = name?;
                Some(self.define(node, SymbolKind::Function, &name, scope))
            }
            "class_declaration" | "abstract_class_declaration" | "class" => {
                let name = name?;
                let inner = self.define(node, SymbolKind::Class, &name, scope);
                let mut cursor = node.walk();
                let heritage =
                    node.named_children(&mut cursor).find(|c| c.kind() == "class_heritage");
                if let Some(h) = heritage {
                    self.js_heritage(h, &inner);
                }
                Some(inner)
            }
            "method_definition" | "method_signature" | "abstract_method_signature" => {
                let name = name?;
                Some(self.define(node, SymbolKind::Method, &name, scope))
            }
            "interface_declaration" => {
                let name = name?;
                let inner = self.define(node, SymbolKind::Trait, &name, scope);
                let mut cursor = node.walk();
                let extends =
                    node.named_children(&mut cursor).find(|c| c.kind() == "extends_type_clause");
                if let Some(h) = extends {
                    self.js_heritage(h, &inner);
                }
                Some(inner)
            }
            "enum_declaration" => {
                let name = name?;
                self.define(node, SymbolKind::Enum, &name, scope);
                None
            }
            "internal_module" | "module" => match name {
                Some(n) => {
                    Some(self.define(node, SymbolKind::Module, n.trim_matches(['"', '\'']), scope))
                }
                None => Some(scope.clone()),
            },
            "variable_declarator" => {
                let value = node.child_by_field_name("value");
                let is_fn = value
                    .is_some_and(|v| matches!(v.kind(), "arrow_function" | "function_expression"));
                let decl_const = node.parent().is_some_and(|p| self.text(p).starts_with("const"));
                match name {
                    Some(n) if is_fn => Some(self.define(node, SymbolKind::Function, &n, scope)),
                    Some(n)
                        if decl_const
                            && scope.parent.is_none()
                            && n.chars().all(|c| !c.is_ascii_lowercase()) =>
                    {
                        self.define(node, SymbolKind::Constant, &n, scope);
                        Some(scope.clone())
                    }
                    _ => Some(scope.clone()),
                }
            }
            "call_expression" => {
                if let Some(f) = node.child_by_field_name("function") {
                    self.js_callee(f, scope);
                }
                Some(scope.clone())
            }
            "new_expression" => {
                if let Some(f) = node.child_by_field_name("constructor") {
                    self.js_callee(f, scope);
                }
                Some(scope.clone())
            }
            "import_statement" => {
                let source = self.field_text(node, "source").unwrap_or_default();
                let source = source.trim_matches(['"', '\'', '`']).to_string();
                let mut cursor = node.walk();
                let clause = node.named_children(&mut cursor).find(|c| c.kind() == "import_clause");
                if let Some(clause) = clause {
                    self.js_import_clause(clause, &source, node);
                }
                None
            }
            _ => Some(scope.clone()),
        }
    }

    fn js_callee(&mut self, f: Node, scope: &Scope) {
        match f.kind() {
            "identifier" => {
                let name = self.text(f).to_string();
                self.site(SiteKind::Calls, &name, None, f, scope);
            }
            "member_expression" => {
                let name = self.field_text(f, "property").unwrap_or_default();
                let object = self.field_text(f, "object");
                self.site(SiteKind::Calls, &name, object, f, scope);
            }
            _ => {}
        }
    }

    fn js_heritage(&mut self, node: Node, scope: &Scope) {
        let mut cursor = node.walk();
        let children: Vec<Node> = node.named_children(&mut cursor).collect();
        for child in children {
            match child.kind() {
                "identifier" | "type_identifier" => {
                    let name = self.text(child).to_string();
                    self.site(SiteKind::Inherits, &name, None, child, scope);
                }
                "member_expression" | "nested_type_identifier" => {
                    let name = self.text(child).rsplit('.').next().unwrap_or("").to_string();
                    self.site(SiteKind::Inherits, &name, None, child, scope);
                }
                "generic_type" => {
                    if let Some(n) = child.child_by_field_name("name") {
                        let name = self.text(n).to_string();
                        self.site(SiteKind::Inherits, &name, None, child, scope);
                    }
                }
                "extends_clause" | "implements_clause" => self.js_heritage(child, scope),
                _ => {}
            }
        }
    }

    fn js_import_clause(&mut self, clause: Node, source: &str, at: Node) {
        let mut cursor = clause.walk();
        let children: Vec<Node> = clause.named_children(&mut cursor).collect();
        for child in children {
            match child.kind() {
                "identifier" => {
                    let alias = self.text(child).to_string();
                    self.import(&alias, format!("{source}.default"), at);
                }
                "namespace_import" => {
                    let alias = self.text(child).rsplit(' ').next().unwrap_or("").to_string();
                    self.import(&alias, source.to_string(), at);
                }
                "named_imports" => {
                    let mut c2 = child.walk();
                    let specs: Vec<Node> = child.named_children(&mut c2).collect();
                    for spec in specs {
                        let name = self.field_text(spec, "name").unwrap_or_default();
                        let alias = self.field_text(spec, "alias").unwrap_or_else(|| name.clone());
                        self.import(&alias, format!("{source}.{name}"), at);
                    }
                }
                _ => {}
            }
        }
    }

    // ---- Go ----

    fn go(&mut self, node: Node, scope: &Scope) -> Option<Scope> {
        match node.kind() {
            "function_declaration" => {
                let name = self.field_text(node, "name")?;
                Some(self.define(node, SymbolKind::Function, &name, scope))
            }
            "method_declaration" => {
                let name = self.field_text(node, "name")?;
                let receiver = node.child_by_field_name("receiver").map(|r| self.go_receiver(r));
                let owner = Scope { prefix: receiver.unwrap_or_default(), ..scope.clone() };
                Some(self.define(node, SymbolKind::Method, &name, &owner))
            }
            "type_spec" => {
                let name = self.field_text(node, "name")?;
                let kind = match node.child_by_field_name("type").map(|t| t.kind()) {
                    Some("struct_type") => SymbolKind::Struct,
                    Some("interface_type") => SymbolKind::Trait,
                    _ => return Some(scope.clone()),
                };
                Some(self.define(node, kind, &name, scope))
            }
            "const_spec" => {
                let mut cursor = node.walk();
                let names: Vec<String> = node
                    .children_by_field_name("name", &mut cursor)
                    .map(|n| self.text(n).to_string())
                    .collect();
                for name in names {
                    self.define(node, SymbolKind::Constant, &name, scope);
                }
                Some(scope.clone())
            }
            "call_expression" => {
                if let Some(f) = node.child_by_field_name("function") {
                    match f.kind() {
                        "identifier" => {
                            let name = self.text(f).to_string();
                            self.site(SiteKind::Calls, &name, None, f, scope);
                        }
                        "selector_expression" => {
                            let name = self.field_text(f, "field").unwrap_or_default();
                            let operand = self.field_text(f, "operand");
                            self.site(SiteKind::Calls, &name, operand, f, scope);
                        }
                        _ => {}
                    }
                }
                Some(scope.clone())
            }
            "import_spec" => {
                let path = self.field_text(node, "path").unwrap_or_default();
                let path = path.trim_matches(['"', '`']).to_string();
                let alias = self
                    .field_text(node, "name")
                    .unwrap_or_else(|| path.rsplit('/').next().unwrap_or(&path).to_string());
                self.import(&alias, path, node);
                None
            }
            _ => Some(scope.clone()),
        }
    }

    /// `(s *Store)` → `Store`.
    fn go_receiver(&self, params: Node) -> String {
        let mut cursor = params.walk();
        let Some(param) = params.named_children(&mut cursor).next() else { return String::new() };
        let Some(mut ty) = param.child_by_field_name("type") else { return String::new() };
        while ty.kind() == "pointer_type" || ty.kind() == "generic_type" {
            match ty.named_child(0) {
                Some(inner) => ty = inner,
                None => break,
            }
        }
        self.text(ty).to_string()
    }
}

fn first_line(text: &str) -> Option<String> {
    let line = text.lines().map(str::trim).find(|l| !l.is_empty())?;
    Some(line.chars().take(MAX_SIGNATURE_CHARS).collect())
}
