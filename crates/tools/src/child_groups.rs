//! The process groups a session's commands started, written down so that
//! none outlives ferroclaw for long. A `bash` call or a background job runs
//! in a process group of its own; its shell dies with ferroclaw (the
//! parent-death signal of [`crate::process`]), but what the shell started
//! (`server &`, a pipeline, a double fork) is not its direct child and
//! would live on after a kill -9. So each group is recorded in a small file
//! per session (`$FERROCLAW_HOME/children/<project>/<session>.json`, with
//! the owning process), and:
//! - when the session ends normally (its [`ChildGroups`] dropped), every
//!   recorded group still alive is killed;
//! - when a session or any session of the workspace opens next, the groups
//!   of owners that are gone (killed, crashed) are killed ([`reap`]), and the
//!   background jobs the opened session lost are returned, for the model.
//!
//! A group is killed only when it is provably the one recorded: its leader
//! has the recorded start time, or the leader is gone and members remain
//! (a group id is not handed out again while any member lives). A pid reused
//! by an unrelated process is never signalled. Detached jobs, which are
//! meant to outlive ferroclaw, are not recorded.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use serde::{Deserialize, Serialize};

/// One recorded process group.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Group {
    /// The group id (the pid of the shell that leads it).
    pub pgid: i32,
    /// The leader's start time, in clock ticks after boot (`/proc/PID/stat`).
    pub started: u64,
    /// The background job it runs, while the job runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job: Option<String>,
    /// The command line as given.
    pub command: String,
}

/// What a session's file holds.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Ledger {
    owner_pid: u32,
    owner_started: u64,
    groups: Vec<Group>,
}

/// A session's record of its process groups. Cheap to clone; all clones
/// share it. The default records nothing (a tool run outside a session).
/// When the last clone of a recording one is dropped, its groups are killed.
#[derive(Debug, Clone, Default)]
pub struct ChildGroups {
    inner: Option<Arc<Recorder>>,
}

#[derive(Debug)]
struct Recorder {
    path: PathBuf,
    owner: (u32, u64),
    groups: Mutex<Vec<Group>>,
}

impl ChildGroups {
    /// Records into `path` (one file per session; see [`ledger_path`]).
    pub fn recording(path: PathBuf) -> Self {
        let pid = std::process::id();
        let owner = (pid, start_time(pid as i32).unwrap_or(0));
        Self { inner: Some(Arc::new(Recorder { path, owner, groups: Mutex::new(Vec::new()) })) }
    }

    /// Records group `pgid` running `command` (for background job `job`).
    pub fn record(&self, pgid: i32, job: Option<&str>, command: &str) {
        let Some(inner) = &self.inner else { return };
        let Some(started) = start_time(pgid) else { return };
        let mut groups = inner.groups.lock().unwrap_or_else(PoisonError::into_inner);
        groups.retain(|g| g.pgid != pgid);
        groups.push(Group { pgid, started, job: job.map(str::to_string), command: command.into() });
        inner.save(&mut groups);
    }

    /// The shell leading group `pgid` ended (a `bash` call returned, a job
    /// ended): the group is no job any more, and stays recorded only while
    /// processes it left behind run.
    pub fn ended(&self, pgid: i32) {
        let Some(inner) = &self.inner else { return };
        let mut groups = inner.groups.lock().unwrap_or_else(PoisonError::into_inner);
        for g in groups.iter_mut().filter(|g| g.pgid == pgid) {
            g.job = None;
        }
        inner.save(&mut groups);
    }

    /// Kills every recorded group still alive (the session ends) and
    /// forgets them. Dropping the last clone does the same.
    pub fn kill_all(&self) {
        let Some(inner) = &self.inner else { return };
        inner.kill_all();
    }

    /// True when a recorded group still has a live process.
    pub fn any_alive(&self) -> bool {
        let Some(inner) = &self.inner else { return false };
        inner.groups.lock().unwrap_or_else(PoisonError::into_inner).iter().any(is_ours)
    }
}

impl Recorder {
    /// Drops groups that ended and writes the rest (no file when none).
    fn save(&self, groups: &mut Vec<Group>) {
        groups.retain(is_ours);
        let written = if groups.is_empty() {
            match std::fs::remove_file(&self.path) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
                _ => Ok(()),
            }
        } else {
            let ledger = Ledger {
                owner_pid: self.owner.0,
                owner_started: self.owner.1,
                groups: groups.clone(),
            };
            write_atomically(&self.path, &ledger)
        };
        if let Err(e) = written {
            tracing::warn!("cannot record child processes in {}: {e}", self.path.display());
        }
    }
}

impl Recorder {
    fn kill_all(&self) {
        let mut groups = self.groups.lock().unwrap_or_else(PoisonError::into_inner);
        for group in groups.iter().filter(|g| is_ours(g)) {
            crate::bash::kill_group(group.pgid);
        }
        groups.clear();
        self.save(&mut groups);
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        self.kill_all();
    }
}

/// The file of session `session` of the project whose sessions are in
/// `project_dir` (`$FERROCLAW_HOME/sessions/<project>`):
/// `$FERROCLAW_HOME/children/<project>/<session>.json`.
pub fn ledger_path(project_dir: &Path, session: &str) -> PathBuf {
    let project = project_dir.file_name().unwrap_or_default();
    let home = project_dir.parent().and_then(Path::parent).unwrap_or(project_dir);
    home.join("children").join(project).join(format!("{session}.json"))
}

