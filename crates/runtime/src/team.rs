//! Agent teams: the lead's teammates as agents opened through the runtime,
//! each in its own tokio task with its own session file (beside the lead's),
//! talking through the inboxes and the task board of `ferroclaw-team`.
//!
//! A teammate's life: `working` (a turn of its agent) -> `idle` (polling its
//! inbox and the board every [`TeamSettings::poll`], without model calls) ->
//! `working` when a message comes or it claims a free task -> ... ->
//! `shutdown` after an approved shutdown request, [`TeamSettings::idle_timeout`]
//! with nothing to do, the team's token budget spent, the one-shot lead done
//! (see [`one_shot`]), or the process ending.
//! Status and session id live in `.agent/team/config.json`, so a restarted
//! lead ([`TeamRunner::attach_lead`] on `--continue`) finds its team and
//! reattaches every teammate that was not shut down.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use ferroclaw_core::agent::{EventSink, Injector};
use ferroclaw_core::session::SessionMeta;
use ferroclaw_core::{Agent, Approver, Outcome};
use ferroclaw_protocol::{AgentEvent, Message, ToolCall};
use ferroclaw_team::inbox::last_through;
use ferroclaw_team::{
    InboxMessage, LEAD, Member, MemberStatus, MessageType, Seat, TaskBoard, Team, TeamError,
    WorktreeManager, lead_tools, teammate_tools,
};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::{Resume, Runtime, SessionOptions};

mod approver;
pub mod one_shot;
mod tools;

use approver::TeammateApprover;
use tools::{SpawnTeammateTool, gate_writes};

/// Default cap on teammates at once (`[team] max_teammates`).
pub const DEFAULT_MAX_TEAMMATES: usize = 4;
/// How often an idle teammate looks at its inbox and the board
/// (learn-claude-code s11: 5 s).
pub const DEFAULT_POLL: Duration = Duration::from_secs(5);
/// How long an idle teammate waits with nothing to do before shutting down
/// (learn-claude-code s11: 60 s).
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(60);

/// `[team]` settings.
#[derive(Debug, Clone, Copy)]
pub struct TeamSettings {
    pub max_teammates: usize,
    pub poll: Duration,
    pub idle_timeout: Duration,
    /// Tokens all teammates together may use.
    pub token_budget: Option<u64>,
}

impl TeamSettings {
    /// The settings of `[team]`, defaults for what it leaves out.
    pub fn from_config(config: &ferroclaw_core::Config) -> Self {
        let section = config.file.team.unwrap_or_default();
        let secs = |v: Option<f64>, default: Duration| {
            v.filter(|s| s.is_finite() && *s >= 0.0).map_or(default, Duration::from_secs_f64)
        };
        TeamSettings {
            max_teammates: section.max_teammates.unwrap_or(DEFAULT_MAX_TEAMMATES),
            poll: secs(section.poll_secs, DEFAULT_POLL),
            idle_timeout: secs(section.idle_timeout_secs, DEFAULT_IDLE_TIMEOUT),
            token_budget: section.token_budget,
        }
    }
}

/// What a new teammate is. One struct so that options (a worktree to work
/// in) can be added without changing every caller.
#[derive(Debug, Clone, Default)]
pub struct TeammateSpec {
    pub name: String,
    pub role: String,
    /// Its first instructions.
    pub prompt: String,
    /// An agent type (`general` when `None`).
    pub agent_type: Option<String>,
    /// Its write tools are refused until the lead approves its plan.
    pub plan_required: bool,
    /// The git worktree it works in (`.agent/worktrees/NAME`, created when
    /// missing); `None`: the project folder.
    pub worktree: Option<String>,
}

