//! The control protocol of Claude Code's Agent SDK, spoken on stdin/stdout
//! beside the stream-json messages (`--input-format stream-json`).
//!
//! The SDK asks, and we answer with a `control_response` line
//! (`{"type":"control_response","response":{"subtype":"success","request_id","response":{...}}}`
//! or `"subtype":"error"` with `error`):
//!
//! - `initialize`: the commands, models and account this run has (what we
//!   do not have is left out: no agents listing, no output styles);
//! - `interrupt`: ends the running turn (before the first turn: that turn);
//! - `set_permission_mode`: switches the mode at once, mid-turn included.
//!
//! Any other request is answered with an error that names it. With
//! `--permission-prompt-tool stdio` we ask too: each call that needs the
//! user's approval becomes a `can_use_tool` request ([`SdkApprover`]), which
//! the SDK answers from its `canUseTool` callback.

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use async_trait::async_trait;
use ferroclaw_core::permission::Permissions;
use ferroclaw_core::{Approval, Approver, PermissionMode, PlanVerdict};
use ferroclaw_protocol::ToolCall;
use ferroclaw_tools::claude;
use serde_json::{Value, json};
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

/// The only `--permission-prompt-tool` we serve (MCP permission tools are not).
pub(crate) const STDIO_PROMPTS: &str = "stdio";

/// What the agent tells the SDK, fixed once the agent is open.
struct Facts {
    initialize: Value,
    permissions: Arc<Permissions>,
}

/// The running turn's cancel token, and whether a turn has run yet.
struct TurnState {
    token: CancellationToken,
    busy: bool,
    started_once: bool,
}

/// Both ends of the control protocol: answers the SDK's requests, sends ours
/// and routes their answers back.
pub(crate) struct Control {
    facts: OnceLock<Facts>,
    turn: Mutex<TurnState>,
    pending: Mutex<HashMap<String, oneshot::Sender<Value>>>,
    next_id: AtomicU64,
    closed: AtomicBool,
}

