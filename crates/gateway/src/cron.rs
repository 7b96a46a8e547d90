//! Scheduled jobs: `$FERROCLAW_HOME/cron/jobs.json`, in nanobot's format.
//!
//! A schedule is one of: `at` a moment (once), `every` N milliseconds, or a
//! `cron` expression of 5 fields (minute granularity) or 6 (seconds first),
//! in a time zone. An expression that does not parse is refused with the
//! reason; nothing falls back to "every minute".
//!
//! Before a job runs, its slot is recorded (`last_run_at_ms`) and the next one
//! computed and saved (`next_run_at_ms`), so a restart never runs one slot
//! twice. A slot missed while the gateway was down runs once when it starts.
//!
//! Several gateway processes on one database keep the jobs in its
//! `cron_jobs` table instead (same JSON per job): the CLI, the `cron` tool
//! and the web app write there, and every process's scheduler reads it on
//! each tick; recording a slot is one transaction, so one process runs it.
//! Both keep the same behaviour ([`CronJobs`]): `cron/files.rs` holds the
//! jobs file, `cron/pg.rs` the table; [`CronStore`] is opened on one of them.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Local, TimeZone, Utc};
use croner::Cron;
use croner::parser::{CronParser, Seconds, Year};
use ferroclaw_store::PgStore;
use serde::{Deserialize, Serialize};

use crate::cron_words;
use crate::files::now_ms;

mod files;
mod pg;
#[cfg(test)]
mod store_tests;

/// The shortest `every` interval: one second (the scheduler's tick).
pub const MIN_EVERY_MS: u64 = 1000;

/// Problems with schedules and the jobs file.
#[derive(Debug, thiserror::Error)]
pub enum CronError {
    #[error("cron expression {expr:?} is not valid: {reason}")]
    BadExpression { expr: String, reason: String },
    #[error("unknown time zone {0:?} (use an IANA name such as Europe/Paris)")]
    BadTimeZone(String),
    #[error("{0}")]
    BadSchedule(String),
    #[error("no cron job {0:?}")]
    NotFound(String),
    #[error("{path}: {message}")]
    File { path: PathBuf, message: String },
    #[error("cron jobs: {0}")]
    Database(String),
    #[error("cron jobs: the store did not apply the change")]
    NotApplied,
}

/// The kind of a schedule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ScheduleKind {
    At,
    Every,
    Cron,
}

/// When a job runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Schedule {
    pub kind: ScheduleKind,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub every_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expr: Option<String>,
    /// IANA time zone of a cron expression (default: the machine's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tz: Option<String>,
}

impl Schedule {
    /// Once, at `at_ms`.
    pub fn at(at_ms: u64) -> Self {
        Schedule {
            kind: ScheduleKind::At,
            at_ms: Some(at_ms),
            every_ms: None,
            expr: None,
            tz: None,
        }
    }

    /// Every `every_ms` milliseconds (at least [`MIN_EVERY_MS`]).
    pub fn every(every_ms: u64) -> Result<Self, CronError> {
        if every_ms < MIN_EVERY_MS {
            return Err(CronError::BadSchedule(format!(
                "every must be at least {} s",
                MIN_EVERY_MS / 1000
            )));
        }
        Ok(Schedule {
            kind: ScheduleKind::Every,
            at_ms: None,
            every_ms: Some(every_ms),
            expr: None,
            tz: None,
        })
    }

    /// A 5- or 6-field cron expression in `tz`; refused with the reason when
    /// it does not parse.
    pub fn cron(expr: &str, tz: Option<&str>) -> Result<Self, CronError> {
        let s = Schedule {
            kind: ScheduleKind::Cron,
            at_ms: None,
            every_ms: None,
            expr: Some(expr.trim().to_string()),
            tz: tz.map(str::to_string),
        };
        s.validate()?;
        Ok(s)
    }

    /// Checks the schedule is complete and parses.
    pub fn validate(&self) -> Result<(), CronError> {
        match self.kind {
            ScheduleKind::At if self.at_ms.is_none() => {
                Err(CronError::BadSchedule("an `at` schedule needs at_ms".into()))
            }
            ScheduleKind::Every if self.every_ms.is_none_or(|ms| ms < MIN_EVERY_MS) => {
                Err(CronError::BadSchedule("an `every` schedule needs every_ms >= 1000".into()))
            }
            ScheduleKind::Cron => {
                parse_expression(self.expr.as_deref().unwrap_or_default())?;
                if let Some(tz) = &self.tz {
                    parse_tz(tz)?;
                }
                Ok(())
            }
            _ => Ok(()),
        }
    }

