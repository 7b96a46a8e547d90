//! `ferroclaw gateway import|export`: moves a box's gateway files into the
//! shared database and back: the chat sessions (and which session each
//! chat talks in), the titles people gave them, the files the agent sent
//! to chats (the `message` tool's `media`: workspace files on one box, the
//! database's `media` on several), the pairing allow-lists and the cron jobs.
//!
//! Both are idempotent: what is there already is left alone, so running one
//! twice is running it once. A session whose copies differ is brought up to
//! date only when one copy continues the other (the newer lines are added);
//! copies that went different ways are left as they are and named. Import
//! adds to the database and export adds to the files: neither deletes.
//! Pending pairing codes are not moved (they expire within the hour).

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use ferroclaw_core::SessionStore;
use ferroclaw_gateway::SessionKey;
use ferroclaw_gateway::cron::{CronJob, CronStore};
use ferroclaw_gateway::pairing::{ApprovedSender, PairingStore};
use ferroclaw_gateway::sessions::{SessionNames, SessionTitles};
use ferroclaw_gateway::shared_media;
use ferroclaw_gateway::shared_sessions::{read_lines, write_lines_atomically};
use ferroclaw_store::{PgOptions, PgStore, SessionWrite};

use crate::args::Cli;
use crate::exit;
use crate::gateway_cmd::{database_url, gateway_config};
use crate::setup::SetupError;

