//! Landlock write confinement for the commands `bash` runs: on Linux kernels
//! with Landlock (5.13+), a command may read anything but write only beneath
//! the workspace, the allowed folders, the temp folders and `/dev`. Where the
//! kernel lacks Landlock, commands run unconfined and only the deny list
//! applies (`ferroclaw doctor` says which).
//!
//! The ruleset is built in the parent (opening folders allocates); the child
//! only calls `prctl` and `landlock_restrict_self` between fork and exec,
//! which are async-signal-safe.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};

// Access rights (linux/landlock.h).
const ACCESS_FS_WRITE_FILE: u64 = 1 << 1;
const ACCESS_FS_REMOVE_DIR: u64 = 1 << 4;
const ACCESS_FS_REMOVE_FILE: u64 = 1 << 5;
const ACCESS_FS_MAKE_CHAR: u64 = 1 << 6;
const ACCESS_FS_MAKE_DIR: u64 = 1 << 7;
const ACCESS_FS_MAKE_REG: u64 = 1 << 8;
const ACCESS_FS_MAKE_SOCK: u64 = 1 << 9;
const ACCESS_FS_MAKE_FIFO: u64 = 1 << 10;
const ACCESS_FS_MAKE_BLOCK: u64 = 1 << 11;
const ACCESS_FS_MAKE_SYM: u64 = 1 << 12;
const ACCESS_FS_REFER: u64 = 1 << 13;
const ACCESS_FS_TRUNCATE: u64 = 1 << 14;
const CREATE_RULESET_VERSION: u32 = 1;
const RULE_PATH_BENEATH: u32 = 1;

#[repr(C)]
struct RulesetAttr {
    handled_access_fs: u64,
}

#[repr(C, packed)]
struct PathBeneathAttr {
    allowed_access: u64,
    parent_fd: i32,
}

/// The kernel's Landlock ABI version, or `None` when Landlock is unavailable.
pub fn abi_version() -> Option<i32> {
    // SAFETY: with a null attribute and the VERSION flag the call only
    // reports the ABI; it touches no memory.
    let v = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<RulesetAttr>(),
            0usize,
            CREATE_RULESET_VERSION,
        )
    };
    (v > 0).then_some(v as i32)
}

/// The write rights handled for an ABI version.
fn write_access(abi: i32) -> u64 {
    let mut access = ACCESS_FS_WRITE_FILE
        | ACCESS_FS_REMOVE_DIR
        | ACCESS_FS_REMOVE_FILE
        | ACCESS_FS_MAKE_CHAR
        | ACCESS_FS_MAKE_DIR
        | ACCESS_FS_MAKE_REG
        | ACCESS_FS_MAKE_SOCK
        | ACCESS_FS_MAKE_FIFO
        | ACCESS_FS_MAKE_BLOCK
        | ACCESS_FS_MAKE_SYM;
    if abi >= 2 {
        access |= ACCESS_FS_REFER;
    }
    if abi >= 3 {
        access |= ACCESS_FS_TRUNCATE;
    }
    access
}

/// A prepared ruleset: writes allowed only beneath its roots.
#[derive(Debug)]
pub struct WriteConfinement {
    ruleset: OwnedFd,
    roots: Vec<PathBuf>,
}

impl WriteConfinement {
    /// Folders every command may write besides the workspace: temp and `/dev`.
    pub fn standard_roots() -> Vec<PathBuf> {
        let mut roots = vec![
            std::env::temp_dir(),
            PathBuf::from("/tmp"),
            PathBuf::from("/var/tmp"),
            PathBuf::from("/dev"),
        ];
        roots.dedup();
        roots
    }

    /// A ruleset allowing writes beneath `roots` (missing ones are skipped);
    /// `Ok(None)` when the kernel has no Landlock.
    pub fn prepare(roots: &[PathBuf]) -> std::io::Result<Option<Self>> {
        let Some(abi) = abi_version() else {
            return Ok(None);
        };
        let access = write_access(abi);
        let attr = RulesetAttr { handled_access_fs: access };
        // SAFETY: attr is a valid, initialised struct of the size passed.
        let fd = unsafe {
            libc::syscall(
                libc::SYS_landlock_create_ruleset,
                &attr as *const RulesetAttr,
                std::mem::size_of::<RulesetAttr>(),
                0u32,
            )
        };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: the syscall returned a new file descriptor that we own.
        let ruleset = unsafe { OwnedFd::from_raw_fd(fd as i32) };
        let mut added = Vec::new();
        for root in roots {
            let Ok(dir) = std::fs::File::open(root) else {
                continue;
            };
            let rule = PathBeneathAttr { allowed_access: access, parent_fd: dir.as_raw_fd() };
            // SAFETY: rule is valid for the call; both fds are open.
            let r = unsafe {
                libc::syscall(
                    libc::SYS_landlock_add_rule,
                    ruleset.as_raw_fd(),
                    RULE_PATH_BENEATH,
                    &rule as *const PathBeneathAttr,
                    0u32,
                )
            };
            if r < 0 {
                return Err(std::io::Error::other(format!(
                    "landlock rule for {}: {}",
                    root.display(),
                    std::io::Error::last_os_error()
                )));
            }
            added.push(root.clone());
        }
        Ok(Some(Self { ruleset, roots: added }))
    }

    /// The folders writes are allowed beneath.
    pub fn roots(&self) -> &[PathBuf] {
        &self.roots
    }

    /// Confines the calling process. Only for the child between fork and
    /// exec (`Command::pre_exec`): no allocation, async-signal-safe calls only.
    pub fn apply_in_child(&self) -> std::io::Result<()> {
        // SAFETY: plain syscalls on integers and an fd we keep open.
        unsafe {
            if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            if libc::syscall(libc::SYS_landlock_restrict_self, self.ruleset.as_raw_fd(), 0u32) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
        }
        Ok(())
    }
}

/// The roots for a workspace: it, the allowed folders, configured extras and
/// the standard ones.
pub fn roots_for(workspace: &Path, allowed_dirs: &[PathBuf], extra: &[PathBuf]) -> Vec<PathBuf> {
    let mut roots = vec![workspace.to_path_buf()];
    roots.extend(allowed_dirs.iter().cloned());
    roots.extend(extra.iter().cloned());
    roots.extend(WriteConfinement::standard_roots());
    roots
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::CommandExt;

    #[test]
    fn a_confined_command_writes_in_the_workspace_but_not_outside() {
        if abi_version().is_none() {
            eprintln!("SKIP: this kernel has no Landlock");
            return;
        }
        let ws = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let confinement = WriteConfinement::prepare(&[ws.path().to_path_buf()]).unwrap().unwrap();
        let target = outside.path().join("escape.txt");
        let script = format!(
            "echo in > {0}/in.txt; echo out > {1}; cat /etc/hostname >/dev/null",
            ws.path().display(),
            target.display()
        );
        let mut cmd = std::process::Command::new("bash");
        cmd.arg("-c").arg(script);
        // SAFETY: apply_in_child only makes async-signal-safe syscalls.
        unsafe {
            cmd.pre_exec(move || confinement.apply_in_child());
        }
        let out = cmd.output().unwrap();
        assert!(ws.path().join("in.txt").exists(), "writes inside the workspace work");
        assert!(!target.exists(), "writes outside are refused");
        assert!(String::from_utf8_lossy(&out.stderr).contains("Permission denied"), "{out:?}");
    }
}
