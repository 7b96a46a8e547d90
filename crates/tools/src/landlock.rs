//! Landlock confinement for the commands ferroclaw starts (`bash`,
//! background jobs, MCP stdio servers): on Linux kernels with Landlock
//! (5.13+), a command may read anything but write only beneath the
//! workspace, the allowed folders, configured extras, the fixed temp folders
//! (`/tmp`, `/var/tmp`) and a short list of harmless devices (`/dev/null`,
//! `/dev/zero`, `/dev/full`, `/dev/random`, `/dev/urandom`, `/dev/tty`,
//! `/dev/ptmx`, `/dev/pts/`); never a disk. Where the kernel's Landlock ABI is
//! 4 or more, TCP `connect` and `bind` can also be limited to configured
//! ports. Where the kernel lacks Landlock, commands run unconfined and only
//! the deny list applies (`ferroclaw doctor` says which).
//!
//! For ferroclaw's own git ([`crate::own_git`]) the same ruleset also limits
//! reads ([`WriteConfinement::prepare_limited`]: the repository, the temp
//! folders and the system folders, so `~/.ssh` cannot be opened) and the
//! command gets a network namespace of its own
//! ([`WriteConfinement::without_network`]).
//!
//! Inside the writable folders, the protected project files (`.git/config`,
//! `.git/hooks`, `.mcp.json`, ...) are made read-only by bind mounts in a
//! namespace of the command's own ([`crate::protected_mounts`]).
//!
//! The ruleset and the mounts are prepared in the parent (opening folders
//! allocates); the child only makes async-signal-safe calls between fork and
//! exec (`prctl`, `unshare`, `mount`, `landlock_restrict_self`).

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use crate::protected_mounts::ProtectedMounts;

// Access rights (linux/landlock.h).
const ACCESS_FS_EXECUTE: u64 = 1 << 0;
const ACCESS_FS_READ_FILE: u64 = 1 << 2;
const ACCESS_FS_READ_DIR: u64 = 1 << 3;
/// The rights a read-only root grants where reads are limited.
const READ_RIGHTS: u64 = ACCESS_FS_EXECUTE | ACCESS_FS_READ_FILE | ACCESS_FS_READ_DIR;
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
/// The rights that apply to a file (not a folder) in a rule.
const FILE_RIGHTS: u64 =
    ACCESS_FS_WRITE_FILE | ACCESS_FS_TRUNCATE | ACCESS_FS_READ_FILE | ACCESS_FS_EXECUTE;
const ACCESS_NET_BIND_TCP: u64 = 1 << 0;
const ACCESS_NET_CONNECT_TCP: u64 = 1 << 1;
const CREATE_RULESET_VERSION: u32 = 1;
const RULE_PATH_BENEATH: u32 = 1;
const RULE_NET_PORT: u32 = 2;

/// The temp folders every command may write: fixed, never taken from
/// `TMPDIR` (which a caller could point anywhere). Commands get `TMPDIR=/tmp`.
pub const TEMP_DIRS: &[&str] = &["/tmp", "/var/tmp"];

/// The devices a command may write: the harmless ones shells and tools use.
/// `/dev/stdout`, `/dev/stderr` and `/dev/fd/N` reach descriptors the command
/// already holds (pipes, files it may write) and need no rule.
pub const WRITABLE_DEVICES: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
    "/dev/tty",
    "/dev/ptmx",
    "/dev/pts",
];

#[repr(C)]
struct RulesetAttr {
    handled_access_fs: u64,
    handled_access_net: u64,
}

#[repr(C, packed)]
struct PathBeneathAttr {
    allowed_access: u64,
    parent_fd: i32,
}

#[repr(C)]
struct NetPortAttr {
    allowed_access: u64,
    port: u64,
}

/// TCP ports commands may use; `None` leaves that direction unrestricted.
/// Enforced only where the kernel's Landlock ABI is 4 or more.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TcpPolicy {
    /// Ports `connect` may reach (config `[sandbox] tcp_connect`).
    pub connect: Option<Vec<u16>>,
    /// Ports `bind` may take (config `[sandbox] tcp_bind`).
    pub bind: Option<Vec<u16>>,
}

