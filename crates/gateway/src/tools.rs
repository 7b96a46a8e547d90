//! Tools the gateway gives its agents: `message` (send to any chat) and
//! `cron` (schedule jobs).

use async_trait::async_trait;
use ferroclaw_tools::{Tool, ToolContext, ToolError, ToolOutput};
use serde_json::{Value, json};

use crate::bus::OutboundMessage;
use crate::cron::{CronJob, CronStore, Payload, Schedule, parse_at, rfc3339_ms};
use crate::outbox::Outbox;

/// `message(content, channel?, chat_id?, media?)`: sends a message now,
/// by default to the chat the agent is talking to.
pub struct MessageTool {
    pub outbox: Outbox,
    /// The chat of the session: the default target.
    pub channel: String,
    pub chat_id: String,
}

#[async_trait]
impl Tool for MessageTool {
    fn name(&self) -> &str {
        "message"
    }

    fn description(&self) -> &str {
        "Send a message to a chat now, without waiting for your final answer: progress \
         updates, or a message to another chat. By default it goes to the current chat; \
         give channel and chat_id to send elsewhere (e.g. channel \"telegram\", chat_id \"12345\")."
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "content": {"type": "string", "description": "The message, in Markdown."},
                "channel": {"type": "string", "description": "Channel name; default: the current one."},
                "chat_id": {"type": "string", "description": "Chat id on that channel; default: the current chat."},
                "media": {"type": "array", "items": {"type": "string"}, "description": "Files to send with it: paths in the workspace (images go as pictures, others as documents) or URLs."}
            },
            "required": ["content"]
        })
    }

    async fn execute(&self, input: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let text = |k: &str| input[k].as_str().filter(|s| !s.is_empty()).map(str::to_string);
        let channel = text("channel").unwrap_or_else(|| self.channel.clone());
        let chat_id = text("chat_id").unwrap_or_else(|| self.chat_id.clone());
        // Files go by their real path, and only from inside the workspace.
        let mut media = Vec::new();
        for m in input["media"].as_array().into_iter().flatten().filter_map(Value::as_str) {
            if crate::media::is_url(m) {
                media.push(m.to_string());
                continue;
            }
            match crate::media::resolve(&ctx.workspace, m) {
                Ok(path) => media.push(path.display().to_string()),
                Err(e) => return Ok(ToolOutput::error(format!("message not sent: {e}"))),
            }
        }
        let message = OutboundMessage {
            channel: channel.clone(),
            chat_id: chat_id.clone(),
            content: text("content").unwrap_or_default(),
            media,
            reply_to: None,
            failure: None,
        };
        Ok(match self.outbox.send(message).await {
            Ok(()) => ToolOutput::text(format!("Message sent to {channel}:{chat_id}")),
            Err(e) => ToolOutput::error(format!("message not sent: {e}")),
        })
    }
}

/// `cron(action, ...)`: add, list, remove or run scheduled jobs.
pub struct CronTool {
    pub store: CronStore,
    /// Where a new job's answer goes by default: the current chat.
    pub channel: String,
    pub chat_id: String,
}

#[async_trait]
impl Tool for CronTool {
    fn name(&self) -> &str {
        "cron"
    }

    fn description(&self) -> &str {
        "Schedule work for later. action \"add\" with message and one of: every_seconds \
         (repeat), cron_expr (5 fields `min hour dom mon dow`, or 6 with seconds first; \
         optional tz such as \"Europe/Paris\"), or at (\"+10m\" or an ISO time, runs once). \
         When it runs, you get the message and your answer goes to this chat. action \
         \"list\" shows jobs; \"remove\" and \"run\" (run now) take job_id."
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "action": {"type": "string", "enum": ["add", "list", "remove", "run"]},
                "message": {"type": "string", "description": "What to do when it runs (add)."},
                "name": {"type": "string"},
                "every_seconds": {"type": "integer", "minimum": 1},
                "cron_expr": {"type": "string"},
                "tz": {"type": "string"},
                "at": {"type": "string"},
                "job_id": {"type": "string"}
            },
            "required": ["action"]
        })
    }

    async fn execute(&self, input: Value, _ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let text = |k: &str| input[k].as_str().filter(|s| !s.trim().is_empty());
        let result = match input["action"].as_str().unwrap_or_default() {
            "list" => self.store.load().await.map(|f| list_jobs(&f.jobs)),
            "remove" => match text("job_id") {
                Some(id) => self
                    .store
                    .remove(id)
                    .await
                    .map(|j| format!("removed job {} ({})", j.id, j.name)),
                None => return Ok(ToolOutput::error("remove needs job_id")),
            },
            "run" => match text("job_id") {
                Some(id) => self.store.run_now(id).await.map(|j| format!("job {} runs now", j.id)),
                None => return Ok(ToolOutput::error("run needs job_id")),
            },
            "add" => {
                let Some(message) = text("message") else {
                    return Ok(ToolOutput::error("add needs message"));
                };
                let schedule =
                    match (input["every_seconds"].as_u64(), text("cron_expr"), text("at")) {
                        (Some(s), None, None) => Schedule::every(s * 1000),
                        (None, Some(expr), None) => Schedule::cron(expr, text("tz")),
                        (None, None, Some(at)) => parse_at(at).map(Schedule::at),
                        _ => {
                            return Ok(ToolOutput::error(
                                "add needs exactly one of every_seconds, cron_expr, at",
                            ));
                        }
                    };
                let payload = Payload {
                    message: message.to_string(),
                    deliver: true,
                    channel: Some(self.channel.clone()),
                    to: Some(self.chat_id.clone()),
                };
                let job =
                    schedule.and_then(|s| CronJob::new(text("name").unwrap_or(""), s, payload));
                let added = match job {
                    Ok(job) => self.store.add(job).await,
                    Err(e) => Err(e),
                };
                added.map(|j| {
                    format!(
                        "added job {} ({}); next run {}",
                        j.id,
                        j.schedule.describe(),
                        j.state.next_run_at_ms.map_or("never".into(), rfc3339_ms)
                    )
                })
            }
            other => return Ok(ToolOutput::error(format!("unknown action {other:?}"))),
        };
        Ok(match result {
            Ok(text) => ToolOutput::text(text),
            Err(e) => ToolOutput::error(e.to_string()),
        })
    }
}

/// Characters of a job's message shown in lists.
const MESSAGE_SHOWN: usize = 60;

/// The jobs, two lines each: id, name, schedule, next and last run; then
/// where the answer goes and the message.
pub fn list_jobs(jobs: &[CronJob]) -> String {
    if jobs.is_empty() {
        return "no cron jobs".into();
    }
    jobs.iter()
        .map(|j| {
            let target = match (&j.payload.channel, &j.payload.to) {
                (Some(channel), Some(to)) if j.payload.deliver => format!("{channel}:{to}"),
                _ => "(answer kept in its session)".into(),
            };
            let mut message: String = j.payload.message.chars().take(MESSAGE_SHOWN).collect();
            if message.len() < j.payload.message.len() {
                message.push('…');
            }
            format!(
                "{} {:<20} {:<28} next {} last {}{}\n    to {target}: {message:?}",
                j.id,
                j.name,
                j.schedule.describe(),
                match (j.enabled, j.state.next_run_at_ms) {
                    (true, Some(ms)) => rfc3339_ms(ms),
                    _ => "-".into(),
                },
                j.state.last_status.as_deref().unwrap_or("-"),
                j.state.last_error.as_deref().map(|e| format!(" ({e})")).unwrap_or_default()
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}
