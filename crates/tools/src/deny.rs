//! The `bash` deny list: catastrophic commands refused before they run.
//!
//! This is a seatbelt against a model's worst mistakes, not a sandbox: the
//! permission gate in `ferroclaw-core` decides what may run at all, and a
//! determined command can always hide itself (`base64 -d | sh`). The command
//! is parsed with the shell grammar ([`crate::shell`]) into every simple
//! command it would run (lists, pipelines, substitutions, `sh -c` and `eval`
//! strings), wrappers such as `sudo`, `env`, `timeout` and `xargs` are seen
//! through, `/usr/bin/rm` counts as `rm`, variables set earlier in the same
//! command (`h=~; rm -rf $h`) and `cd` are followed, and each program is
//! looked at with its arguments. So `echo rm -rf /` is allowed (it only
//! prints), while `bash -c "rm -rf /"` is refused.
//!
//! This file holds the walk over a command's simple commands and the
//! program-by-program verdicts that need no paths (raw disks, fork bombs,
//! `kill -1`, shutdown); what a deletion would wipe, which depends on where
//! the home folder and the workspace are, is in [`deletion`]; the files the
//! agent may never write, whatever the command, are in [`protected`].

use std::path::{Component, Path, PathBuf};

use crate::shell::{self, SimpleCommand, Word};

mod deletion;
mod protected;

use deletion::{Here, check_find, check_rm, check_script_code, expand, is_short_flag_with};
pub use protected::{PROTECTED_FOLDERS, protected_file};

/// Devices that are raw disks or memory: writing to them destroys data.
const DISK_PREFIXES: &[&str] = &[
    "sd", "hd", "vd", "xvd", "nvme", "mmcblk", "disk", "dm-", "md", "loop", "mem", "kmem", "port",
];
/// `of=` targets of `dd` under /dev/ that are harmless.
const HARMLESS_DEVICES: &[&str] = &["null", "zero", "stdout", "stderr", "tty"];

/// Why `command` is refused, or `None` when it may run. `workspace` is the
/// workspace root and `cwd` the folder the command runs in; `~`, `$HOME`
/// and a bare `cd` mean this process's `HOME`.
pub fn dangerous_command(command: &str, workspace: &Path, cwd: &Path) -> Option<String> {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    dangerous_command_for_home(command, workspace, cwd, home.as_deref())
}

/// [`dangerous_command`] for a user whose home folder is `home` (`None`: no
/// home known), whatever the `HOME` of this process: what `cd ~ && rm -rf
/// ../home` deletes depends on where the home folder is.
pub fn dangerous_command_for_home(
    command: &str,
    workspace: &Path,
    cwd: &Path,
    home: Option<&Path>,
) -> Option<String> {
    let squeezed: String = command.chars().filter(|c| !c.is_whitespace()).collect();
    if is_fork_bomb(&squeezed) || squeezed.contains("forkwhilefork") {
        return Some("a fork bomb would exhaust the machine's processes".to_string());
    }
    if let Some(device) = raw_disk_redirect(command) {
        return Some(format!("writing to the raw disk {device} would destroy its filesystem"));
    }
    let script = shell::parse(command);
    if script.functions.iter().any(|f| f.self_calls >= 2 || (f.self_calls >= 1 && f.forks)) {
        return Some("a fork bomb would exhaust the machine's processes".to_string());
    }
    if let Some(r) = script.redirects.iter().find(|r| r.op.contains('>') && is_disk(&r.target.text))
    {
        return Some(format!(
            "writing to the raw disk {} would destroy its filesystem",
            r.target.text
        ));
    }
    let mut cwd = cwd.to_path_buf();
    let mut previous: Option<&SimpleCommand> = None;
    for cmd in &script.commands {
        let here = Here { workspace, cwd: &cwd, home };
        // Through every wrapper, and from every word after one whose
        // options the table does not know (`stdbuf --weird 0 rm -rf ~`).
        for words in cmd.possible_commands() {
            if let Some(reason) = check_simple(cmd, words, &here, previous, &script.heredocs) {
                return Some(reason);
            }
        }
        if cmd.program() == Some("cd") {
            match cmd.unwrapped().get(1) {
                Some(w) if !w.dynamic => cwd = normalize(&expand(&w.text, home, &cwd)),
                Some(_) => {}
                None => cwd = home.map_or(cwd, Path::to_path_buf),
            }
        }
        previous = Some(cmd);
    }
    None
}

