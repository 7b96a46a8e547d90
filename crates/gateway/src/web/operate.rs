//! The web app's operate views, as JSON under `/api/` (token-protected like
//! every endpoint, see [`super::api`]): channels, cron jobs, pairing
//! requests, skills and memory, usage per day, and the gateway log's tail.

use std::collections::BTreeMap;
use std::io::{Read, Seek, SeekFrom};

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use ferroclaw_core::memory::{MemoryStore, Target};
use ferroclaw_core::session::{Entry, for_each_entry};
use ferroclaw_core::skills::SkillSet;
use ferroclaw_protocol::Usage;
use serde::Deserialize;
use serde_json::{Value, json};

use super::App;
use super::api::{ApiError, ApiResult, bad, failed};
use crate::cron::{CronError, CronJob, Payload, Schedule, parse_at, parse_duration_ms, rfc3339_ms};
use crate::pairing::PairingError;

/// Bytes of the gateway log sent by `/api/log`.
const LOG_TAIL_BYTES: u64 = 64 * 1024;
/// Days of usage shown.
const USAGE_DAYS: u64 = 30;
/// Longest cron job message, in characters.
const MAX_JOB_MESSAGE_CHARS: usize = 4_000;

/// `GET /api/status`: the channels and their state, turns, open chat pages.
pub(super) async fn status(State(app): State<App>) -> ApiResult {
    let gw = app.gateway()?;
    let open_pages = app.web.open_sockets.load(std::sync::atomic::Ordering::Relaxed);
    let mut channels: Vec<Value> = gw
        .channel_settings()
        .iter()
        .map(|c| {
            let entry = gw.connections.entry(&c.name);
            let connection = entry.as_ref().map_or(json!({"state": "connecting"}), |e| json!(e));
            let mut state = entry.map_or("connecting".into(), |e| e.state.describe());
            if c.name == "web" {
                state = format!("{state}; {open_pages} chat page(s) open");
            }
            json!({"name": c.name, "dm_policy": format!("{:?}", c.dm_policy).to_lowercase(), "state": state, "connection": connection, "allow_from": c.allow_from.len()})
        })
        .collect();
    // Channels in the configuration without `enabled = true`.
    for name in gw.connections.names() {
        if gw.channel_settings().iter().all(|c| c.name != name)
            && let Some(entry) = gw.connections.entry(&name)
        {
            channels.push(json!({"name": name, "dm_policy": "", "state": entry.state.describe(), "connection": entry, "allow_from": 0}));
        }
    }
    let (running, done) = gw.turn_counts();
    Ok(Json(json!({
        "channels": channels,
        "turns_running": running,
        "turns_done": done,
        "live_sessions": gw.live_sessions(),
        "model": gw.runtime.config().model_spec().unwrap_or_default(),
    })))
}

fn cron_error(e: CronError) -> ApiError {
    match e {
        CronError::NotFound(_) => ApiError(StatusCode::NOT_FOUND, e.to_string()),
        CronError::File { .. } | CronError::Database(_) | CronError::NotApplied => failed(e),
        _ => bad(e.to_string()),
    }
}

fn job_json(job: &CronJob) -> Value {
    json!({
        "id": job.id,
        "name": job.name,
        "enabled": job.enabled,
        "schedule": job.schedule.describe(),
        "explained": job.schedule.explain().unwrap_or_default(),
        "message": job.payload.message,
        "deliver_to": job.payload.deliver.then(|| format!(
            "{}:{}",
            job.payload.channel.as_deref().unwrap_or(""),
            job.payload.to.as_deref().unwrap_or("")
        )),
        "next_run": job.state.next_run_at_ms.map(rfc3339_ms),
        "last_run": job.state.last_run_at_ms.map(rfc3339_ms),
        // As the job's person reads them: in its time zone, in words.
        "next_run_text": job.state.next_run_at_ms.map(|ms| job.schedule.when(ms)),
        "last_run_text": job.state.last_run_at_ms.map(|ms| job.schedule.when(ms)),
        "last_status": job.state.last_status,
        "last_error": job.state.last_error,
    })
}

/// `GET /api/cron`: every job, with its schedule in words and its last run.
pub(super) async fn cron_list(State(app): State<App>) -> ApiResult {
    let gw = app.gateway()?;
    let file = gw.cron.load().await.map_err(cron_error)?;
    Ok(Json(json!({"jobs": file.jobs.iter().map(job_json).collect::<Vec<_>>()})))
}

/// A schedule as the form sends it.
#[derive(Deserialize)]
pub(super) struct ScheduleForm {
    /// `cron`, `every` or `at`.
    kind: String,
    /// The cron expression, the interval (`30m`) or the time (`+1h`, RFC 3339).
    value: String,
    tz: Option<String>,
}

