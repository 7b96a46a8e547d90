//! Claude Code's view of ferroclaw's tools, in one table: which Claude Code
//! tool each of ours is, how its input is spelled there, and (in
//! [`response`]) what Claude Code would report as its `tool_response`.
//! Hooks, `--stream-format claude`, permission rules and anything else that
//! speaks Claude Code's language translate through here and nowhere else.
//!
//! The shapes are copied from what Claude Code 2.1.332 sends its hooks and
//! prints in stream-json: paths are absolute `file_path`s, `Edit` always
//! carries `replace_all`, `TodoWrite` says `todos` and `activeForm`, and a
//! background command is `Bash` with `run_in_background: true`. A tool with
//! no Claude Code counterpart (`memory`, `task_create`, MCP tools...) keeps
//! its own name and input.
//!
//! ```
//! use std::path::Path;
//! use ferroclaw_tools::claude;
//! use serde_json::json;
//!
//! let ws = Path::new("/work/app");
//! let (name, input) = claude::to_claude("write", &json!({"path": "a.txt", "content": "x"}), ws);
//! assert_eq!(name, "Write");
//! assert_eq!(input, json!({"file_path": "/work/app/a.txt", "content": "x"}));
//! let (ours, back) = claude::from_claude("Write", &input, ws);
//! assert_eq!((ours.as_str(), back["path"].as_str()), ("write", Some("/work/app/a.txt")));
//! ```

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

pub mod response;

/// One of our tools and its Claude Code counterpart.
#[derive(Debug)]
pub struct Counterpart {
    /// Ferroclaw's name (`write`).
    pub ours: &'static str,
    /// Claude Code's name (`Write`).
    pub claude: &'static str,
    /// Input fields spelled differently: (ours, Claude's).
    renamed: &'static [(&'static str, &'static str)],
    /// Fields (in Claude's spelling) holding a path, absolute in Claude's view.
    paths: &'static [&'static str],
    /// Claude's fields with no meaning here, dropped on the way in.
    dropped: &'static [&'static str],
    /// Claude's defaults, filled in on the way out when absent.
    defaults: &'static [(&'static str, bool)],
}

const fn pair(ours: &'static str, claude: &'static str) -> Counterpart {
    Counterpart { ours, claude, renamed: &[], paths: &[], dropped: &[], defaults: &[] }
}

/// Every tool with a Claude Code counterpart. `background_run` is `Bash`
/// with `run_in_background: true` (see [`to_claude`]).
pub const TABLE: &[Counterpart] = &[
    Counterpart {
        renamed: &[("path", "file_path")],
        paths: &["file_path"],
        dropped: &["pages"],
        ..pair("read", "Read")
    },
    Counterpart {
        renamed: &[("path", "file_path")],
        paths: &["file_path"],
        ..pair("write", "Write")
    },
    Counterpart {
        renamed: &[("path", "file_path")],
        paths: &["file_path"],
        defaults: &[("replace_all", false)],
        ..pair("edit", "Edit")
    },
    Counterpart {
        renamed: &[("path", "file_path")],
        paths: &["file_path"],
        ..pair("multi_edit", "MultiEdit")
    },
    Counterpart { paths: &["path"], ..pair("glob", "Glob") },
    Counterpart { paths: &["path"], ..pair("grep", "Grep") },
    Counterpart { paths: &["path"], dropped: &["ignore"], ..pair("list_dir", "LS") },
    Counterpart {
        dropped: &["run_in_background", "dangerouslyDisableSandbox"],
        ..pair("bash", "Bash")
    },
    Counterpart { dropped: &["prompt"], ..pair("web_fetch", "WebFetch") },
    Counterpart {
        dropped: &["allowed_domains", "blocked_domains"],
        ..pair("web_search", "WebSearch")
    },
    Counterpart { renamed: &[("items", "todos")], ..pair("todo_write", "TodoWrite") },
    Counterpart {
        renamed: &[("agent_type", "subagent_type")],
        // A sub-agent here always runs in the foreground: its answer is the result.
        dropped: &["run_in_background"],
        defaults: &[("run_in_background", false)],
        ..pair("task", "Agent")
    },
    pair("exit_plan_mode", "ExitPlanMode"),
    Counterpart {
        renamed: &[("name", "skill")],
        dropped: &["args"],
        ..pair("load_skill", "Skill")
    },
];

