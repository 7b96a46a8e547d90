//! The fault suite's tools: running the binary with its peak memory read
//! from the kernel, under `strace` fault injection, on a tiny tmpfs; the
//! checks every fault ends with (the session file has only whole lines, no
//! request broke the APIs' tool pairing); and the tally each test prints.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use ferroclaw_testkit::components::{self, Component};
use ferroclaw_testkit::{ScriptedServer, request_problem};

/// How long one run may take before the harness kills it (a guard against
/// a hang, not a timing assertion: a hang then fails the test).
const RUN_GUARD: Duration = Duration::from_secs(120);

/// What a run of the binary left: exit code (`-SIGNAL` when killed by one),
/// output, and the peak resident memory the kernel measured (`ru_maxrss`).
pub(super) struct Measured {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
    pub peak_rss_kib: u64,
}

impl Measured {
    /// The `--output-format json` result object, if stdout holds one.
    pub(super) fn json(&self) -> Option<serde_json::Value> {
        serde_json::from_str(self.stdout.trim()).ok()
    }

    /// Peak RSS in MiB, for messages.
    pub(super) fn peak_mib(&self) -> u64 {
        self.peak_rss_kib / 1024
    }
}

/// Runs `cmd` to its end and measures it. The child is reaped with `wait4`,
/// which returns its own `ru_maxrss` (the `VmHWM` it had when it exited),
/// so the peak is exact however briefly it lasted. `on_start` gets the pid
/// once the child runs (to kill it at a chosen moment).
#[allow(clippy::zombie_processes, reason = "reaped with wait4, which also gives its rusage")]
pub(super) fn run_measured(mut cmd: Command, on_start: impl FnOnce(u32)) -> Measured {
    cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("the binary starts");
    let pid = child.id();
    let pipe = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            let _ = r.read_to_end(&mut bytes);
            String::from_utf8_lossy(&bytes).into_owned()
        })
    };
    let stdout = pipe(Box::new(child.stdout.take().unwrap()));
    let stderr = pipe(Box::new(child.stderr.take().unwrap()));
    let (done, guard) = mpsc::channel::<()>();
    let watchdog = std::thread::spawn(move || {
        if guard.recv_timeout(RUN_GUARD) == Err(mpsc::RecvTimeoutError::Timeout) {
            // SAFETY: kill(2) on our own unreaped child: the pid is still ours.
            unsafe { libc::kill(pid as i32, libc::SIGKILL) };
            return true;
        }
        false
    });
    on_start(pid);
    let mut status = 0;
    // SAFETY: a zeroed rusage is valid; wait4 on our own child, which
    // `child` never waits for (it is dropped without a wait).
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let reaped = unsafe { libc::wait4(pid as i32, &raw mut status, 0, &raw mut usage) };
    assert_eq!(reaped, pid as i32, "wait4: {}", std::io::Error::last_os_error());
    let _ = done.send(());
    assert!(!watchdog.join().unwrap(), "the run did not end within {RUN_GUARD:?}");
    let code =
        if libc::WIFEXITED(status) { libc::WEXITSTATUS(status) } else { -libc::WTERMSIG(status) };
    Measured {
        code,
        stdout: stdout.join().unwrap(),
        stderr: stderr.join().unwrap(),
        peak_rss_kib: u64::try_from(usage.ru_maxrss).unwrap_or(0),
    }
}

/// Kills `pid` with SIGKILL (kill -9).
pub(super) fn kill_9(pid: u32) {
    // SAFETY: kill(2); the pid is our unreaped child.
    unsafe { libc::kill(pid as i32, libc::SIGKILL) };
}

/// Prints one line of the suite's tally straight to the test's stderr,
/// past the test harness's capture, so CI logs show what was tried and what
/// held even when every test passes.
pub(super) fn report(line: &str) {
    let _ = writeln!(std::io::stderr().lock(), "fault suite: {line}");
}

