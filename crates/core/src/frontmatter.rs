//! YAML frontmatter: the `---` fenced block at the top of a Markdown file
//! (skills, rules). Parsed into a JSON value so that callers check fields with
//! one set of accessors whatever the source format.

use serde_json::{Map, Value};

/// Why a frontmatter block could not be read.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum FrontmatterError {
    /// The opening `---` has no closing `---`.
    #[error("frontmatter starts with --- but has no closing --- line")]
    Unclosed,
    /// The block is not valid YAML.
    #[error("frontmatter is not valid YAML: {0}")]
    Yaml(String),
    /// The block is YAML but not a mapping of keys to values.
    #[error("frontmatter must be a mapping of keys to values, not {0}")]
    NotAMapping(&'static str),
}

/// A Markdown document split into its frontmatter fields and its body.
#[derive(Debug, Clone, PartialEq)]
pub struct Document {
    /// The frontmatter keys and values; empty when there was none.
    pub fields: Map<String, Value>,
    /// Everything after the closing `---`, with leading blank lines removed.
    pub body: String,
    /// True when the file had a frontmatter block.
    pub has_frontmatter: bool,
}

/// Splits `text` into frontmatter and body. A file without a leading `---`
/// line is all body. Tolerates a byte-order mark and CRLF line ends.
pub fn parse(text: &str) -> Result<Document, FrontmatterError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let Some((yaml, body)) = split(text)? else {
        return Ok(Document { fields: Map::new(), body: text.to_string(), has_frontmatter: false });
    };
    let value: Value = if yaml.trim().is_empty() {
        Value::Object(Map::new())
    } else {
        yaml_serde::from_str(yaml).map_err(|e| FrontmatterError::Yaml(e.to_string()))?
    };
    let fields = match value {
        Value::Object(map) => map,
        Value::Null => Map::new(),
        other => return Err(FrontmatterError::NotAMapping(kind(&other))),
    };
    Ok(Document {
        fields,
        body: body.trim_start_matches(['\n', '\r']).to_string(),
        has_frontmatter: true,
    })
}

/// The YAML between the fences and the body after them, or `None` when the
/// text does not open with a `---` line.
fn split(text: &str) -> Result<Option<(&str, &str)>, FrontmatterError> {
    let mut lines = text.split_inclusive('\n');
    match lines.next() {
        Some(first) if first.trim_end() == "---" => {}
        _ => return Ok(None),
    }
    let start = text.find('\n').map_or(text.len(), |i| i + 1);
    let mut offset = start;
    for line in lines {
        if line.trim_end() == "---" {
            return Ok(Some((&text[start..offset], &text[offset + line.len()..])));
        }
        offset += line.len();
    }
    Err(FrontmatterError::Unclosed)
}

/// A JSON value's kind, for messages ("a list", "a string", ...).
pub fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "a mapping",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn fields_and_body_are_split_at_the_closing_fence() {
        let d = parse("---\nname: x\nalways: true\n---\n\n# Body\ntext\n").unwrap();
        assert_eq!(d.fields["name"], json!("x"));
        assert_eq!(d.fields["always"], json!(true));
        assert_eq!(d.body, "# Body\ntext\n");
        assert!(d.has_frontmatter);
    }

    #[test]
    fn a_file_without_frontmatter_is_all_body() {
        let d = parse("# Title\n---\nnot frontmatter\n").unwrap();
        assert!(d.fields.is_empty());
        assert!(!d.has_frontmatter);
        assert!(d.body.starts_with("# Title"));
    }

    #[test]
    fn crlf_and_a_byte_order_mark_are_tolerated() {
        let d = parse("\u{feff}---\r\nname: x\r\n---\r\nbody\r\n").unwrap();
        assert_eq!(d.fields["name"], json!("x"));
        assert_eq!(d.body, "body\r\n");
    }

    #[test]
    fn an_unclosed_block_and_bad_yaml_are_errors_not_panics() {
        assert_eq!(parse("---\nname: x\n"), Err(FrontmatterError::Unclosed));
        assert!(matches!(parse("---\nname: [unclosed\n---\n"), Err(FrontmatterError::Yaml(_))));
        assert_eq!(parse("---\n- a\n- b\n---\n"), Err(FrontmatterError::NotAMapping("a list")));
    }

    #[test]
    fn a_json_flow_mapping_in_yaml_parses_as_nested_fields() {
        let d = parse("---\nmetadata: {\"nanobot\": {\"requires\": {\"bins\": [\"gh\"]}}}\n---\n")
            .unwrap();
        assert_eq!(d.fields["metadata"]["nanobot"]["requires"]["bins"][0], "gh");
    }
}
