//! Which MCP servers to start: `[mcp_servers.NAME]` in config.toml, the
//! project's `.agent/mcp.json` (nanoAgent's format) and `.mcp.json` (Claude
//! Code's format), merged in that order (a later definition of a name replaces
//! an earlier one). A bad entry is a [`ConfigProblem`] for that server only.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use ferroclaw_tools::repo_file::{MAX_REPO_FILE_BYTES, read_repo_text};
use serde::Deserialize;
use serde_json::Value;

/// How long a server may take to start and list its tools. Claude Code and
/// codex both wait tens of seconds: `npx` may download the server first.
pub const DEFAULT_STARTUP_TIMEOUT: Duration = Duration::from_secs(30);

/// How long one request (a tool call, a resource read) may take. Matches the
/// bash tool's 120 s ceiling, so an MCP call is never slower to give up.
pub const DEFAULT_TOOL_TIMEOUT: Duration = Duration::from_secs(120);

/// How to reach a server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Transport {
    /// A child process speaking JSON-RPC on stdin/stdout.
    Stdio {
        command: String,
        args: Vec<String>,
        env: BTreeMap<String, String>,
        cwd: Option<PathBuf>,
    },
    /// Streamable HTTP at `url`, with extra headers on every request.
    Http { url: String, headers: BTreeMap<String, String> },
}

/// One server, validated and with `${VAR}`s expanded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerConfig {
    pub name: String,
    pub transport: Transport,
    /// Only these remote tools are offered (all when `None`).
    pub allowed_tools: Option<Vec<String>>,
    /// These remote tools are never offered.
    pub denied_tools: Vec<String>,
    pub startup_timeout: Duration,
    pub tool_timeout: Duration,
    /// The file that defined it.
    pub source: PathBuf,
    /// How `ferroclaw mcp login` identifies ferroclaw to the server's
    /// authorization server (default: dynamic client registration).
    pub oauth: crate::oauth::OAuthClient,
}

impl ServerConfig {
    /// A stdio server with default settings.
    pub fn stdio(name: impl Into<String>, command: impl Into<String>, args: &[&str]) -> Self {
        Self::with_transport(
            name,
            Transport::Stdio {
                command: command.into(),
                args: args.iter().map(ToString::to_string).collect(),
                env: BTreeMap::new(),
                cwd: None,
            },
        )
    }

    /// A streamable HTTP server with default settings.
    pub fn http(name: impl Into<String>, url: impl Into<String>) -> Self {
        Self::with_transport(name, Transport::Http { url: url.into(), headers: BTreeMap::new() })
    }

    fn with_transport(name: impl Into<String>, transport: Transport) -> Self {
        Self {
            name: name.into(),
            transport,
            allowed_tools: None,
            denied_tools: Vec::new(),
            startup_timeout: DEFAULT_STARTUP_TIMEOUT,
            tool_timeout: DEFAULT_TOOL_TIMEOUT,
            source: PathBuf::new(),
            oauth: Default::default(),
        }
    }

    /// Whether the remote tool `tool` may be offered to the model.
    pub fn offers(&self, tool: &str) -> bool {
        let allowed = self.allowed_tools.as_ref().is_none_or(|a| a.iter().any(|t| t == tool));
        allowed && !self.denied_tools.iter().any(|t| t == tool)
    }
}

/// A server that could not be configured, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{}{}: {}{message}",
    file.display(),
    at.map(|(l, c)| format!(":{l}:{c}")).unwrap_or_default(),
    if *whole_file { String::new() } else { format!("mcp server {server:?}: ") }
)]
pub struct ConfigProblem {
    /// The server's name (the file's path when the whole file is unreadable).
    pub server: String,
    /// The whole file could not be read (bad JSON, no `mcpServers` object):
    /// no server of it starts.
    pub whole_file: bool,
    /// The file that defined it.
    pub file: PathBuf,
    /// Line and column in that file, when known.
    pub at: Option<(usize, usize)>,
    pub message: String,
}

