//! Read-only project files for the commands ferroclaw starts (`bash`,
//! background jobs, MCP stdio servers). Landlock only grants, so inside a
//! writable workspace it cannot keep a command from writing `.git/config`,
//! `.git/hooks/*`, `.mcp.json` or `.agent/config.toml`. Here the child, before
//! exec, enters a user and mount namespace of its own and bind-mounts each of
//! those that exists onto itself read-only; their folders (`.git`, `.agent`,
//! `.claude`) are bound onto themselves too, so they cannot be renamed away
//! and rebuilt. Landlock, applied right after, forbids the command to unmount
//! anything.
//!
//! Repositories nested in the project (up to four folders deep) get the
//! same: their `.git/config`, `hooks`, `commondir`, ... are read-only, and
//! the folders down to them cannot be renamed or removed by a command.
//!
//! What this does not cover: a protected file that does not exist when the
//! command starts can be created by it (project trust notices a new
//! `.mcp.json` or `.agent/config.toml`: its hash changes; a new
//! `.git/commondir` is refused by the permission gate by name and by
//! ferroclaw's own git, but not by the user's git). The whole of `.git`
//! cannot be made read-only: git creates lock files beside `index` and
//! `HEAD` for every commit. Where unprivileged
//! user namespaces are off, nothing is mounted and the permission gate is
//! the only guard (`ferroclaw doctor` says which).
//!
//! Everything is prepared in the parent (paths as C strings, the uid/gid maps,
//! the mount flags to keep); the child makes only async-signal-safe calls and
//! never fails the spawn: a step that fails is skipped.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// Files (or folders) beneath a project root that commands may not change,
/// each judged protected by [`crate::protected_file`].
pub const PROTECTED_PATHS: &[&str] = &[
    ".git/config",
    ".git/hooks",
    ".git/commondir",
    ".git/config.worktree",
    ".git/info/attributes",
    ".agent/worktrees/index.json",
    ".mcp.json",
    ".agent/config.toml",
    ".agent/mcp.json",
    ".claude/settings.json",
    ".claude/settings.local.json",
    ".ferroclaw/config.toml",
    ".ferroclaw/trust.json",
];

/// Inside each `.git/worktrees/NAME/` and `.git/modules/NAME/` (submodules,
/// nested ones included), the files that say where git's config is or that
/// git runs: read-only like [`PROTECTED_PATHS`]. The rest (`HEAD`, `index`,
/// `logs`, `objects`) stays writable for a `git commit` there.
pub const PROTECTED_IN_GIT_DIRS: &[&str] =
    &["config", "config.worktree", "commondir", "gitdir", "hooks", "info/attributes"];

/// One bind mount the child makes.
#[derive(Debug)]
struct Bind {
    path: CString,
    /// `Some(flags)`: remount read-only, keeping these locked flags
    /// (`nosuid`, `nodev`, `noexec` of the mount it lies on).
    read_only: Option<libc::c_ulong>,
}

/// The bind mounts for a set of project roots, prepared in the parent.
#[derive(Debug)]
pub struct ProtectedMounts {
    binds: Vec<Bind>,
    uid_map: Vec<u8>,
    gid_map: Vec<u8>,
    /// Also enter a network namespace of its own (`CLONE_NEWNET`).
    no_network: bool,
}

impl ProtectedMounts {
    /// The mounts that make the protected files under `roots` read-only;
    /// `None` when none exists or this system has no unprivileged user
    /// namespaces (see [`available`]).
    pub fn prepare(roots: &[PathBuf]) -> Option<Self> {
        Self::prepare_except(roots, &[], false)
    }

