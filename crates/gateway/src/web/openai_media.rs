//! The pictures of an API request: `image_url` parts as `data:` URLs
//! (base64) or http(s) URLs, fetched under `web_fetch`'s rules (never the
//! machine itself or its private network unless `[web_fetch] allow_private`
//! allows it; every redirect checked). Each must be a picture a model takes
//! (PNG, JPEG, GIF or WebP, judged by its bytes); one that cannot be had or
//! used is an error naming the part, never dropped.

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use ferroclaw_protocol::{ContentBlock, Message};
use ferroclaw_tools::{WebFetchTool, image_media_type};

use super::openai_request::{ApiError, ClientMessage, Part, texts};
use crate::api_turn::branch::PICTURE_NOTE;
use crate::media::{Attachment, MAX_INBOUND_BYTES};

/// The largest picture taken from a URL (as from a chat platform).
const MAX_IMAGE_BYTES: usize = MAX_INBOUND_BYTES;

/// The picture at `url` (the part at `param`).
pub(super) async fn fetch_image(
    url: &str,
    param: &str,
    fetcher: &WebFetchTool,
) -> Result<Attachment, ApiError> {
    let refused = |message: String| ApiError::invalid(param, "invalid_image_url", message);
    let bytes = if let Some(rest) = url.strip_prefix("data:") {
        let Some((header, data)) = rest.split_once(',') else {
            return Err(refused("a data: URL needs a comma before its data".into()));
        };
        if !header.ends_with(";base64") {
            return Err(refused(
                "a picture's data: URL must be base64 (data:TYPE;base64,...)".into(),
            ));
        }
        BASE64
            .decode(data.trim())
            .map_err(|e| refused(format!("the data: URL is not valid base64: {e}")))?
    } else if url.starts_with("http://") || url.starts_with("https://") {
        let (bytes, _) = fetcher
            .fetch_bytes(url, MAX_IMAGE_BYTES)
            .await
            .map_err(|e| refused(format!("the picture could not be fetched: {e}")))?;
        bytes
    } else {
        let scheme = url.split(':').next().unwrap_or_default();
        return Err(refused(format!("image_url must be a data: or http(s) URL, not {scheme:?}")));
    };
    let Some(media_type) = image_media_type(&bytes[..bytes.len().min(16)]) else {
        return Err(refused(format!(
            "not a picture a model takes ({} bytes; PNG, JPEG, GIF or WebP are)",
            bytes.len()
        )));
    };
    let ext = media_type.trim_start_matches("image/");
    Ok(Attachment { name: format!("image.{ext}"), media_type: media_type.into(), bytes })
}

/// The pictures of the last user message, in order.
pub(super) async fn input_images(
    parts: &[Part],
    fetcher: &WebFetchTool,
) -> Result<Vec<Attachment>, ApiError> {
    let mut images = Vec::new();
    for part in parts {
        if let Part::Image { url, param } = part {
            images.push(fetch_image(url, param, fetcher).await?);
        }
    }
    Ok(images)
}

/// The messages before the last user message as a `user` session compares
/// them with its own ([`crate::api_turn::branch`]): their texts, each
/// picture a note (not fetched again: the session has the ones it was
/// sent); a message with neither is left out.
pub(super) fn noted(history: &[ClientMessage]) -> Vec<Message> {
    history
        .iter()
        .map(|message| {
            // The texts joined as a question's are (see `ChatRequest::input_text`).
            let text = texts(&message.parts);
            let pictures = message.parts.iter().filter(|p| matches!(p, Part::Image { .. }));
            let notes = pictures.map(|_| ContentBlock::text(PICTURE_NOTE));
            let text = Some(text).filter(|t| !t.is_empty()).map(ContentBlock::text);
            Message { role: message.role, content: text.into_iter().chain(notes).collect() }
        })
        .filter(|m| !m.content.is_empty())
        .collect()
}

/// The messages before the last user message as the model gets them,
/// their pictures as image blocks.
pub(super) async fn conversation(
    history: &[ClientMessage],
    fetcher: &WebFetchTool,
) -> Result<Vec<Message>, ApiError> {
    let mut messages = Vec::with_capacity(history.len());
    for message in history {
        let mut content = Vec::with_capacity(message.parts.len());
        for part in &message.parts {
            content.push(match part {
                Part::Text(text) => ContentBlock::text(text.clone()),
                Part::Image { url, param } => {
                    let image = fetch_image(url, param, fetcher).await?;
                    ContentBlock::Image {
                        media_type: image.media_type,
                        data: BASE64.encode(&image.bytes),
                    }
                }
            });
        }
        messages.push(Message { role: message.role, content });
    }
    Ok(messages)
}
