//! `{"type": "text", "text": ...}`: the text content part both wire formats
//! (Anthropic Messages and Chat Completions) write the same way.

use serde::ser::{Serialize, SerializeMap, Serializer};

/// A text content part, serialised without copying the text.
pub(crate) struct TextPart<'a>(pub(crate) &'a str);

impl Serialize for TextPart<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(2))?;
        map.serialize_entry("type", "text")?;
        map.serialize_entry("text", self.0)?;
        map.end()
    }
}

#[cfg(test)]
mod tests {
    use super::TextPart;

    #[test]
    fn a_text_part_is_typed_text_with_its_text() {
        let json = serde_json::to_string(&TextPart("hi \"there\"")).unwrap();
        assert_eq!(json, r#"{"type":"text","text":"hi \"there\""}"#);
    }
}