fn texts(words: &[Word]) -> Vec<String> {
    words.iter().map(|w| w.text.clone()).collect()
}

/// Why one simple command is refused, judged by its program: `words` is the
/// command as run through its wrappers, `previous` the command before it
/// (what `echo ... | xargs rm` feeds), `heredocs` the script's here-documents.
fn check_simple(
    cmd: &SimpleCommand,
    words: &[Word],
    here: &Here,
    previous: Option<&SimpleCommand>,
    heredocs: &[String],
) -> Option<String> {
    if words.first().is_some_and(|w| w.dynamic) {
        // `$(echo rm) -rf ~`: the name is unknown, so judge the arguments as rm's.
        let reason = check_rm(&texts(&words[1..]), here)?;
        return Some(format!(
            "a command whose name is computed at run time, with arguments that mean: {reason}"
        ));
    }
    let (program, args) = words.split_first()?;
    let args = texts(args);
    let name = shell::basename(&program.text);
    let fed_by_xargs = cmd.words.iter().any(|w| shell::basename(&w.text) == "xargs");
    match name {
        "rm" => {
            let mut args = args;
            if fed_by_xargs
                && let Some(prev) = previous
                && matches!(prev.program(), Some("echo" | "printf"))
            {
                args.extend(texts(&prev.unwrapped()[1..]));
            }
            check_rm(&args, here)
        }
        "find" => check_find(&args, here),
        "kill" => check_kill(&args),
        "tee" | "cp" | "mv" | "install" | "shred" | "ln" => args
            .iter()
            .find(|a| is_disk(a))
            .map(|d| format!("{name} to the raw disk {d} would destroy its filesystem")),
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
        _ if name.starts_with("python") || name == "perl" || name == "ruby" || name == "node" => {
            let code = match args.iter().position(|a| a == "-c" || a == "-e") {
                Some(at) => args.get(at + 1).cloned().unwrap_or_default(),
                None => heredocs.join("\n"),
            };
            check_script_code(&code, here)
        }
        _ if name.starts_with("mkfs") || name == "mke2fs" || name == "wipefs" => {
            Some(format!("{name} would erase a filesystem"))
        }
        _ => None,
    }
}

/// `kill -9 -1` (every process the user may signal).
fn check_kill(args: &[String]) -> Option<String> {
    let mut rest = args;
    if let Some(first) = rest.first() {
        if matches!(first.as_str(), "-s" | "-n" | "--signal") {
            rest = rest.get(2..).unwrap_or(&[]);
        } else if first.starts_with('-') {
            rest = &rest[1..]; // a signal, or `--`
        }
    }
    rest.iter().any(|a| a == "-1").then(|| "kill -1 would signal every process you own".to_string())
}

fn is_disk(target: &str) -> bool {
    target
        .strip_prefix("/dev/")
        .is_some_and(|name| DISK_PREFIXES.iter().any(|p| name.starts_with(p)))
}

