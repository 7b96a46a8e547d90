//! A throw-away PostgreSQL server for tests: `initdb` in a temporary folder,
//! `pg_ctl start` on a free loopback port, `pg_ctl stop` when dropped.
//!
//! The binaries are looked up on `PATH`, then in `FERROCLAW_PG_BIN`, then
//! where Debian installs them (`/usr/lib/postgresql/<version>/bin`).
//! `scripts/test` installs PostgreSQL; without it [`PgCluster::start`] fails
//! the test, unless the developer opted out (`FERROCLAW_TEST_SKIP=postgres`,
//! see [`crate::components`]): then it returns `None` and the test returns.
//!
//! PostgreSQL refuses to run as root: as root, the cluster's folder is given
//! to the `postgres` user (else `nobody`) and the server runs as that user.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::components::{Component, require};

/// A running server; stopped (and its folder removed) on drop.
pub struct PgCluster {
    bin: PathBuf,
    data: PathBuf,
    run_as: Option<(u32, u32)>,
    port: u16,
    _dir: tempfile::TempDir,
}

impl PgCluster {
    /// Starts a fresh cluster, or `None` (after a notice) when the developer
    /// opted out of PostgreSQL with `FERROCLAW_TEST_SKIP`. Panics when no
    /// PostgreSQL binaries are found, or they are but the server does not start.
    #[track_caller]
    pub fn start() -> Option<PgCluster> {
        let found = find_bin().ok_or_else(|| {
            "no PostgreSQL binaries (initdb, pg_ctl) on PATH, in FERROCLAW_PG_BIN \
             or in /usr/lib/postgresql/*/bin"
                .to_string()
        });
        let bin = require(Component::Postgres, found)?;
        let dir = tempfile::Builder::new().prefix("ferroclaw-pg-").tempdir().expect("tempdir");
        let data = dir.path().join("data");
        let run_as = if is_root() { Some(unprivileged_user()) } else { None };
        if let Some((uid, gid)) = run_as {
            chown(dir.path(), uid, gid);
        }
        let pg = PgCluster { bin, data, run_as, port: 0, _dir: dir };
        let status = pg
            .command("initdb")
            .args(["-A", "trust", "-U", "postgres", "-E", "UTF8", "--no-sync", "-D"])
            .arg(&pg.data)
            .stdout(Stdio::null())
            .status()
            .expect("run initdb");
        assert!(status.success(), "initdb failed");
        // A few tries: another test may take the free port first.
        let mut pg = pg;
        for _ in 0..5 {
            pg.port = free_port();
            if pg.pg_ctl_start() {
                return Some(pg);
            }
        }
        panic!("PostgreSQL did not start; see {}", pg.data.join("server.log").display());
    }

    /// `pg_ctl start` on this cluster's port; true when it started.
    fn pg_ctl_start(&self) -> bool {
        let options = format!(
            "-p {} -c listen_addresses=127.0.0.1 -c unix_socket_directories='{}' -F -c max_connections=200",
            self.port,
            self.data.display()
        );
        let log = self.data.join("server.log");
        self.command("pg_ctl")
            .args(["-w", "-t", "60", "-D"])
            .arg(&self.data)
            .arg("-l")
            .arg(&log)
            .args(["-o", &options, "start"])
            .stdout(Stdio::null())
            .status()
            .expect("run pg_ctl")
            .success()
    }

    /// Stops the server as an administrator would (`pg_ctl stop -m fast`:
    /// open transactions are rolled back, connections closed), keeping its
    /// data: the database is away until [`start_again`](Self::start_again).
    pub fn stop(&self) {
        let status = self
            .command("pg_ctl")
            .args(["-w", "-m", "fast", "-D"])
            .arg(&self.data)
            .arg("stop")
            .stdout(Stdio::null())
            .status()
            .expect("run pg_ctl");
        assert!(status.success(), "pg_ctl stop failed");
    }

    /// Starts a [`stop`](Self::stop)ped server again, on the same port, with its data.
    pub fn start_again(&self) {
        assert!(
            self.pg_ctl_start(),
            "PostgreSQL did not start again; see {}",
            self.data.join("server.log").display()
        );
    }

