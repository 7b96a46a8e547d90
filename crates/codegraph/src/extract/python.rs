//! Python: functions, classes and their bases, calls, imports, and
//! module-level constants in capitals.

use tree_sitter::Node;

use super::{Scope, SiteKind, SymbolKind, Walk};

impl Walk<'_> {
    pub(super) fn python(&mut self, node: Node, scope: &Scope) -> Option<Scope> {
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
            "type" => {
                self.python_type_refs(node, scope);
                None
            }
            _ => Some(scope.clone()),
        }
    }

    /// The names in an annotation (`User`, `models.User`, `list[User]`) as
    /// `references` sites.
    fn python_type_refs(&mut self, node: Node, scope: &Scope) {
        match node.kind() {
            "identifier" => {
                let name = self.text(node).to_string();
                self.reference(&name, None, node, scope);
            }
            "attribute" => {
                let name = self.field_text(node, "attribute").unwrap_or_default();
                let object = self.field_text(node, "object");
                self.reference(&name, object, node, scope);
            }
            _ => {
                let mut cursor = node.walk();
                let children: Vec<Node> = node.named_children(&mut cursor).collect();
                for child in children {
                    self.python_type_refs(child, scope);
                }
            }
        }
    }
}
