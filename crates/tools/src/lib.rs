//! Tools are how the model touches the world. A tool is a name, a description
//! written for the model, a JSON schema for its input and an async `execute`.
//! The [`ToolRegistry`] keeps tools in insertion order, validates arguments
//! against each tool's schema before running it, and can hand out a restricted
//! copy of itself (`without`) for sub-agents. A built-in tool's input is a
//! typed struct whose schema is generated from it ([`tool_input`]).
//!
//! This crate does not decide whether a call may run (that is the permission
//! gate in `ferroclaw-core`) and does not talk to models.
//!
//! [`builtin_tools`] gives the built-in set: `read`, `write`, `edit`,
//! `multi_edit`, `glob`, `grep`, `list_dir`, `bash` and `web_fetch`. Every file
//! path goes through the [`Sandbox`], which refuses anything outside the
//! workspace and the allowed folders (symlinks included).
//! [`canonical_tool_name`] maps other agents' tool names (`Read`, `read_file`,
//! `exec`, ...) to ours.
//!
//! A [`ReadLedger`], owned by the agent and handed to tools in the
//! [`ToolContext`], lets `read` answer a re-read of a file unchanged since
//! the conversation read it with a short note instead of the content, and
//! `write`, `edit` and `multi_edit` refuse a file changed on disk since the
//! conversation last read or wrote it (or never read).
//!
//! A [`JobManager`] runs commands in the background for a session;
//! [`background_tools`] gives the model `background_run`, `check_background`
//! and `kill_background` on it, and [`JobManager::drain_finished`] hands each
//! finished job's result out once, for the next model request.
//!
//! ```
//! use ferroclaw_tools::{Tool, ToolContext, ToolOutput, ToolError, ToolRegistry};
//! use serde_json::{json, Value};
//!
//! struct Echo;
//! #[async_trait::async_trait]
//! impl Tool for Echo {
//!     fn name(&self) -> &str { "echo" }
//!     fn description(&self) -> &str { "Returns its `text` argument." }
//!     fn input_schema(&self) -> Value {
//!         json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]})
//!     }
//!     fn read_only(&self) -> bool { true }
//!     async fn execute(&self, input: Value, _ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
//!         Ok(ToolOutput::text(input["text"].as_str().unwrap_or_default()))
//!     }
//! }
//!
//! let mut tools = ToolRegistry::new();
//! tools.register(Echo);
//! assert!(tools.validate("echo", &json!({"text": 1})).is_err());
//! assert!(tools.without(&["echo"]).is_empty());
//!
//! let builtins = ferroclaw_tools::builtin_tools();
//! assert_eq!(builtins.names()[0], "read");
//! assert_eq!(ferroclaw_tools::canonical_tool_name("Bash"), "bash");
//! ```

mod background;
mod background_job;
mod background_tools;
mod bash;
mod bash_output;
mod beneath;
mod builtin;
pub mod child_env;
pub mod child_groups;
pub mod claude;
mod closest;
mod deny;
mod edit;
pub mod effects;
pub mod file_limit;
mod glob;
mod grep;
mod grep_sink;
mod html;
pub mod landlock;
mod lines;
mod list_dir;
mod multi_edit;
mod open_rules;
pub mod own_file;
pub mod own_git;
pub mod process;
pub mod protected_mounts;
mod read;
mod read_ledger;
mod registry;
pub mod repo_file;
mod result_cap;
mod sandbox;
pub mod shell;
pub mod ssrf;
mod stale_write;
pub mod tool_input;
mod walk;
mod web_fetch;
mod web_search;
mod write;
mod write_temp;

pub use background::{
    DEFAULT_JOB_TIMEOUT, JobManager, JobOptions, JobResult, JobStatus, JobSummary, MAX_JOB_TIMEOUT,
    MAX_RUNNING_JOBS, RESULT_KEEP_CHARS, format_results,
};
pub use background_tools::{
    BackgroundRunTool, CheckBackgroundTool, KillBackgroundTool, background_tools,
};
pub use bash::{BashTool, DEFAULT_TIMEOUT_MS, MAX_TIMEOUT_MS};
pub use bash_output::MAX_OUTPUT_CHARS;
pub use beneath::Beneath;
pub use builtin::{builtin_tools, canonical_tool_name, register_builtins};
pub use deny::{
    PROTECTED_FOLDERS, dangerous_command, dangerous_command_for_home, normalize as normalize_path,
    protected_file,
};
pub use edit::{EditTool, edit_text};
pub use glob::{GlobTool, MAX_GLOB_RESULTS};
pub use grep::{DEFAULT_HEAD_LIMIT, GrepTool};
pub use grep_sink::MAX_GREP_LINE_CHARS;
pub use lines::MAX_LINE_CHARS;
pub use list_dir::{ListDirTool, MAX_LIST_ENTRIES};
pub use multi_edit::MultiEditTool;
pub use open_rules::OpenRules;
pub use read::{DEFAULT_READ_LINES, MAX_IMAGE_BYTES, MAX_READ_CHARS, ReadTool, image_media_type};
pub use read_ledger::ReadLedger;
pub use registry::ToolRegistry;
pub use result_cap::{MAX_RESULT_CHARS, cap_result, result_cap_chars};
pub use sandbox::Sandbox;
pub use stale_write::{CHANGED_SINCE_READ, Change, Known, NOT_READ_YET};
pub use web_fetch::{DEFAULT_MAX_CHARS, MAX_BODY_BYTES, MAX_REDIRECTS, WebFetchTool};
pub use web_search::{DEFAULT_SEARCH_RESULTS, MAX_SEARCH_RESULTS, SearchBackend, WebSearchTool};
pub use write::WriteTool;

