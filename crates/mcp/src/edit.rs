//! `ferroclaw mcp add/remove`: edits a server list in place, in a project's
//! `.mcp.json` (Claude Code's format, other keys kept) or in config.toml's
//! `[mcp_servers]` (comments and layout kept).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use ferroclaw_tools::repo_file::{MAX_REPO_FILE_BYTES, read_repo_text};
use serde_json::{Map, Value, json};

/// A server to add.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NewServer {
    Stdio { command: String, args: Vec<String>, env: BTreeMap<String, String> },
    Http { url: String, headers: BTreeMap<String, String> },
}

/// Why a file could not be edited.
#[derive(Debug, thiserror::Error)]
pub enum EditError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot write {path}: {source}")]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: {message}")]
    Invalid { path: PathBuf, message: String },
    #[error("{path} already has a server named {name:?}; remove it first")]
    Exists { path: PathBuf, name: String },
}

/// Adds `name` to the file at `path` (config.toml when it ends in `.toml`,
/// else an `mcpServers` JSON file), creating the file if needed.
pub fn add_server(path: &Path, name: &str, server: &NewServer) -> Result<(), EditError> {
    let text = read_or_empty(path)?;
    let text = if is_toml(path) {
        add_toml(path, &text, name, server)?
    } else {
        add_json(path, &text, name, server)?
    };
    write(path, &text)
}

/// Removes `name` from the file at `path`; false when it was not there.
pub fn remove_server(path: &Path, name: &str) -> Result<bool, EditError> {
    let text = read_or_empty(path)?;
    if text.is_empty() {
        return Ok(false);
    }
    let invalid = |message: String| EditError::Invalid { path: path.to_path_buf(), message };
    let new_text = if is_toml(path) {
        let mut doc: toml_edit::DocumentMut = text.parse().map_err(|e| invalid(format!("{e}")))?;
        let removed = doc
            .get_mut("mcp_servers")
            .and_then(|t| t.as_table_like_mut())
            .and_then(|t| t.remove(name));
        if removed.is_none() {
            return Ok(false);
        }
        doc.to_string()
    } else {
        let mut value: Value = serde_json::from_str(&text).map_err(|e| invalid(e.to_string()))?;
        let removed =
            value.get_mut("mcpServers").and_then(Value::as_object_mut).and_then(|m| m.remove(name));
        if removed.is_none() {
            return Ok(false);
        }
        pretty(&value)
    };
    write(path, &new_text).map(|()| true)
}

fn is_toml(path: &Path) -> bool {
    path.extension().is_some_and(|e| e == "toml")
}

fn add_json(path: &Path, text: &str, name: &str, server: &NewServer) -> Result<String, EditError> {
    let invalid = |message: String| EditError::Invalid { path: path.to_path_buf(), message };
    let mut value: Value = if text.trim().is_empty() {
        json!({})
    } else {
        serde_json::from_str(text).map_err(|e| invalid(e.to_string()))?
    };
    let root =
        value.as_object_mut().ok_or_else(|| invalid("the top level is not an object".into()))?;
    let servers = root
        .entry("mcpServers")
        .or_insert_with(|| Value::Object(Map::new()))
        .as_object_mut()
        .ok_or_else(|| invalid("\"mcpServers\" is not an object".into()))?;
    if servers.contains_key(name) {
        return Err(EditError::Exists { path: path.to_path_buf(), name: name.to_string() });
    }
    let entry = match server {
        NewServer::Stdio { command, args, env } => {
            let mut e = json!({"command": command, "args": args});
            if !env.is_empty() {
                e["env"] = json!(env);
            }
            e
        }
        NewServer::Http { url, headers } => {
            let mut e = json!({"type": "http", "url": url});
            if !headers.is_empty() {
                e["headers"] = json!(headers);
            }
            e
        }
    };
    servers.insert(name.to_string(), entry);
    Ok(pretty(&value))
}

/// Adds the server's `[mcp_servers.NAME]` table at the END of the file, after
/// every top-level key and comment: a top-level key written (or uncommented,
/// as the template invites) above it stays top-level.
fn add_toml(path: &Path, text: &str, name: &str, server: &NewServer) -> Result<String, EditError> {
    let invalid = |message: String| EditError::Invalid { path: path.to_path_buf(), message };
    let doc: toml_edit::DocumentMut = text.parse().map_err(|e| invalid(format!("{e}")))?;
    let exists = doc
        .get("mcp_servers")
        .and_then(|t| t.as_table_like())
        .is_some_and(|t| t.contains_key(name));
    if exists {
        return Err(EditError::Exists { path: path.to_path_buf(), name: name.to_string() });
    }
    let table = server_table(path, name, server)?;
    let mut out = text.to_string();
    if !out.is_empty() && !out.ends_with('\n') {
        out.push('\n');
    }
    if !out.trim().is_empty() {
        out.push('\n');
    }
    out.push_str(&table);
    match out.parse::<toml_edit::DocumentMut>() {
        Ok(_) => Ok(out),
        // `mcp_servers` written inline, say: let the editor place the table.
        Err(_) => {
            let mut doc = doc;
            insert_server(path, &mut doc, name, server)?;
            Ok(doc.to_string())
        }
    }
}

