//! The team on disk: `.agent/team/config.json` (who is on the team, their
//! status and session), the inboxes beside it, and the protocol requests
//! (`requests.json`). Every change is a read-modify-write under an exclusive
//! lock on `.agent/team/.lock`, written atomically (temp file, fsync, rename).

use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::TeamError;
use crate::inbox::{self, InboxMessage, MessageType};
use ferroclaw_tools::own_file::{self, MAX_STATE_FILE_BYTES};

/// The team's folder, relative to the workspace.
pub const TEAM_DIR: &str = ".agent/team";
/// The lead's name on every team.
pub const LEAD: &str = "lead";

/// Where a member is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MemberStatus {
    Working,
    Idle,
    Shutdown,
}

impl MemberStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            MemberStatus::Working => "working",
            MemberStatus::Idle => "idle",
            MemberStatus::Shutdown => "shutdown",
        }
    }
}

/// One teammate.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Member {
    pub name: String,
    pub role: String,
    pub status: MemberStatus,
    /// Its session file's id, to reattach after a restart.
    #[serde(default)]
    pub session_id: Option<String>,
    /// Its agent type (`general`, `explore`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_type: Option<String>,
    /// Its first instructions, to restart it.
    #[serde(default)]
    pub prompt: String,
    /// Whether its write tools wait for an approved plan.
    #[serde(default)]
    pub plan_required: bool,
    /// The git worktree it works in (`.agent/worktrees/NAME`), when isolated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worktree: Option<String>,
}

/// `.agent/team/config.json` (learn-claude-code's `team_name` and
/// `members`, plus the lead and each member's session).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TeamConfig {
    pub team_name: String,
    pub lead: String,
    /// The lead's session id, so `--continue` can tell its team.
    #[serde(default)]
    pub lead_session: Option<String>,
    #[serde(default)]
    pub members: Vec<Member>,
}

/// A protocol request and where it stands.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Request {
    pub request_id: String,
    /// `shutdown` or `plan`.
    pub kind: String,
    /// Who asked.
    pub from: String,
    /// Who must answer.
    pub to: String,
    /// pending, approved or rejected.
    pub status: String,
    #[serde(default)]
    pub content: String,
}

/// The team of one workspace. Cheap to clone; holds no open files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Team {
    dir: PathBuf,
}

impl Team {
    /// The team of `workspace` (nothing is touched until used).
    pub fn open(workspace: impl AsRef<Path>) -> Self {
        Team { dir: workspace.as_ref().join(TEAM_DIR) }
    }

    /// The team's folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The inbox folder.
    pub fn inbox_dir(&self) -> PathBuf {
        inbox::inbox_dir(&self.dir)
    }

    /// True when a team was ever formed here.
    pub fn exists(&self) -> bool {
        self.dir.join("config.json").is_file()
    }

