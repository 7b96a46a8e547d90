//! The `bash` deny list: catastrophic commands refused before they run.
//!
//! This is a seatbelt against a model's worst mistakes, not a sandbox: the
//! permission gate in `ferroclaw-core` decides what may run at all, and a
//! determined command can always hide itself (`base64 -d | sh`). The check
//! splits the command into simple commands (at `;`, `&&`, `||`, `|`, `&`,
//! newlines, `(`, `)` and backticks, outside quotes), skips wrappers such as
//! `sudo`, `env` and `nohup`, and looks at each program with its arguments.
//! So `echo rm -rf /` is allowed (it only prints), while
//! `bash -c "rm -rf /"` is refused (the `-c` string is checked too).

use std::path::{Component, Path, PathBuf};

/// Devices that are raw disks: writing to them destroys filesystems.
const DISK_PREFIXES: &[&str] =
    &["sd", "hd", "vd", "xvd", "nvme", "mmcblk", "disk", "dm-", "md", "loop"];
/// `of=` targets of `dd` under /dev/ that are harmless.
const HARMLESS_DEVICES: &[&str] = &["null", "zero", "stdout", "stderr", "tty"];
/// Programs that run the rest of their arguments as a command.
const WRAPPERS: &[&str] =
    &["sudo", "doas", "env", "nohup", "time", "command", "exec", "nice", "ionice", "builtin"];
/// Shell words that may open a simple command without being its program.
const KEYWORDS: &[&str] = &["{", "}", "!", "if", "then", "else", "elif", "do", "while", "until"];

/// Why `command` is refused, or `None` when it may run. `workspace` is the
/// workspace root and `cwd` the folder the command runs in.
pub fn dangerous_command(command: &str, workspace: &Path, cwd: &Path) -> Option<String> {
    let squeezed: String = command.chars().filter(|c| !c.is_whitespace()).collect();
    if is_fork_bomb(&squeezed) {
        return Some("a fork bomb would exhaust the machine's processes".to_string());
    }
    if let Some(device) = raw_disk_redirect(command) {
        return Some(format!("writing to the raw disk {device} would destroy its filesystem"));
    }
    simple_commands(command).iter().find_map(|words| check_simple(words, workspace, cwd))
}

fn check_simple(words: &[String], workspace: &Path, cwd: &Path) -> Option<String> {
    let mut rest = words;
    while let Some(first) = rest.first() {
        let word = first.as_str();
        let is_assignment = word.split_once('=').is_some_and(|(name, _)| {
            !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        });
        if KEYWORDS.contains(&word) || is_assignment {
            rest = &rest[1..];
        } else if WRAPPERS.contains(&word) || word == "timeout" {
            rest = &rest[1..];
            while rest.first().is_some_and(|w| w.starts_with('-')) {
                rest = &rest[1..];
            }
            if word == "timeout" && !rest.is_empty() {
                rest = &rest[1..]; // the duration
            }
        } else {
            break;
        }
    }
    let (program, args) = rest.split_first()?;
    let name = program.rsplit('/').next().unwrap_or(program);
    match name {
        "rm" => check_rm(args, workspace, cwd),
        "dd" => args.iter().find_map(|a| {
            let device = a.strip_prefix("of=/dev/")?;
            (!HARMLESS_DEVICES.contains(&device) && !device.starts_with("fd/"))
                .then(|| format!("dd writing to /dev/{device} would overwrite a device"))
        }),
        "chmod" | "chown" | "chgrp" => {
            let recursive = args.iter().any(|a| a == "--recursive" || is_short_flag_with(a, 'R'));
            let root = args.iter().any(|a| matches!(a.trim_end_matches('/'), "" | "/*"));
            (recursive && root).then(|| format!("{name} -R on / would break the whole system"))
        }
        "shutdown" | "reboot" | "halt" | "poweroff" => {
            Some(format!("{name} would take the machine down"))
        }
        "systemctl" => args
            .iter()
            .find(|a| matches!(a.as_str(), "poweroff" | "reboot" | "halt" | "kexec"))
            .map(|a| format!("systemctl {a} would take the machine down")),
        "init" | "telinit" => args
            .first()
            .filter(|a| matches!(a.as_str(), "0" | "6"))
            .map(|a| format!("{name} {a} would take the machine down")),
        "sh" | "bash" | "zsh" | "dash" | "ksh" => {
            let at = args.iter().position(|a| a == "-c")?;
            dangerous_command(args.get(at + 1)?, workspace, cwd)
        }
        "eval" => dangerous_command(&args.join(" "), workspace, cwd),
        _ if name.starts_with("mkfs") || name == "mke2fs" || name == "wipefs" => {
            Some(format!("{name} would erase a filesystem"))
        }
        _ => None,
    }
}

