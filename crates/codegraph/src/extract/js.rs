//! TypeScript and JavaScript: functions (declared or bound to a `const`),
//! classes and interfaces with their heritage, calls and `new`, imports.

use tree_sitter::Node;

use super::{Scope, SiteKind, SymbolKind, Walk};

impl Walk<'_> {
    pub(super) fn js(&mut self, node: Node, scope: &Scope) -> Option<Scope> {
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
            // Bases were recorded as `inherits` sites with the class.
            "class_heritage" | "extends_type_clause" => None,
            "type_identifier" => {
                let name = self.text(node).to_string();
                self.reference(&name, None, node, scope);
                None
            }
            "nested_type_identifier" => {
                let name = self.field_text(node, "name").unwrap_or_default();
                let module = self.field_text(node, "module");
                self.reference(&name, module, node, scope);
                None
            }
            _ => Some(scope.clone()),
        }
    }

    pub(super) fn js_callee(&mut self, f: Node, scope: &Scope) {
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

    pub(super) fn js_heritage(&mut self, node: Node, scope: &Scope) {
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

    pub(super) fn js_import_clause(&mut self, clause: Node, source: &str, at: Node) {
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
}