/// `path` with `.` and `..` resolved lexically (no file system access).
pub fn normalize(path: &Path) -> PathBuf {
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
        // The name starts after the last character that cannot be in one
        // (which may be several bytes long: the command is any text).
        let name_start = squeezed[..at]
            .char_indices()
            .rev()
            .find(|&(_, c)| !(c.is_alphanumeric() || c == '_' || c == ':'))
            .map_or(0, |(i, c)| i + c.len_utf8());
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

#[cfg(test)]
mod tests {
    use super::*;

    const WS: &str = "/home/dev/project";
    /// The home folder the tests reason about, whatever the `HOME` of the
    /// user running them: root's, outside the workspace's folders.
    const HOME: &str = "/root";

    fn verdict(command: &str, home: &str) -> Option<String> {
        let ws = Path::new(WS);
        dangerous_command_for_home(command, ws, ws, Some(Path::new(home)))
    }

    #[test]
    fn a_command_with_multibyte_text_before_a_function_is_checked_without_panicking() {
        // Found by tests/shell_fuzz.rs: a name boundary inside a 4-byte character.
        let ws = Path::new(WS);
        assert!(dangerous_command("echo \u{87da0}f(){ f|f& };f", ws, ws).is_some());
        assert!(dangerous_command("é(){ echo; }", ws, ws).is_none());
    }

    fn refused(command: &str) -> String {
        verdict(command, HOME).unwrap_or_else(|| panic!("{command:?} should be refused"))
    }

    fn allowed(command: &str) {
        if let Some(reason) = verdict(command, HOME) {
            panic!("{command:?} should run, refused: {reason}");
        }
    }

    #[test]
    fn a_path_from_the_home_folder_is_resolved_against_that_home() {
        // root's home is /root: one level up and into `home` is /home.
        let reason = verdict("cd ~ && rm -rf ../home", "/root").expect("refused for root");
        assert!(reason.contains("rm -r ../home would delete a folder holding"), "{reason}");
        // /home/NAME: the same climb lands on /home, a folder holding the home.
        for command in ["cd ~ && rm -rf ..", "cd ~ && rm -rf ../../home", "cd && rm -rf ../"] {
            let reason = verdict(command, "/home/ann").unwrap_or_else(|| panic!("{command}"));
            assert!(reason.contains("holding your home folder"), "{command}: {reason}");
        }
        // From /home/ann, `../home` is /home/home: nobody's home, nothing precious.
        assert_eq!(verdict("cd ~ && rm -rf ../home", "/home/ann"), None);
    }

    #[test]
    fn the_home_folder_of_the_process_is_the_default() {
        let ws = Path::new(WS);
        let home = std::env::var_os("HOME").map(PathBuf::from);
        for command in ["rm -rf ~", "cd ~ && rm -rf ../home", "rm -rf ~/build"] {
            assert_eq!(
                dangerous_command(command, ws, ws),
                dangerous_command_for_home(command, ws, ws, home.as_deref()),
                "{command}"
            );
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
    fn spellings_that_slipped_past_the_old_splitter_are_refused() {
        for command in [
            "find ~ -delete",
            "find / -delete",
            "find / -name '*' -exec rm -rf {} +",
            "cd ~ && rm -rf ../home",
            "cd / && rm -rf home",
            "$(echo rm) -rf ~",
            "`echo rm` -rf /",
            "/usr/bin/env rm -rf /",
            "echo ~ | xargs rm -rf",
            "h=~; rm -rf $h",
            "d=/; rm -rf \"$d\"",
            "python3 -c 'import shutil; shutil.rmtree(\"/\")'",
            "python -c \"import shutil,os; shutil.rmtree(os.path.expanduser('~'))\"",
            "echo x > /dev/sda",
            "cat disk.img | tee /dev/sda",
            "kill -9 -1",
            "kill -KILL -1",
            "f(){ f|f& };f",
            "bomb() { bomb & bomb; }; bomb",
            "perl -e 'fork while fork'",
            "sh -c \"sh -c 'rm -rf /'\"",
            "rm -rf /usr",
        ] {
            refused(command);
        }
    }

    #[test]
    fn near_misses_run() {
        allowed("rm -rf target");
        allowed("find . -name '*.o' -delete");
        allowed("find build -delete");
        allowed("find . -name x | xargs rm");
        allowed("kill -9 1234");
        allowed("kill -1 1234");
        allowed("python3 -c 'import shutil; shutil.rmtree(\"build\")'");
        allowed("f() { echo hi; }; f; f");
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
