//! `ferroclaw gateway import|export`: moves a box's gateway files into the
//! shared database and back: the chat sessions (and which session each
//! chat talks in), the pairing allow-lists and the cron jobs.
//!
//! Both are idempotent: what is there already is left alone, so running one
//! twice is running it once. A session whose copies differ is brought up to
//! date only when one copy continues the other (the newer lines are added);
//! copies that went different ways are left as they are and named. Import
//! adds to the database and export adds to the files: neither deletes.
//! Pending pairing codes are not moved (they expire within the hour).

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::{Path, PathBuf};

use ferroclaw_core::SessionStore;
use ferroclaw_gateway::SessionKey;
use ferroclaw_gateway::cron::{CronJob, CronStore};
use ferroclaw_gateway::pairing::{ApprovedSender, PairingStore};
use ferroclaw_gateway::sessions::SessionNames;
use ferroclaw_gateway::shared_sessions::{read_lines, write_lines_atomically};
use ferroclaw_store::{PgOptions, PgStore, SessionWrite};

use crate::args::Cli;
use crate::exit;
use crate::gateway_cmd::{database_url, gateway_config};
use crate::setup::SetupError;

/// Which way the data goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Files into the database.
    Import,
    /// The database into files.
    Export,
}

/// How one thing fared.
#[derive(Debug, Default)]
struct Tally {
    moved: usize,
    same: usize,
    /// Named things left alone, with why.
    left: Vec<String>,
}

impl Tally {
    fn line(&self, what: &str, verb: &str) -> String {
        format!("{what}: {} {verb}, {} already there", self.moved, self.same)
    }
}

/// Runs `ferroclaw gateway import` or `export`.
pub async fn run(cli: &Cli, direction: Direction) -> Result<i32, SetupError> {
    let (config, settings) = gateway_config(cli)?;
    let Some(url) = database_url(&settings)? else {
        return Err(SetupError::Other(format!(
            "no database to {} : set [gateway] store = \"postgres://...\" or {}",
            match direction {
                Direction::Import => "import into",
                Direction::Export => "export from",
            },
            ferroclaw_store::DATABASE_URL_ENV
        )));
    };
    let options = PgOptions { migrate: settings.store_migrate, ..Default::default() };
    let store = PgStore::connect(&url, options).await.map_err(other)?;
    let home = &config.home;
    let sessions_dir = SessionStore::new(home).project_dir(&config.workspace);
    let (sessions, chats, allowed, cron) = match direction {
        Direction::Import => (
            import_sessions(&store, &sessions_dir).await?,
            import_chats(&store, home).await?,
            import_allowed(&store, home).await?,
            import_cron(&store, home).await?,
        ),
        Direction::Export => (
            export_sessions(&store, &sessions_dir).await?,
            export_chats(&store, home).await?,
            export_allowed(&store, home).await?,
            export_cron(&store, home).await?,
        ),
    };
    let (verb, from_to) = match direction {
        Direction::Import => ("stored", format!("{} into {}", home.display(), store.url())),
        Direction::Export => ("written", format!("{} into {}", store.url(), home.display())),
    };
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{from_to}:");
    let _ = writeln!(out, "  {}", sessions.line("chat sessions", verb));
    let _ = writeln!(out, "  {}", chats.line("chats on a /new session", verb));
    let _ = writeln!(out, "  {}", allowed.line("allowed senders", verb));
    let _ = writeln!(out, "  {}", cron.line("cron jobs", verb));
    for why in sessions.left.iter().chain(&allowed.left).chain(&cron.left) {
        let _ = writeln!(out, "  left alone: {why}");
    }
    Ok(exit::OK)
}

fn other(e: impl std::fmt::Display) -> SetupError {
    SetupError::Other(e.to_string())
}

fn io_error(path: &Path) -> impl FnOnce(std::io::Error) -> SetupError + '_ {
    move |e| SetupError::Other(format!("{}: {e}", path.display()))
}

