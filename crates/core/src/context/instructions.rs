//! The project's instruction files, read as Claude Code 2.1.332 reads its
//! memory files (checked against it on the same folders):
//!
//! 1. the user's `~/.claude/CLAUDE.md` (`$CLAUDE_CONFIG_DIR/CLAUDE.md`);
//! 2. in every folder from the git root (or just the project folder outside
//!    git) down to the project folder: `AGENTS.md`, `CLAUDE.md`,
//!    `.claude/CLAUDE.md`, `CLAUDE.local.md`;
//! 3. after each file, the files it imports with `@path` (relative to the
//!    importing file, or `~/...`, or absolute), each after its importer, up
//!    to five files deep, never inside `` `code` `` or fenced blocks, each
//!    file once (cycles cut);
//! 4. later, in a session, the same files of a subfolder below the project
//!    folder the first time the agent reads or edits a file there
//!    ([`nested`]).
//!
//! A project file's import of a file outside the project folder (`@~/...`,
//! `@../x`) is followed only in a trusted workspace (Claude Code asks once);
//! the user's own file may import anything. Every file is capped at
//! [`MAX_FILE_CHARS`]; what was cut or left out is said in
//! [`Instructions::notes`] (`ferroclaw context` prints them).

pub mod nested;

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use super::{MAX_FILE_CHARS, read_capped};

/// Instruction files read in each folder, in prompt order.
pub const FOLDER_FILES: [&str; 4] =
    ["AGENTS.md", "CLAUDE.md", ".claude/CLAUDE.md", "CLAUDE.local.md"];

/// Most files in one chain of imports, the importing file included (Claude
/// Code's "five hops": its root file's fourth-level import is the last read).
pub const MAX_IMPORT_DEPTH: usize = 5;

/// One file put into the prompt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstructionFile {
    /// Where it is.
    pub path: PathBuf,
    /// How it is named in the prompt (`../../CLAUDE.md`, `~/.claude/CLAUDE.md`).
    pub shown: String,
    /// Its text, trimmed and capped.
    pub text: String,
    /// The file that imported it (as shown), if any.
    pub imported_by: Option<String>,
}

/// The instruction files found, in prompt order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Instructions {
    pub files: Vec<InstructionFile>,
    /// What was cut or not followed, one line each.
    pub notes: Vec<String>,
}

impl Instructions {
    /// The `project` layer's text: each file under a heading naming it.
    pub fn render(&self) -> String {
        let sections: Vec<String> = self
            .files
            .iter()
            .map(|f| {
                let what = if f.shown.starts_with("~/.claude/") && f.imported_by.is_none() {
                    "User instructions"
                } else {
                    "Project instructions"
                };
                match &f.imported_by {
                    Some(by) => format!("# {what} ({}, imported by {by})\n\n{}", f.shown, f.text),
                    None => format!("# {what} ({})\n\n{}", f.shown, f.text),
                }
            })
            .collect();
        sections.join("\n\n")
    }

    /// Every path read (imports included), for noticing changes.
    pub fn paths(&self) -> Vec<PathBuf> {
        self.files.iter().map(|f| f.path.clone()).collect()
    }
}

/// Whether a project file may import files from outside the project folder:
/// only once you trusted the project with `ferroclaw trust` (and its files
/// did not change since). A project with no config files counts as trusted
/// for everything else, but its `CLAUDE.md` could otherwise put
/// `@~/.ssh/id_rsa` into the request sent to the provider.
pub fn outside_imports_allowed(config: &crate::config::Config) -> bool {
    use crate::trust::TrustState;
    let here = canonical(&config.workspace);
    // `ferroclaw trust` said yes, and nothing it covers changed since (a
    // project with only memory files has nothing else to trust).
    matches!(config.trust, TrustState::Trusted | TrustState::NothingToTrust)
        && crate::trust::TrustStore::new(&config.home)
            .list()
            .is_ok_and(|all| all.iter().any(|(key, _)| Path::new(key) == here))
}

