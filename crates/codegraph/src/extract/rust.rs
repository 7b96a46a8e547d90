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
}
