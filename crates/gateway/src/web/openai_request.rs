//! A `POST /v1/chat/completions` body, checked and taken apart: the
//! client's `system` (and `developer`) messages, the conversation before its
//! last user message, that message's text and pictures, the model asked
//! for, `stream`, `user`, the sampling options (checked as OpenAI checks
//! them, see [`sampling`]). What the gateway cannot honour is refused with
//! OpenAI's error shape naming the field (`n` above 1, a `tool` message, an
//! audio part), never dropped without a word.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use ferroclaw_protocol::{Role, Sampling};
use serde_json::{Value, json};

mod sampling;

/// An OpenAI-style error: `{"error": {"message", "type", "param", "code"}}`.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct ApiError {
    pub status: StatusCode,
    pub message: String,
    /// `invalid_request_error`, `rate_limit_error`, `server_error`, ...
    pub kind: &'static str,
    /// The request field at fault (`messages[2].content[1].image_url`).
    pub param: Option<String>,
    pub code: &'static str,
}

impl ApiError {
    /// A 400 about `param`.
    pub(super) fn invalid(
        param: impl Into<String>,
        code: &'static str,
        message: impl Into<String>,
    ) -> Self {
        ApiError {
            status: StatusCode::BAD_REQUEST,
            message: message.into(),
            kind: "invalid_request_error",
            param: Some(param.into()),
            code,
        }
    }

    /// The error for `status` with the type and code OpenAI uses for it.
    pub(super) fn status(status: StatusCode, message: impl Into<String>) -> Self {
        let (kind, code) = match status {
            StatusCode::UNAUTHORIZED => ("invalid_request_error", "invalid_api_key"),
            StatusCode::NOT_FOUND => ("invalid_request_error", "not_found"),
            StatusCode::METHOD_NOT_ALLOWED => ("invalid_request_error", "method_not_allowed"),
            StatusCode::CONFLICT => ("invalid_request_error", "conflict"),
            StatusCode::TOO_MANY_REQUESTS => ("rate_limit_error", "rate_limit_exceeded"),
            StatusCode::PAYLOAD_TOO_LARGE => ("invalid_request_error", "request_too_large"),
            StatusCode::REQUEST_TIMEOUT => ("invalid_request_error", "request_timeout"),
            StatusCode::SERVICE_UNAVAILABLE => ("server_error", "unavailable"),
            s if s.is_server_error() => ("server_error", "turn_failed"),
            _ => ("invalid_request_error", "invalid_request"),
        };
        ApiError { status, message: message.into(), kind, param: None, code }
    }

    /// The JSON body.
    pub(super) fn body(&self) -> Value {
        json!({"error": {
            "message": self.message,
            "type": self.kind,
            "param": self.param,
            "code": self.code,
        }})
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.status, axum::Json(self.body())).into_response()
    }
}

/// A part of a message as the client sent it.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Part {
    Text(String),
    /// An `image_url` part: its URL, and where it was in the request.
    Image {
        url: String,
        param: String,
    },
}

/// A message of the conversation the client sent.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct ClientMessage {
    pub role: Role,
    pub parts: Vec<Part>,
}

/// What a chat completion request asks for.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct ChatRequest {
    /// The model as the client named it (`None`: not given).
    pub model: Option<String>,
    pub stream: bool,
    pub include_usage: bool,
    /// The session to continue (`user`, else the header); `None`: stateless.
    pub user: Option<String>,
    /// The `system` and `developer` messages, joined.
    pub system: Option<String>,
    /// The messages before the last user message.
    pub history: Vec<ClientMessage>,
    /// The last user message.
    pub input: Vec<Part>,
    /// `temperature`, `top_p`, `seed`, `stop`, checked.
    pub sampling: Sampling,
    /// `max_completion_tokens` (or the older `max_tokens`), at least 1.
    pub max_tokens: Option<u32>,
}

impl ChatRequest {
    /// The text of the last user message.
    pub(super) fn input_text(&self) -> String {
        texts(&self.input)
    }
}