/// The lead's side of a team: starts, tracks and stops teammates.
pub struct TeamRunner {
    runtime: Arc<Runtime>,
    team: Team,
    board: TaskBoard,
    settings: TeamSettings,
    /// The lead's name, inbox and flags.
    lead: Arc<Seat>,
    /// The lead's session, which teammates' sessions are stored beside.
    lead_session: Mutex<Option<SessionMeta>>,
    running: Mutex<HashMap<String, JoinHandle<()>>>,
    /// Tokens used by teammates since this process started.
    tokens: AtomicU64,
    /// Where team events go (the lead's renderer), while one listens.
    events: Mutex<Option<EventSink>>,
    /// Cancels every teammate (the process ends).
    cancel: CancellationToken,
    /// Set when a one-shot lead is done: an idle teammate with nothing in
    /// its inbox or on the board shuts down at once.
    closing: AtomicBool,
    /// Holds the teammates of one lead answer until all of them are spawned.
    spawns: SpawnGate,
}

/// Teammates the lead spawns in one answer start together: each one's first
/// model call waits until every `spawn_teammate` call of that answer has
/// run (or the answer's calls are over), so that a first message from one
/// to another spawned beside it finds it on the team.
#[derive(Default)]
struct SpawnGate {
    /// `spawn_teammate` calls of the lead's current answer not yet run.
    due: tokio::sync::watch::Sender<usize>,
}

impl SpawnGate {
    fn expect(&self, calls: &[ToolCall]) {
        self.due.send_replace(calls.iter().filter(|c| c.name == SpawnTeammateTool::NAME).count());
    }

    fn ran_one(&self) {
        self.due.send_modify(|due| *due = due.saturating_sub(1));
    }

    fn open(&self) {
        self.due.send_replace(0);
    }

    /// Returns once no spawn of the current answer is left to run.
    async fn wait(&self) {
        let mut due = self.due.subscribe();
        let _ = due.wait_for(|due| *due == 0).await;
    }
}

impl TeamRunner {
    /// The team of the runtime's workspace.
    pub fn new(runtime: &Arc<Runtime>) -> Arc<TeamRunner> {
        let workspace = &runtime.config().workspace;
        let team = Team::open(workspace);
        Arc::new(TeamRunner {
            settings: TeamSettings::from_config(runtime.config()),
            board: TaskBoard::open(workspace),
            lead: Seat::new(team.clone(), LEAD),
            team,
            runtime: runtime.clone(),
            lead_session: Mutex::new(None),
            running: Mutex::default(),
            tokens: AtomicU64::new(0),
            events: Mutex::new(None),
            cancel: CancellationToken::new(),
            closing: AtomicBool::new(false),
            spawns: SpawnGate::default(),
        })
    }

    /// True when the team is offered: `[team]` is in the config or this
    /// workspace has a team already.
    pub fn wanted(runtime: &Runtime) -> bool {
        runtime.config().file.team.is_some() || Team::open(&runtime.config().workspace).exists()
    }

    /// The team's files.
    pub fn team(&self) -> &Team {
        &self.team
    }

    /// The lead's seat (its inbox reader, for `/inbox`).
    pub fn lead_seat(&self) -> &Arc<Seat> {
        &self.lead
    }

    /// Makes `agent` the lead: its team tools, its inbox delivered before
    /// each model call, and the team's teammates reattached (a restarted
    /// lead finds its team).
    pub fn attach_lead(self: &Arc<Self>, agent: &mut Agent) -> Result<(), TeamError> {
        for tool in lead_tools(&self.lead) {
            agent.add_tool_arc(tool);
        }
        agent.add_tool(SpawnTeammateTool(self.clone()));
        // A lead that died after recording messages but before saving its
        // cursor must not get them twice.
        if let Some(through) = agent.messages().iter().rev().find_map(|m| last_through(&m.text())) {
            self.lead.reader.reconcile(through)?;
        }
        agent.set_injector(Some(Arc::new(SeatInjector {
            seat: self.lead.clone(),
            identity: None,
            budget: None,
            lead_of: Some(self.clone()),
        })));
        let meta = agent.session().meta().clone();
        let lead_id = meta.id.clone();
        *self.lead_session.lock().unwrap_or_else(PoisonError::into_inner) = Some(meta);
        if self.team.exists() {
            self.team.update(|c| {
                c.lead_session = Some(lead_id);
                Ok(())
            })?;
            self.reattach();
        }
        Ok(())
    }