/// A recursive `rm` of `/`, the home folder, the workspace or a folder above it.
fn check_rm(args: &[String], workspace: &Path, cwd: &Path) -> Option<String> {
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
    let home = std::env::var_os("HOME").map(PathBuf::from);
    targets.into_iter().find_map(|target| {
        if home.is_none() && ["~", "$HOME", "${HOME}"].iter().any(|p| target.starts_with(p)) {
            return Some(format!("rm -r {target} would delete in your home folder"));
        }
        let (dir, star) = match target.strip_suffix("/*").or_else(|| (target == "*").then_some("."))
        {
            Some("") => ("/", true),
            Some(dir) => (dir, true),
            None => (target, false),
        };
        let path = normalize(&expand(dir, home.as_deref(), cwd));
        let what = if path == Path::new("/") {
            "the root folder"
        } else if home.as_deref().is_some_and(|h| normalize(h) == path) {
            "your home folder"
        } else if workspace.starts_with(&path) {
            if path == workspace { "the workspace" } else { "a folder holding the workspace" }
        } else {
            return None;
        };
        let contents = if star { "everything in " } else { "" };
        Some(format!("rm -r {target} would delete {contents}{what}"))
    })
}

/// True for a short-option cluster such as `-rf` that holds `flag`.
fn is_short_flag_with(arg: &str, flag: char) -> bool {
    arg.starts_with('-') && !arg.starts_with("--") && arg[1..].contains(flag)
}

/// `~`, `$HOME` and `${HOME}` expanded; relative paths joined to `cwd`.
fn expand(word: &str, home: Option<&Path>, cwd: &Path) -> PathBuf {
    for prefix in ["~", "$HOME", "${HOME}"] {
        if let (Some(rest), Some(home)) = (word.strip_prefix(prefix), home)
            && (rest.is_empty() || rest.starts_with('/'))
        {
            return home.join(rest.trim_start_matches('/'));
        }
    }
    cwd.join(word)
}

/// `path` with `.` and `..` resolved lexically.
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::from("/");
    for component in path.components() {
        match component {
            Component::ParentDir => {
                out.pop();
            }
            Component::Normal(part) => out.push(part),
            Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
        }
    }
    out
}

/// True when the whitespace-free command defines a function that pipes into
/// itself in the background (`:(){ :|:& };:` and renamed variants).
fn is_fork_bomb(squeezed: &str) -> bool {
    squeezed.match_indices("(){").any(|(at, _)| {
        let name_start = squeezed[..at]
            .rfind(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
            .map_or(0, |i| i + 1);
        let name = &squeezed[name_start..at];
        !name.is_empty() && squeezed[at + 3..].starts_with(&format!("{name}|{name}&"))
    })
}

/// The raw disk a `>`/`>>` redirection writes to, if any.
fn raw_disk_redirect(command: &str) -> Option<String> {
    command.match_indices('>').find_map(|(at, _)| {
        let target = command[at + 1..].trim_start_matches(['>', '|', '&']).trim_start();
        let device = target.strip_prefix("/dev/")?;
        let name: String = device.chars().take_while(|c| !c.is_whitespace() && *c != ';').collect();
        DISK_PREFIXES.iter().any(|p| name.starts_with(p)).then(|| format!("/dev/{name}"))
    })
}

/// The command split into simple commands, each a list of words with quotes removed.
fn simple_commands(command: &str) -> Vec<Vec<String>> {
    let mut commands = Vec::new();
    let mut words: Vec<String> = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut chars = command.chars().peekable();
    let mut quote: Option<char> = None;
    let finish_word = |words: &mut Vec<String>, word: &mut String, in_word: &mut bool| {
        if *in_word {
            words.push(std::mem::take(word));
            *in_word = false;
        }
    };
    while let Some(c) = chars.next() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some('"'), '\\') => {
                if let Some(next) = chars.next() {
                    word.push(next);
                }
            }
            (Some(_), c) => word.push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                in_word = true;
            }
            (None, '\\') => {
                if let Some(next) = chars.next() {
                    word.push(next);
                    in_word = true;
                }
            }
            (None, ';' | '&' | '|' | '\n' | '(' | ')' | '`') => {
                finish_word(&mut words, &mut word, &mut in_word);
                if !words.is_empty() {
                    commands.push(std::mem::take(&mut words));
                }
            }
            (None, c) if c.is_whitespace() => finish_word(&mut words, &mut word, &mut in_word),
            (None, c) => {
                word.push(c);
                in_word = true;
            }
        }
    }
    finish_word(&mut words, &mut word, &mut in_word);
    if !words.is_empty() {
        commands.push(words);
    }
    commands
}