/// Every configured server, and the problems found.
#[derive(Debug, Clone, Default)]
pub struct McpConfig {
    /// Enabled, valid servers, by name.
    pub servers: Vec<ServerConfig>,
    /// Names with `disabled: true`.
    pub disabled: Vec<String>,
    pub problems: Vec<ConfigProblem>,
}

impl McpConfig {
    /// Reads the three layers. `from_config_toml` is the merged
    /// `[mcp_servers]` table of the config files, `config_toml` names it in errors.
    pub fn load(
        from_config_toml: &BTreeMap<String, toml::Table>,
        config_toml: &Path,
        workspace: &Path,
    ) -> McpConfig {
        Self::load_layers(from_config_toml, config_toml, workspace, true)
    }

    /// The same; the project's JSON files only when `project_files` (a
    /// project the user has not trusted cannot start commands).
    pub fn load_layers(
        from_config_toml: &BTreeMap<String, toml::Table>,
        config_toml: &Path,
        workspace: &Path,
        project_files: bool,
    ) -> McpConfig {
        let mut entries: BTreeMap<String, Result<(RawEntry, PathBuf), ConfigProblem>> =
            BTreeMap::new();
        for (name, table) in from_config_toml {
            let entry = serde_json::to_value(table)
                .map_err(|e| e.to_string())
                .and_then(|v| RawEntry::from_value(v, true));
            entries.insert(
                name.clone(),
                entry
                    .map(|e| (e, config_toml.to_path_buf()))
                    .map_err(|message| unknown_key_problem(name, config_toml, message)),
            );
        }
        let project = [workspace.join(".agent").join("mcp.json"), workspace.join(".mcp.json")];
        for path in project.into_iter().filter(|_| project_files) {
            match read_json_servers(&path) {
                Ok(servers) => {
                    for (name, value) in servers {
                        let entry = RawEntry::from_value(value, false)
                            .map(|e| (e, path.clone()))
                            .map_err(|message| problem(&name, &path, message));
                        entries.insert(name, entry);
                    }
                }
                // Keyed by the file's path: two broken files are both reported.
                Err(p) => entries.insert(p.server.clone(), Err(p)).map_or((), drop),
            }
        }
        let mut config = McpConfig::default();
        for (name, entry) in entries {
            let server = entry.and_then(|(e, source)| {
                e.into_server(&name, &source).map_err(|message| problem(&name, &source, message))
            });
            match server {
                Ok(None) => config.disabled.push(name),
                Ok(Some(server)) => config.servers.push(server),
                Err(p) => config.problems.push(p),
            }
        }
        config
    }
}

impl McpConfig {
    /// Adds the servers given on the command line (`--mcp-config`): each
    /// `given` is JSON text (starting with `{`) or a JSON file's path, with
    /// Claude Code's `mcpServers`; a given server replaces a configured one
    /// of its name. An SDK's in-process server (`"type": "sdk"`) cannot be
    /// reached from another process and is a problem, said as such.
    pub fn add_given(&mut self, given: &[String]) {
        for (i, given) in given.iter().enumerate() {
            let (source, servers) = match given.trim_start().starts_with('{') {
                true => {
                    let source = PathBuf::from(format!("--mcp-config #{}", i + 1));
                    let servers = json_servers(&source, given);
                    (source, servers)
                }
                // Unlike a project's `.mcp.json`, a file asked for must be there.
                false => {
                    let source = PathBuf::from(given);
                    let servers = match read_repo_text(&source, MAX_REPO_FILE_BYTES) {
                        Ok(text) => json_servers(&source, &text),
                        Err(e) => {
                            let message = match e.kind() {
                                std::io::ErrorKind::NotFound => "no such file".to_string(),
                                _ => format!("cannot read the file: {e}"),
                            };
                            Err(ConfigProblem {
                                whole_file: true,
                                ..problem(given, &source, message)
                            })
                        }
                    };
                    (source, servers)
                }
            };
            let servers = match servers {
                Ok(servers) => servers,
                Err(p) => {
                    self.problems.push(p);
                    continue;
                }
            };
            for (name, value) in servers {
                self.servers.retain(|s| s.name != name);
                self.disabled.retain(|d| *d != name);
                if value.get("type").and_then(Value::as_str) == Some("sdk") {
                    let message = "an Agent SDK in-process server (\"type\": \"sdk\") lives in the \
                                   SDK program's process, which ferroclaw cannot call; run it as a \
                                   stdio or HTTP server";
                    self.problems.push(problem(&name, &source, message));
                    continue;
                }
                let server = RawEntry::from_value(value, false)
                    .and_then(|e| e.into_server(&name, &source))
                    .map_err(|message| problem(&name, &source, message));
                match server {
                    Ok(None) => self.disabled.push(name),
                    Ok(Some(server)) => self.servers.push(server),
                    Err(p) => self.problems.push(p),
                }
            }
        }
        self.servers.sort_by(|a, b| a.name.cmp(&b.name));
    }
}