    /// The first slot strictly after `after_ms`, or `None` when there is none
    /// (an `at` time already past).
    pub fn next_after(&self, after_ms: u64) -> Result<Option<u64>, CronError> {
        match self.kind {
            ScheduleKind::At => Ok(self.at_ms.filter(|&at| at > after_ms)),
            ScheduleKind::Every => {
                let every = self.every_ms.unwrap_or(MIN_EVERY_MS).max(MIN_EVERY_MS);
                Ok(Some(after_ms + every))
            }
            ScheduleKind::Cron => {
                let cron = parse_expression(self.expr.as_deref().unwrap_or_default())?;
                let after = Utc
                    .timestamp_millis_opt(after_ms as i64)
                    .single()
                    .ok_or_else(|| CronError::BadSchedule(format!("bad time {after_ms}")))?;
                let next = match &self.tz {
                    Some(tz) => next_in(&cron, &after.with_timezone(&parse_tz(tz)?))?,
                    None => next_in(&cron, &after.with_timezone(&Local))?,
                };
                Ok(Some(next))
            }
        }
    }

    /// A short human description: `every 30s`, `cron 0 9 * * 1-5 (Europe/Paris)`, `at ...`.
    pub fn describe(&self) -> String {
        match self.kind {
            ScheduleKind::At => format!("at {}", rfc3339_ms(self.at_ms.unwrap_or(0))),
            ScheduleKind::Every => {
                format!("every {}", format_duration_ms(self.every_ms.unwrap_or(0)))
            }
            ScheduleKind::Cron => match &self.tz {
                Some(tz) => format!("cron {} ({tz})", self.expr.as_deref().unwrap_or("")),
                None => format!("cron {}", self.expr.as_deref().unwrap_or("")),
            },
        }
    }
}

impl Schedule {
    /// `ms` as people read it, in the schedule's time zone (the gateway's
    /// local time when it has none): `Mon 7 Dec 2026, 09:00 CET`.
    pub fn when(&self, ms: u64) -> String {
        cron_words::time_in_words(ms, self.tz.as_deref())
    }

    /// The schedule in words, for people: `Monday to Friday at 09:00
    /// (Europe/Paris)`, `Every 2 hours`, `Once, on Fri 1 May 2026, 09:00 CEST`.
    pub fn explain(&self) -> Result<String, CronError> {
        self.validate()?;
        Ok(match self.kind {
            ScheduleKind::At => format!("Once, on {}", self.when(self.at_ms.unwrap_or(0))),
            ScheduleKind::Every => {
                format!("Every {}", cron_words::duration_in_words(self.every_ms.unwrap_or(0)))
            }
            ScheduleKind::Cron => {
                let expr = self.expr.as_deref().unwrap_or_default();
                let words = match cron_words::cron_in_words(expr) {
                    Some(words) => words,
                    None => parse_expression(expr)?.describe(),
                };
                let zone = self.tz.as_deref().unwrap_or("the gateway's local time");
                format!("{words} ({zone})")
            }
        })
    }
}

fn next_in<Z: TimeZone>(cron: &Cron, after: &DateTime<Z>) -> Result<u64, CronError> {
    cron.find_next_occurrence(after, false)
        .map(|t| t.timestamp_millis().max(0) as u64)
        .map_err(|e| CronError::BadSchedule(format!("no next time for {}: {e}", cron.pattern)))
}

/// Parses a 5-field (minute) or 6-field (seconds first) expression.
pub fn parse_expression(expr: &str) -> Result<Cron, CronError> {
    let fields = expr.split_whitespace().count();
    let bad = |reason: String| CronError::BadExpression { expr: expr.to_string(), reason };
    if !expr.trim_start().starts_with('@') && !(5..=6).contains(&fields) {
        return Err(bad(format!("expected 5 or 6 fields, found {fields}")));
    }
    CronParser::builder()
        .seconds(Seconds::Optional)
        .year(Year::Disallowed)
        .build()
        .parse(expr)
        .map_err(|e| bad(e.to_string()))
}