    /// As [`Self::prepare`], leaving the paths in `except` (relative to a
    /// root; a folder covers what is beneath it) writable, and with
    /// `no_network` in a network namespace of its own; `None` only when
    /// there is nothing to do or namespaces are unavailable.
    pub fn prepare_except(roots: &[PathBuf], except: &[&str], no_network: bool) -> Option<Self> {
        let paths: Vec<(PathBuf, bool)> = existing_protected(roots)
            .into_iter()
            .filter(|(path, _)| {
                !roots.iter().any(|root| except.iter().any(|e| path.starts_with(root.join(e))))
            })
            .collect();
        if (paths.iter().all(|(_, read_only)| !read_only) && !no_network) || available().is_err() {
            return None;
        }
        let binds = paths
            .into_iter()
            .filter_map(|(path, read_only)| {
                let flags = read_only.then(|| locked_flags(&path));
                Some(Bind {
                    path: CString::new(path.as_os_str().as_bytes()).ok()?,
                    read_only: flags,
                })
            })
            .collect();
        // SAFETY: getuid/getgid cannot fail.
        let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
        Some(Self {
            binds,
            uid_map: format!("{uid} {uid} 1\n").into_bytes(),
            gid_map: format!("{gid} {gid} 1\n").into_bytes(),
            no_network,
        })
    }

    /// No mounts, only namespaces: a user namespace and, with `no_network`,
    /// a network namespace of its own. `None` where namespaces are unavailable.
    pub fn namespace_only(no_network: bool) -> Option<Self> {
        Self::prepare_except(&[], &[], no_network)
    }

    /// The paths made read-only (for `doctor` and tests).
    pub fn read_only_paths(&self) -> Vec<PathBuf> {
        self.binds
            .iter()
            .filter(|b| b.read_only.is_some())
            .map(|b| PathBuf::from(std::ffi::OsStr::from_bytes(b.path.as_bytes())))
            .collect()
    }

    /// Enters a new user and mount namespace and makes the mounts. Only for
    /// the child between fork and exec: async-signal-safe calls only, no
    /// allocation; a step that fails is skipped, never reported.
    pub fn apply_in_child(&self) {
        // SAFETY: plain syscalls on prepared, NUL-terminated buffers.
        unsafe {
            let net = if self.no_network { libc::CLONE_NEWNET } else { 0 };
            if libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNS | net) != 0 {
                return;
            }
            enter_maps(&self.uid_map, &self.gid_map);
            let null = std::ptr::null::<libc::c_char>();
            // Keep our mounts to ourselves (a new user namespace makes shared
            // mounts slaves already; this says it outright).
            libc::mount(
                null,
                c"/".as_ptr(),
                null,
                libc::MS_REC | libc::MS_PRIVATE,
                std::ptr::null(),
            );
            for bind in &self.binds {
                let p = bind.path.as_ptr();
                if libc::mount(p, p, null, libc::MS_BIND, std::ptr::null()) != 0 {
                    continue;
                }
                if let Some(flags) = bind.read_only {
                    let flags = libc::MS_REMOUNT | libc::MS_BIND | libc::MS_RDONLY | flags;
                    libc::mount(null, p, null, flags, std::ptr::null());
                }
            }
            // A working folder inside a folder just mounted over would still
            // be the old one: walk to it again by name.
            let mut cwd = [0u8; 4096];
            if libc::syscall(libc::SYS_getcwd, cwd.as_mut_ptr(), cwd.len()) > 0 {
                libc::chdir(cwd.as_ptr().cast());
            }
        }
    }
}

/// Writes the uid/gid maps of a fresh user namespace: the same ids inside as
/// outside, so files keep their owners and `git` its safe-directory check.
///
/// # Safety
/// Only for the child between fork and exec, right after `unshare`.
unsafe fn enter_maps(uid_map: &[u8], gid_map: &[u8]) {
    // SAFETY: open/write/close on static paths and prepared buffers.
    unsafe {
        write_file(c"/proc/self/setgroups", b"deny");
        write_file(c"/proc/self/uid_map", uid_map);
        write_file(c"/proc/self/gid_map", gid_map);
    }
}