/// The gateway's session files: `ID.jsonl` in its workspace's folder, by id.
fn local_sessions(dir: &Path) -> Result<BTreeMap<String, PathBuf>, SetupError> {
    let mut found = BTreeMap::new();
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(found),
        Err(e) => return Err(io_error(dir)(e)),
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if let Some(id) = name.strip_suffix(".jsonl")
            && !name.starts_with('.')
            && path.is_file()
        {
            found.insert(id.to_string(), path);
        }
    }
    Ok(found)
}

/// How two copies of a session stand.
enum Copies {
    Same,
    /// The first copy continues the second.
    Ahead,
    Behind,
    Different,
}

fn compare(mine: &[String], theirs: &[String]) -> Copies {
    let common = mine.iter().zip(theirs).take_while(|(a, b)| a == b).count();
    match (common == mine.len(), common == theirs.len()) {
        (true, true) => Copies::Same,
        (false, true) => Copies::Ahead,
        (true, false) => Copies::Behind,
        (false, false) => Copies::Different,
    }
}

async fn import_sessions(store: &PgStore, dir: &Path) -> Result<Tally, SetupError> {
    let mut tally = Tally::default();
    for (id, path) in local_sessions(dir)? {
        let (local, _torn) = read_lines(&path).map_err(io_error(&path))?;
        let seen = store.session_head(&id).await.map_err(other)?;
        let stored = match seen {
            Some(_) => store.session_lines_after(&id, 0).await.map_err(other)?,
            None => Vec::new(),
        };
        match compare(&local, &stored) {
            Copies::Same => {
                tally.same += 1;
                continue;
            }
            Copies::Behind => {
                tally.same += 1;
                tally.left.push(format!("session {id}: the database's copy is further along"));
                continue;
            }
            Copies::Different => {
                tally.left.push(format!(
                    "session {id}: this box's copy and the database's differ ({} kept as it is)",
                    path.display()
                ));
                continue;
            }
            Copies::Ahead => {}
        }
        // The database's lines begin this box's copy: the rest follows them.
        let keep = seen.unwrap_or_default();
        let lines = local[keep.lines as usize..].to_vec();
        let write = SessionWrite { session: id.clone(), seen, keep, lines };
        if store.write_session(&write).await.map_err(other)? {
            tally.moved += 1;
        } else {
            tally.left.push(format!("session {id}: changed in the database meanwhile; run again"));
        }
    }
    Ok(tally)
}

async fn export_sessions(store: &PgStore, dir: &Path) -> Result<Tally, SetupError> {
    let mut tally = Tally::default();
    for id in store.session_ids().await.map_err(other)? {
        let stored = store.session_lines_after(&id, 0).await.map_err(other)?;
        let path = dir.join(format!("{id}.jsonl"));
        let local = match path.is_file() {
            true => read_lines(&path).map_err(io_error(&path))?.0,
            false => Vec::new(),
        };
        match compare(&stored, &local) {
            Copies::Same => tally.same += 1,
            Copies::Ahead => {
                write_lines_atomically(&path, &stored).map_err(io_error(&path))?;
                tally.moved += 1;
            }
            Copies::Behind => {
                tally.same += 1;
                tally.left.push(format!("session {id}: this box's copy is further along"));
            }
            Copies::Different => tally.left.push(format!(
                "session {id}: this box's copy and the database's differ ({} kept)",
                path.display()
            )),
        }
    }
    Ok(tally)
}

async fn import_chats(store: &PgStore, home: &Path) -> Result<Tally, SetupError> {
    let mut tally = Tally::default();
    let stored: BTreeMap<String, String> =
        store.chat_sessions().await.map_err(other)?.into_iter().collect();
    for (chat, session) in SessionNames::load(home).moved() {
        if stored.get(&chat) == Some(&session) {
            tally.same += 1;
        } else {
            store.set_chat_session(&chat, &session).await.map_err(other)?;
            tally.moved += 1;
        }
    }
    Ok(tally)
}

async fn export_chats(store: &PgStore, home: &Path) -> Result<Tally, SetupError> {
    let mut tally = Tally::default();
    let names = SessionNames::load(home);
    for (chat, session) in store.chat_sessions().await.map_err(other)? {
        let Some(key) = SessionKey::parse_address(&chat) else { continue };
        if names.current(&key) == session {
            tally.same += 1;
        } else {
            names.set(&key, &session);
            tally.moved += 1;
        }
    }
    Ok(tally)
}

