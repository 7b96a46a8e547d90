//! The workspace sandbox: every path a file tool touches must resolve inside
//! the workspace or one of the allowed folders.
//!
//! Resolution follows symlinks (of the file and of every parent folder) before
//! checking, so a link inside the workspace that points out is refused. For a
//! path that does not exist yet, the deepest existing ancestor is resolved and
//! checked, and the rest is re-attached (it may not contain `..`).
//!
//! The check gives clear refusals; the use goes through [`Sandbox::beneath`],
//! which opens the resolved path relative to its root without following any
//! link (see [`crate::beneath`]), so a folder swapped for a link between the
//! check and the use is refused, not followed; and asks the permission
//! gate's deny rules about each path it opens ([`OpenRules`]), so the file
//! opened is the file the rules judged.

use std::ffi::OsString;
use std::fs;
use std::os::unix::fs::FileTypeExt;
use std::path::{Component, Path, PathBuf};

use crate::beneath::Beneath;
use crate::{OpenRules, ToolContext, ToolError};

/// The roots file tools may touch: the workspace first, then the allowed folders.
#[derive(Debug, Clone)]
pub struct Sandbox {
    roots: Vec<PathBuf>,
    /// The call's deny rules, handed to every [`Beneath`] it opens.
    rules: OpenRules,
}

impl Sandbox {
    /// A sandbox over `workspace` and `allowed_dirs` (each canonicalized when it exists).
    pub fn new(workspace: impl Into<PathBuf>, allowed_dirs: &[PathBuf]) -> Self {
        let workspace = workspace.into();
        let roots = std::iter::once(&workspace)
            .chain(allowed_dirs)
            .map(|root| fs::canonicalize(root).unwrap_or_else(|_| root.clone()))
            .collect();
        Self { roots, rules: OpenRules::default() }
    }

    /// The sandbox of a tool call, with its deny rules.
    pub fn from_context(ctx: &ToolContext) -> Self {
        let mut sandbox = Self::new(ctx.workspace.clone(), &ctx.allowed_dirs);
        sandbox.rules = ctx.open_rules.clone();
        sandbox
    }

    /// The workspace root (canonical when it exists).
    pub fn workspace(&self) -> &Path {
        &self.roots[0]
    }

    /// Every root, the workspace first.
    pub fn roots(&self) -> &[PathBuf] {
        &self.roots
    }

    /// True when the already canonical `path` lies inside one of the roots.
    pub fn contains(&self, path: &Path) -> bool {
        self.roots.iter().any(|root| path.starts_with(root))
    }

    /// The root holding the already resolved `path`, held open, and `path`
    /// relative to it: the way file tools open what [`Sandbox::resolve`] returned.
    /// Every open through it answers to the call's deny rules.
    pub fn beneath(&self, path: &Path) -> Result<(Beneath, PathBuf), ToolError> {
        let root = self
            .roots
            .iter()
            .filter(|root| path.starts_with(root))
            .max_by_key(|root| root.as_os_str().len())
            .ok_or_else(|| self.outside(&path.display().to_string(), path))?;
        // Refused here with the rule for a clear answer (a search over a
        // denied folder); each open through the `Beneath` is judged again.
        self.rules.check(path)?;
        let rel = path.strip_prefix(root).unwrap_or(Path::new("")).to_path_buf();
        Ok((Beneath::open(root)?.judged_by(self.rules.clone()), rel))
    }

    /// `path` relative to the workspace when it lies inside, else in full.
    pub fn display(&self, path: &Path) -> String {
        match path.strip_prefix(self.workspace()) {
            Ok(rel) if rel.as_os_str().is_empty() => ".".to_string(),
            Ok(rel) => rel.display().to_string(),
            Err(_) => path.display().to_string(),
        }
    }