/// One line on stdout, whole, flushed (the event writer writes whole lines too).
fn write_line(value: &Value) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{value}");
    let _ = out.flush();
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Control {
    /// A control channel whose turns are cancelled with `parent` too (Ctrl-C).
    pub(crate) fn new(parent: &CancellationToken) -> Arc<Self> {
        let turn = TurnState { token: parent.child_token(), busy: false, started_once: false };
        Arc::new(Control {
            facts: OnceLock::new(),
            turn: Mutex::new(turn),
            pending: Mutex::default(),
            next_id: AtomicU64::new(1),
            closed: AtomicBool::new(false),
        })
    }

    /// Sets what `initialize` answers and the permissions that
    /// `set_permission_mode` switches; before stdin is read.
    pub(crate) fn ready(&self, initialize: Value, permissions: Arc<Permissions>) {
        let _ = self.facts.set(Facts { initialize, permissions });
    }

    /// The token of the turn about to run (already cancelled when an
    /// interrupt came before the first turn).
    pub(crate) fn start_turn(&self) -> CancellationToken {
        let mut turn = lock(&self.turn);
        turn.busy = true;
        turn.started_once = true;
        turn.token.clone()
    }

    /// The turn is over: a later interrupt is for a later turn.
    pub(crate) fn end_turn(&self, parent: &CancellationToken) {
        let mut turn = lock(&self.turn);
        turn.busy = false;
        turn.token = parent.child_token();
    }

    /// Ends the running turn; before the first turn, that turn. Between
    /// turns there is nothing to stop.
    fn interrupt(&self) {
        let turn = lock(&self.turn);
        if turn.busy || !turn.started_once {
            turn.token.cancel();
        }
    }

    fn current_token(&self) -> CancellationToken {
        lock(&self.turn).token.clone()
    }

    /// Answers one control request of the SDK.
    pub(crate) fn handle_request(&self, id: &str, request: &Value) {
        let subtype = request["subtype"].as_str().unwrap_or_default();
        let answer = match subtype {
            "initialize" => match self.facts.get() {
                Some(facts) => Ok(facts.initialize.clone()),
                None => Err("not ready".to_string()),
            },
            "interrupt" => {
                self.interrupt();
                Ok(json!({}))
            }
            "set_permission_mode" => self.set_mode(&request["mode"]),
            other => Err(format!("ferroclaw does not support the control request {other:?}")),
        };
        let response = match answer {
            Ok(response) => json!({"subtype": "success", "request_id": id, "response": response}),
            Err(error) => json!({"subtype": "error", "request_id": id, "error": error}),
        };
        write_line(&json!({"type": "control_response", "response": response}));
    }

    fn set_mode(&self, mode: &Value) -> Result<Value, String> {
        let name = mode.as_str().unwrap_or_default();
        let mode: PermissionMode = name.parse().map_err(|e| format!("mode {name:?}: {e}"))?;
        let facts = self.facts.get().ok_or("not ready")?;
        facts.permissions.set_mode(mode);
        Ok(json!({"mode": crate::claude_stream::mode_name(mode)}))
    }

    /// Routes the SDK's answer to the request of ours it names.
    pub(crate) fn deliver(&self, response: &Value) {
        let id = response["request_id"].as_str().unwrap_or_default();
        match lock(&self.pending).remove(id) {
            Some(waiting) => {
                let _ = waiting.send(response.clone());
            }
            None => tracing::debug!("a control_response for no request of ours: {id}"),
        }
    }

    /// stdin ended: nobody will answer any more; the waiting requests fail.
    pub(crate) fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
        lock(&self.pending).clear();
    }

    /// Sends `request` and waits for the answer's `response` object. Fails
    /// when the SDK answers with an error, when stdin ends, or when the
    /// turn is interrupted meanwhile (the SDK is then told to stop waiting
    /// for it: `control_cancel_request`).
    async fn ask(&self, request: Value) -> Result<Value, String> {
        let id = format!("ferroclaw-{}", self.next_id.fetch_add(1, Ordering::SeqCst));
        let (tx, rx) = oneshot::channel();
        {
            let mut pending = lock(&self.pending);
            if self.closed.load(Ordering::SeqCst) {
                return Err("stdin is closed".into());
            }
            pending.insert(id.clone(), tx);
        }
        write_line(&json!({"type": "control_request", "request_id": id, "request": request}));
        let cancelled = self.current_token();
        tokio::select! {
            answer = rx => match answer {
                Ok(answer) if answer["subtype"] == "error" => {
                    Err(answer["error"].as_str().unwrap_or("an error").to_string())
                }
                Ok(answer) => Ok(answer["response"].clone()),
                Err(_) => Err("stdin closed before the answer came".into()),
            },
            () = cancelled.cancelled() => {
                lock(&self.pending).remove(&id);
                write_line(&json!({"type": "control_cancel_request", "request_id": id}));
                Err("the request was interrupted".into())
            }
        }
    }
}

/// The `initialize` answer: Claude Code's fields that we can fill honestly.
pub(crate) fn initialize_answer(
    agent: &ferroclaw_core::Agent,
    commands: &[ferroclaw_core::commands::CustomCommand],
) -> Value {
    let commands: Vec<Value> = commands
        .iter()
        .map(|c| {
            json!({
                "name": c.name,
                "description": c.description,
                "argumentHint": c.argument_hint.clone().unwrap_or_default(),
            })
        })
        .collect();
    let spec = agent.model_spec();
    let model = crate::claude_stream::model_name(spec);
    json!({
        "commands": commands,
        "agents": [],
        "output_style": "default",
        "available_output_styles": ["default"],
        "models": [{"value": model, "resolvedModel": model, "displayName": model, "description": spec}],
        "account": {"apiKeySource": "environment"},
        "current_permission_mode": crate::claude_stream::mode_name(agent.permissions().mode()),
        "pid": std::process::id(),
    })
}

/// Asks the SDK's `canUseTool` (a `can_use_tool` control request) whether a
/// call may run, in Claude Code's tool names and input shapes. An allow
/// with a changed `updatedInput` is refused: ferroclaw's approval cannot
/// change a call, and running the unchanged one would not be what was
/// allowed. A deny with `interrupt: true` also ends the turn.
pub(crate) struct SdkApprover {
    control: Arc<Control>,
    workspace: PathBuf,
}

impl SdkApprover {
    /// An approver asking over `control`; Claude paths are absolute in `workspace`.
    pub(crate) fn new(control: Arc<Control>, workspace: PathBuf) -> Self {
        SdkApprover { control, workspace }
    }
}