fn parse_tz(tz: &str) -> Result<chrono_tz::Tz, CronError> {
    tz.parse().map_err(|_| CronError::BadTimeZone(tz.to_string()))
}

/// Parses a duration such as `30s`, `5m`, `2h`, `1d` or plain seconds, to milliseconds.
pub fn parse_duration_ms(text: &str) -> Result<u64, CronError> {
    let t = text.trim();
    let (digits, unit) = t.split_at(t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len()));
    let n: u64 = digits.parse().map_err(|_| {
        CronError::BadSchedule(format!("{text:?} is not a duration like 30s, 5m, 2h"))
    })?;
    let factor = match unit.trim() {
        "" | "s" => 1000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        other => {
            return Err(CronError::BadSchedule(format!("unknown unit {other:?} in {text:?}")));
        }
    };
    Ok(n * factor)
}

/// A duration in the largest unit that holds it exactly, as people write
/// it: `45m`, `2h`, `1d`, `90s` (the inverse of [`parse_duration_ms`]).
pub fn format_duration_ms(ms: u64) -> String {
    let secs = ms / 1000;
    match secs {
        0 => format!("{ms}ms"),
        s if s % 86_400 == 0 => format!("{}d", s / 86_400),
        s if s % 3_600 == 0 => format!("{}h", s / 3_600),
        s if s % 60 == 0 => format!("{}m", s / 60),
        s => format!("{s}s"),
    }
}

/// Parses an `at` time: `+30s`/`+5m` from now, or RFC 3339
/// (`2026-05-01T09:00:00+02:00`), or `YYYY-MM-DD HH:MM[:SS]` in local time.
pub fn parse_at(text: &str) -> Result<u64, CronError> {
    let t = text.trim();
    if let Some(rel) = t.strip_prefix('+') {
        return Ok(now_ms() + parse_duration_ms(rel)?);
    }
    if let Ok(dt) = DateTime::parse_from_rfc3339(t) {
        return Ok(dt.timestamp_millis().max(0) as u64);
    }
    for format in ["%Y-%m-%d %H:%M:%S", "%Y-%m-%d %H:%M", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%dT%H:%M"] {
        if let Ok(naive) = chrono::NaiveDateTime::parse_from_str(t, format)
            && let Some(local) = Local.from_local_datetime(&naive).earliest()
        {
            return Ok(local.timestamp_millis().max(0) as u64);
        }
    }
    Err(CronError::BadSchedule(format!(
        "{text:?} is not a time: use +30s, 2026-05-01T09:00:00+02:00 or \"2026-05-01 09:00\""
    )))
}

/// A time in milliseconds as RFC 3339 in local time.
pub fn rfc3339_ms(ms: u64) -> String {
    Local
        .timestamp_millis_opt(ms as i64)
        .single()
        .map_or_else(|| ms.to_string(), |t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, false))
}

/// What a job does: a message for the agent, and where its answer goes.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Payload {
    pub message: String,
    /// Send the agent's answer to `channel`/`to`.
    #[serde(default)]
    pub deliver: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub channel: Option<String>,
    /// The chat id on that channel.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<String>,
}

/// A job's run history.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct JobState {
    #[serde(default)]
    pub next_run_at_ms: Option<u64>,
    #[serde(default)]
    pub last_run_at_ms: Option<u64>,
    /// `ok` or `error`.
    #[serde(default)]
    pub last_status: Option<String>,
    #[serde(default)]
    pub last_error: Option<String>,
}

/// One scheduled job.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CronJob {
    pub id: String,
    pub name: String,
    #[serde(default = "yes")]
    pub enabled: bool,
    pub schedule: Schedule,
    pub payload: Payload,
    #[serde(default)]
    pub state: JobState,
    /// Remove the job after it ran (one-shot reminders).
    #[serde(default)]
    pub delete_after_run: bool,
    #[serde(default)]
    pub created_at_ms: u64,
}

fn yes() -> bool {
    true
}

