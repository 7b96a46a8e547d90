//! The one module that knows the ACP schema crate
//! (`agent-client-protocol-schema`, pinned exactly in the workspace): the
//! client's requests are parsed into its typed structs (so a malformed
//! request gets one clear error), and the frames we send are built here in
//! the protocol's JSON shape (the test suite checks them against the
//! crate's JSON schema).

use std::path::{Path, PathBuf};

use agent_client_protocol_schema::v1 as acp;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::rpc::RpcError;

pub use acp::{
    AuthenticateRequest, CancelNotification, ClientCapabilities, ContentBlock,
    EmbeddedResourceResource, InitializeRequest, LoadSessionRequest, McpServer, NewSessionRequest,
    PromptRequest, ResumeSessionRequest, SetSessionModeRequest,
};

/// The protocol version we speak.
pub const PROTOCOL_VERSION: u16 = 1;

/// Parses `params` of `method` into its typed request.
pub fn params<T: DeserializeOwned>(method: &str, params: Value) -> Result<T, RpcError> {
    serde_json::from_value(params).map_err(|e| RpcError::invalid_params(method, e))
}

/// `session/list` params: all optional.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListSessions {
    pub cwd: Option<PathBuf>,
    pub cursor: Option<String>,
}

/// What the client can do for us, from `initialize`.
#[derive(Debug, Clone, Copy, Default)]
pub struct ClientCan {
    pub read_files: bool,
    pub write_files: bool,
    pub terminal: bool,
}

impl From<&ClientCapabilities> for ClientCan {
    fn from(caps: &ClientCapabilities) -> Self {
        ClientCan {
            read_files: caps.fs.read_text_file,
            write_files: caps.fs.write_text_file,
            terminal: caps.terminal,
        }
    }
}

/// The client's MCP server as a `[mcp_servers.NAME]` table of our config.
pub fn mcp_server_table(server: &McpServer) -> Option<(String, toml::Table)> {
    let mut table = toml::Table::new();
    let name = match server {
        McpServer::Stdio(s) => {
            table.insert("command".into(), s.command.display().to_string().into());
            let args: Vec<toml::Value> = s.args.iter().map(|a| a.clone().into()).collect();
            table.insert("args".into(), args.into());
            let env: toml::Table =
                s.env.iter().map(|v| (v.name.clone(), v.value.clone().into())).collect();
            table.insert("env".into(), env.into());
            s.name.clone()
        }
        McpServer::Http(s) => {
            table.insert("type".into(), "http".into());
            table.insert("url".into(), s.url.clone().into());
            let headers: toml::Table =
                s.headers.iter().map(|h| (h.name.clone(), h.value.clone().into())).collect();
            table.insert("headers".into(), headers.into());
            s.name.clone()
        }
        // We do not speak the deprecated SSE transport (not advertised).
        _ => return None,
    };
    Some((name, table))
}

/// The text of a prompt: text blocks, embedded text resources (as tagged
/// blocks) and resource links (as mentions); images separately.
pub fn prompt_parts(blocks: &[ContentBlock]) -> (String, Vec<(String, String)>) {
    let mut text = String::new();
    let mut images = Vec::new();
    for block in blocks {
        match block {
            ContentBlock::Text(t) => text.push_str(&t.text),
            ContentBlock::Image(i) => images.push((i.mime_type.clone(), i.data.clone())),
            ContentBlock::ResourceLink(link) => {
                text.push_str(&format!("\n[{}]({})\n", link.name, link.uri));
            }
            ContentBlock::Resource(r) => {
                if let EmbeddedResourceResource::TextResourceContents(t) = &r.resource {
                    text.push_str(&format!(
                        "\n<resource uri=\"{}\">\n{}\n</resource>\n",
                        t.uri, t.text
                    ));
                }
            }
            _ => {}
        }
    }
    (text, images)
}

/// A `session/update` notification's params.
pub fn update(session_id: &str, update: Value) -> Value {
    json!({"sessionId": session_id, "update": update})
}

/// A text chunk: `agent_message_chunk`, `agent_thought_chunk` or
/// `user_message_chunk`.
pub fn chunk(kind: &str, text: &str) -> Value {
    json!({"sessionUpdate": kind, "content": {"type": "text", "text": text}})
}

/// ACP's kind of a tool (the icon an editor shows).
pub fn tool_kind(name: &str) -> &'static str {
    match ferroclaw_tools::canonical_tool_name(name) {
        "read" => "read",
        "write" | "edit" | "multi_edit" => "edit",
        "bash" | "background_run" => "execute",
        "grep" | "glob" | "list_dir" | "session_search" => "search",
        "web_fetch" | "web_search" => "fetch",
        "todo_write" | "exit_plan_mode" => "think",
        _ => "other",
    }
}