    /// Sends team events to `events` (the lead's renderer); `None` stops.
    pub fn set_events(&self, events: Option<EventSink>) {
        *self.events.lock().unwrap_or_else(PoisonError::into_inner) = events;
    }

    /// Starts a teammate. Refuses a name already working or idle (no
    /// doubles), a full team, and an unknown agent type. The work (file
    /// locks, `git worktree add` for an isolated teammate, opening its
    /// session) runs on a blocking thread, never on the async threads the
    /// lead's turn and the other teammates share.
    pub async fn spawn(self: &Arc<Self>, spec: TeammateSpec) -> Result<(), TeamError> {
        let runner = self.clone();
        tokio::task::spawn_blocking(move || runner.spawn_now(spec))
            .await
            .map_err(|e| TeamError::Invalid(format!("starting the teammate failed: {e}")))?
    }

    /// [`TeamRunner::spawn`]'s blocking part.
    fn spawn_now(self: &Arc<Self>, spec: TeammateSpec) -> Result<(), TeamError> {
        ferroclaw_team::config::validate_name(&spec.name)?;
        if let Some(kind) = &spec.agent_type
            && !self.runtime.agent_types().iter().any(|t| &t.name == kind)
        {
            let names: Vec<&str> =
                self.runtime.agent_types().iter().map(|t| t.name.as_str()).collect();
            return Err(TeamError::Invalid(format!(
                "unknown agent_type {kind:?}; available: {}",
                names.join(", ")
            )));
        }
        let max = self.settings.max_teammates;
        let lead_session = self
            .lead_session
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
            .map(|m| m.id.clone());
        let member = self.team.update(|c| {
            c.lead_session = lead_session.or(c.lead_session.take());
            if let Some(m) = c.members.iter().find(|m| m.name == spec.name)
                && m.status != MemberStatus::Shutdown
            {
                return Err(TeamError::Exists {
                    name: spec.name.clone(),
                    status: m.status.as_str().to_string(),
                });
            }
            let alive = c.members.iter().filter(|m| m.status != MemberStatus::Shutdown).count();
            if alive >= max {
                return Err(TeamError::Full { max });
            }
            let member = Member {
                name: spec.name.clone(),
                role: spec.role.clone(),
                status: MemberStatus::Working,
                session_id: None,
                agent_type: spec.agent_type.clone(),
                prompt: spec.prompt.clone(),
                plan_required: spec.plan_required,
                worktree: spec.worktree.clone(),
            };
            c.members.retain(|m| m.name != spec.name);
            c.members.push(member.clone());
            Ok(member)
        })?;
        match self.start(member, None) {
            Ok(()) => Ok(()),
            Err(e) => {
                let _ = self.team.set_status(&spec.name, MemberStatus::Shutdown);
                Err(e)
            }
        }
    }