impl TcpPolicy {
    /// The network rights this policy restricts.
    fn handled(&self) -> u64 {
        let mut handled = 0;
        if self.connect.is_some() {
            handled |= ACCESS_NET_CONNECT_TCP;
        }
        if self.bind.is_some() {
            handled |= ACCESS_NET_BIND_TCP;
        }
        handled
    }
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
    /// Whether TCP rules are enforced (ABI 4+ and a restriction configured).
    tcp_enforced: bool,
    /// Read-only bind mounts over the protected project files, when the
    /// system allows them (see [`crate::protected_mounts`]).
    mounts: Option<ProtectedMounts>,
    /// Whether the command gets a network namespace of its own (no
    /// interface but an unconfigured loopback: nothing can be reached).
    no_network: bool,
    /// Whether reads are limited to the roots given to [`Self::prepare_limited`].
    reads_limited: bool,
}

impl WriteConfinement {
    /// Folders every command may write besides the workspace: the fixed temp
    /// folders and the harmless devices.
    pub fn standard_roots() -> Vec<PathBuf> {
        TEMP_DIRS.iter().chain(WRITABLE_DEVICES).map(PathBuf::from).collect()
    }

    /// A ruleset allowing writes beneath `roots` (missing ones are skipped)
    /// and TCP as `tcp` says; `Ok(None)` when the kernel has no Landlock.
    pub fn prepare(roots: &[PathBuf], tcp: &TcpPolicy) -> std::io::Result<Option<Self>> {
        Self::prepare_limited(roots, None, tcp)
    }

    /// As [`Self::prepare`]; with `reads`, the command may also read (and
    /// execute) only beneath `reads` and the write roots (missing ones are
    /// skipped): a file elsewhere (`~/.ssh/id_rsa`) cannot be opened.
    pub fn prepare_limited(
        roots: &[PathBuf],
        reads: Option<&[PathBuf]>,
        tcp: &TcpPolicy,
    ) -> std::io::Result<Option<Self>> {
        let Some(abi) = abi_version() else {
            return Ok(None);
        };
        let write = write_access(abi);
        let access = if reads.is_some() { write | READ_RIGHTS } else { write };
        let handled_net = if abi >= 4 { tcp.handled() } else { 0 };
        if handled_net == 0 && tcp.handled() != 0 {
            tracing::warn!(
                "[sandbox] tcp_connect/tcp_bind need Landlock ABI 4 (Linux 6.7+); this kernel has ABI {abi}, so TCP is not restricted"
            );
        }
        let attr = RulesetAttr { handled_access_fs: access, handled_access_net: handled_net };
        // The first field alone is ABI 1's struct; pass the net field only when used.
        let size = if handled_net == 0 { size_of::<u64>() } else { size_of::<RulesetAttr>() };
        // SAFETY: attr is a valid, initialised struct at least `size` bytes long.
        let fd = unsafe {
            libc::syscall(libc::SYS_landlock_create_ruleset, &raw const attr, size, 0u32)
        };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: the syscall returned a new file descriptor that we own.
        let ruleset = unsafe { OwnedFd::from_raw_fd(fd as i32) };
        let mut added = Vec::new();
        for root in roots {
            let Some((fd, is_dir)) = open_path(root) else {
                continue;
            };
            let allowed = if is_dir { access } else { access & FILE_RIGHTS };
            let rule = PathBeneathAttr { allowed_access: allowed, parent_fd: fd.as_raw_fd() };
            add_rule(&ruleset, RULE_PATH_BENEATH, &raw const rule as *const u8).map_err(|e| {
                std::io::Error::other(format!("landlock rule for {}: {e}", root.display()))
            })?;
            added.push(root.clone());
        }
        for root in reads.unwrap_or_default() {
            let Some((fd, is_dir)) = open_path(root) else {
                continue;
            };
            let allowed =
                if is_dir { READ_RIGHTS } else { ACCESS_FS_READ_FILE | ACCESS_FS_EXECUTE };
            let rule = PathBeneathAttr { allowed_access: allowed, parent_fd: fd.as_raw_fd() };
            add_rule(&ruleset, RULE_PATH_BENEATH, &raw const rule as *const u8).map_err(|e| {
                std::io::Error::other(format!("landlock rule for {}: {e}", root.display()))
            })?;
        }
        let ports = [(ACCESS_NET_CONNECT_TCP, &tcp.connect), (ACCESS_NET_BIND_TCP, &tcp.bind)];
        for (right, list) in ports {
            let Some(list) = list.as_ref().filter(|_| handled_net & right != 0) else {
                continue;
            };
            for port in list {
                let rule = NetPortAttr { allowed_access: right, port: u64::from(*port) };
                add_rule(&ruleset, RULE_NET_PORT, &raw const rule as *const u8).map_err(|e| {
                    std::io::Error::other(format!("landlock rule for port {port}: {e}"))
                })?;
            }
        }
        Ok(Some(Self {
            ruleset,
            roots: added,
            tcp_enforced: handled_net != 0,
            mounts: None,
            no_network: false,
            reads_limited: reads.is_some(),
        }))
    }

