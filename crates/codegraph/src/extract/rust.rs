//! Rust: items, `impl` blocks (methods named `Type::m`, `impl Trait for
//! Type` as an inherits site), calls and `use` trees.

use tree_sitter::Node;

use super::{Scope, SiteKind, SymbolKind, Walk};

impl Walk<'_> {
    pub(super) fn rust(&mut self, node: Node, scope: &Scope) -> Option<Scope> {
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
            "macro_invocation" => {
                let mut cursor = node.walk();
                let body = node.named_children(&mut cursor).find(|c| c.kind() == "token_tree");
                match body {
                    Some(body) if scope.caller.is_none() => self.rust_macro_items(body, scope),
                    Some(body) => self.rust_macro_calls(body, scope),
                    None => {}
                }
                None
            }
            "type_identifier" => {
                let name = self.text(node).to_string();
                self.reference(&name, None, node, scope);
                None
            }
            "scoped_type_identifier" => {
                let name = self.field_text(node, "name").unwrap_or_default();
                let path = self.field_text(node, "path");
                self.reference(&name, path, node, scope);
                None
            }
            "attribute_item" | "macro_definition" => None,
            _ => Some(scope.clone()),
        }
    }

    /// `Foo`, `Foo<T>`, `a::Foo` → `Foo`.
    pub(super) fn type_name(&self, node: Node) -> String {
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

    pub(super) fn rust_call(&mut self, f: Node, scope: &Scope) {
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

    pub(super) fn rust_use(&mut self, node: Node, prefix: &str, at: Node) {
        let join =
            |p: &str, s: &str| if p.is_empty() { s.to_string() } else { format!("{p}::{s}") };
        match node.kind() {
            // `use a::b::{self}` brings `b`, not a name `self`.
            "self" if !prefix.is_empty() => {
                let alias = prefix.rsplit("::").next().unwrap_or(prefix).to_string();
                self.import(&alias, prefix.to_string(), at);
            }
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

    /// `cfg_rt! { pub fn f() {} }` at item level: the body is parsed as Rust
    /// on its own (tree-sitter leaves it a token tree), lines kept.
    fn rust_macro_items(&mut self, body: Node, scope: &Scope) {
        let src = self.src;
        let text = body.utf8_text(src).unwrap_or("");
        let Some(inner) = text.strip_prefix('{').and_then(|t| t.strip_suffix('}')) else { return };
        let mut parser = tree_sitter::Parser::new();
        if parser.set_language(&self.lang.grammar()).is_err() {
            return;
        }
        let Some(tree) = parser.parse(inner, None) else { return };
        let mut sub = Walk {
            lang: self.lang,
            src: inner.as_bytes(),
            out: std::mem::take(&mut self.out),
            line_offset: self.line_offset + body.start_position().row as u32,
            referenced: std::mem::take(&mut self.referenced),
        };
        let root = tree.root_node();
        let mut cursor = root.walk();
        for child in root.named_children(&mut cursor) {
            sub.visit(child, scope);
        }
        self.out = sub.out;
        self.referenced = sub.referenced;
    }

    /// `assert_eq!(run(), 1)` inside a function: `name(...)` in the macro's
    /// tokens is a call site (`a.name(...)` and `A::name(...)` keep `a`/`A`).
    fn rust_macro_calls(&mut self, tokens: Node, scope: &Scope) {
        let mut cursor = tokens.walk();
        let children: Vec<Node> = tokens.children(&mut cursor).collect();
        for (i, child) in children.iter().enumerate() {
            if child.kind() == "token_tree" {
                self.rust_macro_calls(*child, scope);
                continue;
            }
            let called = children
                .get(i + 1)
                .is_some_and(|n| n.kind() == "token_tree" && self.text(*n).starts_with('('));
            if child.kind() != "identifier" || !called {
                continue;
            }
            let qualifier = match i.checked_sub(1).map(|p| self.text(children[p])) {
                Some("." | "::") => i.checked_sub(2).map(|q| self.text(children[q]).to_string()),
                _ => None,
            };
            let name = self.text(*child).to_string();
            self.site(SiteKind::Calls, &name, qualifier, *child, scope);
        }
    }
}