fn problem(server: &str, source: &Path, message: impl Into<String>) -> ConfigProblem {
    ConfigProblem {
        server: server.to_string(),
        whole_file: false,
        file: source.to_path_buf(),
        at: None,
        message: message.into(),
    }
}

/// A config.toml problem with an unknown key of `[mcp_servers.NAME]`: where
/// the key is in the file, and, for a top-level key, the table it landed in.
fn unknown_key_problem(name: &str, file: &Path, message: String) -> ConfigProblem {
    let mut p = problem(name, file, message);
    let Some(key) = p.message.strip_prefix("unknown key \"").and_then(|r| r.split('"').next())
    else {
        return p;
    };
    let key = key.to_string();
    // A top-level key inside a server's table was meant to go above the first table.
    if ferroclaw_protocol::config_keys::TOP_LEVEL_KEYS.contains(&key.as_str()) {
        p.message = format!(
            "unknown key \"{key}\": \"{key}\" is a top-level setting, but it landed inside \
             [mcp_servers.{name}]; move it above the first [table] line"
        );
    }
    p.at = read_repo_text(file, MAX_REPO_FILE_BYTES)
        .ok()
        .and_then(|text| locate_key(&text, name, &key));
    p
}

/// Line and column of `key = ...` in the `[mcp_servers.NAME]` table of `text`.
fn locate_key(text: &str, name: &str, key: &str) -> Option<(usize, usize)> {
    let mut inside = false;
    for (i, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        if trimmed.starts_with('[') {
            let header: String =
                trimmed.chars().filter(|c| !c.is_whitespace() && *c != '"').collect();
            inside = header.starts_with(&format!("[mcp_servers.{name}]"));
            continue;
        }
        let assigned = trimmed.strip_prefix(key).is_some_and(|r| r.trim_start().starts_with('='));
        if inside && assigned {
            return Some((i + 1, line.len() - trimmed.len() + 1));
        }
    }
    None
}

/// The `mcpServers` object of a JSON file; a missing file is empty.
fn read_json_servers(path: &Path) -> Result<Vec<(String, Value)>, ConfigProblem> {
    let file_problem = |message: String| ConfigProblem {
        whole_file: true,
        ..problem(&path.display().to_string(), path, message)
    };
    let text = match read_repo_text(path, MAX_REPO_FILE_BYTES) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(file_problem(format!("cannot read the file: {e}"))),
    };
    json_servers(path, &text)
}

/// The `mcpServers` object of `text`, JSON from `path` (a file, or what
/// names text given on the command line).
fn json_servers(path: &Path, text: &str) -> Result<Vec<(String, Value)>, ConfigProblem> {
    let file_problem = |message: String| ConfigProblem {
        whole_file: true,
        ..problem(&path.display().to_string(), path, message)
    };
    let value: Value = serde_json::from_str(text).map_err(|e| {
        // serde_json says where as " at line L column C"; the position goes first instead.
        let said = e.to_string();
        let what = said.rsplit_once(" at line ").map_or(said.as_str(), |(what, _)| what);
        ConfigProblem {
            at: Some((e.line(), e.column())),
            ..file_problem(format!("invalid JSON ({what}); no server in this file starts"))
        }
    })?;
    match value.get("mcpServers") {
        None => Ok(Vec::new()),
        Some(Value::Object(map)) => Ok(map.clone().into_iter().collect()),
        Some(_) => Err(file_problem("\"mcpServers\" must be an object".into())),
    }
}

