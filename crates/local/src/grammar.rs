//! The grammar that makes a small model's tool calls valid: once the model
//! writes `<tool_call>`, every following token must continue a JSON object
//! naming one of the offered tools with arguments valid under that tool's
//! schema, then `</tool_call>`. Built with llama.cpp's JSON-schema-to-GBNF
//! converter from the union of the tools' schemas; used as a lazy grammar,
//! so text before the trigger is free.

use ferroclaw_protocol::ToolSpec;
use serde_json::Value;

use crate::toolcall::{CALL_CLOSE, CALL_OPEN};

/// Name of the rule the converter's output is renamed to.
const CALL_RULE: &str = "tool-call-json";

/// A tool schema the converter could not take; that tool's arguments are
/// then only required to be a JSON object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LooseTool {
    pub name: String,
    pub reason: String,
}

/// The JSON schema of one call, written by hand so that `name` comes before
/// `arguments` (the converter keeps the order of `properties`, and models are
/// trained on name-first).
pub fn call_schema(name: &str, arguments: &Value) -> String {
    let name = Value::String(name.to_string());
    format!(
        r#"{{"type":"object","properties":{{"name":{{"const":{name}}},"arguments":{arguments}}},"required":["name","arguments"],"additionalProperties":false}}"#
    )
}

/// The union of the calls' schemas; `loose` tools get `{"type":"object"}` arguments.
pub fn union_schema(tools: &[ToolSpec], loose: &[LooseTool]) -> String {
    let any_object = serde_json::json!({"type": "object"});
    let alternatives: Vec<String> = tools
        .iter()
        .map(|t| {
            let args =
                if loose.iter().any(|l| l.name == t.name) { &any_object } else { &t.input_schema };
            call_schema(&t.name, args)
        })
        .collect();
    format!(r#"{{"oneOf":[{}]}}"#, alternatives.join(","))
}

/// Wraps the converter's grammar (whose start rule is `root`) in the call
/// tags: one or more calls, separated by newlines, and nothing after them.
pub fn wrap_in_tags(converted: &str) -> String {
    let mut out = String::with_capacity(converted.len() + 200);
    for line in converted.lines() {
        match line.strip_prefix("root ::=") {
            Some(body) => {
                out.push_str(CALL_RULE);
                out.push_str(" ::=");
                out.push_str(body);
            }
            None => out.push_str(line),
        }
        out.push('\n');
    }
    let open = gbnf_literal(CALL_OPEN);
    let close = gbnf_literal(CALL_CLOSE);
    out.push_str(&format!(
        "tool-call-block ::= {open} \"\\n\"? {CALL_RULE} \"\\n\"? {close}\n\
         root ::= tool-call-block (\"\\n\" tool-call-block)*\n"
    ));
    out
}

/// A GBNF string literal.
fn gbnf_literal(text: &str) -> String {
    format!("\"{}\"", text.replace('\\', "\\\\").replace('"', "\\\""))
}

/// The grammar for `tools`, and the tools whose schemas had to be loosened.
#[cfg(feature = "engine")]
pub fn tool_call_grammar(tools: &[ToolSpec]) -> Result<(String, Vec<LooseTool>), String> {
    let convert =
        |schema: &str| llama_cpp_2::json_schema_to_grammar(schema).map_err(|e| e.to_string());
    if let Ok(g) = convert(&union_schema(tools, &[])) {
        return Ok((wrap_in_tags(&g), Vec::new()));
    }
    // Find the schemas the converter rejects, one by one.
    let loose: Vec<LooseTool> = tools
        .iter()
        .filter_map(|t| {
            convert(&call_schema(&t.name, &t.input_schema))
                .err()
                .map(|reason| LooseTool { name: t.name.clone(), reason })
        })
        .collect();
    let g = convert(&union_schema(tools, &loose))?;
    Ok((wrap_in_tags(&g), loose))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tool(name: &str, schema: Value) -> ToolSpec {
        ToolSpec { name: name.into(), description: String::new(), input_schema: schema }
    }

    #[test]
    fn the_call_schema_puts_name_before_arguments_and_forbids_extras() {
        let s = call_schema("ls", &json!({"type": "object"}));
        let name_at = s.find("\"name\"").unwrap();
        let args_at = s.find("\"arguments\"").unwrap();
        assert!(name_at < args_at, "{s}");
        let v: Value = serde_json::from_str(&s).unwrap();
        assert_eq!(v["properties"]["name"]["const"], "ls");
        assert_eq!(v["additionalProperties"], false);
    }

    #[test]
    fn a_loose_tool_keeps_its_name_but_takes_any_object() {
        let tools = [
            tool("a", json!({"type": "object", "properties": {"x": {"type": "string"}}})),
            tool("b", json!({"weird": true})),
        ];
        let loose = [LooseTool { name: "b".into(), reason: "r".into() }];
        let v: Value = serde_json::from_str(&union_schema(&tools, &loose)).unwrap();
        assert_eq!(v["oneOf"][0]["properties"]["arguments"]["properties"]["x"]["type"], "string");
        assert_eq!(v["oneOf"][1]["properties"]["name"]["const"], "b");
        assert_eq!(v["oneOf"][1]["properties"]["arguments"], json!({"type": "object"}));
    }

    #[test]
    fn the_wrapped_grammar_starts_with_the_tag_and_renames_the_converters_root() {
        let g = wrap_in_tags("root ::= \"{\" space \"}\"\nspace ::= \" \"?\n");
        assert!(g.contains("tool-call-json ::= \"{\" space \"}\""), "{g}");
        assert!(g.contains("tool-call-block ::= \"<tool_call>\""), "{g}");
        assert_eq!(g.matches("root ::=").count(), 1, "{g}");
    }
}