use std::path::PathBuf;

use async_trait::async_trait;
use ferroclaw_protocol::{AgentEvent, ResultPart};
use serde_json::Value;
use tokio::sync::mpsc::UnboundedSender;
use tokio_util::sync::CancellationToken;

/// A capability the model can call.
#[async_trait]
pub trait Tool: Send + Sync {
    /// The name the model calls it by.
    fn name(&self) -> &str;
    /// What it does, its limits and an example, written for the model.
    fn description(&self) -> &str;
    /// JSON schema of the input object.
    fn input_schema(&self) -> Value;
    /// True when the tool never changes anything (then independent calls may
    /// run in parallel, and permission modes let it run freely).
    fn read_only(&self) -> bool {
        false
    }
    /// True when several calls of this tool in one answer may run at the same
    /// time as each other and as other such calls. Defaults to `read_only()`.
    fn concurrent(&self) -> bool {
        self.read_only()
    }
    /// True when this call only shows something to the person of the
    /// conversation it runs in (nothing leaves it, nothing changes): the
    /// permission gate then lets it run as freely as a read-only call (the
    /// `message` tool sending a workspace file to its own chat). Deny and
    /// ask rules still apply.
    fn stays_in_conversation(&self, _input: &Value) -> bool {
        false
    }
    /// Runs the tool. Arguments were already validated against the schema.
    async fn execute(&self, input: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError>;
}

/// What a wrapper does around another tool's run: a check before it, a
/// record after it. [`Wrapped`] keeps the inner tool's name, description,
/// schema and flags, so the model sees the same tool.
#[async_trait]
pub trait Around: Send + Sync {
    /// Runs `inner` (or refuses to) with `input`.
    async fn run(
        &self,
        inner: &dyn Tool,
        input: Value,
        ctx: &ToolContext,
    ) -> Result<ToolOutput, ToolError>;
}

/// `inner` run through `around` (a plan gate, a re-index after edits, a
/// call log).
pub struct Wrapped<A> {
    pub inner: std::sync::Arc<dyn Tool>,
    pub around: A,
}

#[async_trait]
impl<A: Around> Tool for Wrapped<A> {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn description(&self) -> &str {
        self.inner.description()
    }
    fn input_schema(&self) -> Value {
        self.inner.input_schema()
    }
    fn read_only(&self) -> bool {
        self.inner.read_only()
    }
    fn concurrent(&self) -> bool {
        self.inner.concurrent()
    }
    fn stays_in_conversation(&self, input: &Value) -> bool {
        self.inner.stays_in_conversation(input)
    }
    async fn execute(&self, input: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        self.around.run(self.inner.as_ref(), input, ctx).await
    }
}

/// What a tool gets besides its arguments.
#[derive(Debug, Clone)]
pub struct ToolContext {
    /// The workspace root: the project folder, or `--cwd`.
    pub workspace: PathBuf,
    /// Further folders file tools may touch (config `allowed_dirs`).
    pub allowed_dirs: Vec<PathBuf>,
    /// Cancelled when the user interrupts the turn; long tools must stop.
    pub cancel: CancellationToken,
    /// The id of the call being run (empty outside the loop).
    pub call_id: String,
    /// Where a tool may send events of its own (todo list changes, a
    /// sub-agent's progress); `None` when nobody listens.
    pub events: Option<UnboundedSender<AgentEvent>>,
    /// How commands (`bash`, background jobs) are confined.
    pub sandbox: SandboxPolicy,
    /// What this conversation has read (`read` answers a re-read of an
    /// unchanged file with a note); owned by the agent.
    pub reads: ReadLedger,
    /// Where the session records the process groups its commands start
    /// (see [`child_groups`]); the default records nothing.
    pub children: child_groups::ChildGroups,
    /// The deny rules of the permission gate, bound to this call's tool:
    /// every file a file tool opens is judged again on the path it opens
    /// (see [`OpenRules`]); the default has none.
    pub open_rules: OpenRules,
}

/// How tools are confined: what the commands they run may write and
/// reach, and how large a file the file tools take in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxPolicy {
    /// Confine writes with Landlock where the kernel has it (default true).
    pub confine_writes: bool,
    /// Folders commands may write besides the workspace, `allowed_dirs`,
    /// the temp folders and the harmless devices.
    pub writable: Vec<PathBuf>,
    /// Environment variables commands get besides the allow-list of
    /// [`child_env::PASSED_ENV`] (config `[sandbox] env`).
    pub env: Vec<String>,
    /// Variables set for commands on top of the allow-list (Claude Code
    /// settings' `env`); a later one of the same name wins.
    pub set_env: Vec<(String, String)>,
    /// TCP ports commands may connect to and bind (Landlock ABI 4+).
    pub tcp: landlock::TcpPolicy,
    /// Bytes a file may have for `read`, `edit`, `multi_edit` and `write`'s
    /// stale check to open it (config `max_file_bytes`; see [`file_limit`]).
    pub max_file_bytes: u64,
}