/// One entry as written, in any of the three formats.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct RawEntry {
    #[serde(rename = "type")]
    kind: Option<String>,
    command: Option<String>,
    args: Vec<String>,
    env: BTreeMap<String, String>,
    cwd: Option<String>,
    url: Option<String>,
    headers: BTreeMap<String, String>,
    /// Sent as `Authorization: Bearer $VALUE`.
    #[serde(alias = "bearerTokenEnvVar")]
    bearer_token_env_var: Option<String>,
    disabled: bool,
    /// nanoAgent's tool list: names, or objects with a `name`.
    tools: Option<Value>,
    #[serde(alias = "allowedTools")]
    allowed_tools: Option<Vec<String>>,
    #[serde(alias = "deniedTools")]
    denied_tools: Vec<String>,
    #[serde(alias = "startupTimeoutSecs")]
    startup_timeout_secs: Option<u64>,
    #[serde(alias = "toolTimeoutSecs")]
    tool_timeout_secs: Option<u64>,
    /// A client id registered with the authorization server out of band.
    #[serde(alias = "oauthClientId")]
    oauth_client_id: Option<String>,
    /// The variable holding that client's secret (never the secret itself).
    #[serde(alias = "oauthClientSecretEnv")]
    oauth_client_secret_env: Option<String>,
    /// The HTTPS address of a client ID metadata document describing ferroclaw.
    #[serde(alias = "oauthClientMetadataUrl")]
    oauth_client_metadata_url: Option<String>,
    #[serde(flatten)]
    unknown: BTreeMap<String, Value>,
}

const KNOWN_KEYS: &[&str] = &[
    "type",
    "command",
    "args",
    "env",
    "cwd",
    "url",
    "headers",
    "bearer_token_env_var",
    "disabled",
    "tools",
    "allowed_tools",
    "denied_tools",
    "startup_timeout_secs",
    "tool_timeout_secs",
    "oauth_client_id",
    "oauth_client_secret_env",
    "oauth_client_metadata_url",
];

impl RawEntry {
    /// Parses an entry; unknown keys are an error in our own config.toml and
    /// a warning in other agents' JSON files (which carry keys we do not use).
    fn from_value(value: Value, strict: bool) -> Result<RawEntry, String> {
        let entry: RawEntry = serde_json::from_value(value).map_err(|e| e.to_string())?;
        if let Some(key) = entry.unknown.keys().next() {
            let hint = KNOWN_KEYS
                .iter()
                .map(|k| (strsim::levenshtein(key, k), *k))
                .filter(|(d, _)| *d <= 2)
                .min()
                .map(|(_, k)| format!(" (did you mean \"{k}\"?)"))
                .unwrap_or_else(|| format!("; valid keys: {}", KNOWN_KEYS.join(", ")));
            let message = format!("unknown key \"{key}\"{hint}");
            if strict {
                return Err(message);
            }
            tracing::warn!("mcp: ignoring {message}");
        }
        Ok(entry)
    }