/// `open`, `write`, `close`: async-signal-safe.
///
/// # Safety
/// `path` is NUL-terminated; `bytes` is valid.
unsafe fn write_file(path: &std::ffi::CStr, bytes: &[u8]) -> bool {
    // SAFETY: see above.
    unsafe {
        let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return false;
        }
        let n = libc::write(fd, bytes.as_ptr().cast(), bytes.len());
        libc::close(fd);
        n == bytes.len() as isize
    }
}

/// The protected paths that exist under `roots`, folders first: `(path,
/// read_only)`. Every folder between a root and a protected path is bound
/// onto itself still writable (`read_only = false`), parents before
/// children, so that renaming or deleting it to rebuild it fails (`EBUSY`).
fn existing_protected(roots: &[PathBuf]) -> Vec<(PathBuf, bool)> {
    let mut files = Vec::new();
    for root in roots {
        let mut names: Vec<String> = PROTECTED_PATHS.iter().map(ToString::to_string).collect();
        // Claude Code reads any `.claude/settings*.json`.
        if let Ok(entries) = std::fs::read_dir(root.join(".claude")) {
            for entry in entries.flatten() {
                let name = entry.file_name().to_string_lossy().into_owned();
                if name.starts_with("settings") && name.ends_with(".json") {
                    names.push(format!(".claude/{name}"));
                }
            }
        }
        let mut git_dirs = linked_git_dirs(&root.join(".git"));
        // Repositories inside the project (a vendored checkout, a clone in
        // a subfolder): git runs what their config and hooks name as much
        // as the project's own.
        for repo in nested_repositories_cached(root) {
            let git = repo.join(".git");
            if std::fs::symlink_metadata(&git).is_ok_and(|m| m.is_file()) {
                // A worktree's or submodule's pointer to its repository.
                let Ok(rel) = git.strip_prefix(root) else { continue };
                names.push(rel.display().to_string());
                continue;
            }
            git_dirs.extend(linked_git_dirs(&git));
            git_dirs.push(git);
        }
        for dir in git_dirs {
            let Ok(rel) = dir.strip_prefix(root) else { continue };
            for name in PROTECTED_IN_GIT_DIRS {
                names.push(format!("{}/{name}", rel.display()));
            }
        }
        names.sort();
        names.dedup();
        // A `.git` file (a worktree's pointer to its repository) is protected itself.
        if std::fs::symlink_metadata(root.join(".git")).is_ok_and(|m| m.is_file()) {
            names.push(".git".to_string());
        }
        for name in names {
            let path = root.join(&name);
            if std::fs::symlink_metadata(&path).is_ok() {
                files.push((path, true));
            }
        }
    }
    let mut folders: Vec<PathBuf> = Vec::new();
    for (file, _) in &files {
        let Some(root) = roots.iter().find(|r| file.starts_with(r)) else { continue };
        let mut dir = file.parent();
        while let Some(d) = dir.filter(|d| d.starts_with(root) && *d != root.as_path()) {
            if std::fs::symlink_metadata(d).is_ok_and(|m| m.is_dir())
                && !folders.contains(&d.to_path_buf())
            {
                folders.push(d.to_path_buf());
            }
            dir = d.parent();
        }
    }
    folders.sort_by_key(|f| f.components().count());
    let mut all: Vec<(PathBuf, bool)> = folders.into_iter().map(|f| (f, false)).collect();
    all.extend(files);
    all
}

/// How deep below a project root nested repositories are looked for
/// (`a/b/c/.git` is found), and how many folders are read at most: the
/// search runs before every command, so a huge tree is searched in part.
const NESTED_DEPTH: usize = 4;
const NESTED_FOLDERS: usize = 5_000;

/// How long a search for nested repositories is used again: the search
/// reads up to [`NESTED_FOLDERS`] folders (about 45 ms in a project with a
/// 10 GB Rust `target/`), and a project's repositories seldom change
/// between two commands. A repository found stale is skipped (each path is
/// checked before it is bound).
const NESTED_REUSE: std::time::Duration = std::time::Duration::from_secs(10);