impl ScheduleForm {
    fn schedule(&self) -> Result<Schedule, CronError> {
        let tz = self.tz.as_deref().map(str::trim).filter(|t| !t.is_empty());
        match self.kind.as_str() {
            "cron" => Schedule::cron(&self.value, tz),
            "every" => Schedule::every(parse_duration_ms(&self.value)?),
            "at" => Ok(Schedule::at(parse_at(&self.value)?)),
            other => Err(CronError::BadSchedule(format!(
                "unknown schedule kind {other:?}: use cron, every or at"
            ))),
        }
    }
}

/// `POST /api/cron/explain` `{"kind", "value", "tz"}`: the schedule in words
/// and its next runs, or why it is not valid.
pub(super) async fn cron_explain(Json(form): Json<ScheduleForm>) -> ApiResult {
    let schedule = form.schedule().map_err(cron_error)?;
    let mut next = Vec::new();
    let mut after = crate::files::now_ms();
    while next.len() < 3 {
        match schedule.next_after(after).map_err(cron_error)? {
            Some(t) => {
                next.push(schedule.when(t));
                after = t;
            }
            None => break,
        }
    }
    if next.is_empty() {
        return Err(bad("that time is already past"));
    }
    Ok(Json(json!({"explained": schedule.explain().map_err(cron_error)?, "next": next})))
}

#[derive(Deserialize)]
pub(super) struct NewJob {
    #[serde(default)]
    name: String,
    schedule: ScheduleForm,
    message: String,
    /// `CHANNEL:CHAT_ID` to send the answer to (required: an answer nobody
    /// is sent is never read).
    deliver_to: Option<String>,
}

/// `POST /api/cron`: adds a job (validated first; nothing is written on error).
pub(super) async fn cron_add(State(app): State<App>, Json(form): Json<NewJob>) -> ApiResult {
    let gw = app.gateway()?;
    if form.message.trim().is_empty() {
        return Err(bad("a job needs a message for the assistant"));
    }
    if form.message.chars().count() > MAX_JOB_MESSAGE_CHARS {
        return Err(bad(format!("a job's message is at most {MAX_JOB_MESSAGE_CHARS} characters")));
    }
    if form.name.chars().count() > 100 {
        return Err(bad("a job's name is at most 100 characters"));
    }
    let schedule = form.schedule.schedule().map_err(cron_error)?;
    let mut payload = Payload { message: form.message.trim().to_string(), ..Default::default() };
    let to = form.deliver_to.as_deref().map(str::trim).unwrap_or_default();
    if to.is_empty() {
        return Err(bad("a job needs a chat to send its answer to (CHANNEL:CHAT_ID, e.g. \
             telegram:12345 or this page's web:CHAT); without one nobody would read it"));
    }
    let key = crate::sessions::SessionKey::parse_address(to)
        .ok_or_else(|| bad("deliver to CHANNEL:CHAT_ID, e.g. telegram:12345"))?;
    if gw.outbox.channel(&key.channel).is_none() {
        return Err(bad(format!(
            "deliver to {to}: the gateway runs no channel {:?}, so the answer could never arrive",
            key.channel
        )));
    }
    payload.deliver = true;
    payload.channel = Some(key.channel);
    payload.to = Some(key.chat_id);
    let job = CronJob::new(form.name.trim(), schedule, payload).map_err(cron_error)?;
    let job = gw.cron.add(job).await.map_err(cron_error)?;
    Ok(Json(job_json(&job)))
}

/// `POST /api/cron/{id}/run`: makes a job due now.
pub(super) async fn cron_run(State(app): State<App>, Path(id): Path<String>) -> ApiResult {
    let gw = app.gateway()?;
    check_job_id(&id)?;
    Ok(Json(job_json(&gw.cron.run_now(&id).await.map_err(cron_error)?)))
}

#[derive(Deserialize)]
pub(super) struct Enabled {
    enabled: bool,
}

/// `PUT /api/cron/{id}/enabled` `{"enabled": false}`: pauses (or resumes) a job.
pub(super) async fn cron_enable(
    State(app): State<App>,
    Path(id): Path<String>,
    Json(body): Json<Enabled>,
) -> ApiResult {
    let gw = app.gateway()?;
    check_job_id(&id)?;
    let job = gw
        .cron
        .update(|f| {
            let job = f
                .jobs
                .iter_mut()
                .find(|j| j.id == id)
                .ok_or_else(|| CronError::NotFound(id.clone()))?;
            job.enabled = body.enabled;
            if body.enabled && job.state.next_run_at_ms.is_none() {
                job.state.next_run_at_ms = job.schedule.next_after(crate::files::now_ms())?;
            }
            Ok(job.clone())
        })
        .await
        .map_err(cron_error)?;
    Ok(Json(job_json(&job)))
}