    /// Opens a teammate's agent (a new session, or `resume` after a restart)
    /// and starts its loop.
    fn start(self: &Arc<Self>, member: Member, resume: Option<String>) -> Result<(), TeamError> {
        let seat = Seat::new(self.team.clone(), &member.name);
        let team_name = self.team.load()?.map_or_else(|| "team".to_string(), |c| c.team_name);
        let identity = format!(
            "<identity>You are teammate \"{}\", role {}, on team {team_name} (lead: {LEAD}). Your \
             inbox is .agent/team/inbox/{}.jsonl: messages reach you before each model call. Talk \
             with send_message; claim board tasks with claim_task and complete them with \
             task_update; call idle() when you have nothing left to do.</identity>",
            member.name, member.role, member.name
        );
        let mut system = identity.clone();
        if let Some(kind) = member
            .agent_type
            .as_ref()
            .and_then(|k| self.runtime.agent_types().iter().find(|t| &t.name == k))
        {
            system.push_str("\n\n");
            system.push_str(&kind.prompt);
        }
        let options = SessionOptions {
            append_system_prompt: Some(system),
            extra_tools: teammate_tools(&seat, &self.board),
            workspace_root: self.worktree_of(&member, resume.is_none())?,
            checkpoints: false,
            journal: None,
            ..Default::default()
        };
        let approver: Arc<dyn Approver> = Arc::new(TeammateApprover {
            name: member.name.clone(),
            team: self.team.clone(),
            workspace: options
                .workspace_root
                .clone()
                .unwrap_or_else(|| self.runtime.config().workspace.clone()),
            home: self.runtime.config().home.clone(),
        });
        let open = |resume: Resume| {
            self.runtime
                .open(resume, approver.clone(), options)
                .map_err(|e| TeamError::Invalid(format!("cannot start {}: {e}", member.name)))
        };
        let reattached = resume.is_some();
        let opened = match resume {
            Some(id) => open(Resume::Id(id))?,
            None => {
                let parent = self
                    .lead_session
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .clone()
                    .ok_or_else(|| TeamError::Invalid("the lead has no session yet".into()))?;
                let label = format!("team-{}-{}", member.name, ferroclaw_team::inbox::new_id("s"));
                open(Resume::Beside { parent: Box::new(parent), label })?
            }
        };
        let mut agent = opened.agent;
        if let Some(through) = agent.messages().iter().rev().find_map(|m| last_through(&m.text())) {
            seat.reader.reconcile(through)?;
        }
        if member.plan_required {
            let team = self.team.clone();
            let name = member.name.clone();
            agent.map_tools(|tools| gate_writes(tools, &team, &name));
        }
        let cancel = self.cancel.child_token();
        agent.set_injector(Some(Arc::new(SeatInjector {
            seat: seat.clone(),
            identity: Some(identity),
            budget: self.settings.token_budget.map(|b| (self.clone(), b, cancel.clone())),
            lead_of: None,
        })));
        let session_id = agent.session().meta().id.clone();
        self.team.update(|c| {
            if let Some(m) = c.members.iter_mut().find(|m| m.name == member.name) {
                m.session_id = Some(session_id);
            }
            Ok(())
        })?;
        let first = match (reattached, member.status) {
            (false, _) => Some(member.prompt.clone()),
            (true, MemberStatus::Working) => Some(
                "The process running you stopped and was restarted: carry on where you left off \
                 (check your inbox and the task board)."
                    .to_string(),
            ),
            (true, _) => None,
        };
        let runner = self.clone();
        let name = member.name.clone();
        let handle = tokio::spawn(async move {
            if !reattached {
                tokio::select! {
                    () = runner.spawns.wait() => {}
                    () = cancel.cancelled() => {}
                }
            }
            runner.run_teammate(seat, agent, first, cancel).await;
        });
        self.running.lock().unwrap_or_else(PoisonError::into_inner).insert(name, handle);
        Ok(())
    }

    /// The folder an isolated teammate works in: its worktree, created on
    /// first spawn (a kept or existing one is reused) and found again on
    /// reattach. Isolation that cannot be set up (not a git repository, a
    /// dirty checkout) fails the spawn with the reason: never silently shared.
    fn worktree_of(&self, member: &Member, first: bool) -> Result<Option<PathBuf>, TeamError> {
        let Some(name) = &member.worktree else { return Ok(None) };
        let manager = WorktreeManager::open(&self.runtime.config().workspace);
        let tree = match manager.get(name) {
            Ok(tree) => tree,
            Err(_) if first => manager.create(name, None, None).map_err(|e| {
                TeamError::Invalid(format!(
                    "cannot isolate {} in worktree {name}: {e}",
                    member.name
                ))
            })?,
            Err(e) => {
                return Err(TeamError::Invalid(format!(
                    "cannot reattach {} to worktree {name}: {e}",
                    member.name
                )));
            }
        };
        Ok(Some(tree.path))
    }