impl CronJob {
    /// A new enabled job with a fresh id and its first slot computed.
    pub fn new(name: &str, schedule: Schedule, payload: Payload) -> Result<Self, CronError> {
        schedule.validate()?;
        let now = now_ms();
        let next = schedule.next_after(now.saturating_sub(1))?;
        if next.is_none() {
            return Err(CronError::BadSchedule("that time is already past".into()));
        }
        let delete_after_run = schedule.kind == ScheduleKind::At;
        Ok(CronJob {
            id: format!("{:08x}", fastrand::u32(..)),
            name: if name.trim().is_empty() {
                payload.message.chars().take(30).collect()
            } else {
                name.to_string()
            },
            enabled: true,
            schedule,
            payload,
            state: JobState { next_run_at_ms: next, ..Default::default() },
            delete_after_run,
            created_at_ms: now,
        })
    }
}

/// The whole jobs file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobsFile {
    pub version: u32,
    pub jobs: Vec<CronJob>,
}

impl Default for JobsFile {
    fn default() -> Self {
        JobsFile { version: 1, jobs: Vec::new() }
    }
}

/// Where the jobs are kept, and how they change: the one behaviour both
/// stores have, so that the CLI, the `cron` tool, the web app and the
/// scheduler never ask which one they hold.
#[async_trait]
pub trait CronJobs: Send + Sync + std::fmt::Debug {
    /// Every job, as stored.
    async fn load(&self) -> Result<JobsFile, CronError>;

    /// Reads the jobs, lets `change` edit them, and writes what it changed,
    /// as one step no other writer's change interleaves with; `change`
    /// failing writes nothing and its error is returned.
    async fn edit(&self, change: JobsChange<'_>) -> Result<(), CronError>;
}

/// An edit of the jobs, for [`CronJobs::edit`].
pub type JobsChange<'a> = Box<dyn FnOnce(&mut JobsFile) -> Result<(), CronError> + Send + 'a>;

/// The cron jobs, wherever they are kept: `$FERROCLAW_HOME/cron/jobs.json`,
/// shared by the CLI and the gateway ([`CronStore::new`]); or, for several
/// gateway processes, the database's `cron_jobs` table, one row per job with
/// the same JSON, which every process reads ([`CronStore::database`]). The
/// choice is made once, where the store is opened.
#[derive(Debug, Clone)]
pub struct CronStore {
    jobs: Arc<dyn CronJobs>,
}

impl CronStore {
    /// The jobs file of `home`.
    pub fn new(home: &Path) -> Self {
        CronStore { jobs: Arc::new(files::JobsFileStore::new(home)) }
    }

    /// The jobs in `db`'s `cron_jobs` table.
    pub fn database(db: PgStore) -> Self {
        CronStore { jobs: Arc::new(pg::CronTable::new(db)) }
    }

    /// Every job, as stored.
    pub async fn load(&self) -> Result<JobsFile, CronError> {
        self.jobs.load().await
    }

    /// Reads, changes and writes the jobs in one step (in the database, one
    /// transaction no other process's change interleaves with).
    pub async fn update<T: Send>(
        &self,
        f: impl FnOnce(&mut JobsFile) -> Result<T, CronError> + Send,
    ) -> Result<T, CronError> {
        let mut out = None;
        self.jobs
            .edit(Box::new(|file| {
                out = Some(f(file)?);
                Ok(())
            }))
            .await?;
        out.ok_or(CronError::NotApplied)
    }

    /// Adds a job.
    pub async fn add(&self, job: CronJob) -> Result<CronJob, CronError> {
        self.update(|f| {
            f.jobs.push(job.clone());
            Ok(job)
        })
        .await
    }

    /// Removes a job by id (or unique id prefix).
    pub async fn remove(&self, id: &str) -> Result<CronJob, CronError> {
        self.update(|f| {
            let i = find(&f.jobs, id)?;
            Ok(f.jobs.remove(i))
        })
        .await
    }