    /// Resolves `path` (relative paths against the workspace, `~` against
    /// `$HOME`) to a canonical path inside one of the roots, or refuses it.
    pub fn resolve(&self, path: &str) -> Result<PathBuf, ToolError> {
        if path.contains('\0') {
            return Err(ToolError::Refused(format!("path {path:?} contains a NUL byte")));
        }
        if path.trim().is_empty() {
            return Err(ToolError::InvalidArguments(
                "path is empty; give a file path relative to the workspace".to_string(),
            ));
        }
        let joined = self.workspace().join(expand_home(path));
        let resolved = match fs::canonicalize(&joined) {
            Ok(canonical) => canonical,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                self.resolve_missing(path, &joined)?
            }
            Err(e) => return Err(ToolError::io(format!("cannot resolve {path}"), e)),
        };
        if !self.contains(&resolved) {
            return Err(self.outside(path, &resolved));
        }
        if let Ok(meta) = fs::metadata(&resolved) {
            let kind = meta.file_type();
            let special = if kind.is_block_device() || kind.is_char_device() {
                Some("a device")
            } else if kind.is_fifo() {
                Some("a named pipe (fifo)")
            } else if kind.is_socket() {
                Some("a socket")
            } else {
                None
            };
            if let Some(what) = special {
                return Err(ToolError::Refused(format!(
                    "path {path} is {what}; file tools only open regular files and folders"
                )));
            }
        }
        // The deny rules on the path as it resolves now (the editor's file
        // tools over ACP open this path by name); local tools' opens are
        // judged again on what they open.
        self.rules.check(&resolved)?;
        Ok(resolved)
    }

    /// Resolves a path that does not exist (yet): canonicalize the deepest
    /// existing ancestor, check it, and re-attach the missing tail.
    fn resolve_missing(&self, path: &str, joined: &Path) -> Result<PathBuf, ToolError> {
        if fs::symlink_metadata(joined).is_ok() {
            return Err(ToolError::Refused(format!(
                "path {path} is a symlink whose target does not exist"
            )));
        }
        let mut tail: Vec<OsString> = Vec::new();
        let mut cursor = joined.to_path_buf();
        loop {
            if fs::symlink_metadata(&cursor).is_ok() {
                break;
            }
            match (cursor.file_name(), cursor.parent()) {
                (Some(name), Some(parent)) => {
                    tail.push(name.to_os_string());
                    cursor = parent.to_path_buf();
                }
                _ => {
                    // `..` as the last component, or the filesystem root: refuse below.
                    return Err(ToolError::Refused(format!(
                        "path {path} walks up with `..` through folders that do not exist"
                    )));
                }
            }
        }
        // A missing folder followed by `..` ends the name with `..`, which has no
        // file_name: the loop above refused it. A `..` elsewhere in the tail:
        let missing = joined.strip_prefix(&cursor).unwrap_or(joined);
        if missing.components().any(|c| matches!(c, Component::ParentDir)) {
            return Err(ToolError::Refused(format!(
                "path {path} uses `..` after a folder that does not exist"
            )));
        }
        let base = fs::canonicalize(&cursor).map_err(|_| {
            ToolError::Refused(format!(
                "path {path}: {} is a symlink whose target does not exist",
                cursor.display()
            ))
        })?;
        if !self.contains(&base) {
            return Err(self.outside(path, &base));
        }
        let meta = fs::metadata(&base).map_err(|e| ToolError::io(base.display().to_string(), e))?;
        if !meta.is_dir() {
            return Err(ToolError::Refused(format!(
                "path {path}: {} is not a folder",
                self.display(&base)
            )));
        }
        Ok(tail.iter().rev().fold(base, |acc, part| acc.join(part)))
    }

    /// The refusal for a path that resolved outside every root.
    fn outside(&self, path: &str, resolved: &Path) -> ToolError {
        let via = if Path::new(path) == resolved {
            String::new()
        } else {
            format!(" (resolves to {})", resolved.display())
        };
        let roots: Vec<String> = self.roots.iter().map(|r| r.display().to_string()).collect();
        ToolError::Refused(format!(
            "path {path}{via} is outside the workspace {} (allowed roots: {})",
            self.workspace().display(),
            roots.join(", ")
        ))
    }
}

