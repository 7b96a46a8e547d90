//! Runs a command under `strace -f` and reads back what it executed and
//! wrote.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::{Seen, Workspace};

/// The system calls that run programs or change files.
const TRACED: &str = "trace=execve,execveat,openat,open,creat,rename,renameat,renameat2,unlink,\
unlinkat,mkdir,mkdirat,symlink,symlinkat,link,linkat,truncate";

/// Runs `command` with `bash -c` in `ws` under strace and returns what it did.
pub(crate) fn observe(ws: &Workspace, command: &str) -> Seen {
    let log = ws.dir.path().join("strace.log");
    let status = Command::new("timeout")
        .args(["-k", "2", "10", "strace", "-f", "-qq", "-y", "--seccomp-bpf", "-e", TRACED, "-o"])
        .arg(&log)
        .args(["bash", "-c", command])
        .current_dir(ws.root())
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("HOME", ws.home())
        .env("TMPDIR", ws.tmp())
        .env("LANG", "C")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    assert!(status.is_ok(), "timeout/strace could not start");
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    let mut seen = read_log(&text, ws.root());
    let (home, tmp) = (ws.home(), ws.tmp());
    seen.writes.retain(|p| {
        !p.starts_with(&home)
            && !p.starts_with(&tmp)
            && !p.starts_with("/dev")
            && !p.starts_with("/proc")
            && p != &log
    });
    seen
}

/// Reads strace's log: joins `<unfinished ...>` and `resumed>` halves, then
/// takes each successful call.
fn read_log(text: &str, cwd: &Path) -> Seen {
    let mut seen = Seen::default();
    let mut pending: HashMap<String, String> = HashMap::new();
    let mut first_exec = true;
    for line in text.lines() {
        let Some((pid, rest)) = line.split_once(' ') else { continue };
        let rest = rest.trim_start();
        let full = if let Some(head) = rest.strip_suffix(" <unfinished ...>") {
            pending.insert(pid.to_string(), head.to_string());
            continue;
        } else if rest.starts_with("<... ") {
            let Some((_, tail)) = rest.split_once(" resumed>") else { continue };
            match pending.remove(pid) {
                Some(head) => format!("{head}{tail}"),
                None => continue,
            }
        } else {
            rest.to_string()
        };
        let Some((call, args)) = full.split_once('(') else { continue };
        let Some((args, result)) = args.rsplit_once(") = ") else { continue };
        if result.starts_with("-1") || result.starts_with('?') {
            continue;
        }
        let tokens = tokens(args);
        let path = |i: usize| -> Option<PathBuf> {
            let t = tokens.get(i)?;
            match t {
                Token::Str(s) => Some(cwd.join(s)),
                Token::Fd(_) => None,
            }
        };
        // A path argument after a directory descriptor (`AT_FDCWD</d>`).
        let at = |fd: usize, name: usize| -> Option<PathBuf> {
            let Token::Str(s) = tokens.get(name)? else { return None };
            match tokens.get(fd)? {
                Token::Fd(dir) => Some(Path::new(dir).join(s)),
                Token::Str(_) => Some(cwd.join(s)),
            }
        };
        match call {
            "execve" | "execveat" => {
                let Some(Token::Str(p)) = tokens.iter().find(|t| matches!(t, Token::Str(_))) else {
                    continue;
                };
                if std::mem::take(&mut first_exec) {
                    continue; // the outer bash
                }
                seen.execs.push(p.clone());
            }
            "openat" | "open" | "creat" => {
                let writes = call == "creat"
                    || ["O_WRONLY", "O_RDWR", "O_CREAT", "O_TRUNC"]
                        .iter()
                        .any(|f| args.contains(f));
                if writes {
                    // The result names the file opened: `= 3</ws/out.txt>`.
                    let resolved = result
                        .split_once('<')
                        .and_then(|(_, p)| p.strip_suffix('>'))
                        .map(PathBuf::from);
                    let named = if call == "openat" { at(0, 1) } else { path(0) };
                    if let Some(p) = resolved.or(named) {
                        seen.writes.push(p);
                    }
                }
            }
            "unlink" | "mkdir" | "truncate" => seen.writes.extend(path(0)),
            "unlinkat" | "mkdirat" => seen.writes.extend(at(0, 1)),
            "rename" => seen.writes.extend(path(0).into_iter().chain(path(1))),
            "renameat" | "renameat2" => seen.writes.extend(at(0, 1).into_iter().chain(at(2, 3))),
            "link" => seen.writes.extend(path(1)),
            "linkat" => seen.writes.extend(at(2, 3)),
            "symlink" => seen.writes.extend(path(1)),
            "symlinkat" => seen.writes.extend(at(1, 2)),
            _ => {}
        }
    }
    seen
}

/// A quoted string or a descriptor with its path (`3</ws/src>`).
enum Token {
    Str(String),
    Fd(String),
}

/// The strings and decorated descriptors among a call's arguments, in order.
fn tokens(args: &str) -> Vec<Token> {
    let mut out = Vec::new();
    let chars: Vec<char> = args.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        match chars[i] {
            '"' => {
                let mut s = String::new();
                i += 1;
                while i < chars.len() && chars[i] != '"' {
                    if chars[i] == '\\' && i + 1 < chars.len() {
                        i += 1;
                    }
                    s.push(chars[i]);
                    i += 1;
                }
                out.push(Token::Str(s));
                i += 1;
            }
            '<' => {
                let start = i + 1;
                while i < chars.len() && chars[i] != '>' {
                    i += 1;
                }
                out.push(Token::Fd(chars[start..i.min(chars.len())].iter().collect()));
                i += 1;
            }
            '[' => {
                // argv and other arrays: skip to the matching `]`.
                let mut depth = 0;
                while i < chars.len() {
                    match chars[i] {
                        '[' => depth += 1,
                        ']' => {
                            depth -= 1;
                            if depth == 0 {
                                break;
                            }
                        }
                        '"' => {
                            i += 1;
                            while i < chars.len() && chars[i] != '"' {
                                if chars[i] == '\\' {
                                    i += 1;
                                }
                                i += 1;
                            }
                        }
                        _ => {}
                    }
                    i += 1;
                }
                i += 1;
            }
            _ => i += 1,
        }
    }
    out
}