/// `DELETE /api/cron/{id}`: removes a job.
pub(super) async fn cron_remove(State(app): State<App>, Path(id): Path<String>) -> ApiResult {
    let gw = app.gateway()?;
    check_job_id(&id)?;
    let job = gw
        .cron
        .update(|f| {
            let i = f
                .jobs
                .iter()
                .position(|j| j.id == id)
                .ok_or_else(|| CronError::NotFound(id.clone()))?;
            Ok(f.jobs.remove(i))
        })
        .await;
    Ok(Json(job_json(&job.map_err(cron_error)?)))
}

fn check_job_id(id: &str) -> Result<(), ApiError> {
    if id.len() == 8 && id.chars().all(|c| c.is_ascii_hexdigit()) {
        Ok(())
    } else {
        Err(bad("a job id is 8 hex digits"))
    }
}

fn pairing_error(e: PairingError) -> ApiError {
    match e {
        PairingError::UnknownCode { .. } => ApiError(StatusCode::NOT_FOUND, e.to_string()),
        PairingError::BadChannel(_) => bad(e.to_string()),
        PairingError::File { .. } | PairingError::Database(_) => failed(e),
    }
}

/// `GET /api/pairing`: requests waiting and senders approved, by channel.
pub(super) async fn pairing_list(State(app): State<App>) -> ApiResult {
    let gw = app.gateway()?;
    let now = crate::files::now_ms();
    let mut out = Vec::new();
    let mut names = gw.pairing.channels().await.map_err(pairing_error)?;
    for c in gw.channel_settings() {
        if !names.contains(&c.name) {
            names.push(c.name.clone());
        }
    }
    names.sort();
    for channel in names {
        let state = gw.pairing.load(&channel).await.map_err(pairing_error)?;
        let pending: Vec<_> = state.pending.into_iter().filter(|p| p.expires_at_ms > now).collect();
        out.push(json!({"channel": channel, "pending": pending, "approved": state.approved}));
    }
    Ok(Json(json!({"channels": out})))
}

/// `POST /api/pairing/{channel}/{code}/{approve|deny}`.
pub(super) async fn pairing_decide(
    State(app): State<App>,
    Path((channel, code, decision)): Path<(String, String, String)>,
) -> ApiResult {
    let gw = app.gateway()?;
    if code.is_empty() || code.len() > 16 || !code.chars().all(|c| c.is_ascii_alphanumeric()) {
        return Err(bad("a pairing code is letters and digits"));
    }
    match decision.as_str() {
        "approve" => {
            let who = gw.pairing.approve(&channel, &code).await.map_err(pairing_error)?;
            Ok(Json(json!({"approved": who})))
        }
        "deny" => {
            let who = gw.pairing.deny(&channel, &code).await.map_err(pairing_error)?;
            Ok(Json(json!({"denied": who})))
        }
        _ => Err(bad("decide approve or deny")),
    }
}

fn memory_store(app: &App) -> Result<MemoryStore, ApiError> {
    let gw = app.gateway()?;
    Ok(MemoryStore::new(&gw.home).with_limits(gw.runtime.config().file.memory))
}

/// `GET /api/memory`: MEMORY.md and USER.md, with their limits.
pub(super) async fn memory_read(State(app): State<App>) -> ApiResult {
    let store = memory_store(&app)?;
    let config = app.gateway()?.runtime.config().file.memory.unwrap_or_default();
    Ok(Json(json!({
        "memory": {"text": store.read(Target::Memory), "limit": config.memory_chars.unwrap_or(ferroclaw_core::memory::DEFAULT_MEMORY_CHARS)},
        "user": {"text": store.read(Target::User), "limit": config.user_chars.unwrap_or(ferroclaw_core::memory::DEFAULT_USER_CHARS)},
    })))
}

#[derive(Deserialize)]
pub(super) struct MemoryText {
    text: String,
}

/// `PUT /api/memory/{memory|user}` `{"text": "..."}`: replaces the file,
/// screened and limited like the agent's own edits.
pub(super) async fn memory_write(
    State(app): State<App>,
    Path(which): Path<String>,
    Json(body): Json<MemoryText>,
) -> ApiResult {
    let store = memory_store(&app)?;
    let target = Target::parse(&which).ok_or_else(|| bad("edit memory or user"))?;
    use ferroclaw_core::memory::MemoryError;
    let change = store.overwrite(target, &body.text).map_err(|e| match e {
        MemoryError::Io { .. } => failed(e),
        other => bad(other.to_string()),
    })?;
    Ok(Json(json!({"file": change.file, "chars": change.chars, "limit": change.limit})))
}