impl Default for SandboxPolicy {
    fn default() -> Self {
        Self {
            confine_writes: true,
            writable: Vec::new(),
            env: Vec::new(),
            set_env: Vec::new(),
            tcp: landlock::TcpPolicy::default(),
            max_file_bytes: file_limit::DEFAULT_MAX_FILE_BYTES,
        }
    }
}

impl SandboxPolicy {
    /// The Landlock ruleset for commands writing beneath `roots` (plus the
    /// configured extras and the standard ones): `None` when confinement is
    /// off or the kernel has no Landlock.
    pub fn confinement(
        &self,
        workspace: &std::path::Path,
        allowed_dirs: &[PathBuf],
    ) -> std::io::Result<Option<std::sync::Arc<landlock::WriteConfinement>>> {
        if !self.confine_writes {
            return Ok(None);
        }
        let roots = landlock::roots_for(workspace, allowed_dirs, &self.writable);
        let projects: Vec<PathBuf> =
            std::iter::once(workspace.to_path_buf()).chain(allowed_dirs.iter().cloned()).collect();
        let confinement = landlock::WriteConfinement::prepare(&roots, &self.tcp)?;
        Ok(confinement.map(|c| std::sync::Arc::new(c.protect_files(&projects))))
    }

    /// The environment for a command: the allow-list, the configured names
    /// and the fixed `TMPDIR`, from ferroclaw's own environment, then the
    /// variables of [`SandboxPolicy::set_env`].
    pub fn child_env(&self) -> Vec<(std::ffi::OsString, std::ffi::OsString)> {
        let mut env = child_env::current_child_env(&self.env);
        for (name, value) in &self.set_env {
            env.retain(|(n, _)| n.as_os_str() != std::ffi::OsStr::new(name));
            env.push((name.into(), value.into()));
        }
        env
    }
}

impl ToolContext {
    /// A context rooted at `workspace`, with nothing else allowed.
    pub fn new(workspace: impl Into<PathBuf>) -> Self {
        Self {
            workspace: workspace.into(),
            allowed_dirs: Vec::new(),
            cancel: CancellationToken::new(),
            call_id: String::new(),
            events: None,
            sandbox: SandboxPolicy::default(),
            reads: ReadLedger::default(),
            children: child_groups::ChildGroups::default(),
            open_rules: OpenRules::default(),
        }
    }

    /// The Landlock ruleset for commands run from this context: `None` when
    /// confinement is off or the kernel has no Landlock.
    pub fn write_confinement(
        &self,
    ) -> Result<Option<std::sync::Arc<landlock::WriteConfinement>>, ToolError> {
        self.sandbox
            .confinement(&self.workspace, &self.allowed_dirs)
            .map_err(|e| ToolError::io("cannot set up the write sandbox", e))
    }

    /// Sends an event to whoever listens; dropped when nobody does.
    pub fn emit(&self, event: AgentEvent) {
        if let Some(events) = &self.events {
            let _ = events.send(event);
        }
    }
}

/// A tool's result: content parts, and whether it is an error the model
/// should see as such.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolOutput {
    pub content: Vec<ResultPart>,
    pub is_error: bool,
}

impl ToolOutput {
    /// A successful text result.
    pub fn text(text: impl Into<String>) -> Self {
        Self { content: vec![ResultPart::Text { text: text.into() }], is_error: false }
    }

    /// An error result: the message tells the model what was wrong.
    pub fn error(text: impl Into<String>) -> Self {
        Self { content: vec![ResultPart::Text { text: text.into() }], is_error: true }
    }

    /// The text parts joined.
    pub fn joined_text(&self) -> String {
        let mut out = String::new();
        for p in &self.content {
            if let Some(t) = p.as_text() {
                out.push_str(t);
            }
        }
        out
    }
}

/// Why a tool call could not produce a result. Every variant becomes an
/// `is_error` tool result whose text is this error's message.
#[derive(Debug, thiserror::Error)]
pub enum ToolError {
    /// The arguments make no sense for this tool (beyond what the schema checks).
    #[error("invalid arguments: {0}")]
    InvalidArguments(String),
    /// The path is outside every allowed root, or otherwise refused.
    #[error("{0}")]
    Refused(String),
    /// An I/O error, with the path or operation it concerns.
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
    /// The call was cancelled by the user.
    #[error("cancelled by the user")]
    Cancelled,
    /// Anything else, said plainly.
    #[error("{0}")]
    Failed(String),
}

impl ToolError {
    /// An I/O error about `context` (a path or an operation).
    pub fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        Self::Io { context: context.into(), source }
    }
}