/// Claude Code's names for a tool that are not [`Counterpart::claude`]
/// (older Claude Code called `Agent` `Task`).
const CLAUDE_ALIASES: &[(&str, &str)] = &[("Task", "task")];

/// Our built-in sub-agent types and Claude Code's names for them (the
/// `subagent_type` of an `Agent` call, the `agent_type` of its hooks).
const AGENT_TYPES: &[(&str, &str)] = &[("general", "general-purpose"), ("explore", "Explore")];

/// Claude Code's name for one of our sub-agent types (`general` ->
/// `general-purpose`); a user's own type keeps its name.
pub fn claude_agent_type(ours: &str) -> &str {
    AGENT_TYPES.iter().find(|(o, _)| *o == ours).map_or(ours, |(_, c)| c)
}

/// Our name for a Claude Code sub-agent type (`general-purpose` -> `general`).
pub fn ours_agent_type(claude: &str) -> &str {
    AGENT_TYPES.iter().find(|(_, c)| *c == claude).map_or(claude, |(o, _)| o)
}

/// Renames the sub-agent type in `fields[key]` with `rename`.
fn rename_agent_type(fields: &mut Map<String, Value>, key: &str, rename: fn(&str) -> &str) {
    if let Some(Value::String(kind)) = fields.get_mut(key) {
        *kind = rename(kind).to_string();
    }
}

/// The counterpart of one of our tools.
pub fn counterpart(ours: &str) -> Option<&'static Counterpart> {
    TABLE.iter().find(|c| c.ours == ours)
}

/// Claude Code's name for one of our tools (`bash` -> `Bash`).
pub fn claude_name(ours: &str) -> Option<&'static str> {
    match ours {
        "background_run" => Some("Bash"),
        _ => counterpart(ours).map(|c| c.claude),
    }
}

/// Our name for a Claude Code tool name (`Bash` -> `bash`).
pub fn ours_name(claude: &str) -> Option<&'static str> {
    TABLE
        .iter()
        .find(|c| c.claude == claude)
        .map(|c| c.ours)
        .or_else(|| CLAUDE_ALIASES.iter().find(|(a, _)| *a == claude).map(|(_, o)| *o))
}

/// A call of our tool `ours` as Claude Code would have made it: its name
/// and input. Paths are made absolute against `workspace`; fields without
/// a Claude spelling pass through unchanged.
pub fn to_claude(ours: &str, input: &Value, workspace: &Path) -> (String, Value) {
    if ours == "background_run" {
        let mut out = object(input);
        // Claude's Bash timeout is in milliseconds, background_run's in seconds.
        if let Some(secs) = out.get("timeout").and_then(Value::as_u64) {
            out.insert("timeout".into(), (secs.saturating_mul(1000)).into());
        }
        out.insert("run_in_background".into(), true.into());
        return ("Bash".into(), Value::Object(out));
    }
    let Some(c) = counterpart(ours) else { return (ours.to_string(), input.clone()) };
    let mut out = Map::new();
    for (key, value) in object(input) {
        let key = c.renamed.iter().find(|(o, _)| *o == key).map_or(key, |(_, cl)| cl.to_string());
        let value = match c.paths.contains(&key.as_str()) {
            true => absolute(&value, workspace),
            false => value,
        };
        out.insert(key, value);
    }
    for (key, default) in c.defaults {
        out.entry(*key).or_insert((*default).into());
    }
    if ours == "todo_write" {
        rename_in_items(&mut out, "todos", "active_form", "activeForm");
    }
    if ours == "task" {
        rename_agent_type(&mut out, "subagent_type", claude_agent_type);
    }
    if ours == "multi_edit" {
        for edit in out.get_mut("edits").and_then(Value::as_array_mut).into_iter().flatten() {
            if let Value::Object(edit) = edit {
                edit.entry("replace_all").or_insert(false.into());
            }
        }
    }
    (c.claude.to_string(), Value::Object(out))
}