    /// One cluster for the tests running now in this process: started by the
    /// first, stopped when the last lets go (a later test starts another).
    /// Give each test its own [`database`](Self::database).
    #[track_caller]
    pub fn shared() -> Option<std::sync::Arc<PgCluster>> {
        use std::sync::{Arc, Mutex, PoisonError, Weak};
        static SHARED: Mutex<Weak<PgCluster>> = Mutex::new(Weak::new());
        let mut slot = SHARED.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(running) = slot.upgrade() {
            return Some(running);
        }
        let started = Arc::new(PgCluster::start()?);
        *slot = Arc::downgrade(&started);
        Some(started)
    }

    /// The port it listens on (127.0.0.1).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// A connection URL for database `postgres` as user `postgres`.
    pub fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    /// A URL for database `name` over the Unix socket in the data folder
    /// (the form a local install uses: `?host=/var/run/postgresql`).
    pub fn socket_url(&self, name: &str) -> String {
        format!(
            "postgres://postgres@/{name}?host={}&port={}&sslmode=disable",
            self.data.display(),
            self.port
        )
    }

    /// Creates database `name` and returns its URL (one per test keeps tests apart).
    pub fn database(&self, name: &str) -> String {
        let status = self
            .command("createdb")
            .args(["-h", "127.0.0.1", "-p", &self.port.to_string(), "-U", "postgres", name])
            .status()
            .expect("run createdb");
        assert!(status.success(), "createdb {name} failed");
        format!("postgres://postgres@127.0.0.1:{}/{name}", self.port)
    }

    fn command(&self, program: &str) -> Command {
        let path = self.bin.join(program);
        match self.run_as {
            Some((uid, gid)) => {
                let mut c = Command::new("setpriv");
                c.arg(format!("--reuid={uid}"))
                    .arg(format!("--regid={gid}"))
                    .arg("--clear-groups")
                    .arg(path);
                c
            }
            None => Command::new(path),
        }
    }
}

impl Drop for PgCluster {
    fn drop(&mut self) {
        let _ = self
            .command("pg_ctl")
            .args(["-m", "immediate", "-D"])
            .arg(&self.data)
            .arg("stop")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

/// The folder holding `initdb` and `pg_ctl`.
fn find_bin() -> Option<PathBuf> {
    let has = |dir: &Path| dir.join("initdb").is_file() && dir.join("pg_ctl").is_file();
    let mut candidates: Vec<PathBuf> = Vec::new();
    if let Some(dir) = std::env::var_os("FERROCLAW_PG_BIN") {
        candidates.push(dir.into());
    }
    if let Some(path) = std::env::var_os("PATH") {
        candidates.extend(std::env::split_paths(&path));
    }
    // Debian and Ubuntu: /usr/lib/postgresql/<version>/bin, newest first.
    if let Ok(entries) = std::fs::read_dir("/usr/lib/postgresql") {
        let mut versions: Vec<PathBuf> = entries.flatten().map(|e| e.path().join("bin")).collect();
        versions.sort();
        versions.reverse();
        candidates.extend(versions);
    }
    // A symlink on PATH (as /usr/local/bin/initdb) is followed to the real
    // folder, where createdb and the server live too.
    candidates.into_iter().find(|d| has(d)).map(|d| {
        std::fs::canonicalize(d.join("initdb"))
            .ok()
            .and_then(|p| p.parent().map(Path::to_path_buf))
            .filter(|real| has(real))
            .unwrap_or(d)
    })
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
        .unwrap_or(false)
}

/// The `postgres` user's ids, else `nobody`'s.
fn unprivileged_user() -> (u32, u32) {
    for name in ["postgres", "nobody"] {
        let ids = |flag: &str| -> Option<u32> {
            let out = Command::new("id").args([flag, name]).output().ok()?;
            String::from_utf8_lossy(&out.stdout).trim().parse().ok()
        };
        if let (Some(uid), Some(gid)) = (ids("-u"), ids("-g")) {
            return (uid, gid);
        }
    }
    (65534, 65534)
}

fn chown(path: &Path, uid: u32, gid: u32) {
    let status = Command::new("chown")
        .arg("-R")
        .arg(format!("{uid}:{gid}"))
        .arg(path)
        .status()
        .expect("run chown");
    assert!(status.success(), "chown {} failed", path.display());
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}