    /// The folders (and devices) writes are allowed beneath.
    pub fn roots(&self) -> &[PathBuf] {
        &self.roots
    }

    /// Whether TCP connect/bind restrictions are in force.
    pub fn tcp_enforced(&self) -> bool {
        self.tcp_enforced
    }

    /// Also makes the protected files beneath `project_roots` (`.git/config`,
    /// `.git/hooks`, `.mcp.json`, ...) read-only for the command, where user
    /// namespaces allow it.
    pub fn protect_files(self, project_roots: &[PathBuf]) -> Self {
        self.protect_files_except(project_roots, &[])
    }

    /// As [`Self::protect_files`], leaving writable the protected paths in
    /// `except` (relative to a project root): ferroclaw's own `git worktree
    /// add` must write `.git/worktrees/`.
    pub fn protect_files_except(mut self, project_roots: &[PathBuf], except: &[&str]) -> Self {
        self.mounts = ProtectedMounts::prepare_except(project_roots, except, self.no_network)
            .or_else(|| self.mounts.take());
        self
    }

    /// Also gives the command a network namespace of its own, where user
    /// namespaces allow it: it can reach no host, not even this one's
    /// loopback services. Call before [`Self::protect_files`].
    pub fn without_network(mut self) -> Self {
        self.no_network = true;
        if self.mounts.is_none() {
            self.mounts = ProtectedMounts::namespace_only(true);
        }
        self
    }

    /// Whether reads are limited to named folders.
    pub fn reads_limited(&self) -> bool {
        self.reads_limited
    }

    /// Confines the calling process. Only for the child between fork and
    /// exec (`Command::pre_exec`): no allocation, async-signal-safe calls only.
    /// The read-only mounts come first: once Landlock applies, the command
    /// can no longer mount or unmount anything.
    pub fn apply_in_child(&self) -> std::io::Result<()> {
        // SAFETY: plain syscalls on integers and an fd we keep open.
        unsafe {
            if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            if let Some(mounts) = &self.mounts {
                mounts.apply_in_child();
            }
            if libc::syscall(libc::SYS_landlock_restrict_self, self.ruleset.as_raw_fd(), 0u32) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
        }
        Ok(())
    }
}

/// Opens `path` as `O_PATH` (devices are not opened for real, so `/dev/tty`
/// without a terminal is fine); whether it is a folder. `None` when missing.
fn open_path(path: &Path) -> Option<(OwnedFd, bool)> {
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).ok()?;
    // SAFETY: c is NUL-terminated; the result is checked.
    let fd = unsafe { libc::open(c.as_ptr(), libc::O_PATH | libc::O_CLOEXEC) };
    if fd < 0 {
        return None;
    }
    // SAFETY: a new descriptor we own.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let is_dir = std::fs::metadata(path).ok()?.is_dir();
    Some((fd, is_dir))
}