/// A call in Claude Code's terms as one of ours: our tool's name and its
/// input. Names without a counterpart are returned unchanged.
pub fn from_claude(claude: &str, input: &Value, workspace: &Path) -> (String, Value) {
    back(claude, input, None, workspace)
}

/// [`from_claude`] for an input a hook gave back (`updatedInput`) for a
/// call of ours whose input was `original`: a path the hook left as it was
/// shown keeps the spelling the model used (`a.txt`, not `/work/a.txt`), and
/// fields in our own spelling (a hook written for ferroclaw) are kept.
pub fn updated_input(ours: &str, claude_input: &Value, original: &Value, ws: &Path) -> Value {
    let claude = claude_name(ours).unwrap_or(ours);
    let (_, input) = back(claude, claude_input, Some(original), ws);
    input
}

fn back(
    claude: &str,
    input: &Value,
    original: Option<&Value>,
    workspace: &Path,
) -> (String, Value) {
    let mut fields = object(input);
    if claude == "Bash" && fields.get("run_in_background").and_then(Value::as_bool) == Some(true) {
        fields.remove("run_in_background");
        if let Some(ms) = fields.get("timeout").and_then(Value::as_u64) {
            fields.insert("timeout".into(), ms.div_ceil(1000).into());
        }
        return ("background_run".into(), Value::Object(fields));
    }
    let Some(c) = ours_name(claude).and_then(counterpart) else {
        return (claude.to_string(), input.clone());
    };
    let mut out = Map::new();
    for (key, value) in fields {
        if c.dropped.contains(&key.as_str()) {
            continue;
        }
        let value = match (c.paths.contains(&key.as_str()), original) {
            (true, Some(original)) => {
                let ours_key =
                    c.renamed.iter().find(|(_, cl)| *cl == key).map_or(&*key, |(o, _)| o);
                match original.get(ours_key) {
                    Some(was) if absolute(was, workspace) == value => was.clone(),
                    _ => value,
                }
            }
            _ => value,
        };
        let key = c.renamed.iter().find(|(_, cl)| *cl == key).map_or(key, |(o, _)| o.to_string());
        out.insert(key, value);
    }
    if c.ours == "todo_write" {
        rename_in_items(&mut out, "items", "activeForm", "active_form");
    }
    if c.ours == "task" {
        rename_agent_type(&mut out, "agent_type", ours_agent_type);
    }
    (c.ours.to_string(), Value::Object(out))
}

/// `path` as Claude Code shows it: absolute, `.` and `..` resolved.
pub fn absolute_path(path: &str, workspace: &Path) -> PathBuf {
    let joined = match path.strip_prefix("~/") {
        Some(rest) => std::env::var_os("HOME").map(PathBuf::from).unwrap_or_default().join(rest),
        None => workspace.join(path),
    };
    crate::normalize_path(&joined)
}

fn absolute(value: &Value, workspace: &Path) -> Value {
    match value.as_str() {
        Some(path) => absolute_path(path, workspace).to_string_lossy().into_owned().into(),
        None => value.clone(),
    }
}

fn object(input: &Value) -> Map<String, Value> {
    input.as_object().cloned().unwrap_or_default()
}

/// Renames `from` to `to` in each object of the array `list`.
fn rename_in_items(fields: &mut Map<String, Value>, list: &str, from: &str, to: &str) {
    for item in fields.get_mut(list).and_then(Value::as_array_mut).into_iter().flatten() {
        if let Some(item) = item.as_object_mut()
            && let Some(v) = item.remove(from)
        {
            item.insert(to.into(), v);
        }
    }
}

#[cfg(test)]
mod tests;
