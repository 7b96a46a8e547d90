//! Tools the gateway gives its agents: `message` (send to any chat) and
//! `cron` (schedule jobs).

use std::sync::Arc;

use async_trait::async_trait;
use ferroclaw_tools::tool_input::{AtLeastOne, parse, schema_for};
use ferroclaw_tools::{Tool, ToolContext, ToolError, ToolOutput};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use crate::bus::OutboundMessage;
use crate::channel::ChannelError;
use crate::cron::{CronJob, CronStore, Payload, Schedule, parse_at, rfc3339_ms};
use crate::handover::Handed;
use crate::outbox::Outbox;
use crate::sessions::SessionKey;

/// Keeps a message one session sent in another chat's history (see
/// [`crate::handover`]).
pub type KeepInHistory = Arc<dyn Fn(&SessionKey, Handed) + Send + Sync>;

/// `message`'s input (unknown fields are ignored, as they always were).
#[derive(Deserialize, JsonSchema)]
struct MessageArgs {
    /// The message, in Markdown.
    content: String,
    /// Channel name; default: the current one.
    channel: Option<String>,
    /// Chat id on that channel; default: the current chat.
    chat_id: Option<String>,
    /// Files to send with it: paths in the workspace (images go as pictures, others as documents) or URLs.
    media: Option<Vec<String>>,
}

/// `cron`'s input (unknown fields are ignored, as they always were).
#[derive(Deserialize, JsonSchema)]
struct CronArgs {
    action: CronAction,
    /// What to do when it runs (add).
    message: Option<String>,
    name: Option<String>,
    every_seconds: Option<AtLeastOne>,
    cron_expr: Option<String>,
    tz: Option<String>,
    at: Option<String>,
    job_id: Option<String>,
}

/// What `cron` does.
#[derive(Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
enum CronAction {
    Add,
    List,
    Remove,
    Run,
}

impl CronAction {
    /// The action as the model wrote it, quoted (`"remove"`).
    fn quoted(self) -> &'static str {
        match self {
            Self::Add => "\"add\"",
            Self::List => "\"list\"",
            Self::Remove => "\"remove\"",
            Self::Run => "\"run\"",
        }
    }
}