/// `landlock_add_rule` of one rule of `kind`.
fn add_rule(ruleset: &OwnedFd, kind: u32, rule: *const u8) -> std::io::Result<()> {
    // SAFETY: rule points at a valid attribute struct of `kind`; fds are open.
    let r = unsafe {
        libc::syscall(libc::SYS_landlock_add_rule, ruleset.as_raw_fd(), kind, rule, 0u32)
    };
    if r < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
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
        let confinement =
            WriteConfinement::prepare(&[ws.path().to_path_buf()], &TcpPolicy::default())
                .unwrap()
                .unwrap();
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

    /// Runs `script` in bash confined to writes beneath `ws` (plus the
    /// standard roots); returns its stderr and stdout.
    fn confined(ws: &Path, script: &str) -> String {
        confined_tcp(ws, script, &TcpPolicy::default())
    }

    fn confined_tcp(ws: &Path, script: &str, tcp: &TcpPolicy) -> String {
        let roots = roots_for(ws, &[], &[]);
        let confinement = WriteConfinement::prepare(&roots, tcp).unwrap().unwrap();
        let mut cmd = std::process::Command::new("bash");
        cmd.arg("-c").arg(script).current_dir(ws);
        // SAFETY: apply_in_child only makes async-signal-safe syscalls.
        unsafe {
            cmd.pre_exec(move || confinement.apply_in_child());
        }
        let out = cmd.output().unwrap();
        String::from_utf8_lossy(&out.stderr).into_owned() + &String::from_utf8_lossy(&out.stdout)
    }

    #[test]
    fn redteam_confine_dev_writes_only_to_harmless_devices() {
        if abi_version().is_none() {
            eprintln!("SKIP: this kernel has no Landlock");
            return;
        }
        let ws = tempfile::tempdir().unwrap();
        let name = format!("ferroclaw-test-{}", std::process::id());
        let shm = Path::new("/dev/shm").join(&name);
        let out = confined(
            ws.path(),
            &format!(
                "echo a > /dev/null && echo b 2>/dev/null >/dev/stdout && echo ok-null; \
                 head -c 4 /dev/urandom > {ws}/r && echo ok-urandom; \
                 echo x > {shm} || echo refused-shm",
                ws = ws.path().display(),
                shm = shm.display()
            ),
        );
        assert!(out.contains("ok-null"), "/dev/null and /dev/stdout work: {out}");
        assert!(out.contains("ok-urandom"), "{out}");
        assert!(out.contains("refused-shm"), "{out}");
        assert!(!shm.exists(), "a write to /dev/shm went through");
    }

    #[test]
    fn redteam_confine_temp_roots_are_fixed_not_taken_from_tmpdir() {
        let roots = WriteConfinement::standard_roots();
        for root in &roots {
            assert!(
                TEMP_DIRS.contains(&root.to_str().unwrap())
                    || WRITABLE_DEVICES.contains(&root.to_str().unwrap()),
                "{root:?}"
            );
        }
        assert!(!roots.iter().any(|r| r == Path::new("/dev")), "not all of /dev");
    }

    #[test]
    fn tcp_connect_is_limited_to_configured_ports_where_the_abi_allows() {
        if abi_version().is_none_or(|abi| abi < 4) {
            eprintln!("SKIP: this kernel's Landlock has no network rules");
            return;
        }
        let ws = tempfile::tempdir().unwrap();
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let script =
            format!("(exec 3<>/dev/tcp/127.0.0.1/{port}) && echo connected || echo refused");
        let none = TcpPolicy { connect: Some(vec![]), bind: None };
        assert!(confined_tcp(ws.path(), &script, &none).contains("refused"));
        let this_port = TcpPolicy { connect: Some(vec![port]), bind: None };
        assert!(confined_tcp(ws.path(), &script, &this_port).contains("connected"));
        assert!(confined(ws.path(), &script).contains("connected"), "unrestricted by default");
    }
}
