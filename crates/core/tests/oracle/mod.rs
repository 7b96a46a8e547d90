//! The exec oracle's parts: the fixture folder, the spelling grammar, the
//! strace recorder, and the gate's model of what a command runs and writes.

mod grammar;
mod strace;

pub(crate) use grammar::generate;
pub(crate) use strace::observe;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use ferroclaw_tools::effects::{self, Kind};
use ferroclaw_tools::shell::{self, basename};

/// A program of the oracle with argument lists to try, some of which write
/// or run (so the gate must ask for them or report what they do).
pub(crate) struct Program {
    pub name: &'static str,
    pub args: &'static [&'static str],
}

/// The template folder every spelling starts from: a few files, a folder,
/// an archive and a git repository with one commit.
pub(crate) struct Fixture {
    template: tempfile::TempDir,
}

/// One throw-away copy of the fixture: `ws` (the workspace and working
/// folder), `home` (HOME) and `tmp` (TMPDIR) beside it.
pub(crate) struct Workspace {
    dir: tempfile::TempDir,
    root: PathBuf,
}

impl Workspace {
    /// The workspace folder (canonical, as strace reports paths).
    pub(crate) fn root(&self) -> &Path {
        &self.root
    }
    fn home(&self) -> PathBuf {
        self.dir.path().join("home")
    }
    fn tmp(&self) -> PathBuf {
        self.dir.path().join("tmp")
    }
}

impl Fixture {
    pub(crate) fn new() -> Fixture {
        let template = tempfile::tempdir().unwrap();
        let ws = template.path();
        for (name, text) in [
            ("a.txt", "alpha\nbeta\n"),
            ("b.txt", "alpha\ngamma\n"),
            ("names.txt", "b\na\nc\na\n"),
            ("data.csv", "x,2\ny,1\n"),
            ("README.md", "# readme\n"),
            ("src/lib.rs", "fn main() {}\n"),
        ] {
            std::fs::create_dir_all(ws.join(name).parent().unwrap()).unwrap();
            std::fs::write(ws.join(name), text).unwrap();
        }
        std::fs::create_dir_all(ws.join("emptydir")).unwrap();
        let run = |args: &[&str]| {
            let ok = std::process::Command::new(args[0])
                .args(&args[1..])
                .current_dir(ws)
                .env("HOME", ws)
                .env("GIT_CONFIG_NOSYSTEM", "1")
                .output()
                .is_ok_and(|o| o.status.success());
            assert!(ok, "fixture: {args:?} failed");
        };
        run(&["tar", "-cf", "archive.tar", "a.txt", "b.txt"]);
        run(&["git", "init", "-q"]);
        run(&["git", "-c", "user.name=t", "-c", "user.email=t@t", "add", "-A"]);
        run(&["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "one"]);
        Fixture { template }
    }

    /// The oracle's programs that are installed here.
    pub(crate) fn programs(&self) -> Vec<&'static Program> {
        let path = std::env::var("PATH").unwrap_or_default();
        grammar::PROGRAMS
            .iter()
            .filter(|p| path.split(':').any(|dir| Path::new(dir).join(p.name).is_file()))
            .collect()
    }

    /// A fresh copy of the template.
    pub(crate) fn copy(&self) -> Workspace {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("ws");
        copy_tree(self.template.path(), &root);
        std::fs::create_dir_all(dir.path().join("home")).unwrap();
        std::fs::create_dir_all(dir.path().join("tmp")).unwrap();
        let root = root.canonicalize().unwrap();
        Workspace { dir, root }
    }
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap().flatten() {
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// What a command did under strace.
#[derive(Debug, Default)]
pub(crate) struct Seen {
    /// Programs executed (as named to execve), after the outer bash.
    pub execs: Vec<String>,
    /// Files written, created, renamed, linked or removed.
    pub writes: Vec<PathBuf>,
}

/// What the gate's model says a command runs and writes.
#[derive(Debug, Default)]
pub(crate) struct Model {
    programs: BTreeSet<String>,
    writes: Vec<PathBuf>,
    /// An interpreter runs code the gate does not read: whatever it runs
    /// or writes is out of the gate's reach (and said so in the README).
    anything: bool,
}

/// The gate's model of `command` run in `ws`.
pub(crate) fn reported(command: &str, ws: &Path) -> Model {
    let script = shell::parse(command);
    let mut model = Model::default();
    let table = effects::table();
    for cmd in &script.commands {
        let layers = effects::layers(&cmd.words);
        for &start in &layers.starts {
            let Some(word) = cmd.words.get(start) else { continue };
            let name = basename(&word.text).to_string();
            if table.get(&name).is_some_and(|e| e.kind == Kind::Interpreter) {
                model.anything = true;
            }
            model.programs.insert(name);
        }
        let fx = effects::of(&cmd.words);
        model.programs.extend(fx.helpers.iter().cloned());
        for w in fx.writes.iter().chain(&fx.operand_writes) {
            model.writes.push(ws.join(&w.path));
        }
        model.writes.extend(fx.state.iter().map(|s| ws.join(s)));
    }
    for r in script.file_writes() {
        model.writes.push(ws.join(&r.target.text));
    }
    model.writes = model.writes.iter().map(|p| normalize(p)).collect();
    model
}

fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            std::path::Component::ParentDir => {
                out.pop();
            }
            std::path::Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// A command that did something the gate did not report.
pub(crate) struct Miss {
    command: String,
    what: Vec<String>,
    programs: Vec<String>,
}

impl Miss {
    /// The miss as a red-team case that fails until the gate asks for it.
    pub(crate) fn as_case(&self) -> String {
        let rules: Vec<String> = self.programs.iter().map(|p| format!("\"bash({p}:*)\"")).collect();
        format!(
            "# exec oracle miss: {}\n[[case]]\nname = {:?}\ncategory = \"exec oracle\"\nkind = \"permission\"\n\
             allow = [{}]\ntool = \"bash\"\ninput = {{ command = {:?} }}\nexpect = \"ask\"\n",
            self.what.join("; "),
            format!("exec oracle: '{}'", self.command),
            rules.join(", "),
            self.command
        )
    }
}

impl Model {
    /// What `seen` did beyond the model, as a miss.
    pub(crate) fn misses(&self, seen: &Seen, command: &str, ws: &Path) -> Option<Miss> {
        if self.anything {
            return None;
        }
        let mut what = Vec::new();
        for exec in &seen.execs {
            if !self.programs.contains(basename(exec)) {
                what.push(format!("ran {exec}"));
            }
        }
        for write in &seen.writes {
            if !self.covers(write) {
                let shown = write.strip_prefix(ws).unwrap_or(write);
                what.push(format!("wrote {}", shown.display()));
            }
        }
        (!what.is_empty()).then(|| Miss {
            command: command.to_string(),
            what,
            programs: self.programs.iter().cloned().collect(),
        })
    }

    /// True when `path` is a reported write, inside one (a folder), or a
    /// sibling named after one (`a.txt.gz`, `a.txt~`).
    fn covers(&self, path: &Path) -> bool {
        self.writes.iter().any(|w| {
            path.starts_with(w)
                || (path.parent() == w.parent()
                    && path.file_name().zip(w.file_name()).is_some_and(|(p, w)| {
                        let (p, w) = (p.to_string_lossy(), w.to_string_lossy());
                        p.starts_with(&format!("{w}.")) || p == format!("{w}~")
                    }))
        })
    }
}