/// A short title: the tool and what it works on.
pub fn tool_title(name: &str, input: &Value) -> String {
    match ferroclaw_core::permission::call_subject(input) {
        Some(subject) => {
            let subject: String = subject.chars().take(80).collect();
            format!("{name} {subject}")
        }
        None => name.to_string(),
    }
}

/// The files a call works on, absolute.
pub fn locations(workspace: &Path, input: &Value) -> Vec<Value> {
    let Some(path) = input["path"].as_str().or(input["file_path"].as_str()) else {
        return Vec::new();
    };
    let line = input["offset"].as_u64();
    let mut location = json!({"path": workspace.join(path)});
    if let Some(line) = line {
        location["line"] = json!(line);
    }
    vec![location]
}

/// The diffs an edit makes, from its input: `edit`'s and `multi_edit`'s
/// replacements, `write`'s whole new content.
pub fn diffs(workspace: &Path, name: &str, input: &Value) -> Vec<Value> {
    let Some(path) = input["path"].as_str() else { return Vec::new() };
    let path = workspace.join(path);
    let diff = |old: Option<&str>, new: &str| json!({"type": "diff", "path": path, "oldText": old, "newText": new});
    match ferroclaw_tools::canonical_tool_name(name) {
        "write" => input["content"].as_str().map(|c| diff(None, c)).into_iter().collect(),
        "edit" => match (input["old_string"].as_str(), input["new_string"].as_str()) {
            (Some(old), Some(new)) => vec![diff(Some(old), new)],
            _ => Vec::new(),
        },
        "multi_edit" => input["edits"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|e| Some(diff(Some(e["old_string"].as_str()?), e["new_string"].as_str()?)))
            .collect(),
        _ => Vec::new(),
    }
}

/// A `tool_call` (or the tool call of a permission request): id, title,
/// kind, status, input, locations and diffs.
pub fn tool_call(workspace: &Path, id: &str, name: &str, input: &Value, status: &str) -> Value {
    json!({
        "toolCallId": id,
        "title": tool_title(name, input),
        "kind": tool_kind(name),
        "status": status,
        "rawInput": input,
        "locations": locations(workspace, input),
        "content": diffs(workspace, name, input),
    })
}

/// Text content of a tool call.
pub fn text_content(text: &str) -> Value {
    json!({"type": "content", "content": {"type": "text", "text": text}})
}

/// The permission options we offer, by their ids (the same as their kinds).
pub const PERMISSION_OPTIONS: [(&str, &str); 4] = [
    ("allow_once", "Allow"),
    ("allow_always", "Always allow"),
    ("reject_once", "Reject"),
    ("reject_always", "Always reject"),
];

/// `session/request_permission` params.
pub fn permission_request(session_id: &str, tool_call: Value) -> Value {
    let options: Vec<Value> = PERMISSION_OPTIONS
        .iter()
        .map(|(id, name)| json!({"optionId": id, "name": name, "kind": id}))
        .collect();
    json!({"sessionId": session_id, "toolCall": tool_call, "options": options})
}

/// The client's answer to a permission request: the chosen option id, or
/// `None` when it was cancelled.
pub fn permission_outcome(result: &Value) -> Option<String> {
    let outcome = &result["outcome"];
    match outcome["outcome"].as_str() {
        Some("selected") => outcome["optionId"].as_str().map(str::to_string),
        _ => None,
    }
}

/// ACP's status of a todo item.
pub fn plan_entry(item: &ferroclaw_protocol::TodoItem) -> Value {
    use ferroclaw_protocol::TodoStatus;
    let status = match item.status {
        TodoStatus::Pending => "pending",
        TodoStatus::InProgress => "in_progress",
        TodoStatus::Completed => "completed",
    };
    json!({"content": item.content, "priority": "medium", "status": status})
}

/// Our permission modes as ACP session modes.
pub fn modes(current: ferroclaw_core::PermissionMode) -> Value {
    json!({
        "currentModeId": mode_id(current),
        "availableModes": [
            {"id": "default", "name": "Default", "description": "Read-only tools run; edits and commands ask"},
            {"id": "accept-edits", "name": "Accept edits", "description": "File edits run without asking; commands ask"},
            {"id": "plan", "name": "Plan", "description": "Read-only tools until you approve a plan"},
            {"id": "bypass", "name": "Bypass permissions", "description": "Every call runs without asking (deny rules still apply)"},
        ],
    })
}

/// The ACP mode id of a permission mode.
pub fn mode_id(mode: ferroclaw_core::PermissionMode) -> &'static str {
    use ferroclaw_core::PermissionMode::*;
    match mode {
        Default => "default",
        AcceptEdits => "accept-edits",
        Plan => "plan",
        Bypass => "bypass",
    }
}
