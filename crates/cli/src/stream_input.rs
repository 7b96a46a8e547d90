//! `--input-format stream-json`: the prompts of a `-p` run as Claude Code's
//! Agent SDK sends them on stdin, one JSON object per line:
//! `{"type":"user","message":{"role":"user","content":"..." | [{"type":"text","text":"..."}]}}`.
//! Each user message is one request, run in order; other lines (the SDK's
//! `control_request`s, `keep_alive`) are skipped. stdin is read to its end.

use std::io::BufRead;

use serde_json::Value;

/// The user messages' texts, in order; an error names the line that is not JSON.
pub(crate) fn prompts(input: impl BufRead) -> Result<Vec<String>, String> {
    let mut prompts = Vec::new();
    for (n, line) in input.lines().enumerate() {
        let line = line.map_err(|e| format!("cannot read stdin: {e}"))?;
        if line.trim().is_empty() {
            continue;
        }
        let value: Value = serde_json::from_str(&line).map_err(|e| {
            format!("--input-format stream-json: line {} is not JSON ({e}): {line:.80}", n + 1)
        })?;
        if value["type"] != "user" {
            tracing::debug!("stream-json input: skipped a {} line", value["type"]);
            continue;
        }
        let text = match &value["message"]["content"] {
            Value::String(text) => text.clone(),
            Value::Array(blocks) => blocks
                .iter()
                .filter(|b| b["type"] == "text")
                .filter_map(|b| b["text"].as_str())
                .collect::<Vec<_>>()
                .join("\n"),
            _ => String::new(),
        };
        if !text.trim().is_empty() {
            prompts.push(text);
        }
    }
    if prompts.is_empty() {
        return Err("--input-format stream-json: stdin had no user message with text".into());
    }
    Ok(prompts)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_messages_become_prompts_and_other_lines_are_skipped() {
        let input = concat!(
            r#"{"type":"control_request","request_id":"1","request":{"subtype":"initialize"}}"#,
            "\n",
            r#"{"type":"user","message":{"role":"user","content":"first"},"parent_tool_use_id":null}"#,
            "\n\n",
            r#"{"type":"user","message":{"role":"user","content":[{"type":"text","text":"second"}]}}"#,
            "\n",
        );
        assert_eq!(prompts(input.as_bytes()).unwrap(), ["first", "second"]);
        assert!(prompts("not json\n".as_bytes()).unwrap_err().contains("line 1"));
        assert!(prompts("".as_bytes()).is_err());
    }
}