/// `message(content, channel?, chat_id?, media?)`: sends a message now,
/// by default to the chat the agent is talking to.
pub struct MessageTool {
    pub outbox: Outbox,
    /// The chat of the session: the default target.
    pub channel: String,
    pub chat_id: String,
    /// The chat whose session this is (a cron job's differs from where it
    /// sends): a message to any other chat is kept in that chat's history
    /// through `keep`, and a web chat with no page open gets it there.
    pub home: SessionKey,
    pub keep: Option<KeepInHistory>,
    /// The database gateways share, where the files sent are kept for
    /// every gateway to serve ([`crate::shared_media`]); `None`: files mode.
    pub store: Option<ferroclaw_store::PgStore>,
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
        schema_for::<MessageArgs>()
    }

    /// A message to the chat the turn is in, with files of the workspace
    /// only (no URL for the gateway to fetch), shows the chat's person what
    /// the answer itself could: it needs no approval. One to another chat,
    /// or with a URL, is asked as before.
    fn stays_in_conversation(&self, input: &Value) -> bool {
        let named = |k: &str, own: &str| input[k].as_str().is_none_or(|v| v.is_empty() || v == own);
        let here = named("channel", &self.channel) && named("chat_id", &self.chat_id);
        let mut media = input["media"].as_array().into_iter().flatten();
        here && media.all(|m| m.as_str().is_some_and(|m| !crate::media::is_url(m)))
    }

    async fn execute(&self, input: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let args: MessageArgs = parse(input)?;
        let given = |v: Option<String>| v.filter(|s| !s.is_empty());
        let channel = given(args.channel).unwrap_or_else(|| self.channel.clone());
        let chat_id = given(args.chat_id).unwrap_or_else(|| self.chat_id.clone());
        // Files go by their real path, and only from inside the workspace.
        let mut media = Vec::new();
        for m in args.media.iter().flatten() {
            if crate::media::is_url(m) {
                media.push(m.clone());
                continue;
            }
            match crate::media::resolve(&ctx.workspace, m) {
                Ok(path) => media.push(path.display().to_string()),
                Err(e) => return Ok(ToolOutput::error(format!("message not sent: {e}"))),
            }
        }
        if let Some(store) = &self.store {
            for path in media.iter().filter(|m| !crate::media::is_url(m)) {
                if let Err(e) = crate::shared_media::keep(store, &ctx.workspace, path).await {
                    tracing::warn!("{path}: not kept for the other gateways to show: {e}");
                }
            }
        }
        let content = args.content;
        let message = OutboundMessage {
            channel: channel.clone(),
            chat_id: chat_id.clone(),
            content: content.clone(),
            media: media.clone(),
            reply_to: None,
            failure: None,
        };
        let sent = self.outbox.send(message).await;
        let to = SessionKey::new(channel.clone(), chat_id.clone());
        // A web chat with no page open reads it when one opens.
        let waits = channel == "web" && matches!(sent, Err(ChannelError::UnknownChat { .. }));
        if let Some(keep) =
            self.keep.as_ref().filter(|_| to != self.home && (sent.is_ok() || waits))
        {
            let from = self.home.address();
            // Kept by their place in the workspace, as the history names files.
            let root = ctx.workspace.canonicalize().unwrap_or_else(|_| ctx.workspace.clone());
            let media = media
                .iter()
                .map(|m| match std::path::Path::new(m).strip_prefix(&root) {
                    Ok(inside) => inside.display().to_string(),
                    Err(_) => m.clone(),
                })
                .collect();
            keep(&to, Handed { from, text: content, media, send: false });
            if waits {
                return Ok(ToolOutput::text(format!(
                    "No page is open on {channel}:{chat_id} now; the message waits in that chat's \
                     history and shows when its page opens"
                )));
            }
        }
        Ok(match sent {
            Ok(()) => ToolOutput::text(format!("Message sent to {channel}:{chat_id}")),
            Err(e) => ToolOutput::error(format!("message not sent: {e}")),
        })
    }
}

