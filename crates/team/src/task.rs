//! A task on the board, as stored in `task_<id>.json` (learn-claude-code's
//! format), and the changes `update` can make to one.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Where a task is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum TaskStatus {
    /// Not started.
    Pending,
    /// Someone works on it.
    InProgress,
    /// Done; its dependents no longer wait for it.
    Completed,
}

impl TaskStatus {
    /// The name used in files and tool arguments: `pending`, `in_progress`, `completed`.
    pub fn as_str(self) -> &'static str {
        match self {
            TaskStatus::Pending => "pending",
            TaskStatus::InProgress => "in_progress",
            TaskStatus::Completed => "completed",
        }
    }

    /// The status called `name`, if any.
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "pending" => Some(TaskStatus::Pending),
            "in_progress" => Some(TaskStatus::InProgress),
            "completed" => Some(TaskStatus::Completed),
            _ => None,
        }
    }
}

impl std::fmt::Display for TaskStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One task. `blocked_by` and `blocks` mirror each other across the board:
/// `a.blocked_by` holds `b` exactly when `b.blocks` holds `a`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Task {
    /// A small integer, unique on the board.
    pub id: u64,
    /// A short title.
    pub subject: String,
    /// Details: what done means.
    #[serde(default)]
    pub description: String,
    /// Where it is in its life.
    pub status: TaskStatus,
    /// Tasks that must be completed before this one can start.
    #[serde(rename = "blockedBy", default)]
    pub blocked_by: Vec<u64>,
    /// Tasks waiting for this one.
    #[serde(default)]
    pub blocks: Vec<u64>,
    /// Who works on it (an agent or teammate name); stored as `""` when nobody.
    #[serde(default, with = "empty_is_none")]
    pub owner: Option<String>,
    /// The git worktree it is done in; stored as `""` when none.
    #[serde(default, with = "empty_is_none")]
    pub worktree: Option<String>,
    /// When it was created, RFC 3339 UTC.
    #[serde(default, deserialize_with = "timestamp")]
    pub created_at: String,
    /// When it last changed, RFC 3339 UTC.
    #[serde(default, deserialize_with = "timestamp")]
    pub updated_at: String,
}

/// Changes to one task; every field left empty changes nothing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TaskUpdate {
    /// The new status.
    pub status: Option<TaskStatus>,
    /// The new owner; `Some("")` clears it.
    pub owner: Option<String>,
    /// A new subject.
    pub subject: Option<String>,
    /// A new description.
    pub description: Option<String>,
    /// The worktree to bind; `Some("")` clears it.
    pub worktree: Option<String>,
    /// Tasks this one must now wait for.
    pub add_blocked_by: Vec<u64>,
    /// Tasks this one no longer waits for.
    pub remove_blocked_by: Vec<u64>,
    /// Tasks that must now wait for this one.
    pub add_blocks: Vec<u64>,
    /// Tasks that no longer wait for this one.
    pub remove_blocks: Vec<u64>,
}

/// `Option<String>` stored as a string, `""` meaning `None` (learn-claude-code
/// writes `""` for "no owner").
mod empty_is_none {
    use super::*;

    pub(super) fn serialize<S: Serializer>(
        value: &Option<String>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        s.serialize_str(value.as_deref().unwrap_or(""))
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
        let value: Option<String> = Option::deserialize(d)?;
        Ok(value.filter(|s| !s.is_empty()))
    }
}

/// A timestamp as RFC 3339 text, also accepting the Unix seconds that
/// learn-claude-code's Python writes (`time.time()`).
fn timestamp<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Either {
        Text(String),
        Seconds(f64),
    }
    Ok(match Option::<Either>::deserialize(d)? {
        Some(Either::Text(text)) => text,
        Some(Either::Seconds(secs)) if secs >= 0.0 => crate::clock::rfc3339(secs as u64),
        Some(Either::Seconds(_)) | None => String::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_task_round_trips_in_the_reference_format() {
        let json = r#"{"id": 3, "subject": "Write tests", "description": "", "status": "in_progress",
            "blockedBy": [1], "blocks": [], "owner": "", "worktree": "wt-a",
            "created_at": "2026-01-02T03:04:05Z", "updated_at": "2026-01-02T03:04:05Z"}"#;
        let task: Task = serde_json::from_str(json).unwrap();
        assert_eq!(task.status, TaskStatus::InProgress);
        assert_eq!(task.blocked_by, [1]);
        assert_eq!(task.owner, None);
        assert_eq!(task.worktree.as_deref(), Some("wt-a"));
        let back = serde_json::to_value(&task).unwrap();
        assert_eq!(back["owner"], "");
        assert_eq!(back["blockedBy"], serde_json::json!([1]));
        assert_eq!(back["status"], "in_progress");
    }

    #[test]
    fn python_float_timestamps_and_missing_fields_are_accepted() {
        let json = r#"{"id": 1, "subject": "x", "status": "pending", "created_at": 86400.5}"#;
        let task: Task = serde_json::from_str(json).unwrap();
        assert_eq!(task.created_at, "1970-01-02T00:00:00Z");
        assert_eq!(task.updated_at, "");
        assert!(task.blocks.is_empty() && task.blocked_by.is_empty());
    }
}
