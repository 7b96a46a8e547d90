//! `ferroclaw status`: the gateway (running or not, channels, live chats),
//! its chat sessions, and cron jobs.

use ferroclaw_core::SessionStore;
use ferroclaw_gateway::cron::{CronStore, rfc3339_ms};
use ferroclaw_gateway::status::StatusFile;
use ferroclaw_gateway::tools::list_jobs;

use crate::args::Cli;
use crate::exit;
use crate::setup::SetupError;

/// Chat sessions listed (newest first).
const SESSIONS_SHOWN: usize = 10;

/// Runs `ferroclaw status`.
pub(crate) async fn run(cli: &Cli) -> Result<i32, SetupError> {
    let (config, settings) = crate::gateway_cmd::gateway_config(cli)?;
    let home = &config.home;
    println!("home       {}", home.display());
    println!("workspace  {}", config.workspace.display());
    println!("model      {}", config.model_spec().unwrap_or_else(|e| format!("none ({e})")));
    match StatusFile::new(home).read() {
        Some(s) if s.is_alive() => {
            println!("gateway    running (pid {}, since {})", s.pid, rfc3339_ms(s.started_at_ms));
            if let Some(url) = &s.web_url {
                println!("web chat   {url}");
            }
            let names: Vec<String> = s
                .channels
                .iter()
                .map(|c| match &c.state {
                    Some(state) => format!("{} ({state})", c.name),
                    None => c.name.clone(),
                })
                .collect();
            println!("channels   {}", names.join(", "));
            println!(
                "chats      {} live, {} turns running, {} turns done",
                s.live_sessions, s.turns_running, s.turns_done
            );
        }
        _ => {
            println!("gateway    not running (start it with `ferroclaw gateway`)");
            let names = ferroclaw_gateway::config::enabled_channels(&config.file.channels);
            println!("channels   {} (configured)", names.join(", "));
        }
    }
    println!(
        "heartbeat  {}",
        match settings.heartbeat_interval() {
            Some(d) => format!("every {} min", d.as_secs() / 60),
            None => "off".into(),
        }
    );
    let sessions: Vec<_> = SessionStore::new(home)
        .list(&config.workspace)
        .into_iter()
        .filter(|s| s.id.starts_with("gw-"))
        .collect();
    println!("\nsessions   {} chat sessions", sessions.len());
    for s in sessions.iter().take(SESSIONS_SHOWN) {
        println!("  {}  {}  {}", s.id, s.created, s.title);
    }
    let mut cron = CronStore::new(home);
    // Several gateways: the jobs are in their database.
    if let Ok(Some(db)) = crate::database::store_of(&settings).await {
        cron = CronStore::database(db);
    }
    let jobs = cron.load().await.map(|f| f.jobs).unwrap_or_default();
    println!("\ncron       {} jobs", jobs.len());
    if !jobs.is_empty() {
        println!("{}", list_jobs(&jobs));
    }
    Ok(exit::OK)
}
