//! The team's tools that need no running agent besides the caller: messages
//! (`send_message`, `broadcast`, `read_inbox`), the protocols
//! (`shutdown_request`, `shutdown_response`, `submit_plan`, `plan_approval`),
//! `list_teammates`, `claim_task` and `idle`. `spawn_teammate` opens agents and
//! lives in `ferroclaw-runtime`. Each tool acts for one [`Seat`]: who calls it.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use async_trait::async_trait;
use ferroclaw_tools::tool_input::{AtLeastOne, parse, schema_for};
use ferroclaw_tools::{Around, Tool, ToolContext, ToolError, ToolOutput};
use schemars::JsonSchema;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::board::TaskBoard;
use crate::config::{LEAD, MemberStatus, Request, Team};
use crate::error::TeamError;
use crate::inbox::{InboxMessage, InboxReader, MessageType, new_id};

/// Who calls a team tool: the team, the caller's name and inbox, and flags
/// its run loop reads after each turn.
#[derive(Debug)]
pub struct Seat {
    pub team: Team,
    pub name: String,
    pub reader: Arc<InboxReader>,
    /// Set by an approved `shutdown_response`: stop after this turn.
    pub stop: AtomicBool,
    /// Set by `idle()`: nothing more to do for now.
    pub idle: AtomicBool,
}

impl Seat {
    /// The seat of `name` on `team`, reading its inbox from the saved cursor.
    pub fn new(team: Team, name: &str) -> Arc<Seat> {
        let reader = Arc::new(InboxReader::open(&team.inbox_dir(), name));
        Arc::new(Seat {
            team,
            name: name.to_string(),
            reader,
            stop: AtomicBool::new(false),
            idle: AtomicBool::new(false),
        })
    }

    fn is_lead(&self) -> bool {
        self.name == LEAD
    }
}

/// The lead's tools from this crate (`spawn_teammate` comes from the runtime).
pub fn lead_tools(seat: &Arc<Seat>) -> Vec<Arc<dyn Tool>> {
    let tool = |kind| -> Arc<dyn Tool> { Arc::new(SeatTool { seat: seat.clone(), kind }) };
    vec![
        tool(Kind::ListTeammates),
        tool(Kind::SendMessage),
        tool(Kind::Broadcast),
        tool(Kind::ReadInbox),
        tool(Kind::ShutdownRequest),
        tool(Kind::PlanApproval),
    ]
}

/// A teammate's team tools (its work tools come from the runtime).
pub fn teammate_tools(seat: &Arc<Seat>, board: &TaskBoard) -> Vec<Arc<dyn Tool>> {
    let tool = |kind| -> Arc<dyn Tool> { Arc::new(SeatTool { seat: seat.clone(), kind }) };
    vec![
        tool(Kind::SendMessage),
        tool(Kind::ReadInbox),
        tool(Kind::ShutdownResponse),
        tool(Kind::SubmitPlan),
        tool(Kind::Idle),
        tool(Kind::ClaimTask(board.clone())),
    ]
}

/// Names of every team tool (they are never gated by plan approval).
pub const TEAM_TOOL_NAMES: &[&str] = &[
    "spawn_teammate",
    "list_teammates",
    "send_message",
    "broadcast",
    "read_inbox",
    "shutdown_request",
    "shutdown_response",
    "submit_plan",
    "plan_approval",
    "idle",
    "claim_task",
];

#[derive(Debug, Clone)]
enum Kind {
    ListTeammates,
    SendMessage,
    Broadcast,
    ReadInbox,
    ShutdownRequest,
    ShutdownResponse,
    SubmitPlan,
    PlanApproval,
    Idle,
    ClaimTask(TaskBoard),
}

/// The input of `list_teammates`, `read_inbox` and `idle`: nothing.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct NoArgs {}

/// `send_message`'s input.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct SendMessageArgs {
    to: String,
    content: String,
    msg_type: Option<MsgType>,
}

/// The kinds of message `send_message` sends (protocol messages have their
/// own tools).
#[derive(PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
enum MsgType {
    Message,
    Broadcast,
}

/// `broadcast`'s input.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct BroadcastArgs {
    content: String,
}

/// `shutdown_request`'s input.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ShutdownRequestArgs {
    teammate: String,
}

/// `shutdown_response`'s input.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ShutdownResponseArgs {
    request_id: Option<String>,
    approve: bool,
    reason: Option<String>,
}

/// `submit_plan`'s input.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct SubmitPlanArgs {
    plan: String,
}