/// What the SDK's answer means for the call (`input`: as the SDK was shown it).
fn verdict(answer: &Value, ours: &str, call: &ToolCall, shown: &Value, ws: &Path) -> Approval {
    match answer["behavior"].as_str() {
        Some("allow") => match answer.get("updatedInput") {
            Some(updated) if updated != shown => {
                let mapped = claude::updated_input(ours, updated, &call.input, ws);
                match mapped == call.input {
                    true => Approval::Yes,
                    false => Approval::No(
                        "canUseTool allowed this call with a changed input, which ferroclaw \
                         cannot run; the call was not made"
                            .into(),
                    ),
                }
            }
            _ => Approval::Yes,
        },
        Some("deny") => {
            let message = answer["message"].as_str().filter(|m| !m.is_empty());
            Approval::No(message.unwrap_or("the user denied this call").to_string())
        }
        _ => Approval::No(format!("canUseTool gave no behavior: {answer}")),
    }
}

#[async_trait]
impl Approver for SdkApprover {
    async fn approve(&self, call: &ToolCall) -> Approval {
        let ours = ferroclaw_tools::canonical_tool_name(&call.name);
        let (name, input) = claude::to_claude(ours, &call.input, &self.workspace);
        let request = json!({
            "subtype": "can_use_tool",
            "tool_name": name,
            "input": input,
            "tool_use_id": call.id,
            "permission_suggestions": [],
        });
        match self.control.ask(request).await {
            Ok(answer) => {
                if answer["behavior"] == "deny" && answer["interrupt"] == true {
                    self.control.interrupt();
                }
                verdict(&answer, ours, call, &input, &self.workspace)
            }
            Err(e) => Approval::No(format!("nobody approved this call ({e})")),
        }
    }

    async fn approve_plan(&self, plan: &str) -> PlanVerdict {
        let request = json!({
            "subtype": "can_use_tool",
            "tool_name": "ExitPlanMode",
            "input": {"plan": plan},
            "tool_use_id": format!("plan-{}", crate::claude_stream::uuid()),
            "permission_suggestions": [],
        });
        match self.control.ask(request).await {
            Ok(answer) if answer["behavior"] == "allow" => {
                PlanVerdict::Approved(PermissionMode::Default)
            }
            Ok(answer) => PlanVerdict::Rejected(
                answer["message"].as_str().unwrap_or("the user wants a different plan").into(),
            ),
            Err(e) => PlanVerdict::Rejected(format!("nobody approved the plan ({e})")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call() -> ToolCall {
        ToolCall {
            id: "t1".into(),
            name: "write".into(),
            input: json!({"path": "a.txt", "content": "x"}),
        }
    }

    #[test]
    fn the_sdks_answer_becomes_an_approval() {
        let ws = PathBuf::from("/w");
        let shown = json!({"file_path": "/w/a.txt", "content": "x"});
        let allow = json!({"behavior": "allow", "updatedInput": shown});
        assert_eq!(verdict(&allow, "write", &call(), &shown, &ws), Approval::Yes);
        let bare = json!({"behavior": "allow"});
        assert_eq!(verdict(&bare, "write", &call(), &shown, &ws), Approval::Yes);
        let deny = json!({"behavior": "deny", "message": "not that file"});
        assert_eq!(
            verdict(&deny, "write", &call(), &shown, &ws),
            Approval::No("not that file".into())
        );
        let changed =
            json!({"behavior": "allow", "updatedInput": {"file_path": "/w/b.txt", "content": "x"}});
        assert!(matches!(verdict(&changed, "write", &call(), &shown, &ws), Approval::No(_)));
    }

    #[test]
    fn an_interrupt_stops_the_running_turn_and_not_the_next_one() {
        let parent = CancellationToken::new();
        let control = Control::new(&parent);
        let first = control.start_turn();
        control.handle_request("1", &json!({"subtype": "interrupt"}));
        assert!(first.is_cancelled());
        control.end_turn(&parent);
        control.handle_request("2", &json!({"subtype": "interrupt"}));
        assert!(!control.start_turn().is_cancelled(), "between turns there is nothing to stop");
        assert!(!parent.is_cancelled());
    }
}
