//! The ordered set of tools offered to the model.

use std::sync::{Arc, OnceLock};

use ferroclaw_protocol::ToolSpec;
use serde_json::Value;

use crate::Tool;

/// One registered tool and its lazily compiled schema validator.
#[derive(Clone)]
struct Entry {
    tool: Arc<dyn Tool>,
    validator: Arc<OnceLock<Result<jsonschema::Validator, String>>>,
}

/// Tools in insertion order. Cloning is cheap (tools are shared), and the
/// specs are built once per change and shared by the clones.
#[derive(Clone, Default)]
pub struct ToolRegistry {
    entries: Vec<Entry>,
    /// The specs of `entries`, built on first use; replaced on any change.
    specs: Arc<OnceLock<Arc<[ToolSpec]>>>,
}

impl ToolRegistry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a tool; a tool with the same name is replaced in place.
    pub fn register(&mut self, tool: impl Tool + 'static) {
        self.register_arc(Arc::new(tool));
    }

    /// Adds an already shared tool; a tool with the same name is replaced in place.
    pub fn register_arc(&mut self, tool: Arc<dyn Tool>) {
        let entry = Entry { tool, validator: Arc::new(OnceLock::new()) };
        self.specs = Arc::default();
        match self.entries.iter_mut().find(|e| e.tool.name() == entry.tool.name()) {
            Some(slot) => *slot = entry,
            None => self.entries.push(entry),
        }
    }

    /// The tool called `name`.
    pub fn get(&self, name: &str) -> Option<&Arc<dyn Tool>> {
        self.entries.iter().find(|e| e.tool.name() == name).map(|e| &e.tool)
    }

    /// Names in order.
    pub fn names(&self) -> Vec<&str> {
        self.entries.iter().map(|e| e.tool.name()).collect()
    }

    /// True when no tool is registered.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Number of tools.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// The specs sent to the model, in order.
    pub fn specs(&self) -> Vec<ToolSpec> {
        self.shared_specs().to_vec()
    }

    /// The specs, built once per change of the registry and shared by its
    /// clones (a tool's schema is built by code on every `input_schema` call).
    pub fn shared_specs(&self) -> Arc<[ToolSpec]> {
        self.specs
            .get_or_init(|| {
                self.entries
                    .iter()
                    .map(|e| ToolSpec {
                        name: e.tool.name().to_string(),
                        description: e.tool.description().to_string(),
                        input_schema: e.tool.input_schema(),
                    })
                    .collect()
            })
            .clone()
    }

    /// Shares one set of specs with `other` when both offer the same tools
    /// (names and descriptions, in order), as agents opened alike do: the
    /// specs are then built once for all of them, not once per agent. True
    /// when shared.
    pub fn share_specs_with(&mut self, other: &ToolRegistry) -> bool {
        let same = self.entries.len() == other.entries.len()
            && self.entries.iter().zip(&other.entries).all(|(a, b)| {
                a.tool.name() == b.tool.name() && a.tool.description() == b.tool.description()
            });
        if same {
            self.specs = other.specs.clone();
        }
        same
    }

    /// A NEW registry holding every tool except those named.
    pub fn without(&self, names: &[&str]) -> ToolRegistry {
        ToolRegistry {
            entries: self
                .entries
                .iter()
                .filter(|e| !names.contains(&e.tool.name()))
                .cloned()
                .collect(),
            specs: Arc::default(),
        }
    }

    /// Checks `input` against the schema of tool `name`. The error names every
    /// problem with its JSON pointer, e.g. `/path: 1 is not of type "string"`.
    pub fn validate(&self, name: &str, input: &Value) -> Result<(), String> {
        let entry = self
            .entries
            .iter()
            .find(|e| e.tool.name() == name)
            .ok_or_else(|| self.unknown_tool_message(name))?;
        let validator = entry.validator.get_or_init(|| {
            jsonschema::validator_for(&entry.tool.input_schema())
                .map_err(|e| format!("tool {name} has an invalid input schema: {e}"))
        });
        let validator = validator.as_ref().map_err(Clone::clone)?;
        let problems: Vec<String> = validator
            .iter_errors(input)
            .map(|e| {
                let at = e.instance_path().to_string();
                if at.is_empty() { e.to_string() } else { format!("{at}: {e}") }
            })
            .collect();
        if problems.is_empty() {
            Ok(())
        } else {
            Err(format!(
                "invalid arguments for {name}: {}. Expected input schema: {}",
                problems.join("; "),
                entry.tool.input_schema()
            ))
        }
    }

    /// The message a model gets when it calls a tool that does not exist.
    pub fn unknown_tool_message(&self, name: &str) -> String {
        format!(
            "unknown tool {name:?}; available tools: {}",
            if self.is_empty() { "(none)".to_string() } else { self.names().join(", ") }
        )
    }
}

impl std::fmt::Debug for ToolRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.names()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ToolContext, ToolError, ToolOutput};
    use serde_json::json;

    struct Named(&'static str);

    #[async_trait::async_trait]
    impl Tool for Named {
        fn name(&self) -> &str {
            self.0
        }
        fn description(&self) -> &str {
            "test tool"
        }
        fn input_schema(&self) -> Value {
            json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"], "additionalProperties": false})
        }
        async fn execute(
            &self,
            _input: Value,
            _ctx: &ToolContext,
        ) -> Result<ToolOutput, ToolError> {
            Ok(ToolOutput::text(self.0))
        }
    }

    fn registry() -> ToolRegistry {
        let mut r = ToolRegistry::new();
        for n in ["read", "write", "task"] {
            r.register(Named(n));
        }
        r
    }

    #[test]
    fn keeps_insertion_order_and_without_returns_a_new_registry() {
        let r = registry();
        assert_eq!(r.names(), ["read", "write", "task"]);
        let sub = r.without(&["task"]);
        assert_eq!(sub.names(), ["read", "write"]);
        assert_eq!(r.len(), 3, "the original registry is unchanged");
    }

    #[test]
    fn specs_are_built_once_and_shared_by_registries_with_the_same_tools() {
        let a = registry();
        let mut b = registry();
        assert!(b.share_specs_with(&a));
        assert!(Arc::ptr_eq(&a.shared_specs(), &b.shared_specs()));
        b.register(Named("grep"));
        assert_eq!(b.shared_specs().len(), 4, "a change builds them again");
        assert_eq!(a.shared_specs().len(), 3, "for that registry only");
        assert!(!b.share_specs_with(&a));
    }

    #[test]
    fn validation_names_the_field_and_the_problem() {
        let r = registry();
        let err = r.validate("read", &json!({"path": 7})).unwrap_err();
        assert!(err.contains("/path"), "{err}");
        assert!(err.contains("string"), "{err}");
        let err = r.validate("read", &json!({})).unwrap_err();
        assert!(err.contains("\"path\" is a required property"), "{err}");
        assert!(r.validate("read", &json!({"path": "a"})).is_ok());
    }

    #[test]
    fn unknown_tool_lists_the_available_ones() {
        let err = registry().validate("rm", &json!({})).unwrap_err();
        assert_eq!(err, "unknown tool \"rm\"; available tools: read, write, task");
    }
}