/// `plan_approval`'s input.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct PlanApprovalArgs {
    request_id: Option<String>,
    approve: bool,
    feedback: Option<String>,
}

/// `claim_task`'s input.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ClaimTaskArgs {
    task_id: AtLeastOne,
}

/// One team tool acting for a seat.
#[derive(Debug)]
pub struct SeatTool {
    seat: Arc<Seat>,
    kind: Kind,
}

#[async_trait]
impl Tool for SeatTool {
    fn name(&self) -> &str {
        match self.kind {
            Kind::ListTeammates => "list_teammates",
            Kind::SendMessage => "send_message",
            Kind::Broadcast => "broadcast",
            Kind::ReadInbox => "read_inbox",
            Kind::ShutdownRequest => "shutdown_request",
            Kind::ShutdownResponse => "shutdown_response",
            Kind::SubmitPlan => "submit_plan",
            Kind::PlanApproval => "plan_approval",
            Kind::Idle => "idle",
            Kind::ClaimTask(_) => "claim_task",
        }
    }

    fn description(&self) -> &str {
        match self.kind {
            Kind::ListTeammates => {
                "Lists the team: each teammate's name, role and status (working, idle, shutdown)."
            }
            Kind::SendMessage => {
                "Sends a message to one team member (the lead is \"lead\"). It reaches them before their next model call. Unknown names are refused."
            }
            Kind::Broadcast => "Sends a message to every team member but you.",
            Kind::ReadInbox => {
                "Reads your new team messages now (they also arrive on their own before each of your turns)."
            }
            Kind::ShutdownRequest => {
                "Asks a teammate to shut down gracefully; it answers with shutdown_response (approve, or refuse with a reason). Returns the request_id."
            }
            Kind::ShutdownResponse => {
                "Answers the lead's shutdown_request (request_id may be left out when only one is pending): approve to stop after this turn, or refuse with a reason."
            }
            Kind::SubmitPlan => {
                "Sends your plan to the lead for approval. Until the lead approves, your write tools are refused if your plan must be approved."
            }
            Kind::PlanApproval => {
                "Approves or rejects a teammate's plan (request_id from its plan_approval_request; may be left out when only one is pending), with feedback."
            }
            Kind::Idle => {
                "Says you have nothing to do now: end your turn after this. You wake on a new message or a free task on the board."
            }
            Kind::ClaimTask(_) => {
                "Claims a pending, unowned, unblocked task from the board for you (atomic: two agents never get the same task)."
            }
        }
    }

    fn input_schema(&self) -> Value {
        match self.kind {
            Kind::ListTeammates | Kind::ReadInbox | Kind::Idle => schema_for::<NoArgs>(),
            Kind::SendMessage => schema_for::<SendMessageArgs>(),
            Kind::Broadcast => schema_for::<BroadcastArgs>(),
            Kind::ShutdownRequest => schema_for::<ShutdownRequestArgs>(),
            Kind::ShutdownResponse => schema_for::<ShutdownResponseArgs>(),
            Kind::SubmitPlan => schema_for::<SubmitPlanArgs>(),
            Kind::PlanApproval => schema_for::<PlanApprovalArgs>(),
            Kind::ClaimTask(_) => schema_for::<ClaimTaskArgs>(),
        }
    }

    fn read_only(&self) -> bool {
        // Messages and protocol answers change only the team's own files.
        true
    }

    fn concurrent(&self) -> bool {
        false
    }

    async fn execute(&self, input: Value, _ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let seat = self.seat.clone();
        let kind = self.kind.clone();
        tokio::task::spawn_blocking(move || run(&seat, &kind, input))
            .await
            .map_err(|e| ToolError::Failed(format!("the team tool failed: {e}")))?
            .map(ToolOutput::text)
            .map_err(|e| match e {
                TeamError::Io { .. } => ToolError::Failed(e.to_string()),
                other => ToolError::InvalidArguments(other.to_string()),
            })
    }
}