/// At the start of a session: kills the recorded groups of every session of
/// the project (`ledger_path`'s folder) whose owner process is gone, and
/// returns the background jobs that session `session` lost (its file is
/// then removed). Files of live owners are left alone.
pub fn reap(project_dir: &Path, session: &str) -> Vec<Group> {
    let own = ledger_path(project_dir, session);
    let Some(dir) = own.parent() else { return Vec::new() };
    let mut lost = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.extension().is_none_or(|e| e != "json") {
            continue;
        }
        let Some(ledger) = read_ledger(&path) else { continue };
        if start_time(ledger.owner_pid as i32) == Some(ledger.owner_started) {
            continue; // its process still runs
        }
        for group in ledger.groups.iter().filter(|g| is_ours(g)) {
            tracing::info!(pgid = group.pgid, "killing what {:?} left running", group.command);
            crate::bash::kill_group(group.pgid);
        }
        if path == own {
            lost.extend(ledger.groups.into_iter().filter(|g| g.job.is_some()));
            let _ = std::fs::remove_file(&path);
        }
    }
    lost
}

/// A ledger file, when readable (a small file; a damaged one is ignored).
fn read_ledger(path: &Path) -> Option<Ledger> {
    let bytes = crate::repo_file::read_repo_file(path, 1 << 20).ok()?;
    serde_json::from_slice(&bytes).ok()
}

fn write_atomically(path: &Path, ledger: &Ledger) -> std::io::Result<()> {
    let dir = path.parent().ok_or_else(|| std::io::Error::other("no folder"))?;
    std::fs::create_dir_all(dir)?;
    let tmp = path.with_extension("json.tmp");
    // Private, like the session files: command lines may name secrets.
    let mut file = {
        use std::os::unix::fs::OpenOptionsExt;
        std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&tmp)?
    };
    std::io::Write::write_all(
        &mut file,
        &serde_json::to_vec(ledger).map_err(std::io::Error::other)?,
    )?;
    drop(file);
    std::fs::rename(&tmp, path)
}

/// Start time of process `pid` in clock ticks after boot, when it exists.
pub fn start_time(pid: i32) -> Option<u64> {
    stat_fields(pid).and_then(|f| f.get(19)?.parse().ok())
}

/// The fields of `/proc/PID/stat` after the command name (state first).
fn stat_fields(pid: i32) -> Option<Vec<String>> {
    if pid <= 0 {
        return None;
    }
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = stat.rsplit_once(')')?;
    Some(rest.split_whitespace().map(str::to_string).collect())
}

/// True when `group` is still the recorded group and has a live process:
/// its leader has the recorded start time, or the leader is gone and a
/// process started no earlier is still in the group.
fn is_ours(group: &Group) -> bool {
    match stat_fields(group.pgid) {
        Some(fields) => {
            let leader_same = fields.get(19).and_then(|s| s.parse().ok()) == Some(group.started);
            leader_same && (fields[0] != "Z" || members_alive(group))
        }
        None => members_alive(group),
    }
}

/// True when a live process (not a zombie) started at or after the group's
/// leader is in the group.
fn members_alive(group: &Group) -> bool {
    let pgid = group.pgid.to_string();
    std::fs::read_dir("/proc").into_iter().flatten().flatten().any(|entry| {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else {
            return false;
        };
        stat_fields(pid).is_some_and(|f| {
            f.len() > 19
                && f[0] != "Z"
                && f[2] == pgid
                && f[19].parse::<u64>().is_ok_and(|t| t >= group.started)
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sleeper_group() -> std::process::Child {
        crate::process::Launch::new("bash", "/")
            .args(["-c", "sleep 30 & wait"])
            .in_own_group()
            .command()
            .spawn()
            .unwrap()
    }

    #[test]
    fn dropping_the_record_kills_the_groups_it_holds() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.json");
        let mut child = sleeper_group();
        let pgid = child.id() as i32;
        let groups = ChildGroups::recording(path.clone());
        groups.record(pgid, Some("j1"), "sleep 30 & wait");
        assert!(path.exists());
        assert!(groups.any_alive());
        drop(groups);
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(child.wait().unwrap().signal(), Some(libc::SIGKILL));
        assert!(!path.exists(), "nothing left to record");
    }

    #[test]
    fn a_dead_owners_groups_are_reaped_and_its_jobs_reported_lost() {
        let home = tempfile::tempdir().unwrap();
        let project = home.path().join("sessions").join("proj");
        let path = ledger_path(&project, "s1");
        let mut child = sleeper_group();
        let pgid = child.id() as i32;
        let ledger = Ledger {
            owner_pid: u32::MAX / 2, // no such process
            owner_started: 1,
            groups: vec![Group {
                pgid,
                started: start_time(pgid).unwrap(),
                job: Some("ab12cd34".into()),
                command: "sleep 30 & wait".into(),
            }],
        };
        write_atomically(&path, &ledger).unwrap();
        let lost = reap(&project, "s1");
        assert_eq!(lost.len(), 1);
        assert_eq!(lost[0].job.as_deref(), Some("ab12cd34"));
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(child.wait().unwrap().signal(), Some(libc::SIGKILL));
        assert!(!path.exists());
    }

    #[test]
    fn a_reused_pid_is_never_signalled() {
        let mut child = sleeper_group();
        let pgid = child.id() as i32;
        let other = Group { pgid, started: 1, job: None, command: "x".into() };
        assert!(!is_ours(&other), "another start time is another process");
        let same =
            Group { pgid, started: start_time(pgid).unwrap(), job: None, command: "x".into() };
        assert!(is_ours(&same));
        crate::bash::kill_group(pgid);
        child.wait().unwrap();
    }
}