#[cfg(test)]
mod tests {
    use super::*;

    const WS: &str = "/home/dev/project";

    fn refused(command: &str) -> String {
        let ws = Path::new(WS);
        dangerous_command(command, ws, ws)
            .unwrap_or_else(|| panic!("{command:?} should be refused"))
    }

    fn allowed(command: &str) {
        let ws = Path::new(WS);
        if let Some(reason) = dangerous_command(command, ws, ws) {
            panic!("{command:?} should run, refused: {reason}");
        }
    }

    #[test]
    fn rm_rf_of_root_is_refused_in_any_flag_order() {
        for command in [
            "rm -rf /",
            "rm -fr /",
            "rm -r -f /",
            "rm --recursive --force /",
            "rm -Rf //",
            "/bin/rm -rf /",
        ] {
            assert!(refused(command).contains("the root folder"), "{command}");
        }
    }

    #[test]
    fn rm_rf_of_everything_under_root_is_refused() {
        assert!(refused("rm -rf /*").contains("everything in the root folder"));
    }

    #[test]
    fn rm_rf_of_home_is_refused() {
        for command in
            ["rm -rf ~", "rm -rf ~/", "rm -rf $HOME", "rm -rf ${HOME}", "rm -rf \"$HOME\""]
        {
            let reason = refused(command);
            assert!(
                reason.contains("home folder") || reason.contains("holding the workspace"),
                "{command}: {reason}"
            );
        }
    }

    #[test]
    fn rm_rf_of_the_workspace_or_above_is_refused() {
        assert!(refused(&format!("rm -rf {WS}")).contains("the workspace"));
        assert!(refused("rm -rf .").contains("the workspace"));
        assert!(refused("rm -rf *").contains("everything in the workspace"));
        assert!(refused("rm -rf ..").contains("holding the workspace"));
    }

    #[test]
    fn rm_no_preserve_root_is_refused() {
        refused("rm -rf --no-preserve-root /tmp/x");
    }

    #[test]
    fn wrapped_and_chained_rm_is_refused() {
        refused("sudo rm -rf /");
        refused("cd /tmp && rm -rf /");
        refused("echo hi; env FOO=1 rm -rf /");
        refused("bash -c 'rm -rf /'");
        refused("X=1 nohup rm -rf / &");
    }

    #[test]
    fn mkfs_is_refused() {
        refused("mkfs.ext4 /dev/sdb1");
        refused("sudo mkfs -t xfs /dev/nvme0n1");
    }

    #[test]
    fn dd_to_a_device_is_refused() {
        refused("dd if=/dev/zero of=/dev/sda bs=1M");
    }

    #[test]
    fn fork_bomb_is_refused() {
        refused(":(){ :|:& };:");
        refused("bomb() { bomb | bomb & }; bomb");
    }

    #[test]
    fn redirect_to_a_raw_disk_is_refused() {
        refused("echo x > /dev/sda");
        refused("cat image.iso >/dev/nvme0n1");
    }

    #[test]
    fn recursive_chmod_of_root_is_refused() {
        refused("chmod -R 777 /");
        refused("chown -R nobody /");
    }

    #[test]
    fn shutdown_and_friends_are_refused() {
        for command in
            ["shutdown -h now", "reboot", "sudo halt", "poweroff", "systemctl reboot", "init 0"]
        {
            refused(command);
        }
    }

    #[test]
    fn near_misses_run() {
        allowed("rm -rf ./build");
        allowed("rm -rf target/debug");
        allowed("rm -f /tmp/x.log");
        allowed("rm /");
        allowed("echo rm -rf /");
        allowed("grep -r shutdown docs/");
        allowed("dd if=in.bin of=/dev/null");
        allowed("ls > /dev/null 2>&1");
        allowed("chmod -R 755 ./scripts");
        allowed("git commit -m 'do not reboot'");
        allowed("cargo build --release");
    }
}