/// Where the user's Claude Code files are: `$CLAUDE_CONFIG_DIR`, else `~/.claude`.
pub fn claude_home() -> Option<PathBuf> {
    std::env::var_os("CLAUDE_CONFIG_DIR")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .or_else(|| home_dir().map(|h| h.join(".claude")))
}

fn home_dir() -> Option<PathBuf> {
    std::env::var_os("HOME").filter(|h| !h.is_empty()).map(PathBuf::from)
}

/// The folders read, outermost first: the git root down to `workspace`
/// (just `workspace` outside git).
pub fn project_dirs(workspace: &Path) -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    for dir in workspace.ancestors() {
        dirs.push(dir.to_path_buf());
        if dir.join(".git").exists() {
            dirs.reverse();
            return dirs;
        }
    }
    vec![workspace.to_path_buf()]
}

/// Every candidate path the layer may read, present or not (imports of the
/// present ones included), for noticing a file that appears.
pub fn candidate_paths(workspace: &Path, claude: Option<&Path>, trusted: bool) -> Vec<PathBuf> {
    let mut paths: Vec<PathBuf> = claude.map(|c| c.join("CLAUDE.md")).into_iter().collect();
    for dir in project_dirs(workspace) {
        paths.extend(FOLDER_FILES.iter().map(|f| dir.join(f)));
    }
    paths.extend(read(workspace, claude, trusted).paths());
    paths
}

/// Reads the instruction files of `workspace` and of the user's Claude Code
/// folder `claude` (see [`claude_home`]); see the module docs.
pub fn read(workspace: &Path, claude: Option<&Path>, trusted: bool) -> Instructions {
    let mut reader = Reader::new(workspace, trusted);
    if let Some(claude) = claude {
        reader.add(&claude.join("CLAUDE.md"), "~/.claude/CLAUDE.md".into(), Scope::User);
    }
    let dirs = project_dirs(workspace);
    let last = dirs.len() - 1;
    for (i, dir) in dirs.iter().enumerate() {
        let up = "../".repeat(last - i);
        reader.add_folder(dir, &up);
    }
    reader.done
}

/// Whose file is being read: the user's own may import anything.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scope {
    User,
    Project,
}

/// Reads files and their imports, each once.
pub(crate) struct Reader {
    workspace: PathBuf,
    trusted: bool,
    seen: HashSet<PathBuf>,
    pub(crate) done: Instructions,
}

impl Reader {
    pub(crate) fn new(workspace: &Path, trusted: bool) -> Self {
        Reader {
            workspace: workspace.to_path_buf(),
            trusted,
            seen: HashSet::new(),
            done: Instructions::default(),
        }
    }

    /// Files already read count as seen (a session's nested loader).
    pub(crate) fn mark_seen(&mut self, path: &Path) {
        self.seen.insert(canonical(path));
    }

    /// The instruction files of one folder, shown as `up` + name. A file
    /// with the same text as one before it in the folder (`CLAUDE.md`
    /// linked to `AGENTS.md`) is left out.
    pub(crate) fn add_folder(&mut self, dir: &Path, up: &str) {
        let mut texts: Vec<String> = Vec::new();
        for name in FOLDER_FILES {
            let path = dir.join(name);
            let Some(text) = read_capped(&path, false) else { continue };
            if texts.contains(&text) {
                self.seen.insert(canonical(&path));
                continue;
            }
            texts.push(text);
            self.add(&path, format!("{up}{name}"), Scope::Project);
        }
    }

    fn add(&mut self, path: &Path, shown: String, scope: Scope) {
        self.add_at(path, shown, scope, None, 1);
    }