/// `cron(action, ...)`: add, list, remove or run this chat's scheduled
/// jobs. Only this chat's: a chat's person (a paired stranger, say) cannot
/// read, remove or set off the jobs of other chats through the model; the
/// owner sees them all in the web app and `ferroclaw cron`.
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
         \"list\" shows this chat's jobs; \"remove\" and \"run\" (run now) take job_id."
    }

    fn input_schema(&self) -> Value {
        schema_for::<CronArgs>()
    }

    async fn execute(&self, input: Value, _ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let args: CronArgs = parse(input)?;
        let text = given;
        let result = match args.action {
            CronAction::List => self.store.load().await.map(|f| {
                let mine: Vec<CronJob> = f.jobs.into_iter().filter(|j| self.is_mine(j)).collect();
                list_jobs(&mine)
            }),
            action @ (CronAction::Remove | CronAction::Run) => {
                let Some(id) = text(&args.job_id) else {
                    return Ok(ToolOutput::error(format!("{} needs job_id", action.quoted())));
                };
                let id = match self.my_job(id).await {
                    Ok(id) => id,
                    Err(e) => return Ok(ToolOutput::error(e)),
                };
                if action == CronAction::Remove {
                    self.store
                        .remove(&id)
                        .await
                        .map(|j| format!("removed job {} ({})", j.id, j.name))
                } else {
                    self.store.run_now(&id).await.map(|j| format!("job {} runs now", j.id))
                }
            }
            CronAction::Add => {
                let Some(message) = text(&args.message) else {
                    return Ok(ToolOutput::error("add needs message"));
                };
                let schedule = match (args.every_seconds, text(&args.cron_expr), text(&args.at)) {
                    (Some(s), None, None) => Schedule::every(s.get() * 1000),
                    (None, Some(expr), None) => Schedule::cron(expr, text(&args.tz)),
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
                    schedule.and_then(|s| CronJob::new(text(&args.name).unwrap_or(""), s, payload));
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
        };
        Ok(match result {
            Ok(text) => ToolOutput::text(text),
            Err(e) => ToolOutput::error(e.to_string()),
        })
    }
}

/// A text argument that is given and not blank.
fn given(value: &Option<String>) -> Option<&str> {
    value.as_deref().filter(|s| !s.trim().is_empty())
}

impl CronTool {
    /// True when `job` answers this chat.
    fn is_mine(&self, job: &CronJob) -> bool {
        job.payload.channel.as_deref() == Some(self.channel.as_str())
            && job.payload.to.as_deref() == Some(self.chat_id.as_str())
    }

    /// The full id of this chat's job `id` names (whole, or a unique prefix).
    async fn my_job(&self, id: &str) -> Result<String, String> {
        let jobs = self.store.load().await.map_err(|e| e.to_string())?.jobs;
        let mine: Vec<&CronJob> = jobs.iter().filter(|j| self.is_mine(j)).collect();
        let named: Vec<&&CronJob> = mine.iter().filter(|j| j.id.starts_with(id)).collect();
        match named[..] {
            [job] => Ok(job.id.clone()),
            _ => match mine.iter().find(|j| j.id == id) {
                Some(job) => Ok(job.id.clone()),
                None => Err(format!("this chat has no job {id:?}; action \"list\" shows its jobs")),
            },
        }
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_workspace_file_to_the_chat_itself_needs_no_approval_anything_else_is_asked() {
        let tool = MessageTool {
            outbox: Outbox::new([]),
            channel: "web".into(),
            chat_id: "page-1".into(),
            home: SessionKey::new("web", "page-1"),
            keep: None,
            store: None,
        };
        let free = |input: Value| tool.stays_in_conversation(&input);
        assert!(free(json!({"content": "Here is the chart.", "media": ["chart.png"]})));
        assert!(free(json!({"content": "done", "channel": "web", "chat_id": "page-1"})));
        assert!(!free(json!({"content": "hi", "channel": "telegram", "chat_id": "42"})));
        assert!(!free(json!({"content": "hi", "chat_id": "page-2"})));
        assert!(!free(json!({"content": "x", "media": ["https://example.com/a.png"]})));
    }

    fn tool(store: &CronStore, chat: &str) -> CronTool {
        CronTool { store: store.clone(), channel: "telegram".into(), chat_id: chat.into() }
    }

    async fn call(tool: &CronTool, input: Value) -> ToolOutput {
        tool.execute(input, &ToolContext::new("/")).await.unwrap()
    }

    #[tokio::test]
    async fn a_chat_sees_and_changes_only_its_own_cron_jobs() {
        let home = tempfile::tempdir().unwrap();
        let store = CronStore::new(home.path());
        let (owner, stranger) = (tool(&store, "1"), tool(&store, "2"));
        let added = call(
            &owner,
            json!({"action": "add", "message": "summarise my inbox", "every_seconds": 3600}),
        )
        .await;
        assert!(!added.is_error, "{added:?}");
        let before = store.load().await.unwrap().jobs[0].clone();
        let id = before.id.clone();

        let listed = call(&stranger, json!({"action": "list"})).await.joined_text();
        assert!(!listed.contains("inbox") && !listed.contains(&id), "{listed}");
        for action in ["remove", "run"] {
            let out = call(&stranger, json!({"action": action, "job_id": id})).await;
            assert!(out.is_error && out.joined_text().contains("this chat has no job"), "{out:?}");
        }
        assert_eq!(store.load().await.unwrap().jobs, vec![before], "untouched");

        assert!(call(&owner, json!({"action": "list"})).await.joined_text().contains("inbox"));
        let removed = call(&owner, json!({"action": "remove", "job_id": &id[..6]})).await;
        assert!(!removed.is_error, "{removed:?}");
        assert!(store.load().await.unwrap().jobs.is_empty());
    }
}