/// `[mcp_servers.NAME]` and its keys, as TOML text.
fn server_table(path: &Path, name: &str, server: &NewServer) -> Result<String, EditError> {
    let mut doc = toml_edit::DocumentMut::new();
    insert_server(path, &mut doc, name, server)?;
    Ok(doc.to_string())
}

fn insert_server(
    path: &Path,
    doc: &mut toml_edit::DocumentMut,
    name: &str,
    server: &NewServer,
) -> Result<(), EditError> {
    let invalid = |message: String| EditError::Invalid { path: path.to_path_buf(), message };
    let servers = doc
        .entry("mcp_servers")
        .or_insert_with(|| {
            let mut t = toml_edit::Table::new();
            t.set_implicit(true);
            toml_edit::Item::Table(t)
        })
        .as_table_mut()
        .ok_or_else(|| invalid("mcp_servers is not a table".into()))?;
    if servers.contains_key(name) {
        return Err(EditError::Exists { path: path.to_path_buf(), name: name.to_string() });
    }
    let mut entry = toml_edit::Table::new();
    let map_item = |m: &BTreeMap<String, String>| {
        let mut t = toml_edit::InlineTable::new();
        for (k, v) in m {
            t.insert(k, v.as_str().into());
        }
        toml_edit::value(t)
    };
    match server {
        NewServer::Stdio { command, args, env } => {
            entry["command"] = toml_edit::value(command.as_str());
            entry["args"] =
                toml_edit::value(args.iter().map(String::as_str).collect::<toml_edit::Array>());
            if !env.is_empty() {
                entry["env"] = map_item(env);
            }
        }
        NewServer::Http { url, headers } => {
            entry["url"] = toml_edit::value(url.as_str());
            if !headers.is_empty() {
                entry["headers"] = map_item(headers);
            }
        }
    }
    servers.insert(name, toml_edit::Item::Table(entry));
    Ok(())
}

fn pretty(value: &Value) -> String {
    let mut s = serde_json::to_string_pretty(value).unwrap_or_default();
    s.push('\n');
    s
}

fn read_or_empty(path: &Path) -> Result<String, EditError> {
    match read_repo_text(path, MAX_REPO_FILE_BYTES) {
        Ok(t) => Ok(t),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(String::new()),
        Err(source) => Err(EditError::Read { path: path.to_path_buf(), source }),
    }
}

fn write(path: &Path, text: &str) -> Result<(), EditError> {
    let err = |source| EditError::Write { path: path.to_path_buf(), source };
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(err)?;
    }
    std::fs::write(path, text).map_err(err)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stdio() -> NewServer {
        NewServer::Stdio {
            command: "npx".into(),
            args: vec!["-y".into(), "srv".into()],
            env: BTreeMap::new(),
        }
    }

    #[test]
    fn json_add_keeps_other_servers_and_refuses_a_duplicate_name() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(".mcp.json");
        std::fs::write(&path, r#"{"mcpServers": {"old": {"command": "x"}}, "other": 1}"#).unwrap();
        add_server(&path, "new", &stdio()).unwrap();
        let v: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(v["mcpServers"]["new"]["args"][1], "srv");
        assert_eq!(v["mcpServers"]["old"]["command"], "x");
        assert_eq!(v["other"], 1);
        assert!(matches!(add_server(&path, "new", &stdio()), Err(EditError::Exists { .. })));
        assert!(remove_server(&path, "new").unwrap());
        assert!(!remove_server(&path, "new").unwrap());
    }

    #[test]
    fn toml_add_keeps_comments_and_round_trips_through_remove() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.toml");
        std::fs::write(&path, "# my config\nmodel = \"a/b\"\n").unwrap();
        let http = NewServer::Http {
            url: "https://x/mcp".into(),
            headers: BTreeMap::from([("Authorization".into(), "Bearer ${TOKEN}".into())]),
        };
        add_server(&path, "web", &http).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.starts_with("# my config\n"), "{text}");
        assert!(text.contains("[mcp_servers.web]"), "{text}");
        let table: toml::Table = toml::from_str(&text).unwrap();
        assert_eq!(table["mcp_servers"]["web"]["url"].as_str(), Some("https://x/mcp"));
        assert!(remove_server(&path, "web").unwrap());
        assert!(!std::fs::read_to_string(&path).unwrap().contains("web"));
    }

    #[test]
    fn toml_add_goes_after_the_commented_template_so_an_uncommented_key_stays_top_level() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.toml");
        std::fs::write(&path, "# Settings\n# model = \"anthropic/x\"\n# max_turns = 50\n").unwrap();
        add_server(&path, "fs", &stdio()).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.find("# model").unwrap() < text.find("[mcp_servers.fs]").unwrap(), "{text}");
        let uncommented = text.replace("# model", "model");
        let table: toml::Table = toml::from_str(&uncommented).unwrap();
        assert_eq!(table["model"].as_str(), Some("anthropic/x"));
        assert_eq!(table["mcp_servers"]["fs"]["command"].as_str(), Some("npx"));
        add_server(&path, "other", &stdio()).unwrap();
        let table: toml::Table = toml::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(table["mcp_servers"].as_table().unwrap().len(), 2);
    }
}