fn run(seat: &Seat, kind: &Kind, input: Value) -> Result<String, TeamError> {
    let team = &seat.team;
    match kind {
        Kind::ListTeammates => {
            let config = team.load()?;
            let members = config.map(|c| c.members).unwrap_or_default();
            if members.is_empty() {
                return Ok("No teammates yet (spawn_teammate adds one).".into());
            }
            Ok(members
                .iter()
                .map(|m| format!("{} ({}): {}", m.name, m.role, m.status.as_str()))
                .collect::<Vec<_>>()
                .join("\n"))
        }
        Kind::SendMessage => {
            let SendMessageArgs { to, content, msg_type } = args(input)?;
            if msg_type == Some(MsgType::Broadcast) {
                return broadcast(seat, &content);
            }
            team.send(&InboxMessage::new(MessageType::Message, &seat.name, &to, &content))?;
            Ok(format!("Sent to {to}."))
        }
        Kind::Broadcast => broadcast(seat, &args::<BroadcastArgs>(input)?.content),
        Kind::ReadInbox => {
            let batch = seat.reader.read()?;
            if batch.messages.is_empty() {
                return Ok("No new messages.".into());
            }
            Ok(batch.render())
        }
        Kind::ShutdownRequest => {
            let to = args::<ShutdownRequestArgs>(input)?.teammate;
            let member = team
                .load()?
                .and_then(|c| c.members.into_iter().find(|m| m.name == to))
                .ok_or_else(|| TeamError::UnknownMember {
                    name: to.clone(),
                    members: team.names().unwrap_or_default(),
                })?;
            if member.status == MemberStatus::Shutdown {
                return Ok(format!("{to} is already shut down."));
            }
            let id = new_id("shutdown");
            team.open_request(request(&id, "shutdown", &seat.name, &to, ""))?;
            let mut m = InboxMessage::new(
                MessageType::ShutdownRequest,
                &seat.name,
                &to,
                "Please finish and shut down; answer with shutdown_response.",
            );
            m.request_id = Some(id.clone());
            team.send(&m)?;
            Ok(format!(
                "Asked {to} to shut down (request_id {id}); its answer comes to your inbox."
            ))
        }
        Kind::ShutdownResponse => {
            let ShutdownResponseArgs { request_id: given, approve, reason } = args(input)?;
            let id = request_id(team, &given.unwrap_or_default(), &seat.name, "shutdown")?;
            let request = team.resolve_request(&id, &seat.name, approve)?;
            // An answer without a reason still says what it is.
            let reason = match (reason.unwrap_or_default(), approve) {
                (r, _) if !r.trim().is_empty() => r,
                (_, true) => "Shutting down.".to_string(),
                (_, false) => "Not shutting down (no reason given).".to_string(),
            };
            let mut m = InboxMessage::new(
                MessageType::ShutdownResponse,
                &seat.name,
                &request.from,
                &reason,
            );
            m.request_id = Some(id);
            m.approve = Some(approve);
            team.send(&m)?;
            if approve {
                seat.stop.store(true, Ordering::SeqCst);
                Ok("Shutdown approved: finish this turn with a short summary; you stop after it."
                    .into())
            } else {
                Ok("Shutdown refused; the lead was told why. Carry on.".into())
            }
        }
        Kind::SubmitPlan => {
            if seat.is_lead() {
                return Err(TeamError::Invalid("the lead has no one to submit a plan to".into()));
            }
            let plan = args::<SubmitPlanArgs>(input)?.plan;
            if plan.trim().is_empty() {
                return Err(TeamError::Invalid("the plan is empty".into()));
            }
            let id = new_id("plan");
            team.open_request(request(&id, "plan", &seat.name, LEAD, &plan))?;
            let mut m =
                InboxMessage::new(MessageType::PlanApprovalRequest, &seat.name, LEAD, &plan);
            m.request_id = Some(id.clone());
            team.send(&m)?;
            Ok(format!(
                "Plan sent to the lead (request_id {id}). Wait for its plan_approval_response before changing anything."
            ))
        }
        Kind::PlanApproval => {
            let PlanApprovalArgs { request_id: given, approve, feedback } = args(input)?;
            let id = request_id(team, &given.unwrap_or_default(), &seat.name, "plan")?;
            let request = team.resolve_request(&id, &seat.name, approve)?;
            let feedback = match (feedback.unwrap_or_default(), approve) {
                (f, _) if !f.trim().is_empty() => f,
                (_, true) => "Plan approved.".to_string(),
                (_, false) => "Plan rejected (no feedback given).".to_string(),
            };
            let mut m = InboxMessage::new(
                MessageType::PlanApprovalResponse,
                &seat.name,
                &request.from,
                &feedback,
            );
            m.request_id = Some(id);
            m.approve = Some(approve);
            team.send(&m)?;
            Ok(format!(
                "{} {}'s plan.",
                if approve { "Approved" } else { "Rejected" },
                request.from
            ))
        }
        Kind::Idle => {
            seat.idle.store(true, Ordering::SeqCst);
            Ok("You are idle: end your turn now. A message or a free task on the board wakes you."
                .into())
        }
        Kind::ClaimTask(board) => {
            let id = args::<ClaimTaskArgs>(input)?.task_id.get();
            let task =
                board.claim(id, &seat.name).map_err(|e| TeamError::Invalid(e.to_string()))?;
            Ok(format!(
                "Claimed task #{}: {}\n{}\nWhen done, mark it completed with task_update.",
                task.id, task.subject, task.description
            ))
        }
    }
}

