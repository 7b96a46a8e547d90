//! The grammar that makes a small model's tool calls valid: once the model
//! writes `<tool_call>`, every following token must continue a JSON object
//! naming one of the offered tools with arguments valid under that tool's
//! schema, then `</tool_call>`. Each tool's schema is converted by
//! [`crate::json_gbnf`]; used as a lazy grammar, so text before the
//! trigger is free.

use ferroclaw_protocol::ToolSpec;

use crate::json_gbnf::{Grammar, gbnf_literal, json_literal, rule_name};
use crate::toolcall::{CALL_CLOSE, CALL_OPEN};

/// The grammar (start rule `root`) of one or more calls to `tools`, each in
/// the call tags, separated by newlines, and nothing after them. A call is
/// `{"name": NAME, "arguments": ARGS}`, name first as models are trained.
pub fn tool_call_grammar(tools: &[ToolSpec]) -> String {
    let mut g = Grammar::default();
    let mut calls = Vec::with_capacity(tools.len());
    for tool in tools {
        let base = format!("call-{}", rule_name(&tool.name));
        // Arguments are an object whatever the schema says.
        let args = match g.value(&tool.input_schema, &format!("{base}-args")) {
            any if any == "value" => "any-object".to_string(),
            args => args,
        };
        let name = json_literal(&serde_json::Value::String(tool.name.clone()));
        let body = format!(
            r#""{{" space "\"name\"" space ":" space {name} space "," space "\"arguments\"" space ":" space {args} "}}" space"#
        );
        calls.push(g.define(&base, &body));
    }
    g.define("tool-call", &calls.join(" | "));
    let (open, close) = (gbnf_literal(CALL_OPEN), gbnf_literal(CALL_CLOSE));
    g.define("tool-call-block", &format!(r#"{open} "\n"? tool-call "\n"? {close}"#));
    g.define("root", r#"tool-call-block ("\n" tool-call-block)*"#);
    g.finish()
}

/// `text` as a regular expression matching itself: llama.cpp builds a
/// `std::regex` from each trigger pattern and, without the `common`
/// helpers' exception shim, an invalid one aborts the process. The
/// characters escaped are ECMAScript's syntax characters, as llama.cpp's
/// own `regex_escape` does.
pub fn regex_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len() * 2);
    for c in text.chars() {
        if ".^$|()*+?[]{}\\".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gbnf_match::Gbnf;
    use serde_json::{Value, json};

    fn tool(name: &str, schema: Value) -> ToolSpec {
        ToolSpec { name: name.into(), description: String::new(), input_schema: schema }
    }

    fn tools() -> Vec<ToolSpec> {
        vec![
            tool(
                "read_file",
                json!({"type": "object", "properties": {"path": {"type": "string"}},
                       "required": ["path"], "additionalProperties": false}),
            ),
            tool("anything", json!({"weird": true})),
        ]
    }

    #[test]
    fn a_call_names_a_tool_first_then_its_arguments() {
        let g = tool_call_grammar(&tools());
        assert!(
            g.contains(r#"call-read-file ::= "{" space "\"name\"" space ":" space "\"read_file\"" space "," space "\"arguments\"" space ":" space call-read-file-args "}" space"#),
            "{g}"
        );
        assert!(g.contains("tool-call ::= call-read-file | call-anything"), "{g}");
        assert_eq!(g.matches("root ::=").count(), 1, "{g}");
    }

    #[test]
    fn calls_in_tags_match_and_anything_else_does_not() {
        let g = Gbnf::parse(&tool_call_grammar(&tools())).unwrap();
        assert!(g.matches(
            r#"<tool_call>{"name": "read_file", "arguments": {"path": "a.txt"}}</tool_call>"#
        ));
        assert!(g.matches(
            "<tool_call>\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"a\"}}\n</tool_call>\n\
             <tool_call>{\"name\": \"anything\", \"arguments\": {\"x\": [1, null]}}</tool_call>"
        ));
        for wrong in [
            r#"<tool_call>{"name": "write_file", "arguments": {"path": "a"}}</tool_call>"#,
            r#"<tool_call>{"arguments": {"path": "a"}, "name": "read_file"}</tool_call>"#,
            r#"<tool_call>{"name": "read_file", "arguments": {}}</tool_call>"#,
            r#"<tool_call>{"name": "read_file", "arguments": {"path": "a"}}</tool_call> done"#,
            r#"{"name": "read_file", "arguments": {"path": "a"}}"#,
            r#"<tool_call>{"name": "anything", "arguments": [1]}</tool_call>"#,
        ] {
            assert!(!g.matches(wrong), "matched: {wrong}");
        }
    }

    #[test]
    fn tool_names_are_escaped_and_rule_names_stay_distinct() {
        let tools = [tool("a.b", json!({})), tool("a-b", json!({})), tool("q\"x", json!({}))];
        let g = Gbnf::parse(&tool_call_grammar(&tools)).unwrap();
        for name in ["a.b", "a-b", "q\\\"x"] {
            let call = format!(r#"<tool_call>{{"name": "{name}", "arguments": {{}}}}</tool_call>"#);
            assert!(g.matches(&call), "{call}");
        }
    }

    #[test]
    fn trigger_text_is_escaped_so_it_matches_itself_only() {
        assert_eq!(regex_escape("<tool_call>"), "<tool_call>");
        assert_eq!(
            regex_escape("a.b*[c](d)|{e}^$\\?+"),
            "a\\.b\\*\\[c\\]\\(d\\)\\|\\{e\\}\\^\\$\\\\\\?\\+"
        );
    }
}