/// [`nested_repositories`], searched again at most every [`NESTED_REUSE`].
fn nested_repositories_cached(root: &Path) -> Vec<PathBuf> {
    type Found = std::collections::HashMap<PathBuf, (std::time::Instant, Vec<PathBuf>)>;
    static FOUND: OnceLock<std::sync::Mutex<Found>> = OnceLock::new();
    let found = FOUND.get_or_init(Default::default);
    let now = std::time::Instant::now();
    if let Some((at, repos)) =
        found.lock().unwrap_or_else(std::sync::PoisonError::into_inner).get(root)
        && now.duration_since(*at) < NESTED_REUSE
    {
        return repos.clone();
    }
    let repos = nested_repositories(root);
    found
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .insert(root.to_path_buf(), (now, repos.clone()));
    repos
}

/// Folders under `root` (not `root` itself) that hold a `.git` (a folder,
/// or the file of a worktree or submodule), breadth first, within
/// [`NESTED_DEPTH`] and [`NESTED_FOLDERS`]; no link is followed and no
/// `.git` folder entered.
fn nested_repositories(root: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut queue = std::collections::VecDeque::from([(root.to_path_buf(), 0)]);
    let mut read = 0;
    while let Some((dir, depth)) = queue.pop_front() {
        read += 1;
        if read > NESTED_FOLDERS {
            break;
        }
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        for entry in entries.flatten() {
            let Ok(kind) = entry.file_type() else { continue };
            if entry.file_name() == ".git" {
                if dir != root {
                    found.push(dir.clone());
                }
            } else if kind.is_dir() && depth < NESTED_DEPTH {
                queue.push_back((entry.path(), depth + 1));
            }
        }
    }
    found
}

/// The git folders inside `git_dir` that git reads config from:
/// `worktrees/NAME` and `modules/NAME` (nested `modules` too, a few levels).
fn linked_git_dirs(git_dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut stack = vec![(git_dir.to_path_buf(), 0)];
    while let Some((dir, depth)) = stack.pop() {
        if depth > 4 {
            continue;
        }
        for kind in ["worktrees", "modules"] {
            let Ok(entries) = std::fs::read_dir(dir.join(kind)) else { continue };
            for entry in entries.flatten() {
                if entry.file_type().is_ok_and(|t| t.is_dir()) {
                    found.push(entry.path());
                    if kind == "modules" {
                        stack.push((entry.path(), depth + 1));
                    }
                }
            }
        }
    }
    found
}

/// The flags a read-only remount of `path` must keep: a mount inherited
/// from a more privileged namespace has them locked (`nosuid`, `nodev`,
/// `noexec`), and a remount that drops them is refused.
fn locked_flags(path: &Path) -> libc::c_ulong {
    let Ok(c) = CString::new(path.as_os_str().as_bytes()) else { return 0 };
    // SAFETY: c is NUL-terminated; st is written by the call.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statvfs(c.as_ptr(), &raw mut st) } != 0 {
        return 0;
    }
    let mut flags = 0;
    for (st_flag, ms_flag) in [
        (libc::ST_NOSUID, libc::MS_NOSUID),
        (libc::ST_NODEV, libc::MS_NODEV),
        (libc::ST_NOEXEC, libc::MS_NOEXEC),
    ] {
        if st.f_flag & st_flag != 0 {
            flags |= ms_flag;
        }
    }
    flags
}

/// Whether commands can get read-only protected files here: `Err` says why
/// not (unprivileged user namespaces off, or mounts refused in them).
/// Probed once per process, in a forked child.
pub fn available() -> Result<(), String> {
    static PROBE: OnceLock<Result<(), String>> = OnceLock::new();
    PROBE.get_or_init(probe).clone()
}