/// `~` and `~/x` become `$HOME` and `$HOME/x`; anything else is unchanged.
fn expand_home(path: &str) -> PathBuf {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    match (path, home) {
        ("~", Some(home)) => home,
        (p, Some(home)) if p.starts_with("~/") => home.join(&p[2..]),
        (p, _) => PathBuf::from(p),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn setup() -> (tempfile::TempDir, tempfile::TempDir, Sandbox) {
        let ws = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        fs::create_dir(ws.path().join("src")).unwrap();
        fs::write(ws.path().join("src/main.rs"), "fn main() {}").unwrap();
        fs::write(outside.path().join("secret.txt"), "secret").unwrap();
        let sandbox = Sandbox::new(ws.path(), &[]);
        (ws, outside, sandbox)
    }

    fn refused(result: Result<PathBuf, ToolError>) -> String {
        match result {
            Err(ToolError::Refused(msg)) => msg,
            other => panic!("expected a refusal, got {other:?}"),
        }
    }

    #[test]
    fn relative_paths_resolve_against_the_workspace() {
        let (ws, _out, sb) = setup();
        let got = sb.resolve("src/main.rs").unwrap();
        assert_eq!(got, fs::canonicalize(ws.path().join("src/main.rs")).unwrap());
        assert_eq!(sb.display(&got), "src/main.rs");
    }

    #[test]
    fn dot_dot_escape_is_refused_and_names_the_roots() {
        let (ws, _out, sb) = setup();
        let msg = refused(sb.resolve("../../../../etc/passwd"));
        assert!(msg.contains("outside the workspace"), "{msg}");
        assert!(msg.contains(&sb.workspace().display().to_string()), "{msg}");
        assert!(msg.contains("allowed roots"), "{msg}");
        drop(ws);
    }

    #[test]
    fn absolute_path_elsewhere_is_refused() {
        let (_ws, out, sb) = setup();
        let target = out.path().join("secret.txt");
        let msg = refused(sb.resolve(target.to_str().unwrap()));
        assert!(msg.contains("outside the workspace"), "{msg}");
    }

    #[test]
    fn absolute_path_inside_an_allowed_dir_is_accepted() {
        let (ws, out, _sb) = setup();
        let sb = Sandbox::new(ws.path(), &[out.path().to_path_buf()]);
        let target = out.path().join("secret.txt");
        assert!(sb.resolve(target.to_str().unwrap()).is_ok());
    }

    #[test]
    fn symlinked_folder_pointing_out_is_refused() {
        let (ws, out, sb) = setup();
        symlink(out.path(), ws.path().join("escape")).unwrap();
        let msg = refused(sb.resolve("escape/secret.txt"));
        assert!(msg.contains("resolves to"), "{msg}");
        refused(sb.resolve("escape/new-file.txt"));
    }

    #[test]
    fn symlinked_file_pointing_out_is_refused() {
        let (ws, out, sb) = setup();
        symlink(out.path().join("secret.txt"), ws.path().join("link.txt")).unwrap();
        refused(sb.resolve("link.txt"));
    }

    #[test]
    fn dangling_symlink_is_refused() {
        let (ws, out, sb) = setup();
        symlink(out.path().join("nope.txt"), ws.path().join("dangling")).unwrap();
        refused(sb.resolve("dangling"));
    }

    #[test]
    fn nul_byte_is_refused() {
        let (_ws, _out, sb) = setup();
        let msg = refused(sb.resolve("src/ma\0in.rs"));
        assert!(msg.contains("NUL"), "{msg}");
    }

    #[test]
    fn fifo_is_refused() {
        let (ws, _out, sb) = setup();
        let fifo = ws.path().join("pipe");
        let status = std::process::Command::new("mkfifo").arg(&fifo).status().unwrap();
        assert!(status.success());
        let msg = refused(sb.resolve("pipe"));
        assert!(msg.contains("fifo"), "{msg}");
    }

    #[test]
    fn socket_is_refused() {
        let (ws, _out, sb) = setup();
        let _listener = std::os::unix::net::UnixListener::bind(ws.path().join("sock")).unwrap();
        let msg = refused(sb.resolve("sock"));
        assert!(msg.contains("socket"), "{msg}");
    }

    #[test]
    fn device_outside_is_refused() {
        let (_ws, _out, sb) = setup();
        refused(sb.resolve("/dev/null"));
    }

    #[test]
    fn missing_path_reattaches_its_tail_under_the_existing_ancestor() {
        let (ws, _out, sb) = setup();
        let got = sb.resolve("src/new/deeper/file.rs").unwrap();
        let expected = fs::canonicalize(ws.path()).unwrap().join("src/new/deeper/file.rs");
        assert_eq!(got, expected);
    }

    #[test]
    fn missing_path_with_dot_dot_in_its_tail_is_refused() {
        let (_ws, _out, sb) = setup();
        refused(sb.resolve("newdir/../../escape.txt"));
        refused(sb.resolve("newdir/.."));
    }

    #[test]
    fn dot_dot_that_stays_inside_is_accepted() {
        let (_ws, _out, sb) = setup();
        assert!(sb.resolve("src/../src/main.rs").is_ok());
    }
}