/// `GET /api/skills`: the skills in force, with their instructions.
pub(super) async fn skills(State(app): State<App>) -> ApiResult {
    let gw = app.gateway()?;
    let set = SkillSet::discover(&gw.runtime.config().workspace, &gw.home);
    let skills: Vec<Value> = set
        .skills()
        .iter()
        .map(|s| {
            json!({
                "name": s.name,
                "description": s.description,
                "source": format!("{:?}", s.source).to_lowercase(),
                "path": s.path.display().to_string(),
                "always": s.always,
                "body": s.body,
            })
        })
        .collect();
    let problems: Vec<String> = set.problems().iter().map(ToString::to_string).collect();
    Ok(Json(json!({"skills": skills, "problems": problems})))
}

/// `GET /api/usage`: tokens and cost per day (UTC) over the last
/// [`USAGE_DAYS`] days, from the gateway's session files.
pub(super) async fn usage(State(app): State<App>) -> ApiResult {
    let gw = app.gateway()?;
    let workspace = gw.runtime.config().workspace.clone();
    let dir = gw.runtime.sessions().project_dir(&workspace);
    let days = tokio::task::spawn_blocking(move || {
        usage_by_day(&dir, ferroclaw_core::clock::unix_seconds())
    })
    .await
    .map_err(failed)?;
    Ok(Json(json!({"days": days})))
}

/// Usage per UTC day of the session files in `dir` changed in the last
/// [`USAGE_DAYS`] days, newest day first.
fn usage_by_day(dir: &std::path::Path, now: u64) -> Vec<Value> {
    let since = now.saturating_sub(USAGE_DAYS * 86_400);
    let mut days: BTreeMap<u64, (Usage, f64, bool)> = BTreeMap::new();
    for file in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = file.path();
        let recent = file
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .is_some_and(|d| d.as_secs() >= since);
        if !recent || path.extension().is_none_or(|x| x != "jsonl") {
            continue;
        }
        let _ = for_each_entry(&path, |entry| {
            if let Entry::Usage { ts, model, usage } = entry
                && ts >= since
            {
                let day = days.entry(ts / 86_400).or_default();
                day.0.add(&usage);
                match ferroclaw_core::pricing::cost(&model, &usage) {
                    Some(c) => day.1 += c,
                    None => day.2 = true,
                }
            }
        });
    }
    days.into_iter()
        .rev()
        .map(|(day, (u, cost, unpriced))| {
            json!({
                "day": ferroclaw_core::clock::rfc3339(day * 86_400).get(..10).unwrap_or_default(),
                "input_tokens": u.input_tokens + u.cache_read_tokens + u.cache_write_tokens,
                "cache_read_tokens": u.cache_read_tokens,
                "output_tokens": u.output_tokens,
                "cost_usd": cost,
                "some_unpriced": unpriced,
            })
        })
        .collect()
}

/// `GET /api/log`: the last [`LOG_TAIL_BYTES`] of the gateway log.
pub(super) async fn log_tail(State(app): State<App>) -> ApiResult {
    let gw = app.gateway()?;
    let path = gw.home.join("logs").join("gateway.log");
    let text = tokio::task::spawn_blocking(move || -> std::io::Result<String> {
        let mut file = match ferroclaw_tools::own_file::open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(String::new()),
            Err(e) => return Err(e),
        };
        let len = file.metadata()?.len();
        file.seek(SeekFrom::Start(len.saturating_sub(LOG_TAIL_BYTES)))?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)?;
        let text = String::from_utf8_lossy(&bytes).into_owned();
        // Start at a whole line when cut.
        Ok(if len > LOG_TAIL_BYTES {
            text.split_once('\n').map(|(_, rest)| rest.to_string()).unwrap_or(text)
        } else {
            text
        })
    })
    .await
    .map_err(failed)?
    .map_err(failed)?;
    Ok(Json(json!({"text": text})))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usage_adds_up_per_day_newest_first() {
        let dir = tempfile::tempdir().unwrap();
        let day = 20_000 * 86_400;
        let usage = |ts: u64, input: u64| {
            json!({"type": "usage", "ts": ts, "model": "anthropic/claude-sonnet-4-5",
                   "usage": {"input_tokens": input, "output_tokens": 10}})
            .to_string()
        };
        let text = [usage(day + 5, 100), usage(day + 50, 200), usage(day + 86_400, 7)].join("\n");
        std::fs::write(dir.path().join("gw-web-a.jsonl"), text + "\n").unwrap();
        let days = usage_by_day(dir.path(), day + 86_500);
        assert_eq!(days.len(), 2);
        assert_eq!(days[1]["input_tokens"], 300);
        assert_eq!(days[1]["output_tokens"], 20);
        assert_eq!(days[0]["input_tokens"], 7);
        assert!(days[1]["day"].as_str().unwrap().starts_with("2024-"), "{days:?}");
    }
}