/// `input` read as `T`; a bad argument is refused as [`TeamError::Invalid`].
fn args<T: DeserializeOwned>(input: Value) -> Result<T, TeamError> {
    parse(input).map_err(|e| match e {
        ToolError::InvalidArguments(why) => TeamError::Invalid(why),
        other => TeamError::Invalid(other.to_string()),
    })
}

/// The request answered: `given`, or when it is empty the one pending
/// request of `kind` waiting for `me` (an error if none or several).
fn request_id(team: &Team, given: &str, me: &str, kind: &str) -> Result<String, TeamError> {
    if !given.is_empty() {
        return Ok(given.to_string());
    }
    let pending: Vec<Request> = team
        .requests()?
        .into_iter()
        .filter(|r| r.status == "pending" && r.to == me && r.kind == kind)
        .collect();
    match pending.as_slice() {
        [one] => Ok(one.request_id.clone()),
        [] => Err(TeamError::Invalid(format!("there is no pending {kind} request for you"))),
        several => Err(TeamError::Invalid(format!(
            "several {kind} requests are pending ({}): give request_id",
            several
                .iter()
                .map(|r| format!("{} from {}", r.request_id, r.from))
                .collect::<Vec<_>>()
                .join(", ")
        ))),
    }
}

fn broadcast(seat: &Seat, content: &str) -> Result<String, TeamError> {
    if content.trim().is_empty() {
        return Err(TeamError::Invalid("the broadcast is empty".into()));
    }
    let sent = seat.team.broadcast(&seat.name, content)?;
    Ok(format!("Broadcast to {}.", if sent.is_empty() { "nobody".into() } else { sent.join(", ") }))
}

fn request(id: &str, kind: &str, from: &str, to: &str, content: &str) -> Request {
    Request {
        request_id: id.to_string(),
        kind: kind.to_string(),
        from: from.to_string(),
        to: to.to_string(),
        status: "pending".to_string(),
        content: content.to_string(),
    }
}

/// True when `name` has a plan the lead approved.
pub fn plan_approved(team: &Team, name: &str) -> bool {
    team.requests().is_ok_and(|all| {
        all.iter().any(|r| r.kind == "plan" && r.from == name && r.status == "approved")
    })
}

/// A write tool of a teammate whose plan must be approved first: refused
/// until the lead approves one of its plans (the constraint lives in the
/// tool, not in the prompt).
pub struct PlanGate {
    pub team: Team,
    pub name: String,
}

#[async_trait]
impl Around for PlanGate {
    async fn run(
        &self,
        inner: &dyn Tool,
        input: Value,
        ctx: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        if !plan_approved(&self.team, &self.name) {
            return Err(ToolError::Refused(format!(
                "{} is refused until the lead approves your plan: call submit_plan(plan) and wait for the plan_approval_response",
                inner.name()
            )));
        }
        inner.execute(input, ctx).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Member;
    use serde_json::json;

    #[test]
    fn a_shutdown_answer_without_a_reason_still_tells_the_lead_what_it_is() {
        let ws = tempfile::tempdir().unwrap();
        let team = Team::open(ws.path());
        team.update(|c| {
            c.members.push(Member {
                name: "alice".into(),
                role: "coder".into(),
                status: MemberStatus::Working,
                session_id: None,
                agent_type: None,
                prompt: String::new(),
                plan_required: false,
                worktree: None,
            });
            Ok(())
        })
        .unwrap();
        let lead = Seat::new(team.clone(), LEAD);
        let alice = Seat::new(team.clone(), "alice");
        run(&lead, &Kind::ShutdownRequest, json!({"teammate": "alice"})).unwrap();
        run(&alice, &Kind::ShutdownResponse, json!({"approve": true})).unwrap();
        let inbox = std::fs::read_to_string(team.inbox_dir().join("lead.jsonl")).unwrap();
        let answer: InboxMessage = serde_json::from_str(inbox.lines().last().unwrap()).unwrap();
        assert_eq!(answer.content, "Shutting down.");
    }
}