fn probe() -> Result<(), String> {
    // SAFETY: getuid/getgid cannot fail.
    let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
    let uid_map = format!("{uid} {uid} 1\n").into_bytes();
    let gid_map = format!("{gid} {gid} 1\n").into_bytes();
    // SAFETY: the child makes only async-signal-safe calls and leaves with _exit.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(format!("cannot fork: {}", std::io::Error::last_os_error()));
    }
    if pid == 0 {
        // SAFETY: async-signal-safe calls only, then _exit.
        unsafe {
            if libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNS) != 0 {
                libc::_exit(1);
            }
            enter_maps(&uid_map, &gid_map);
            let null = std::ptr::null::<libc::c_char>();
            let flags = libc::MS_REC | libc::MS_PRIVATE;
            if libc::mount(null, c"/".as_ptr(), null, flags, std::ptr::null()) != 0 {
                libc::_exit(2);
            }
            libc::_exit(0);
        }
    }
    let mut status = 0;
    // SAFETY: pid is our child.
    unsafe { libc::waitpid(pid, &raw mut status, 0) };
    match libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status)) {
        Some(0) => Ok(()),
        Some(1) => Err("unprivileged user namespaces are not available (kernel.unprivileged_userns_clone, user.max_user_namespaces, an AppArmor or seccomp policy)".into()),
        Some(2) => Err("mounts are refused in a new user namespace".into()),
        _ => Err("the namespace probe failed".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_path_made_read_only_is_one_the_permission_gate_protects() {
        for rel in PROTECTED_PATHS {
            let path = Path::new("/ws").join(rel);
            assert!(crate::protected_file(&path).is_some(), "{rel} is not protected_file");
        }
    }

    #[test]
    fn only_existing_files_are_bound_and_their_folders_first() {
        let ws = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(ws.path().join(".git/hooks")).unwrap();
        std::fs::write(ws.path().join(".git/config"), "").unwrap();
        std::fs::create_dir_all(ws.path().join(".claude")).unwrap();
        std::fs::write(ws.path().join(".claude/settings.team.json"), "").unwrap();
        let got = existing_protected(&[ws.path().to_path_buf()]);
        let rel: Vec<(String, bool)> = got
            .iter()
            .map(|(p, ro)| (p.strip_prefix(ws.path()).unwrap().display().to_string(), *ro))
            .collect();
        assert_eq!(
            rel,
            [
                (".claude".into(), false),
                (".git".into(), false),
                (".claude/settings.team.json".into(), true),
                (".git/config".into(), true),
                (".git/hooks".into(), true),
            ]
        );
    }

    #[test]
    fn a_repository_nested_in_the_project_has_its_git_config_and_hooks_bound_too() {
        let ws = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(ws.path().join("vendor/lib/.git/hooks")).unwrap();
        std::fs::write(ws.path().join("vendor/lib/.git/config"), "").unwrap();
        std::fs::create_dir_all(ws.path().join("sub")).unwrap();
        std::fs::write(ws.path().join("sub/.git"), "gitdir: ../.git/modules/sub\n").unwrap();
        // Deeper than the search goes, and inside a `.git` folder: not looked at.
        std::fs::create_dir_all(ws.path().join("a/b/c/d/e/.git/hooks")).unwrap();
        std::fs::create_dir_all(ws.path().join("vendor/lib/.git/x/.git/hooks")).unwrap();
        let got = existing_protected(&[ws.path().to_path_buf()]);
        let read_only: Vec<String> = got
            .iter()
            .filter(|(_, ro)| *ro)
            .map(|(p, _)| p.strip_prefix(ws.path()).unwrap().display().to_string())
            .collect();
        assert_eq!(read_only, ["sub/.git", "vendor/lib/.git/config", "vendor/lib/.git/hooks"]);
        for path in &read_only {
            assert!(crate::protected_file(&ws.path().join(path)).is_some(), "{path}");
        }
    }
}
