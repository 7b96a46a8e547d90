//! Specifications of the board tools, called as the agent loop calls them.

use ferroclaw_team::register_board_tools;
use ferroclaw_tools::{ToolContext, ToolError, ToolRegistry};
use serde_json::{Value, json};

struct Ws {
    _dir: tempfile::TempDir,
    ctx: ToolContext,
    tools: ToolRegistry,
}

fn workspace() -> Ws {
    let dir = tempfile::tempdir().unwrap();
    let mut tools = ToolRegistry::new();
    register_board_tools(&mut tools, dir.path());
    Ws { ctx: ToolContext::new(dir.path()), _dir: dir, tools }
}

impl Ws {
    /// Validates `input` and runs tool `name`, as the agent loop does.
    async fn call(&self, name: &str, input: Value) -> Result<String, ToolError> {
        self.tools.validate(name, &input).map_err(ToolError::InvalidArguments)?;
        let out = self.tools.get(name).unwrap().execute(input, &self.ctx).await?;
        assert!(!out.is_error);
        Ok(out.joined_text())
    }

    async fn ok(&self, name: &str, input: Value) -> String {
        self.call(name, input).await.unwrap()
    }
}

#[tokio::test]
async fn the_four_tools_are_registered_and_only_reads_are_read_only() {
    let ws = workspace();
    assert_eq!(ws.tools.names(), ["task_create", "task_update", "task_list", "task_get"]);
    let read_only: Vec<bool> =
        ws.tools.names().iter().map(|n| ws.tools.get(n).unwrap().read_only()).collect();
    assert_eq!(read_only, [false, false, true, true]);
}

#[tokio::test]
async fn a_plan_is_created_linked_listed_and_worked_through() {
    let ws = workspace();
    let created = ws.ok("task_create", json!({"subject": "Design the schema"})).await;
    let task: Value = serde_json::from_str(&created).unwrap();
    assert_eq!(task["id"], 1);
    ws.ok("task_create", json!({"subject": "Write the API", "description": "tests pass"})).await;
    let linked = ws.ok("task_update", json!({"task_id": 2, "addBlockedBy": [1]})).await;
    assert!(linked.contains("\"blockedBy\": [\n    1\n  ]"), "{linked}");

    let list = ws.ok("task_list", json!({})).await;
    assert!(list.contains("[ ] #1 Design the schema\n"), "{list}");
    assert!(list.contains("[ ] #2 Write the API (blocked by #1)"), "{list}");
    assert!(list.contains("Ready now: #1 Design the schema"), "{list}");

    let started =
        ws.ok("task_update", json!({"task_id": 1, "status": "in_progress", "owner": "lead"})).await;
    assert!(started.contains("\"owner\": \"lead\""), "{started}");
    let done = ws.ok("task_update", json!({"task_id": 1, "status": "completed"})).await;
    assert!(done.contains("Now ready: #2 Write the API"), "{done}");

    let got = ws.ok("task_get", json!({"task_id": 2})).await;
    assert!(got.contains("\"description\": \"tests pass\""), "{got}");
    assert!(got.contains("\"blockedBy\": []"), "{got}");
}

#[tokio::test]
async fn refusals_reach_the_model_as_errors_it_can_act_on() {
    let ws = workspace();
    ws.ok("task_create", json!({"subject": "a"})).await;
    ws.ok("task_create", json!({"subject": "b"})).await;
    ws.ok("task_update", json!({"task_id": 2, "addBlockedBy": [1]})).await;

    let err = ws.call("task_update", json!({"task_id": 1, "addBlockedBy": [2]})).await.unwrap_err();
    assert!(err.to_string().contains("dependency cycle #1 waits for #2 waits for #1"), "{err}");
    let err =
        ws.call("task_update", json!({"task_id": 2, "status": "in_progress"})).await.unwrap_err();
    assert!(err.to_string().contains("blocked by #1"), "{err}");
    let err = ws.call("task_get", json!({"task_id": 9})).await.unwrap_err();
    assert!(err.to_string().contains("no task #9"), "{err}");
    let err = ws.call("task_update", json!({"task_id": 1, "status": "done"})).await.unwrap_err();
    assert!(err.to_string().contains("status"), "{err}");
}