    /// Validates and expands; `Ok(None)` for a disabled server.
    fn into_server(self, name: &str, source: &Path) -> Result<Option<ServerConfig>, String> {
        if self.disabled {
            return Ok(None);
        }
        if name.is_empty()
            || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        {
            return Err("server names may hold only letters, digits, '_' and '-'".into());
        }
        let transport = match (self.kind.as_deref(), self.command, self.url) {
            (Some("sse"), _, _) => {
                return Err(
                    "type \"sse\" (the deprecated HTTP+SSE transport) is not supported; use the server's streamable HTTP endpoint with type \"http\"".into(),
                );
            }
            (Some(kind), _, _) if !matches!(kind, "stdio" | "http" | "streamable-http") => {
                return Err(format!("unknown type {kind:?}; valid types: stdio, http"));
            }
            (_, Some(_), Some(_)) => {
                return Err("has both \"command\" and \"url\"; give one".into());
            }
            (_, Some(command), None) => Transport::Stdio {
                command: expand(&command)?,
                args: self.args.iter().map(|a| expand(a)).collect::<Result<_, _>>()?,
                env: expand_map(&self.env)?,
                cwd: self.cwd.as_deref().map(expand).transpose()?.map(PathBuf::from),
            },
            (_, None, Some(url)) => {
                let url = expand(&url)?;
                if !(url.starts_with("http://") || url.starts_with("https://")) {
                    return Err(format!("url {url:?} must start with http:// or https://"));
                }
                let mut headers = expand_map(&self.headers)?;
                if let Some(var) = &self.bearer_token_env_var {
                    let token = std::env::var(var).map_err(|_| {
                        format!("bearer_token_env_var names {var}, which is not set")
                    })?;
                    headers.insert("Authorization".into(), format!("Bearer {token}"));
                }
                Transport::Http { url, headers }
            }
            (_, None, None) => return Err("needs \"command\" (stdio) or \"url\" (http)".into()),
        };
        let client_secret =
            match &self.oauth_client_secret_env {
                Some(var) => Some(std::env::var(var).map_err(|_| {
                    format!("oauth_client_secret_env names {var}, which is not set")
                })?),
                None => None,
            };
        if client_secret.is_some() && self.oauth_client_id.is_none() {
            return Err("oauth_client_secret_env needs oauth_client_id".into());
        }
        if let Some(url) = &self.oauth_client_metadata_url
            && !url.starts_with("https://")
        {
            return Err(format!("oauth_client_metadata_url {url:?} must be an https:// address"));
        }
        let oauth = crate::oauth::OAuthClient {
            client_id: self.oauth_client_id.as_deref().map(expand).transpose()?,
            client_secret,
            client_metadata_url: self.oauth_client_metadata_url,
        };
        let mut allowed_tools = self.allowed_tools;
        if let Some(tools) = self.tools {
            let names = tool_names(&tools)?;
            allowed_tools = Some(match allowed_tools {
                Some(a) => a.into_iter().filter(|t| names.contains(t)).collect(),
                None => names,
            });
        }
        Ok(Some(ServerConfig {
            name: name.to_string(),
            transport,
            allowed_tools,
            denied_tools: self.denied_tools,
            startup_timeout: self
                .startup_timeout_secs
                .map_or(DEFAULT_STARTUP_TIMEOUT, Duration::from_secs),
            tool_timeout: self.tool_timeout_secs.map_or(DEFAULT_TOOL_TIMEOUT, Duration::from_secs),
            source: source.to_path_buf(),
            oauth,
        }))
    }
}

/// Names from nanoAgent's `tools`: `["a", "b"]` or `[{"name": "a", ...}]`.
fn tool_names(tools: &Value) -> Result<Vec<String>, String> {
    let bad = || "\"tools\" must be a list of tool names or of objects with a \"name\"".to_string();
    let list = tools.as_array().ok_or_else(bad)?;
    list.iter()
        .map(|t| {
            t.as_str()
                .or_else(|| t.get("name").and_then(Value::as_str))
                .map(str::to_string)
                .ok_or_else(bad)
        })
        .collect()
}

fn expand_map(map: &BTreeMap<String, String>) -> Result<BTreeMap<String, String>, String> {
    map.iter().map(|(k, v)| Ok((k.clone(), expand(v)?))).collect()
}