    fn add_at(
        &mut self,
        path: &Path,
        shown: String,
        scope: Scope,
        imported_by: Option<String>,
        depth: usize,
    ) {
        if !self.seen.insert(canonical(path)) {
            return;
        }
        let Some(text) = read_capped(path, false) else {
            if imported_by.is_some() && !path.is_file() {
                self.done.notes.push(format!("{shown}: imported but not found"));
            }
            return;
        };
        if text.ends_with(&format!("[... cut at {MAX_FILE_CHARS} characters]")) {
            self.done.notes.push(format!("{shown}: cut at {MAX_FILE_CHARS} characters"));
        }
        let imports = imports(&text);
        self.done.files.push(InstructionFile {
            path: path.to_path_buf(),
            shown: shown.clone(),
            text,
            imported_by,
        });
        let base = path.parent().unwrap_or(Path::new("/"));
        for import in imports {
            let Some(target) = resolve(&import, base) else { continue };
            if depth >= MAX_IMPORT_DEPTH {
                self.done.notes.push(format!(
                    "{shown}: @{import} not followed (imports nest {MAX_IMPORT_DEPTH} files deep at most)"
                ));
                continue;
            }
            if scope == Scope::Project && !self.trusted && !self.inside_workspace(&target) {
                self.done.notes.push(format!(
                    "{shown}: @{import} not followed (outside the project folder, and the \
                     workspace is not trusted: see `ferroclaw trust`)"
                ));
                continue;
            }
            let shown_import = self.shown(&target, &import);
            self.add_at(&target, shown_import, scope, Some(shown.clone()), depth + 1);
        }
    }

    fn inside_workspace(&self, path: &Path) -> bool {
        canonical(path).starts_with(canonical(&self.workspace))
    }

    /// A path as the prompt names it: relative to the project folder
    /// (`docs/a.md`, `../docs/a.md`) when they share more than the root,
    /// else as written in the import (`~/notes.md`).
    fn shown(&self, path: &Path, written: &str) -> String {
        let (path, base) = (canonical(path), canonical(&self.workspace));
        let common = path.components().zip(base.components()).take_while(|(a, b)| a == b).count();
        if common <= 1 {
            return written.to_string();
        }
        let up = base.components().count() - common;
        let rest: PathBuf = path.components().skip(common).collect();
        format!("{}{}", "../".repeat(up), rest.display())
    }
}

fn canonical(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
}

/// `~/x` from the home folder, `/x` as it is, anything else from `base`.
fn resolve(import: &str, base: &Path) -> Option<PathBuf> {
    if let Some(rest) = import.strip_prefix("~/") {
        return Some(home_dir()?.join(rest));
    }
    let path = Path::new(import);
    Some(if path.is_absolute() { path.to_path_buf() } else { base.join(path) })
}

/// The `@path` imports of a text, in order: an `@` at the start of a line
/// or after white space, outside `` `code` `` spans and fenced blocks.
pub fn imports(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut fence: Option<&str> = None;
    for line in text.lines() {
        let trimmed = line.trim_start();
        if let Some(open) = fence {
            if trimmed.starts_with(open) {
                fence = None;
            }
            continue;
        }
        if trimmed.starts_with("```") || trimmed.starts_with("~~~") {
            fence = Some(&trimmed[..3]);
            continue;
        }
        let mut in_code = false;
        let mut prev: Option<char> = None;
        for (i, c) in line.char_indices() {
            match c {
                '`' => in_code = !in_code,
                '@' if !in_code && prev.is_none_or(char::is_whitespace) => {
                    let path: String = line[i + 1..]
                        .chars()
                        .take_while(|c| !c.is_whitespace() && *c != '`')
                        .collect();
                    let path = path.trim_end_matches(['.', ',', ';', ':', ')', '!', '?']);
                    if !path.is_empty() && !path.starts_with('@') {
                        out.push(path.to_string());
                    }
                }
                _ => {}
            }
            prev = Some(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn imports_are_found_outside_code_and_after_white_space_only() {
        let text = "See @docs/a.md and more.\nInline `@docs/code.md` here.\n```\n@docs/fence.md\n```\n@~/personal.md\nmail x@docs/mail.md\n@docs/d1.md\n";
        assert_eq!(imports(text), ["docs/a.md", "~/personal.md", "docs/d1.md"]);
    }
}