    /// Reattaches every teammate that was working or idle when the lead
    /// stopped; one that cannot be reopened is marked shut down and the
    /// lead is told.
    fn reattach(self: &Arc<Self>) {
        let Ok(Some(config)) = self.team.load() else { return };
        for member in config.members {
            let running = self
                .running
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .contains_key(&member.name);
            if member.status == MemberStatus::Shutdown || running {
                continue;
            }
            let name = member.name.clone();
            let resume = member.session_id.clone();
            if let Err(e) = self.start(member, resume) {
                let _ = self.team.set_status(&name, MemberStatus::Shutdown);
                self.tell_lead(&name, &format!("could not be reattached: {e}"));
            }
        }
    }

    /// The teammate's loop: a turn per input, then idle polling.
    async fn run_teammate(
        self: Arc<Self>,
        seat: Arc<Seat>,
        mut agent: Agent,
        mut input: Option<String>,
        cancel: CancellationToken,
    ) {
        let name = seat.name.clone();
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let counter = {
            let runner = self.clone();
            tokio::spawn(async move {
                while let Some(event) = rx.recv().await {
                    if let AgentEvent::Usage { usage } = event {
                        runner.tokens.fetch_add(usage.total(), Ordering::Relaxed);
                    }
                }
            })
        };
        let why = loop {
            if let Some(text) = input.take() {
                self.set_status(&name, MemberStatus::Working, "working");
                seat.idle.store(false, Ordering::SeqCst);
                let report = agent.run(Message::user(text), &tx, &cancel).await;
                if let Outcome::Failed(e) = &report.outcome {
                    self.tell_lead(&name, &format!("stopped its turn with an error: {e}"));
                }
            }
            if self.budget_spent() {
                let budget = self.settings.token_budget.unwrap_or_default();
                self.tell_lead(
                    &name,
                    &format!("stopped: the team's token budget ({budget} tokens) is spent"),
                );
                break "the team's token budget is spent".to_string();
            }
            if seat.stop.load(Ordering::SeqCst) {
                break "shutdown approved".to_string();
            }
            if cancel.is_cancelled() {
                break "stopped".to_string();
            }
            self.set_status(&name, MemberStatus::Idle, "idle");
            match self.idle_wait(&seat, &cancel).await {
                Ok(text) => input = Some(text),
                Err(why) => break why,
            }
        };
        agent.finish().await;
        drop(tx);
        let _ = counter.await;
        // A process that is ending keeps working/idle on disk, so that
        // `--continue` reattaches the teammate.
        if !self.cancel.is_cancelled() {
            self.set_status(&name, MemberStatus::Shutdown, &why);
        }
    }

    /// Idle: every poll, the inbox (one stat) and the board; no model call.
    /// Returns the next input, or why the teammate stops.
    async fn idle_wait(&self, seat: &Seat, cancel: &CancellationToken) -> Result<String, String> {
        let since = Instant::now();
        loop {
            if seat.reader.has_new() {
                match seat.reader.read() {
                    Ok(batch) if !batch.messages.is_empty() => return Ok(batch.render()),
                    Ok(_) => {}
                    Err(e) => tracing::warn!("{}: {e}", seat.name),
                }
            }
            match self.board.claim_next(&seat.name) {
                Ok(Some(task)) => {
                    self.emit(&seat.name, "working", &format!("claimed task #{}", task.id));
                    return Ok(format!(
                        "<claimed-task>You claimed task #{} from the board: {}\n{}</claimed-task>\n\
                         Do it, then mark it completed with task_update.",
                        task.id, task.subject, task.description
                    ));
                }
                Ok(None) => {}
                Err(e) => tracing::warn!("{}: the task board: {e}", seat.name),
            }
            if self.closing.load(Ordering::SeqCst) {
                return Err(one_shot::CLOSED.to_string());
            }
            if since.elapsed() >= self.settings.idle_timeout {
                return Err(format!(
                    "idle for {} s with nothing to do",
                    self.settings.idle_timeout.as_secs_f64()
                ));
            }
            tokio::select! {
                _ = tokio::time::sleep(self.settings.poll) => {}
                _ = cancel.cancelled() => return Err("stopped".into()),
            }
        }
    }