async fn import_allowed(store: &PgStore, home: &Path) -> Result<Tally, SetupError> {
    let mut tally = Tally::default();
    let stored: BTreeSet<(String, String)> = store
        .allow_list_entries()
        .await
        .map_err(other)?
        .into_iter()
        .map(|(channel, sender, _, _)| (channel, sender))
        .collect();
    let pairing = PairingStore::new(home);
    for channel in pairing.channels().await.map_err(other)? {
        let state = pairing.load(&channel).await.map_err(other)?;
        for approved in state.approved {
            if stored.contains(&(channel.clone(), approved.sender.clone())) {
                tally.same += 1;
            } else {
                store
                    .allow_named(&channel, &approved.sender, approved.name.as_deref())
                    .await
                    .map_err(other)?;
                tally.moved += 1;
            }
        }
    }
    Ok(tally)
}

async fn export_allowed(store: &PgStore, home: &Path) -> Result<Tally, SetupError> {
    let mut tally = Tally::default();
    let pairing = PairingStore::new(home);
    let mut by_channel: BTreeMap<String, Vec<(String, Option<String>, i64)>> = BTreeMap::new();
    for (channel, sender, name, added_ms) in store.allow_list_entries().await.map_err(other)? {
        by_channel.entry(channel).or_default().push((sender, name, added_ms));
    }
    for (channel, senders) in by_channel {
        // Also checks the channel's name is one a file can have.
        let mut state = match pairing.load(&channel).await {
            Ok(s) => s,
            Err(e) => {
                tally.left.push(format!("allow-list of {channel}: {e}"));
                continue;
            }
        };
        let before = state.approved.len();
        for (sender, name, added_ms) in senders {
            if state.approved.iter().any(|a| a.sender == sender) {
                tally.same += 1;
            } else {
                let approved_at_ms = u64::try_from(added_ms).unwrap_or_default();
                state.approved.push(ApprovedSender { sender, name, approved_at_ms });
            }
        }
        if state.approved.len() > before {
            tally.moved += state.approved.len() - before;
            let path = home.join("pairing").join(format!("{channel}.json"));
            ferroclaw_gateway::files::write_json_atomically(&path, &state)
                .map_err(|e| SetupError::Other(format!("{}: {e}", path.display())))?;
        }
    }
    Ok(tally)
}

async fn import_cron(store: &PgStore, home: &Path) -> Result<Tally, SetupError> {
    let mut tally = Tally::default();
    let stored: BTreeMap<String, serde_json::Value> =
        store.cron_jobs().await.map_err(other)?.into_iter().collect();
    for job in CronStore::new(home).load().await.map_err(other)?.jobs {
        let body = serde_json::to_value(&job).map_err(other)?;
        if stored.get(&job.id) == Some(&body) {
            tally.same += 1;
        } else {
            store.save_cron_job(&job.id, &body).await.map_err(other)?;
            tally.moved += 1;
        }
    }
    Ok(tally)
}

async fn export_cron(store: &PgStore, home: &Path) -> Result<Tally, SetupError> {
    let mut tally = Tally::default();
    let mut jobs = Vec::new();
    for (id, body) in store.cron_jobs().await.map_err(other)? {
        match serde_json::from_value::<CronJob>(body) {
            Ok(job) => jobs.push(job),
            Err(e) => tally.left.push(format!("cron job {id}: does not parse ({e})")),
        }
    }
    let cron = CronStore::new(home);
    cron.update(|file| {
        for job in jobs {
            match file.jobs.iter_mut().find(|j| j.id == job.id) {
                Some(same) if *same == job => tally.same += 1,
                Some(older) => {
                    *older = job;
                    tally.moved += 1;
                }
                None => {
                    file.jobs.push(job);
                    tally.moved += 1;
                }
            }
        }
        Ok(())
    })
    .await
    .map_err(other)?;
    Ok(tally)
}
