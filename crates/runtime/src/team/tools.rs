//! The lead's `spawn_teammate` tool, and the wrappers teammates' tools get.

use std::sync::Arc;

use async_trait::async_trait;
use ferroclaw_team::{PlanGate, TEAM_TOOL_NAMES, Team};
use ferroclaw_tools::tool_input::{parse, schema_for};
use ferroclaw_tools::{Tool, ToolContext, ToolError, ToolOutput, ToolRegistry, Wrapped};
use schemars::JsonSchema;
use serde::Deserialize;
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

/// `spawn_teammate`'s input; `agent_type`'s choices are filled in at run time.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct SpawnTeammateArgs {
    /// 1-40 of A-Z a-z 0-9 . _ -
    name: String,
    role: String,
    /// Its first instructions.
    prompt: String,
    agent_type: Option<String>,
    /// Its write tools wait for your plan_approval.
    plan_required: Option<bool>,
    /// Isolate it in this git worktree (created from HEAD if missing): its edits never touch your checkout.
    worktree: Option<String>,
}

/// `spawn_teammate(name, role, prompt, agent_type?, plan_required?)`.
pub(super) struct SpawnTeammateTool(pub(super) Arc<TeamRunner>);

impl SpawnTeammateTool {
    pub(super) const NAME: &str = "spawn_teammate";

    async fn spawn(&self, input: Value) -> Result<ToolOutput, ToolError> {
        let args: SpawnTeammateArgs = parse(input)?;
        let spec = TeammateSpec {
            name: args.name,
            role: args.role,
            prompt: args.prompt,
            agent_type: args.agent_type,
            plan_required: args.plan_required.unwrap_or(false),
            worktree: args.worktree,
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

#[async_trait]
impl Tool for SpawnTeammateTool {
    fn name(&self) -> &str {
        Self::NAME
    }

    fn description(&self) -> &str {
        "Starts a persistent, named teammate: an agent with your tools that works on its own, \
         talks through send_message and the team inboxes, and claims tasks from the board. \
         It keeps running after this call (idle when it has nothing to do)."
    }

    fn input_schema(&self) -> Value {
        let mut schema = schema_for::<SpawnTeammateArgs>();
        // The agent types are known at run time.
        let types: Vec<String> =
            self.0.runtime.agent_types().iter().map(|t| t.name.clone()).collect();
        schema["properties"]["agent_type"]["enum"] = json!(types);
        schema
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
        let spawned = self.spawn(input).await;
        // Started or refused, this call of the answer has run.
        self.0.spawns.ran_one();
        spawned
    }
}