    /// Makes a job due now; a running gateway runs it within a second.
    pub async fn run_now(&self, id: &str) -> Result<CronJob, CronError> {
        self.update(|f| {
            let i = find(&f.jobs, id)?;
            f.jobs[i].state.next_run_at_ms = Some(now_ms());
            f.jobs[i].enabled = true;
            Ok(f.jobs[i].clone())
        })
        .await
    }
}

fn find(jobs: &[CronJob], id: &str) -> Result<usize, CronError> {
    let matches: Vec<usize> =
        jobs.iter().enumerate().filter(|(_, j)| j.id.starts_with(id)).map(|(i, _)| i).collect();
    match matches[..] {
        [i] => Ok(i),
        _ if id.is_empty() => Err(CronError::NotFound(id.to_string())),
        _ => {
            jobs.iter().position(|j| j.id == id).ok_or_else(|| CronError::NotFound(id.to_string()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_print_as_people_write_them() {
        for given in ["45m", "2h", "1d", "90s", "30s"] {
            let ms = parse_duration_ms(given).unwrap();
            assert_eq!(format_duration_ms(ms), given);
        }
        assert_eq!(Schedule::every(2_700_000).unwrap().describe(), "every 45m");
    }

    #[test]
    fn schedules_are_explained_in_words() {
        let weekdays = Schedule::cron("0 9 * * 1-5", Some("Europe/Paris")).unwrap();
        let words = weekdays.explain().unwrap();
        assert_eq!(words, "Monday to Friday at 09:00 (Europe/Paris)");
        assert_eq!(Schedule::every(7_200_000).unwrap().explain().unwrap(), "Every 2 hours");
    }

    #[test]
    fn a_bad_expression_is_refused_with_the_reason_not_run_every_minute() {
        for bad in ["every day", "61 * * * *", "* * *", "* * * * * * *", "0 25 * * *"] {
            let err = Schedule::cron(bad, None).unwrap_err().to_string();
            assert!(err.contains("not valid"), "{bad}: {err}");
        }
        assert!(matches!(
            Schedule::cron("0 9 * * *", Some("Mars/Base")),
            Err(CronError::BadTimeZone(_))
        ));
    }

    #[test]
    fn five_and_six_field_expressions_find_their_next_slot_in_a_time_zone() {
        // 2026-01-01T00:00:00Z
        let start = 1_767_225_600_000;
        let daily = Schedule::cron("0 9 * * *", Some("Europe/Paris")).unwrap();
        assert_eq!(daily.next_after(start).unwrap(), Some(start + 8 * 3_600_000));
        let every_ten_s = Schedule::cron("*/10 * * * * *", Some("UTC")).unwrap();
        assert_eq!(every_ten_s.next_after(start).unwrap(), Some(start + 10_000));
    }

    #[test]
    fn at_runs_once_and_every_keeps_its_interval() {
        let at = Schedule::at(5000);
        assert_eq!(at.next_after(4999).unwrap(), Some(5000));
        assert_eq!(at.next_after(5000).unwrap(), None);
        assert_eq!(Schedule::every(60_000).unwrap().next_after(1000).unwrap(), Some(61_000));
        assert!(Schedule::every(10).is_err());
    }

    #[test]
    fn durations_and_times_parse_or_say_why_not() {
        assert_eq!(parse_duration_ms("90").unwrap(), 90_000);
        assert_eq!(parse_duration_ms("5m").unwrap(), 300_000);
        assert!(parse_duration_ms("5 parsecs").is_err());
        assert_eq!(parse_at("2026-01-01T00:00:00Z").unwrap(), 1_767_225_600_000);
        assert!(parse_at("+2s").unwrap() > now_ms());
        assert!(parse_at("tomorrowish").is_err());
    }

    #[tokio::test]
    async fn jobs_persist_in_nanobots_shape_and_are_found_by_prefix() {
        let home = tempfile::tempdir().unwrap();
        let store = CronStore::new(home.path());
        let payload = Payload { message: "stretch".into(), ..Default::default() };
        let job = store
            .add(CronJob::new("", Schedule::every(60_000).unwrap(), payload).unwrap())
            .await
            .unwrap();
        let text = std::fs::read_to_string(home.path().join("cron").join("jobs.json")).unwrap();
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["jobs"][0]["schedule"]["kind"], "every");
        assert_eq!(v["jobs"][0]["payload"]["message"], "stretch");
        assert!(v["jobs"][0]["state"]["next_run_at_ms"].is_u64());
        assert_eq!(store.remove(&job.id[..4]).await.unwrap().id, job.id);
        assert!(store.load().await.unwrap().jobs.is_empty());
    }
}