/// Expands `${VAR}` and `${VAR:-default}` from the environment. A variable
/// that is unset (and has no default) is an error naming it.
pub fn expand(text: &str) -> Result<String, String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let end = after.find('}').ok_or_else(|| format!("unclosed \"${{\" in {text:?}"))?;
        let inner = &after[..end];
        let (var, default) = match inner.split_once(":-") {
            Some((v, d)) => (v, Some(d)),
            None => (inner, None),
        };
        match (std::env::var(var), default) {
            (Ok(value), _) => out.push_str(&value),
            (Err(_), Some(d)) => out.push_str(d),
            (Err(_), None) => {
                return Err(format!("environment variable {var} is not set (used as ${{{var}}})"));
            }
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load_json(agent: Option<&str>, claude: Option<&str>) -> McpConfig {
        let ws = tempfile::tempdir().unwrap();
        if let Some(text) = agent {
            std::fs::create_dir_all(ws.path().join(".agent")).unwrap();
            std::fs::write(ws.path().join(".agent/mcp.json"), text).unwrap();
        }
        if let Some(text) = claude {
            std::fs::write(ws.path().join(".mcp.json"), text).unwrap();
        }
        McpConfig::load(&BTreeMap::new(), Path::new("config.toml"), ws.path())
    }

    #[test]
    fn claude_code_format_reads_stdio_and_http_servers() {
        let c = load_json(
            None,
            Some(
                r#"{"mcpServers": {
                "fs": {"command": "npx", "args": ["-y", "srv"], "env": {"A": "1"}},
                "web": {"type": "http", "url": "https://example.com/mcp", "headers": {"X-Key": "k"}}
            }}"#,
            ),
        );
        assert!(c.problems.is_empty(), "{:?}", c.problems);
        assert_eq!(c.servers.len(), 2);
        assert!(
            matches!(&c.servers[0].transport, Transport::Stdio { command, args, .. } if command == "npx" && args == &["-y", "srv"])
        );
        assert!(
            matches!(&c.servers[1].transport, Transport::Http { headers, .. } if headers["X-Key"] == "k")
        );
    }

    #[test]
    fn later_files_replace_earlier_definitions_and_disabled_servers_are_skipped() {
        let c = load_json(
            Some(
                r#"{"mcpServers": {"a": {"command": "one"}, "b": {"command": "x", "disabled": true}, "c": {"command": "c", "tools": ["t1", {"name": "t2"}]}}}"#,
            ),
            Some(r#"{"mcpServers": {"a": {"command": "two"}}}"#),
        );
        assert_eq!(c.disabled, ["b"]);
        let a = c.servers.iter().find(|s| s.name == "a").unwrap();
        assert!(matches!(&a.transport, Transport::Stdio { command, .. } if command == "two"));
        let srv = c.servers.iter().find(|s| s.name == "c").unwrap();
        assert!(srv.offers("t2") && !srv.offers("t3"));
    }

    #[test]
    fn a_missing_variable_is_an_error_for_that_server_only() {
        let c = load_json(
            None,
            Some(
                r#"{"mcpServers": {"bad": {"command": "x", "env": {"K": "${FERROCLAW_TEST_SURELY_UNSET}"}}, "good": {"command": "${FERROCLAW_TEST_SURELY_UNSET:-fallback}"}}}"#,
            ),
        );
        assert_eq!(c.servers.len(), 1);
        assert!(
            matches!(&c.servers[0].transport, Transport::Stdio { command, .. } if command == "fallback")
        );
        let msg = c.problems[0].to_string();
        assert!(msg.contains("\"bad\""), "{msg}");
        assert!(msg.contains("FERROCLAW_TEST_SURELY_UNSET is not set"), "{msg}");
    }

    #[test]
    fn a_pre_registered_oauth_client_is_read_with_its_secret_from_the_environment() {
        let c = load_json(
            None,
            Some(
                r#"{"mcpServers": {
                    "web": {"url": "https://example.com/mcp", "oauth_client_id": "id-1", "oauth_client_secret_env": "PATH"},
                    "leaky": {"url": "https://example.com/mcp", "oauth_client_secret_env": "PATH"},
                    "plain": {"url": "https://example.com/mcp", "oauth_client_metadata_url": "http://example.com/c.json"}}}"#,
            ),
        );
        assert_eq!(c.servers.len(), 1, "{:?}", c.problems);
        let oauth = &c.servers[0].oauth;
        assert_eq!(oauth.client_id.as_deref(), Some("id-1"));
        assert_eq!(oauth.client_secret, std::env::var("PATH").ok());
        let problems: Vec<String> = c.problems.iter().map(ToString::to_string).collect();
        assert!(problems.iter().any(|p| p.contains("needs oauth_client_id")), "{problems:?}");
        assert!(problems.iter().any(|p| p.contains("must be an https://")), "{problems:?}");
    }

    #[test]
    fn config_toml_entries_are_strict_and_carry_timeouts_and_tool_filters() {
        let text = "[mcp_servers.gh]\nurl = \"http://127.0.0.1:1/mcp\"\ndenied_tools = [\"delete\"]\ntool_timeout_secs = 5\n[mcp_servers.typo]\ncomand = \"x\"\n";
        #[derive(Deserialize)]
        struct F {
            mcp_servers: BTreeMap<String, toml::Table>,
        }
        let f: F = toml::from_str(text).unwrap();
        let ws = tempfile::tempdir().unwrap();
        let c = McpConfig::load(&f.mcp_servers, Path::new("config.toml"), ws.path());
        assert_eq!(c.servers[0].tool_timeout, Duration::from_secs(5));
        assert!(!c.servers[0].offers("delete") && c.servers[0].offers("list"));
        assert_eq!(
            c.problems[0].to_string(),
            "config.toml: mcp server \"typo\": unknown key \"comand\" (did you mean \"command\"?)"
        );
    }

    #[test]
    fn a_top_level_key_inside_a_server_table_is_located_and_the_table_named() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("config.toml");
        let text = "[mcp_servers.fs]\ncommand = \"x\"\nmodel = \"anthropic/y\"\n";
        std::fs::write(&file, text).unwrap();
        let table: toml::Table = toml::from_str(text).unwrap();
        let servers: BTreeMap<String, toml::Table> = table["mcp_servers"]
            .as_table()
            .unwrap()
            .iter()
            .map(|(k, v)| (k.clone(), v.as_table().unwrap().clone()))
            .collect();
        let config = McpConfig::load(&servers, &file, dir.path());
        let shown = config.problems[0].to_string();
        assert!(shown.contains("config.toml:3:1: mcp server \"fs\""), "{shown}");
        assert!(shown.contains("inside [mcp_servers.fs]"), "{shown}");
    }

    #[test]
    fn broken_json_names_the_file_and_position() {
        let c = load_json(None, Some("{\"mcpServers\": {"));
        let msg = c.problems[0].to_string();
        assert!(
            msg.contains(".mcp.json:1:16: invalid JSON (EOF while parsing an object)"),
            "{msg}"
        );
    }

    #[test]
    fn servers_given_on_the_command_line_join_or_replace_and_an_sdk_server_is_a_problem() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("more.json");
        std::fs::write(&file, r#"{"mcpServers": {"files": {"command": "srv", "args": ["a"]}}}"#)
            .unwrap();
        let mut config = McpConfig {
            servers: vec![ServerConfig::stdio("files", "old", &[])],
            ..Default::default()
        };
        config.add_given(&[
            file.to_string_lossy().into_owned(),
            r#"{"mcpServers": {"web": {"type": "http", "url": "http://127.0.0.1:1/mcp"},
                               "inproc": {"type": "sdk", "name": "inproc"}}}"#
                .to_string(),
            dir.path().join("missing.json").to_string_lossy().into_owned(),
        ]);
        let names: Vec<&str> = config.servers.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["files", "web"]);
        assert!(
            matches!(&config.servers[0].transport, Transport::Stdio { command, .. } if command == "srv")
        );
        let problems: Vec<String> = config.problems.iter().map(ToString::to_string).collect();
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(
            problems[0].contains("inproc") && problems[0].contains("in-process"),
            "{problems:?}"
        );
        assert!(
            problems[1].contains("missing.json") && problems[1].contains("no such file"),
            "{problems:?}"
        );
    }
}
