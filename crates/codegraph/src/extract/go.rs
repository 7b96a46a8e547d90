//! Go: functions, methods (named `Type.m` by their receiver), struct and
//! interface types, constants, calls and imports.

use tree_sitter::Node;

use super::{Scope, SiteKind, SymbolKind, Walk};

/// Go's predeclared types: never a project's.
const PREDECLARED: &[&str] = &[
    "any",
    "bool",
    "byte",
    "comparable",
    "complex64",
    "complex128",
    "error",
    "float32",
    "float64",
    "int",
    "int8",
    "int16",
    "int32",
    "int64",
    "rune",
    "string",
    "uint",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "uintptr",
];

impl Walk<'_> {
    pub(super) fn go(&mut self, node: Node, scope: &Scope) -> Option<Scope> {
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
            "type_identifier" => {
                let name = self.text(node).to_string();
                if !PREDECLARED.contains(&name.as_str()) {
                    self.reference(&name, None, node, scope);
                }
                None
            }
            "qualified_type" => {
                let name = self.field_text(node, "name").unwrap_or_default();
                let package = self.field_text(node, "package");
                self.reference(&name, package, node, scope);
                None
            }
            _ => Some(scope.clone()),
        }
    }

    /// `(s *Store)` → `Store`.
    pub(super) fn go_receiver(&self, params: Node) -> String {
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