/// The text parts of `parts`, one per line.
pub(super) fn texts(parts: &[Part]) -> String {
    let texts: Vec<&str> = parts
        .iter()
        .filter_map(|p| match p {
            Part::Text(t) => Some(t.as_str()),
            Part::Image { .. } => None,
        })
        .collect();
    texts.join("\n")
}

/// Checks and takes apart `body`; `header_user` is the session header's value.
pub(super) fn parse(body: &Value, header_user: Option<&str>) -> Result<ChatRequest, ApiError> {
    if !body.is_object() {
        return Err(ApiError::invalid("", "invalid_request", "the body must be a JSON object"));
    }
    one_answer(&body["n"])?;
    let model = match &body["model"] {
        Value::Null => None,
        Value::String(m) => Some(m.clone()),
        _ => return Err(ApiError::invalid("model", "invalid_type", "model must be a string")),
    };
    let (sampling, max_tokens) = sampling::options(body)?;
    let (system, mut history) = conversation(&body["messages"])?;
    let input = last_question(&mut history, &body["messages"])?;
    let user = body["user"]
        .as_str()
        .or(header_user)
        .map(str::trim)
        .filter(|u| !u.is_empty())
        .map(str::to_string);
    Ok(ChatRequest {
        model,
        stream: body["stream"].as_bool().unwrap_or(false),
        include_usage: body["stream_options"]["include_usage"].as_bool().unwrap_or(false),
        user,
        system,
        history,
        input,
        sampling,
        max_tokens,
    })
}

/// Refuses `n` above 1: the agent gives one answer per request.
fn one_answer(n: &Value) -> Result<(), ApiError> {
    if n.is_null() || n.as_u64() == Some(1) {
        return Ok(());
    }
    Err(ApiError::invalid(
        "n",
        "unsupported_value",
        format!("n = {n} is not supported: the agent gives one answer per request (n = 1)"),
    ))
}

/// The `system` and `developer` messages (joined; `None` when blank), and
/// the user and assistant messages in order.
fn conversation(messages: &Value) -> Result<(Option<String>, Vec<ClientMessage>), ApiError> {
    let Some(list) = messages.as_array().filter(|l| !l.is_empty()) else {
        return Err(ApiError::invalid(
            "messages",
            "invalid_value",
            "messages must be a non-empty array",
        ));
    };
    let mut system = Vec::new();
    let mut conversation = Vec::new();
    for (i, message) in list.iter().enumerate() {
        let role = message["role"].as_str().unwrap_or_default();
        let parts = parts_of(&message["content"], &format!("messages[{i}].content"))?;
        match role {
            "system" | "developer" => system.push(texts(&parts)),
            "user" => conversation.push(ClientMessage { role: Role::User, parts }),
            "assistant" => conversation.push(ClientMessage { role: Role::Assistant, parts }),
            "tool" | "function" => {
                return Err(ApiError::invalid(
                    format!("messages[{i}].role"),
                    "unsupported_value",
                    format!(
                        "messages with role {role:?} are not supported: the agent runs its own \
                         tools and does not call the client's"
                    ),
                ));
            }
            other => {
                return Err(ApiError::invalid(
                    format!("messages[{i}].role"),
                    "invalid_value",
                    format!("unknown role {other:?} (system, developer, user or assistant)"),
                ));
            }
        }
    }
    let system = Some(system.join("\n\n")).filter(|s| !s.trim().is_empty());
    Ok((system, conversation))
}

/// Takes the last message off `conversation`: it must be the user's, with
/// text or a picture (`messages` is the request's list, for the error).
fn last_question(
    conversation: &mut Vec<ClientMessage>,
    messages: &Value,
) -> Result<Vec<Part>, ApiError> {
    let input = match conversation.pop() {
        Some(last) if last.role == Role::User => last.parts,
        _ => {
            return Err(ApiError::invalid(
                "messages",
                "invalid_value",
                "the last message (after any system messages) must be the user's",
            ));
        }
    };
    if input_is_empty(&input) {
        let last = messages.as_array().map_or(0, Vec::len).saturating_sub(1);
        return Err(ApiError::invalid(
            format!("messages[{last}].content"),
            "invalid_value",
            "the last user message has neither text nor a picture",
        ));
    }
    Ok(input)
}

