//! What a deletion would wipe: a recursive `rm`, a `find ... -delete` or a
//! script's `rmtree` of `/`, the home folder, the workspace, a system folder
//! or a folder holding one of them. These verdicts depend on where the
//! command runs ([`Here`]): `~`, `$HOME` and relative paths are resolved
//! against the home folder and the current folder before they are judged.

use std::path::{Path, PathBuf};

use super::{dangerous_command, normalize};
use crate::shell;

/// `find` tests that narrow what it matches (so `find . -name x -delete` is work, not a wipe).
const FIND_FILTERS: &[&str] = &[
    "-name",
    "-iname",
    "-path",
    "-ipath",
    "-wholename",
    "-regex",
    "-iregex",
    "-type",
    "-newer",
    "-mtime",
    "-mmin",
    "-atime",
    "-ctime",
    "-empty",
    "-size",
    "-user",
    "-perm",
    "-links",
];

/// Where a command runs.
pub(super) struct Here<'a> {
    pub(super) workspace: &'a Path,
    pub(super) cwd: &'a Path,
    pub(super) home: Option<&'a Path>,
}

/// What a path means for a deletion: `None` for ordinary folders.
fn precious(path: &Path, here: &Here) -> Option<&'static str> {
    if path == Path::new("/") {
        return Some("the root folder");
    }
    if let Some(home) = here.home.map(normalize) {
        if home == path {
            return Some("your home folder");
        }
        if home.starts_with(path) {
            return Some("a folder holding your home folder");
        }
    }
    if here.workspace.starts_with(path) {
        return Some(if path == here.workspace {
            "the workspace"
        } else {
            "a folder holding the workspace"
        });
    }
    if path.components().count() == 2 {
        return Some("a system folder");
    }
    None
}

/// A recursive `rm` of `/`, the home folder, the workspace, a system folder
/// or a folder above one of them.
pub(super) fn check_rm(args: &[String], here: &Here) -> Option<String> {
    if args.iter().any(|a| a == "--no-preserve-root") {
        return Some("rm --no-preserve-root is never needed".to_string());
    }
    let mut recursive = false;
    let mut targets = Vec::new();
    let mut after_dashes = false;
    for arg in args {
        if !after_dashes && arg == "--" {
            after_dashes = true;
        } else if !after_dashes && arg.starts_with("--") {
            recursive |= arg == "--recursive";
        } else if !after_dashes && arg.starts_with('-') && arg.len() > 1 {
            recursive |= is_short_flag_with(arg, 'r') || is_short_flag_with(arg, 'R');
        } else {
            targets.push(arg.as_str());
        }
    }
    if !recursive {
        return None;
    }
    targets.into_iter().find_map(|target| {
        if here.home.is_none() && ["~", "$HOME", "${HOME}"].iter().any(|p| target.starts_with(p)) {
            return Some(format!("rm -r {target} would delete in your home folder"));
        }
        let (dir, star) = match target.strip_suffix("/*").or_else(|| (target == "*").then_some("."))
        {
            Some("") => ("/", true),
            Some(dir) => (dir, true),
            None => (target, false),
        };
        let path = normalize(&expand(dir, here.home, here.cwd));
        let what = precious(&path, here)?;
        let contents = if star { "everything in " } else { "" };
        Some(format!("rm -r {target} would delete {contents}{what}"))
    })
}

/// `find START... -delete` (or `-exec rm`) over /, home, or a folder holding them.
pub(super) fn check_find(args: &[String], here: &Here) -> Option<String> {
    let deletes = args.iter().enumerate().any(|(i, a)| {
        a == "-delete"
            || (matches!(a.as_str(), "-exec" | "-execdir" | "-ok" | "-okdir")
                && args
                    .get(i + 1)
                    .is_some_and(|p| matches!(shell::basename(p), "rm" | "shred" | "unlink")))
    });
    if !deletes {
        return None;
    }
    let starts: Vec<&String> =
        args.iter().take_while(|a| !a.starts_with('-') && *a != "(" && *a != "!").collect();
    let filtered = args.iter().any(|a| FIND_FILTERS.contains(&a.as_str()));
    let dot = String::from(".");
    let starts = if starts.is_empty() { vec![&dot] } else { starts };
    starts.into_iter().find_map(|start| {
        let path = normalize(&expand(start, here.home, here.cwd));
        let what = precious(&path, here)?;
        if what == "the workspace" && filtered {
            return None;
        }
        Some(format!("find {start} deleting would wipe {what}"))
    })
}

/// Python, Perl or Ruby code that deletes a precious tree or forks forever.
pub(super) fn check_script_code(code: &str, here: &Here) -> Option<String> {
    let squeezed: String = code.chars().filter(|c| !c.is_whitespace()).collect();
    if squeezed.contains("forkwhilefork") || squeezed.contains("whileTrue:os.fork()") {
        return Some("a fork bomb would exhaust the machine's processes".to_string());
    }
    for call in ["rmtree(", "remove_tree(", "rm_rf(", "rm_r("] {
        for (at, _) in squeezed.match_indices(call) {
            let arg = call_arguments(&squeezed[at + call.len()..]);
            let precious_arg = [
                "'/'",
                "\"/\"",
                "expanduser",
                "Path.home",
                "'~",
                "\"~",
                "HOME",
                "getenv",
                "'/home",
                "\"/home",
                "'/root",
                "\"/root",
                "os.sep",
                "Dir.home",
                "'/usr",
                "\"/usr",
            ]
            .iter()
            .any(|p| arg.contains(p));
            let above = arg.trim_matches(['\'', '"']).starts_with("..");
            if precious_arg || above || here.workspace == Path::new(arg.trim_matches(['\'', '"'])) {
                return Some(format!("{call}{arg}) would delete the root or home folder"));
            }
        }
    }
    for (at, _) in code.match_indices("os.system(") {
        let rest = &code[at + "os.system(".len()..];
        let quote = rest.chars().next().filter(|c| *c == '\'' || *c == '"')?;
        if let Some(end) = rest[1..].find(quote)
            && let Some(reason) = dangerous_command(&rest[1..=end], here.workspace, here.cwd)
        {
            return Some(reason);
        }
    }
    None
}

/// The text up to the parenthesis that closes a call opened just before `rest`.
fn call_arguments(rest: &str) -> &str {
    let mut depth = 0usize;
    for (i, c) in rest.char_indices() {
        match c {
            '(' => depth += 1,
            ')' if depth == 0 => return &rest[..i],
            ')' => depth -= 1,
            _ => {}
        }
    }
    rest
}

/// True for a short-option cluster such as `-rf` that holds `flag`.
pub(super) fn is_short_flag_with(arg: &str, flag: char) -> bool {
    arg.starts_with('-') && !arg.starts_with("--") && arg[1..].contains(flag)
}

/// `~`, `$HOME` and `${HOME}` expanded; relative paths joined to `cwd`.
pub(super) fn expand(word: &str, home: Option<&Path>, cwd: &Path) -> PathBuf {
    for prefix in ["~", "$HOME", "${HOME}"] {
        if let (Some(rest), Some(home)) = (word.strip_prefix(prefix), home)
            && (rest.is_empty() || rest.starts_with('/'))
        {
            return home.join(rest.trim_start_matches('/'));
        }
    }
    cwd.join(word)
}