/// True when `strace` runs and may trace (scripts/test installs it):
/// without it the test fails; false only when the developer opted out
/// (`FERROCLAW_TEST_SKIP=strace`), and the cases that need it do not run.
#[track_caller]
pub(super) fn strace() -> bool {
    components::require(Component::Strace, components::strace()).is_some()
}

/// `cmd` run under `strace -f` with `args` (the `-e inject=...` and `-P`
/// filters), its trace thrown away: the program, arguments, environment
/// and folder of `cmd` are kept.
pub(super) fn under_strace(cmd: &Command, args: &[String]) -> Command {
    let mut traced = Command::new("strace");
    traced.args(["-f", "-qq", "-o", "/dev/null"]).args(args).arg("--").arg(cmd.get_program());
    traced.args(cmd.get_args());
    traced.env_clear();
    for (key, value) in cmd.get_envs() {
        if let Some(value) = value {
            traced.env(key, value);
        }
    }
    if let Some(dir) = cmd.get_current_dir() {
        traced.current_dir(dir);
    }
    traced
}

/// A tmpfs mounted on a folder for one test, unmounted when dropped.
pub(super) struct TinyDisk(PathBuf);

impl TinyDisk {
    /// Mounts a tmpfs of `size` (`mount -o size=`) on `dir`; `None`, after a
    /// loud skip line, where this process may not mount (not root, no
    /// CAP_SYS_ADMIN).
    pub(super) fn mount(dir: &Path, size: &str) -> Option<TinyDisk> {
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir)
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            report(
                "*** SKIPPED: cannot mount a tmpfs here (needs root); no full-disk case ran ***",
            );
        }
        ok.then(|| TinyDisk(dir.to_path_buf()))
    }

    /// Bytes still free for files.
    pub(super) fn free(&self) -> u64 {
        let path = std::ffi::CString::new(self.0.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a zeroed statvfs is valid; the path is NUL-terminated.
        let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
        assert_eq!(unsafe { libc::statvfs(path.as_ptr(), &raw mut st) }, 0);
        st.f_bavail * st.f_frsize
    }

    /// Fills the disk with `filler` until only about `leave` bytes are free.
    pub(super) fn fill_leaving(&self, filler: &Path, leave: u64) {
        let mut file = std::fs::OpenOptions::new().create(true).append(true).open(filler).unwrap();
        let page = [b'f'; 4096];
        while self.free() > leave + 4096 {
            if file.write_all(&page).is_err() {
                break;
            }
        }
    }
}

impl Drop for TinyDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

/// The lines of session file `path` that are not whole JSON lines: a torn
/// fragment or a bad line anywhere, or a last line without its newline.
pub(super) fn broken_lines(path: &Path) -> Vec<String> {
    let bytes = std::fs::read(path).unwrap_or_default();
    let mut broken = Vec::new();
    for (i, line) in bytes.split_inclusive(|b| *b == b'\n').enumerate() {
        let whole = line.ends_with(b"\n")
            && serde_json::from_slice::<serde_json::Value>(line).is_ok_and(|v| v.is_object());
        if !whole {
            let shown = String::from_utf8_lossy(&line[..line.len().min(120)]).into_owned();
            broken.push(format!("line {}: {shown}", i + 1));
        }
    }
    broken
}

/// Every request the server got that the real APIs would refuse for its
/// tool pairing, with why.
pub(super) fn inconsistent_requests(server: &ScriptedServer) -> Vec<String> {
    server.requests().iter().filter_map(request_problem).collect()
}

/// A deterministic choice from the suite's seed (`FERROCLAW_FAULT_SEED`,
/// default fixed), so a failing point is replayed by its seed.
pub(super) fn seed() -> u64 {
    std::env::var("FERROCLAW_FAULT_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(30)
}

/// A count from the environment (`FERROCLAW_FAULT_<NAME>`), else `default`:
/// a longer run than CI's (`FERROCLAW_FAULT_KILLS=200`).
pub(super) fn count(name: &str, default: usize) -> usize {
    std::env::var(format!("FERROCLAW_FAULT_{name}"))
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}