fn input_is_empty(parts: &[Part]) -> bool {
    parts.iter().all(|p| matches!(p, Part::Text(t) if t.trim().is_empty()))
}

/// The parts of a message's `content`: a string, an array of parts, or null.
fn parts_of(content: &Value, param: &str) -> Result<Vec<Part>, ApiError> {
    let list = match content {
        Value::Null => return Ok(Vec::new()),
        Value::String(s) => return Ok(vec![Part::Text(s.clone())]),
        Value::Array(list) => list,
        _ => {
            return Err(ApiError::invalid(
                param,
                "invalid_type",
                "content must be a string or an array of parts",
            ));
        }
    };
    let mut parts = Vec::with_capacity(list.len());
    for (j, part) in list.iter().enumerate() {
        let here = format!("{param}[{j}]");
        match part["type"].as_str().unwrap_or_default() {
            "text" | "input_text" => {
                parts.push(Part::Text(part["text"].as_str().unwrap_or_default().to_string()));
            }
            "image_url" => {
                // `{"image_url": {"url": ...}}`, or the URL itself as some clients send it.
                let url = part["image_url"]["url"].as_str().or(part["image_url"].as_str());
                let Some(url) = url else {
                    return Err(ApiError::invalid(
                        format!("{here}.image_url"),
                        "invalid_value",
                        "an image_url part needs image_url.url (a data: URL or an http(s) URL)",
                    ));
                };
                parts
                    .push(Part::Image { url: url.to_string(), param: format!("{here}.image_url") });
            }
            other => {
                return Err(ApiError::invalid(
                    format!("{here}.type"),
                    "unsupported_value",
                    format!(
                        "content parts of type {other:?} are not supported (text and image_url are)"
                    ),
                ));
            }
        }
    }
    Ok(parts)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_system_message_history_and_last_user_message_are_taken_apart() {
        let body = json!({"model": "ferroclaw", "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "first"},
            {"role": "assistant", "content": "one"},
            {"role": "developer", "content": [{"type": "text", "text": "No emoji."}]},
            {"role": "user", "content": [{"type": "text", "text": "second"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA"}}]},
        ]});
        let request = parse(&body, None).unwrap();
        assert_eq!(request.system.as_deref(), Some("Be brief.\n\nNo emoji."));
        assert_eq!(request.history.len(), 2);
        assert_eq!(request.input_text(), "second");
        assert!(matches!(&request.input[1], Part::Image { param, .. }
            if param == "messages[4].content[1].image_url"));
        assert_eq!(request.user, None);
        assert_eq!(parse(&body, Some("h")).unwrap().user.as_deref(), Some("h"));
    }

    #[test]
    fn what_cannot_be_honoured_is_refused_naming_the_field() {
        let user = json!([{"role": "user", "content": "hi"}]);
        let e = parse(&json!({"n": 2, "messages": user}), None).unwrap_err();
        assert_eq!((e.param.as_deref(), e.code), (Some("n"), "unsupported_value"));
        let tool = json!({"messages": [{"role": "tool", "content": "x"}, {"role": "user", "content": "hi"}]});
        assert_eq!(parse(&tool, None).unwrap_err().param.as_deref(), Some("messages[0].role"));
        let audio = json!({"messages": [{"role": "user", "content": [{"type": "input_audio"}]}]});
        assert_eq!(
            parse(&audio, None).unwrap_err().param.as_deref(),
            Some("messages[0].content[0].type")
        );
        let last = json!({"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "x"}]});
        assert_eq!(parse(&last, None).unwrap_err().param.as_deref(), Some("messages"));
        assert!(parse(&json!({"n": 1, "messages": user}), None).is_ok());
    }
}
