//! `ferroclaw cron list|add|remove|run`: scheduled jobs in
//! `$FERROCLAW_HOME/cron/jobs.json` (or the shared database of several
//! gateways), run by a running gateway.

use clap::Subcommand;
use ferroclaw_core::{Config, Overrides};
use ferroclaw_gateway::config::enabled_channels;
use ferroclaw_gateway::cron::{CronJob, CronStore, Payload, Schedule, parse_at, parse_duration_ms};
use ferroclaw_gateway::status::StatusFile;
use ferroclaw_gateway::tools::list_jobs;

use crate::exit;
use crate::setup::SetupError;

#[derive(Debug, Subcommand)]
pub(crate) enum CronAction {
    /// Every job with its schedule, next run and last status.
    List,
    /// Add a job: exactly one of --every, --cron, --at.
    Add {
        /// What the agent is asked when the job runs.
        #[arg(short, long)]
        message: String,
        /// A name to show in lists.
        #[arg(long, default_value = "")]
        name: String,
        /// Repeat every interval: 90, 30s, 5m, 2h, 1d.
        #[arg(long, value_name = "INTERVAL")]
        every: Option<String>,
        /// A cron expression: 5 fields, or 6 with seconds first.
        #[arg(long, value_name = "EXPR")]
        cron: Option<String>,
        /// The IANA time zone of --cron (default: this machine's).
        #[arg(long)]
        tz: Option<String>,
        /// Run once: +10m, 2026-05-01T09:00:00+02:00 or "2026-05-01 09:00".
        #[arg(long, value_name = "TIME")]
        at: Option<String>,
        /// Deliver the answer to this chat, as CHANNEL:CHAT_ID (e.g. telegram:12345).
        #[arg(long, value_name = "CHANNEL:CHAT_ID")]
        to: Option<String>,
    },
    /// Remove a job by id (or unique prefix).
    Remove { id: String },
    /// Make a job due now: a running gateway runs it within a second.
    Run { id: String },
}

/// Refuses a `--to` channel the gateway would not run (unknown, or not enabled in config.toml).
fn check_channel(home: &std::path::Path, channel: &str) -> Result<(), SetupError> {
    let config = Config::load(home.to_path_buf(), home.join("workspace"), &Overrides::default())?;
    let enabled = enabled_channels(&config.file.channels);
    if enabled.iter().any(|c| c == channel) {
        return Ok(());
    }
    let known = ferroclaw_gateway::config::CHANNEL_KEYS.iter().any(|(n, _)| *n == channel);
    let why = if known { "is not enabled in config.toml" } else { "does not exist" };
    Err(SetupError::Other(format!(
        "--to {channel}:...: channel {channel:?} {why} (enabled: {}); the job could never deliver",
        enabled.join(", ")
    )))
}

/// Runs `ferroclaw cron ACTION`.
pub(crate) async fn run(action: &CronAction) -> Result<i32, SetupError> {
    let home = Config::default_home();
    let mut store = CronStore::new(&home);
    // Several gateways: the jobs are in their database.
    if let Some(db) = crate::database::shared_store(&home).await? {
        store = CronStore::database(db);
    }
    let fail = |e: ferroclaw_gateway::cron::CronError| SetupError::Other(e.to_string());
    match action {
        CronAction::List => println!("{}", list_jobs(&store.load().await.map_err(fail)?.jobs)),
        CronAction::Add { message, name, every, cron, tz, at, to } => {
            let schedule = match (every, cron, at) {
                (Some(every), None, None) => {
                    Schedule::every(parse_duration_ms(every).map_err(fail)?)
                }
                (None, Some(expr), None) => Schedule::cron(expr, tz.as_deref()),
                (None, None, Some(at)) => Ok(Schedule::at(parse_at(at).map_err(fail)?)),
                _ => {
                    return Err(SetupError::Other(
                        "give exactly one of --every, --cron, --at".into(),
                    ));
                }
            }
            .map_err(fail)?;
            let target = match to {
                None => None,
                Some(t) => {
                    let (channel, id) = t
                        .split_once(':')
                        .filter(|(c, id)| !c.is_empty() && !id.is_empty())
                        .ok_or_else(|| {
                            SetupError::Other(format!("--to {t:?} is not CHANNEL:CHAT_ID"))
                        })?;
                    check_channel(&home, channel)?;
                    Some((channel, id))
                }
            };
            let payload = Payload {
                message: message.clone(),
                deliver: target.is_some(),
                channel: target.map(|(c, _)| c.to_string()),
                to: target.map(|(_, id)| id.to_string()),
            };
            let job = CronJob::new(name, schedule, payload).map_err(fail)?;
            let job = store.add(job).await.map_err(fail)?;
            println!("added job {}", job.id);
            println!("{}", list_jobs(std::slice::from_ref(&job)));
            if !StatusFile::new(&home).read().is_some_and(|s| s.is_alive()) {
                println!(
                    "note: no gateway is running, so nothing will run this job until one \
                     starts (`ferroclaw gateway`, or `ferroclaw gateway install` for a service)"
                );
            }
        }
        CronAction::Remove { id } => {
            let job = store.remove(id).await.map_err(fail)?;
            println!("removed job {} ({})", job.id, job.name);
        }
        CronAction::Run { id } => {
            let job = store.run_now(id).await.map_err(fail)?;
            println!("job {} is due now; a running gateway runs it within a second", job.id);
        }
    }
    Ok(exit::OK)
}
