//! MCP content blocks to ferroclaw result parts. Text and images map
//! directly; the rest, which our protocol has no block for, becomes a text
//! note the model can act on.

use ferroclaw_protocol::ResultPart;
use ferroclaw_tools::ToolOutput;
use serde_json::Value;

/// A `tools/call` result (as JSON) to a tool output: `isError` carries over;
/// `structuredContent` is shown when the content is empty.
pub fn tool_output(result: &Value) -> ToolOutput {
    let mut content: Vec<ResultPart> =
        result["content"].as_array().into_iter().flatten().map(result_part).collect();
    if content.is_empty()
        && let Some(structured) = result.get("structuredContent")
    {
        content.push(ResultPart::Text { text: structured.to_string() });
    }
    if content.is_empty() {
        content.push(ResultPart::Text { text: "(no content)".into() });
    }
    ToolOutput { content, is_error: result["isError"].as_bool().unwrap_or(false) }
}

/// One MCP content block (`text`, `image`, `audio`, `resource`, `resource_link`).
pub fn result_part(block: &Value) -> ResultPart {
    let text = |t: String| ResultPart::Text { text: t };
    let str_of = |v: &Value, key: &str| v[key].as_str().unwrap_or_default().to_string();
    match block["type"].as_str().unwrap_or_default() {
        "text" => text(str_of(block, "text")),
        "image" => {
            ResultPart::Image { media_type: str_of(block, "mimeType"), data: str_of(block, "data") }
        }
        "audio" => text(format!(
            "[audio: {}, {} bytes; audio cannot be shown to the model]",
            str_of(block, "mimeType"),
            base64_len(block["data"].as_str().unwrap_or_default())
        )),
        "resource" => resource_part(&block["resource"]),
        "resource_link" => text(format!(
            "[resource link: {}{}{}; read it with mcp_read_resource]",
            str_of(block, "uri"),
            block["name"].as_str().map(|n| format!(" ({n})")).unwrap_or_default(),
            block["mimeType"].as_str().map(|m| format!(", {m}")).unwrap_or_default(),
        )),
        other => text(format!("[unsupported MCP content type {other:?}]: {block}")),
    }
}

/// The contents of a resource: text as text, an image blob as an image,
/// any other blob as a note with its type and size.
pub fn resource_part(resource: &Value) -> ResultPart {
    let uri = resource["uri"].as_str().unwrap_or_default();
    let mime = resource["mimeType"].as_str().unwrap_or("application/octet-stream");
    if let Some(text) = resource["text"].as_str() {
        return ResultPart::Text { text: format!("[resource {uri}]\n{text}") };
    }
    let blob = resource["blob"].as_str().unwrap_or_default();
    if is_text_mime(mime)
        && let Some(text) = decode_utf8(blob)
    {
        return ResultPart::Text { text: format!("[resource {uri}]\n{text}") };
    }
    if mime.starts_with("image/") {
        return ResultPart::Image { media_type: mime.to_string(), data: blob.to_string() };
    }
    ResultPart::Text {
        text: format!(
            "[resource {uri}: {mime}, {} bytes of binary data not shown]",
            base64_len(blob)
        ),
    }
}

/// Types whose blobs are worth decoding for the model.
fn is_text_mime(mime: &str) -> bool {
    mime.starts_with("text/") || mime.ends_with("json") || mime.ends_with("xml")
}

/// A base64 blob as UTF-8 text, when it is that.
fn decode_utf8(blob: &str) -> Option<String> {
    use base64::Engine as _;
    let bytes = base64::engine::general_purpose::STANDARD.decode(blob.trim()).ok()?;
    String::from_utf8(bytes).ok()
}

/// Decoded size of base64 text.
fn base64_len(data: &str) -> usize {
    let data = data.trim_end();
    let padding = data.bytes().rev().take_while(|&b| b == b'=').count();
    (data.len() * 3 / 4).saturating_sub(padding)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_content_type_becomes_a_part_the_model_can_read() {
        let out = tool_output(&json!({"content": [
            {"type": "text", "text": "hello"},
            {"type": "image", "data": "AAAA", "mimeType": "image/png"},
            {"type": "audio", "data": "AAAAAA==", "mimeType": "audio/wav"},
            {"type": "resource", "resource": {"uri": "file:///a.txt", "text": "alpha"}},
            {"type": "resource", "resource": {"uri": "file:///a.bin", "blob": "AAAA", "mimeType": "application/zip"}},
            {"type": "resource", "resource": {"uri": "file:///b.txt", "blob": "YmV0YQ==", "mimeType": "text/plain"}},
            {"type": "resource_link", "uri": "demo://x", "name": "x"}
        ]}));
        assert!(!out.is_error);
        assert_eq!(out.content[0], ResultPart::Text { text: "hello".into() });
        assert_eq!(
            out.content[1],
            ResultPart::Image { media_type: "image/png".into(), data: "AAAA".into() }
        );
        let text = out.joined_text();
        assert!(text.contains("[audio: audio/wav, 4 bytes"), "{text}");
        assert!(text.contains("[resource file:///a.txt]\nalpha"), "{text}");
        assert!(text.contains("application/zip, 3 bytes"), "{text}");
        assert!(text.contains("[resource file:///b.txt]\nbeta"), "{text}");
        assert!(text.contains("[resource link: demo://x (x)"), "{text}");
    }

    #[test]
    fn is_error_results_stay_errors_and_structured_content_fills_empty_results() {
        let out =
            tool_output(&json!({"content": [{"type": "text", "text": "boom"}], "isError": true}));
        assert!(out.is_error);
        let out = tool_output(&json!({"content": [], "structuredContent": {"t": 1}}));
        assert_eq!(out.joined_text(), "{\"t\":1}");
    }
}