/// Which way the data goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Direction {
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
pub(crate) async fn run(cli: &Cli, direction: Direction) -> Result<i32, SetupError> {
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
    let workspace = &config.workspace;
    let (titles, media) = match direction {
        Direction::Import => (
            import_titles(&store, home).await?,
            import_media(&store, &sessions_dir, workspace).await?,
        ),
        Direction::Export => {
            (export_titles(&store, home).await?, export_media(&store, workspace).await?)
        }
    };
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
    let _ = writeln!(out, "  {}", titles.line("session titles", verb));
    let _ = writeln!(out, "  {}", media.line("files sent to chats", verb));
    let _ = writeln!(out, "  {}", allowed.line("allowed senders", verb));
    let _ = writeln!(out, "  {}", cron.line("cron jobs", verb));
    let left = [&sessions.left, &titles.left, &media.left, &allowed.left, &cron.left];
    for why in left.into_iter().flatten() {
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

async fn import_titles(store: &PgStore, home: &Path) -> Result<Tally, SetupError> {
    let mut tally = Tally::default();
    let stored: BTreeMap<String, String> =
        store.session_titles().await.map_err(other)?.into_iter().collect();
    for (id, title) in SessionTitles::load(home).all().await.map_err(other)? {
        match stored.get(&id) {
            Some(same) if *same == title => tally.same += 1,
            Some(other_title) => tally.left.push(format!(
                "title of session {id}: the database's is \"{other_title}\" (\"{title}\" not stored)"
            )),
            None => {
                store.set_session_title(&id, Some(&title)).await.map_err(other)?;
                tally.moved += 1;
            }
        }
    }
    Ok(tally)
}

async fn export_titles(store: &PgStore, home: &Path) -> Result<Tally, SetupError> {
    let mut tally = Tally::default();
    let titles = SessionTitles::load(home);
    for (id, title) in store.session_titles().await.map_err(other)? {
        match titles.get(&id).await.map_err(other)? {
            Some(same) if same == title => tally.same += 1,
            Some(mine) => tally.left.push(format!(
                "title of session {id}: this box's is \"{mine}\" (\"{title}\" not written)"
            )),
            None => {
                titles.set(&id, &title).await.map_err(other)?;
                tally.moved += 1;
            }
        }
    }
    Ok(tally)
}

/// The files the `message` tool sent in the session lines `lines` (its
/// `media`), in order, each once.
fn sent_files(lines: &[String]) -> Vec<String> {
    fn walk(value: &serde_json::Value, found: &mut Vec<String>) {
        match value {
            serde_json::Value::Object(map) => {
                let is_send = map.get("type").and_then(|t| t.as_str()) == Some("tool_call")
                    && map.get("name").and_then(|n| n.as_str()) == Some("message");
                if is_send {
                    let media = map.get("input").and_then(|i| i.get("media"));
                    for path in media.and_then(|m| m.as_array()).into_iter().flatten() {
                        if let Some(path) = path.as_str().filter(|p| !found.iter().any(|f| f == p))
                        {
                            found.push(path.to_string());
                        }
                    }
                }
                map.values().for_each(|v| walk(v, found));
            }
            serde_json::Value::Array(items) => items.iter().for_each(|v| walk(v, found)),
            _ => {}
        }
    }
    let mut found = Vec::new();
    for line in lines {
        if let Ok(value) = serde_json::from_str::<serde_json::Value>(line) {
            walk(&value, &mut found);
        }
    }
    found
}

/// Keeps in the database each workspace file the agent sent in this box's
/// sessions (URLs, files gone since and files outside the workspace are
/// named and left).
async fn import_media(
    store: &PgStore,
    sessions_dir: &Path,
    workspace: &Path,
) -> Result<Tally, SetupError> {
    let mut tally = Tally::default();
    let mut seen = BTreeSet::new();
    for (_, path) in local_sessions(sessions_dir)? {
        let (lines, _torn) = read_lines(&path).map_err(io_error(&path))?;
        for sent in sent_files(&lines) {
            if sent.contains("://") {
                continue;
            }
            let real = match ferroclaw_gateway::media::resolve(workspace, &sent) {
                Ok(real) => real.display().to_string(),
                Err(e) => {
                    tally.left.push(format!("sent file {sent}: {e}"));
                    continue;
                }
            };
            let Some(key) = shared_media::key(workspace, &real) else { continue };
            if !seen.insert(key.clone()) {
                continue;
            }
            if store.media(&key).await.map_err(other)?.is_some() {
                tally.same += 1;
                continue;
            }
            match shared_media::keep(store, workspace, &real).await {
                Ok(()) => tally.moved += 1,
                Err(e) => tally.left.push(format!("sent file {key}: {e}")),
            }
        }
    }
    Ok(tally)
}

/// Writes each file kept in the database into the workspace at its path,
/// where no file is (a different file already there is named and kept; a
/// path through a symbolic link is refused).
async fn export_media(store: &PgStore, workspace: &Path) -> Result<Tally, SetupError> {
    let mut tally = Tally::default();
    for key in store.media_ids().await.map_err(other)? {
        let Some(kept) = store.media(&key).await.map_err(other)? else { continue };
        // Only a plain path inside the workspace, as the gateway names them.
        if shared_media::key(workspace, &key).as_deref() != Some(key.as_str()) {
            tally.left.push(format!("sent file {key}: not a path inside the workspace"));
            continue;
        }
        let target = workspace.join(&key);
        match write_new_file(workspace, &target, &kept.bytes) {
            Ok(true) => tally.moved += 1,
            Ok(false) if std::fs::read(&target).is_ok_and(|b| b == kept.bytes) => tally.same += 1,
            Ok(false) => tally.left.push(format!(
                "sent file {key}: this box has another file there ({} kept)",
                target.display()
            )),
            Err(e) => tally.left.push(format!("sent file {key}: {e}")),
        }
    }
    Ok(tally)
}

/// Writes `bytes` to `target` (inside `workspace`) unless something is
/// there already (false); folders are created, and none on the way may be
/// a symbolic link.
fn write_new_file(workspace: &Path, target: &Path, bytes: &[u8]) -> std::io::Result<bool> {
    let Ok(inside) = target.strip_prefix(workspace) else {
        return Err(std::io::Error::other("not inside the workspace"));
    };
    let mut folder = workspace.to_path_buf();
    for part in inside.parent().into_iter().flat_map(Path::components) {
        folder.push(part);
        match std::fs::symlink_metadata(&folder) {
            Ok(m) if m.file_type().is_symlink() => {
                return Err(std::io::Error::other(format!(
                    "{} is a symbolic link",
                    folder.display()
                )));
            }
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => std::fs::create_dir(&folder)?,
            Err(e) => return Err(e),
        }
    }
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(target);
    match file {
        Ok(mut file) => {
            file.write_all(bytes)?;
            Ok(true)
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
        Err(e) => Err(e),
    }
}
