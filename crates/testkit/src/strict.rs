//! The one rule of the real APIs that clients most often break after a crash:
//! every tool call must be answered, in the message right after it, and every
//! tool result must answer a call of the message right before it. With
//! [`ServerOptions::strict`](crate::ServerOptions) the server answers 400 to a
//! request that breaks it, as Anthropic and OpenAI do.

use serde_json::Value;

use crate::render::Wire;

/// Why the request's messages would be refused, or `None` when they are fine.
pub(crate) fn tool_pairing_problem(wire: Wire, body: &Value) -> Option<String> {
    let messages = body["messages"].as_array()?;
    match wire {
        Wire::Anthropic => anthropic(messages),
        Wire::OpenAi => openai(messages),
    }
}

/// Why the real API would refuse `request` for its tool pairing, or `None`
/// (a request to neither model endpoint is fine): a check over every
/// request a test's server recorded, strict or not (fault suites count
/// inconsistent requests with it).
pub fn request_problem(request: &crate::RecordedRequest) -> Option<String> {
    let wire = match request.path.as_str() {
        "/v1/messages" => Wire::Anthropic,
        "/v1/chat/completions" => Wire::OpenAi,
        _ => return None,
    };
    tool_pairing_problem(wire, &request.body)
}

fn blocks<'a>(message: &'a Value, kind: &'a str) -> impl Iterator<Item = &'a Value> + 'a {
    message["content"].as_array().into_iter().flatten().filter(move |b| b["type"] == kind)
}

fn anthropic(messages: &[Value]) -> Option<String> {
    let mut pending: Vec<String> = Vec::new();
    for (i, message) in messages.iter().enumerate() {
        let results: Vec<String> = blocks(message, "tool_result")
            .filter_map(|b| b["tool_use_id"].as_str().map(str::to_string))
            .collect();
        if let Some(orphan) = results.iter().find(|id| !pending.contains(id)) {
            return Some(format!(
                "messages.{i}.content: unexpected `tool_use_id` found in `tool_result` blocks: \
                 {orphan}. Each `tool_result` block must have a corresponding `tool_use` block in \
                 the previous message."
            ));
        }
        let missing: Vec<&String> = pending.iter().filter(|id| !results.contains(id)).collect();
        if !missing.is_empty() {
            return Some(format!(
                "messages.{}: `tool_use` ids were found without `tool_result` blocks immediately \
                 after: {}. Each `tool_use` block must have a corresponding `tool_result` block \
                 in the next message.",
                i - 1,
                join(&missing)
            ));
        }
        pending = blocks(message, "tool_use")
            .filter_map(|b| b["id"].as_str().map(str::to_string))
            .collect();
    }
    (!pending.is_empty()).then(|| {
        format!(
            "messages.{}: `tool_use` ids were found without `tool_result` blocks immediately \
             after: {}.",
            messages.len() - 1,
            join(&pending.iter().collect::<Vec<_>>())
        )
    })
}

fn openai(messages: &[Value]) -> Option<String> {
    let mut pending: Vec<String> = Vec::new();
    for message in messages {
        if message["role"] == "tool" {
            let id = message["tool_call_id"].as_str().unwrap_or_default().to_string();
            if !pending.contains(&id) {
                return Some(format!(
                    "Invalid parameter: messages with role 'tool' must be a response to a \
                     preceeding message with 'tool_calls' (tool_call_id {id})."
                ));
            }
            pending.retain(|p| *p != id);
            continue;
        }
        if !pending.is_empty() {
            break;
        }
        pending = message["tool_calls"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|c| c["id"].as_str().map(str::to_string))
            .collect();
    }
    (!pending.is_empty()).then(|| {
        format!(
            "An assistant message with 'tool_calls' must be followed by tool messages responding \
             to each 'tool_call_id'. The following tool_call_ids did not have response messages: \
             {}",
            join(&pending.iter().collect::<Vec<_>>())
        )
    })
}

fn join(ids: &[&String]) -> String {
    ids.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_unanswered_call_is_refused_on_both_wires_and_an_answered_one_passes() {
        let anthropic = json!({"messages": [
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "bash", "input": {}}]},
            {"role": "user", "content": "again"}
        ]});
        assert!(tool_pairing_problem(Wire::Anthropic, &anthropic).unwrap().contains("t1"));
        let ok = json!({"messages": [
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "bash", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "x"}]}
        ]});
        assert_eq!(tool_pairing_problem(Wire::Anthropic, &ok), None);
        let openai = json!({"messages": [
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "type": "function"}]},
            {"role": "user", "content": "again"}
        ]});
        assert!(tool_pairing_problem(Wire::OpenAi, &openai).unwrap().contains("c1"));
    }
}
