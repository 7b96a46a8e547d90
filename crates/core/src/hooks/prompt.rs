//! `prompt` and `agent` hooks: instead of running a command, ferroclaw asks
//! the session's own model (Claude Code asks a fast model) whether the event
//! may go on. The hook's `prompt` gets the event's JSON in place of
//! `$ARGUMENTS` (or after it, when the prompt has no placeholder); the model
//! answers `{"ok": true}` or `{"ok": false, "reason": "..."}`, and a "no"
//! blocks as exit code 2 would (a tool call is refused, a Stop sends the
//! model back with the reason). An `agent` hook is asked the same way, in
//! one model call without tools (Claude Code lets it read files first).
//!
//! The answer is turned into a [`CommandRun`], so it is read like a
//! command's: a model that cannot be reached or answers nonsense is a hook
//! failure (non-blocking, unless `fail_closed`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use ferroclaw_llm::{ChatRequest, Provider};
use ferroclaw_protocol::{Message, ProviderEvent};
use futures_util::StreamExt;
use serde_json::{Value, json};

use super::command::{CommandRun, Ended};

/// Most tokens of the model's answer (a verdict is a line of JSON).
const MAX_ANSWER_TOKENS: u32 = 512;

/// What the model is told it is doing.
const SYSTEM: &str = "You are a hook that checks an event of a coding agent's session. You get \
    the hook's instructions and the event as JSON. Answer with one JSON object and nothing else: \
    {\"ok\": true} when the event may go on, or {\"ok\": false, \"reason\": \"...\"} when it \
    must not, with the reason the agent will read.";

/// The model `prompt` and `agent` hooks ask: the session's own.
#[derive(Clone)]
pub struct HookModel {
    pub provider: Arc<dyn Provider>,
    /// The model name as the provider knows it.
    pub model: String,
}

impl std::fmt::Debug for HookModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "HookModel({}/{})", self.provider.name(), self.model)
    }
}

/// The hook's `prompt` with the event's JSON `input` in place of `$ARGUMENTS`.
pub fn fill(prompt: &str, input: &str) -> String {
    match prompt.contains("$ARGUMENTS") {
        true => prompt.replace("$ARGUMENTS", input),
        false => format!("{prompt}\n\n{input}"),
    }
}

/// Asks `model` about the event `input` with the hook's `prompt`, for at
/// most `timeout_secs`; the verdict as a command's run would say it.
pub async fn ask(
    model: Option<&HookModel>,
    prompt: &str,
    input: &str,
    timeout_secs: f64,
) -> CommandRun {
    let started = Instant::now();
    let done = |ended, stdout: String, stderr: String| CommandRun {
        ended,
        stdout,
        stderr,
        duration_ms: started.elapsed().as_millis() as u64,
        over_cap: None,
    };
    let Some(model) = model else {
        let why = "no model to ask (a prompt hook runs inside a session)".to_string();
        return done(Ended::NotStarted(why), String::new(), String::new());
    };
    let mut request = ChatRequest::new(&model.model, vec![Message::user(fill(prompt, input))]);
    request.system = SYSTEM.into();
    request.max_tokens = MAX_ANSWER_TOKENS;
    let call = async {
        let mut stream = model.provider.stream(request);
        let mut answer = String::new();
        while let Some(event) = stream.next().await {
            match event {
                Ok(ProviderEvent::TextDelta(t)) => answer.push_str(&t),
                Ok(_) => {}
                Err(e) => return Err(e.to_string()),
            }
        }
        Ok(answer)
    };
    let answer = match tokio::time::timeout(Duration::from_secs_f64(timeout_secs), call).await {
        Err(_) => return done(Ended::TimedOut, String::new(), String::new()),
        Ok(Err(e)) => {
            return done(
                Ended::NotStarted(format!("the model call failed: {e}")),
                String::new(),
                String::new(),
            );
        }
        Ok(Ok(answer)) => answer,
    };
    match verdict(&answer) {
        Some(Ok(())) => done(Ended::Exited(Some(0)), String::new(), String::new()),
        Some(Err(reason)) => {
            let block = json!({"decision": "block", "reason": reason}).to_string();
            done(Ended::Exited(Some(0)), block, String::new())
        }
        None => {
            let why = format!(
                "the model's answer is not {{\"ok\": ...}}: {}",
                crate::context::cap(&answer, 200)
            );
            done(Ended::Exited(Some(1)), String::new(), why)
        }
    }
}

/// `Ok` for `{"ok": true}`, `Err(reason)` for `{"ok": false, ...}`, from
/// the first JSON object of `answer` (a model may fence it or add words).
fn verdict(answer: &str) -> Option<Result<(), String>> {
    let (start, end) = (answer.find('{')?, answer.rfind('}')?);
    let value: Value = serde_json::from_str(answer.get(start..=end)?).ok()?;
    match value.get("ok")?.as_bool()? {
        true => Some(Ok(())),
        false => {
            let reason = value.get("reason").and_then(Value::as_str).unwrap_or("");
            let reason = if reason.is_empty() { "a prompt hook said no" } else { reason };
            Some(Err(reason.to_string()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_event_goes_where_arguments_stands_or_after_the_prompt() {
        assert_eq!(fill("Check $ARGUMENTS now", "{}"), "Check {} now");
        assert_eq!(fill("Check it", "{\"a\":1}"), "Check it\n\n{\"a\":1}");
    }

    #[test]
    fn a_verdict_is_read_from_the_first_json_object() {
        assert_eq!(verdict("{\"ok\": true}"), Some(Ok(())));
        assert_eq!(
            verdict("Sure:\n```json\n{\"ok\": false, \"reason\": \"tests fail\"}\n```"),
            Some(Err("tests fail".into()))
        );
        assert_eq!(verdict("yes"), None);
        assert_eq!(verdict("{\"decision\": 1}"), None);
    }
}
