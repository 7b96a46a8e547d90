//! The lead's `spawn_teammate` tool, and the wrappers teammates' tools get.

use std::sync::Arc;

use async_trait::async_trait;
use ferroclaw_team::{PlanGate, TEAM_TOOL_NAMES, Team};
use ferroclaw_tools::{Tool, ToolContext, ToolError, ToolOutput, ToolRegistry, Wrapped};
use serde_json::{Value, json};

use super::{TeamRunner, TeammateSpec};

/// Wraps every write tool (except the team's own) in a [`PlanGate`].
pub(super) fn gate_writes(tools: &ToolRegistry, team: &Team, name: &str) -> ToolRegistry {
    let mut gated = ToolRegistry::new();
    for tool_name in tools.names() {
        let Some(tool) = tools.get(tool_name) else { continue };
        if tool.read_only() || TEAM_TOOL_NAMES.contains(&tool_name) {
            gated.register_arc(tool.clone());
        } else {
            gated.register(Wrapped {
                inner: tool.clone(),
                around: PlanGate { team: team.clone(), name: name.to_string() },
            });
        }
    }
    gated
}

/// `spawn_teammate(name, role, prompt, agent_type?, plan_required?)`.
pub(super) struct SpawnTeammateTool(pub(super) Arc<TeamRunner>);

#[async_trait]
impl Tool for SpawnTeammateTool {
    fn name(&self) -> &str {
        "spawn_teammate"
    }

    fn description(&self) -> &str {
        "Starts a persistent, named teammate: an agent with your tools that works on its own, \
         talks through send_message and the team inboxes, and claims tasks from the board. \
         It keeps running after this call (idle when it has nothing to do)."
    }

    fn input_schema(&self) -> Value {
        let types: Vec<String> =
            self.0.runtime.agent_types().iter().map(|t| t.name.clone()).collect();
        json!({
            "type": "object",
            "properties": {
                "name": {"type": "string", "description": "1-40 of A-Z a-z 0-9 . _ -"},
                "role": {"type": "string"},
                "prompt": {"type": "string", "description": "Its first instructions."},
                "agent_type": {"type": "string", "enum": types},
                "plan_required": {"type": "boolean", "description": "Its write tools wait for your plan_approval."},
                "worktree": {"type": "string", "description": "Isolate it in this git worktree (created from HEAD if missing): its edits never touch your checkout."}
            },
            "required": ["name", "role", "prompt"],
            "additionalProperties": false
        })
    }

    /// Starting a teammate changes nothing by itself: its calls pass the
    /// same permission checks as any agent's.
    fn read_only(&self) -> bool {
        true
    }

    fn concurrent(&self) -> bool {
        false
    }

    async fn execute(&self, input: Value, _ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let text = |k: &str| input.get(k).and_then(Value::as_str).unwrap_or_default().to_string();
        let spec = TeammateSpec {
            name: text("name"),
            role: text("role"),
            prompt: text("prompt"),
            agent_type: input.get("agent_type").and_then(Value::as_str).map(str::to_string),
            plan_required: input.get("plan_required").and_then(Value::as_bool).unwrap_or(false),
            worktree: input.get("worktree").and_then(Value::as_str).map(str::to_string),
        };
        if spec.prompt.trim().is_empty() {
            return Err(ToolError::InvalidArguments("the prompt is empty".into()));
        }
        let name = spec.name.clone();
        self.0.spawn(spec).await.map_err(|e| ToolError::InvalidArguments(e.to_string()))?;
        self.0.emit(&name, "working", "spawned");
        Ok(ToolOutput::text(format!(
            "Spawned {name}; it works on its own and reports to your inbox."
        )))
    }
}
