//! For models that cannot see images: image blocks become a short text note,
//! so the request stays valid and the model knows something was there.

use ferroclaw_protocol::{ContentBlock, Message, ResultPart};

/// The note that stands in for an image.
fn note(media_type: &str, bytes_b64: usize) -> String {
    format!(
        "[image {media_type}, ~{} KB, not shown: this model does not accept images]",
        bytes_b64 * 3 / 4 / 1024
    )
}

/// True when some message or tool result holds an image.
pub(crate) fn any_image(messages: &[Message]) -> bool {
    messages.iter().flat_map(|m| &m.content).any(|block| match block {
        ContentBlock::Image { .. } => true,
        ContentBlock::ToolResult { content, .. } => {
            content.iter().any(|part| matches!(part, ResultPart::Image { .. }))
        }
        _ => false,
    })
}

/// Replaces every image (in messages and in tool results) with a text note.
pub(crate) fn replace_images_with_notes(messages: &mut [Message]) {
    for message in messages {
        for block in &mut message.content {
            match block {
                ContentBlock::Image { media_type, data } => {
                    *block = ContentBlock::text(note(media_type, data.len()));
                }
                ContentBlock::ToolResult { content, .. } => {
                    for part in content.iter_mut() {
                        if let ResultPart::Image { media_type, data } = part {
                            *part = ResultPart::Text { text: note(media_type, data.len()) };
                        }
                    }
                }
                _ => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferroclaw_protocol::Role;

    #[test]
    fn images_in_messages_and_tool_results_become_notes() {
        let mut messages = vec![Message {
            role: Role::User,
            content: vec![
                ContentBlock::Image { media_type: "image/png".into(), data: "A".repeat(4096) },
                ContentBlock::ToolResult {
                    tool_call_id: "c".into(),
                    content: vec![ResultPart::Image {
                        media_type: "image/gif".into(),
                        data: "B".into(),
                    }],
                    is_error: false,
                },
            ],
        }];
        assert!(any_image(&messages));
        replace_images_with_notes(&mut messages);
        assert!(!any_image(&messages));
        assert_eq!(
            messages[0].content[0],
            ContentBlock::text(
                "[image image/png, ~3 KB, not shown: this model does not accept images]"
            )
        );
        let ContentBlock::ToolResult { content, .. } = &messages[0].content[1] else { panic!() };
        assert!(content[0].as_text().unwrap().starts_with("[image image/gif"));
    }
}