    fn budget_spent(&self) -> bool {
        self.settings.token_budget.is_some_and(|b| self.tokens.load(Ordering::Relaxed) >= b)
    }

    fn set_status(&self, name: &str, status: MemberStatus, detail: &str) {
        if let Err(e) = self.team.set_status(name, status) {
            tracing::warn!("team: cannot save {name}'s status: {e}");
        }
        self.emit(name, status.as_str(), detail);
    }

    fn emit(&self, name: &str, status: &str, detail: &str) {
        if let Some(events) = &*self.events.lock().unwrap_or_else(PoisonError::into_inner) {
            let _ = events.send(AgentEvent::Team {
                name: name.to_string(),
                status: status.to_string(),
                detail: detail.to_string(),
            });
        }
    }

    /// A note from the team to the lead's inbox.
    fn tell_lead(&self, about: &str, text: &str) {
        let message =
            InboxMessage::new(MessageType::Message, about, LEAD, &format!("{about} {text}"));
        if let Err(e) = self.team.send(&message) {
            tracing::warn!("team: cannot tell the lead: {e}");
        }
    }

    /// Names of teammates whose loop is still running.
    pub fn running(&self) -> Vec<String> {
        let mut running = self.running.lock().unwrap_or_else(PoisonError::into_inner);
        running.retain(|_, handle| !handle.is_finished());
        let mut names: Vec<String> = running.keys().cloned().collect();
        names.sort();
        names
    }

    /// Waits until every teammate has stopped (a one-shot lead waits for
    /// its team before the process ends).
    pub async fn wait_all(&self) {
        while !self.running().is_empty() {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Stops every teammate now, leaving their status on disk for
    /// `--continue`.
    pub async fn stop_all(&self) {
        self.cancel.cancel();
        self.wait_all().await;
    }
}

/// Delivers a seat's inbox before each model call (and the teammate's
/// identity after compaction); stops a teammate once the budget is spent.
struct SeatInjector {
    seat: Arc<Seat>,
    identity: Option<String>,
    budget: Option<(Arc<TeamRunner>, u64, CancellationToken)>,
    /// The lead's injector: the team whose spawns the lead's answers gate.
    lead_of: Option<Arc<TeamRunner>>,
}

impl Injector for SeatInjector {
    fn before_request(&self) -> Option<String> {
        if let Some((runner, budget, cancel)) = &self.budget
            && runner.tokens.load(Ordering::Relaxed) >= *budget
        {
            // Finish the step that just ran; make no new model call.
            cancel.cancel();
        }
        if !self.seat.reader.has_new() {
            return None;
        }
        match self.seat.reader.read() {
            Ok(batch) if !batch.messages.is_empty() => Some(batch.render()),
            Ok(_) => None,
            Err(e) => {
                tracing::warn!("{}'s inbox: {e}", self.seat.name);
                None
            }
        }
    }

    fn has_uncommitted(&self) -> bool {
        self.seat.reader.has_uncommitted()
    }

    fn committed(&self) {
        if let Err(e) = self.seat.reader.commit() {
            tracing::warn!("{}'s inbox cursor: {e}", self.seat.name);
        }
    }

    fn after_compaction(&self) -> Option<String> {
        self.identity.clone()
    }

    fn before_tools(&self, calls: &[ToolCall]) {
        if let Some(team) = &self.lead_of {
            team.spawns.expect(calls);
        }
    }

    fn after_tools(&self) {
        if let Some(team) = &self.lead_of {
            team.spawns.open();
        }
    }
}