    /// The team as on disk; `None` when there is none.
    pub fn load(&self) -> Result<Option<TeamConfig>, TeamError> {
        let path = self.dir.join("config.json");
        match own_file::read(&path, MAX_STATE_FILE_BYTES) {
            Ok(bytes) => serde_json::from_slice(&bytes).map(Some).map_err(|e| {
                TeamError::Invalid(format!("{} is not a valid team: {e}", path.display()))
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(TeamError::io(&path, e)),
        }
    }

    /// Changes the team under its lock (creating it, named after the
    /// workspace folder, if there is none) and saves it atomically.
    pub fn update<T>(
        &self,
        change: impl FnOnce(&mut TeamConfig) -> Result<T, TeamError>,
    ) -> Result<T, TeamError> {
        let _lock = self.lock()?;
        let mut config = self.load()?.unwrap_or_else(|| TeamConfig {
            team_name: self
                .dir
                .parent()
                .and_then(Path::parent)
                .and_then(Path::file_name)
                .map_or("team".to_string(), |n| n.to_string_lossy().into_owned()),
            lead: LEAD.to_string(),
            lead_session: None,
            members: Vec::new(),
        });
        let out = change(&mut config)?;
        let json = serde_json::to_vec_pretty(&config)
            .map_err(|e| TeamError::Invalid(format!("cannot encode the team: {e}")))?;
        write_atomic(&self.dir.join("config.json"), &json)?;
        Ok(out)
    }

    /// Sets `name`'s status (the lead has none).
    pub fn set_status(&self, name: &str, status: MemberStatus) -> Result<(), TeamError> {
        self.update(|c| {
            if let Some(m) = c.members.iter_mut().find(|m| m.name == name) {
                m.status = status;
            }
            Ok(())
        })
    }

    /// Everyone a message can go to: the lead and every member.
    pub fn names(&self) -> Result<Vec<String>, TeamError> {
        let config = self.load()?;
        let mut names = vec![config.as_ref().map_or(LEAD.to_string(), |c| c.lead.clone())];
        names.extend(config.into_iter().flat_map(|c| c.members).map(|m| m.name));
        Ok(names)
    }

    /// Sends `message` to its recipient, who must be on the team: an unknown
    /// name is an error listing the members, never a new inbox.
    pub fn send(&self, message: &InboxMessage) -> Result<(), TeamError> {
        let names = self.names()?;
        if !names.contains(&message.to) {
            return Err(TeamError::UnknownMember { name: message.to.clone(), members: names });
        }
        if message.content.trim().is_empty() && message.kind == MessageType::Message {
            return Err(TeamError::Invalid("the message is empty".into()));
        }
        inbox::append(&self.inbox_dir(), message)
    }

    /// Sends `content` to everyone on the team but `from`; returns who got it.
    pub fn broadcast(&self, from: &str, content: &str) -> Result<Vec<String>, TeamError> {
        let config = self.load()?;
        let mut sent = Vec::new();
        for name in self.names()? {
            let shut = config.as_ref().is_some_and(|c| {
                c.members.iter().any(|m| m.name == name && m.status == MemberStatus::Shutdown)
            });
            if name == from || shut {
                continue;
            }
            self.send(&InboxMessage::new(MessageType::Broadcast, from, &name, content))?;
            sent.push(name);
        }
        Ok(sent)
    }

    /// The protocol requests, oldest first.
    pub fn requests(&self) -> Result<Vec<Request>, TeamError> {
        let path = self.dir.join("requests.json");
        match own_file::read(&path, MAX_STATE_FILE_BYTES) {
            Ok(bytes) => serde_json::from_slice(&bytes)
                .map_err(|e| TeamError::Invalid(format!("{} is not valid: {e}", path.display()))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
            Err(e) => Err(TeamError::io(&path, e)),
        }
    }

    /// Records a new pending request.
    pub fn open_request(&self, request: Request) -> Result<(), TeamError> {
        let _lock = self.lock()?;
        let mut all = self.requests()?;
        all.push(request);
        self.save_requests(&all)
    }

    /// Moves request `id` from pending to approved or rejected; `answerer`
    /// must be the one it was sent to. Returns the request as it was.
    pub fn resolve_request(
        &self,
        id: &str,
        answerer: &str,
        approve: bool,
    ) -> Result<Request, TeamError> {
        let _lock = self.lock()?;
        let mut all = self.requests()?;
        let request = all
            .iter_mut()
            .find(|r| r.request_id == id && r.status == "pending" && r.to == answerer)
            .ok_or_else(|| TeamError::UnknownRequest(id.to_string()))?;
        request.status = if approve { "approved" } else { "rejected" }.to_string();
        let out = request.clone();
        self.save_requests(&all)?;
        Ok(out)
    }

    fn save_requests(&self, all: &[Request]) -> Result<(), TeamError> {
        let json = serde_json::to_vec_pretty(all).map_err(|e| TeamError::Invalid(e.to_string()))?;
        write_atomic(&self.dir.join("requests.json"), &json)
    }

    fn lock(&self) -> Result<File, TeamError> {
        std::fs::create_dir_all(&self.dir).map_err(|e| TeamError::io(&self.dir, e))?;
        // The team's files are ferroclaw's own: `git status` does not list them.
        let ignore = self.dir.join(".gitignore");
        if !ignore.exists() {
            crate::confined::create_new(
                &ignore,
                b"# ferroclaw's team: config, inboxes, locks\n*\n",
            )
            .map_err(|e| TeamError::io(&ignore, e))?;
        }
        let path = self.dir.join(".lock");
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|e| TeamError::io(&path, e))?;
        file.lock().map_err(|e| TeamError::io(&path, e))?;
        Ok(file)
    }
}

/// Checks a teammate's name: it names files, so `[A-Za-z0-9._-]{1,40}`, not
/// `lead`, not starting with a dot.
pub fn validate_name(name: &str) -> Result<(), TeamError> {
    let ok = !name.is_empty()
        && name.len() <= 40
        && !name.starts_with('.')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    if !ok {
        return Err(TeamError::Invalid(format!(
            "{name:?} is not a valid teammate name: 1-40 of A-Z a-z 0-9 . _ -, not starting with a dot"
        )));
    }
    if name == LEAD {
        return Err(TeamError::Invalid("\"lead\" is the lead's name".into()));
    }
    Ok(())
}

/// Writes `bytes` to `path` atomically: a temporary file in the same folder,
/// flushed to disk, renamed over the old one.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), TeamError> {
    crate::confined::write_atomic(path, bytes).map_err(|e| TeamError::io(path, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(name: &str) -> Member {
        Member {
            name: name.into(),
            role: "coder".into(),
            status: MemberStatus::Working,
            session_id: None,
            agent_type: None,
            prompt: String::new(),
            plan_required: false,
            worktree: None,
        }
    }

    #[test]
    fn an_unknown_recipient_is_refused_with_the_members_and_no_inbox_appears() {
        let ws = tempfile::tempdir().unwrap();
        let team = Team::open(ws.path());
        team.update(|c| {
            c.members.push(member("alice"));
            Ok(())
        })
        .unwrap();
        let err = team
            .send(&InboxMessage::new(MessageType::Message, "lead", "alcie", "hi"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("\"alcie\" is not on the team; members: lead, alice"), "{err}");
        assert!(!team.inbox_dir().join("alcie.jsonl").exists());
    }

    #[test]
    fn a_broadcast_reaches_everyone_but_the_sender_and_the_shut_down() {
        let ws = tempfile::tempdir().unwrap();
        let team = Team::open(ws.path());
        team.update(|c| {
            c.members.extend([member("alice"), member("bob"), member("carl")]);
            c.members[2].status = MemberStatus::Shutdown;
            Ok(())
        })
        .unwrap();
        assert_eq!(team.broadcast("alice", "stand-up").unwrap(), ["lead", "bob"]);
    }

    #[test]
    fn the_team_folder_does_not_show_in_git_status() {
        let ws = tempfile::tempdir().unwrap();
        ferroclaw_testkit::git::init_repo(ws.path(), "README.md", "hi\n");
        let team = Team::open(ws.path());
        team.update(|c| {
            c.members.push(member("alice"));
            Ok(())
        })
        .unwrap();
        team.send(&InboxMessage::new(MessageType::Message, "lead", "alice", "hi")).unwrap();
        assert!(team.inbox_dir().join("alice.jsonl").exists());
        let status = ferroclaw_testkit::git::git(ws.path(), &["status", "--porcelain"]);
        assert_eq!(status, "", "inboxes, locks and config are ferroclaw's own");
    }

    #[test]
    fn names_that_would_escape_the_inbox_folder_are_refused() {
        for bad in ["", "../x", "a/b", ".hidden", "lead", &"x".repeat(41)] {
            assert!(validate_name(bad).is_err(), "{bad:?}");
        }
        validate_name("alice-2.b_c").unwrap();
    }

    #[test]
    fn a_request_is_answered_once_and_only_by_its_recipient() {
        let ws = tempfile::tempdir().unwrap();
        let team = Team::open(ws.path());
        team.open_request(Request {
            request_id: "r1".into(),
            kind: "shutdown".into(),
            from: "lead".into(),
            to: "alice".into(),
            status: "pending".into(),
            content: String::new(),
        })
        .unwrap();
        assert!(team.resolve_request("r1", "bob", true).is_err());
        assert_eq!(team.resolve_request("r1", "alice", false).unwrap().status, "rejected");
        assert!(team.resolve_request("r1", "alice", true).is_err(), "no longer pending");
    }
}
