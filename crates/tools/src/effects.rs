//! What a simple command does, read from the table of program semantics
//! (`effects/programs.toml`, one reviewed entry per program, git and cargo
//! per subcommand): the files it writes through its options or operands, the
//! command lines it runs through its options, the options the table does not
//! know, and which words are the command a wrapper runs.
//!
//! The permission gate decides on these effects rather than on the text: an
//! allow rule naming `git log` lets `git log` read, but `git log
//! --output=package.json` writes a file and needs what a write needs.
//!
//! ```
//! use ferroclaw_tools::{effects, shell};
//! let cmd = &shell::parse("sort -o out.txt in.txt").commands[0];
//! let fx = effects::of(&cmd.words);
//! assert_eq!(fx.writes[0].path, "out.txt");
//! ```

mod scripts;
mod table;

pub use table::{Entry, Kind, Operands, Table, table};

use crate::shell::{Word, basename};
use table::Class;

/// A file a command writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Write {
    /// The path as written (relative to the command's folder), or the word's
    /// source text when it is computed at run time.
    pub path: String,
    pub dynamic: bool,
    /// What makes it written: the option (`--output`), `operand`, or the
    /// script command (`sed w`).
    pub by: String,
}

/// Everything one simple command does beyond reading its operands.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Effects {
    /// The program after wrappers, without its folder; empty when computed.
    pub program: String,
    /// True when the table has an entry for the program.
    pub known: bool,
    /// Files written because of an option or a script command (`sort -o F`,
    /// `sed -i`, `find -delete`, `sed 'w F'`): these need write permission
    /// even when a rule names the program.
    pub writes: Vec<Write>,
    /// Files written as the program's own purpose (`touch F`, `cp A B`,
    /// `tee F`): a rule naming the program covers them; protected files are
    /// refused all the same.
    pub operand_writes: Vec<Write>,
    /// Command lines run by an option (`--compress-program=gzip`, `rg --pre
    /// X`, `flock F -c CMD`): the parser follows them as commands.
    pub runs: Vec<Word>,
    /// Options and script commands that run what configuration, a file or
    /// the data names (`git -c`, `cargo --config`, `sed e`, awk `system()`):
    /// no rule covers them, the call asks.
    pub opaque: Vec<String>,
    /// Options the table does not know for this program.
    pub unknown: Vec<String>,
    /// The program runs code the gate cannot read (python, node, make).
    pub interpreter: bool,
    /// Programs it runs itself as part of its work (`tar -z` runs gzip).
    pub helpers: Vec<String>,
    /// Folders where it keeps its own state (git's `.git`): not the user's
    /// files, so not checked by the gate; reported for the exec oracle.
    pub state: Vec<String>,
    /// A wrapper feeds the program more words from stdin (`xargs`): any of
    /// its options may come from there.
    pub fed: bool,
}

impl Effects {
    /// True when nothing beyond reading and its own purpose happens: no
    /// write by option, no opaque or unknown option, and (when stdin feeds
    /// it words) no option that writes or runs at all.
    pub fn plain(&self) -> bool {
        let risky_when_fed =
            self.fed && table().get(&self.program).is_some_and(Entry::writes_or_runs_anything);
        self.writes.is_empty()
            && self.opaque.is_empty()
            && self.unknown.is_empty()
            && !risky_when_fed
    }
}

/// The start of each command in `words`: 0, then the index where each
/// wrapper's command begins (`timeout 5 nice -n 3 rm x` -> `[0, 2, 5]`).
/// `certain` is false when a wrapper had an option the table does not know
/// (its value may be the next word): the program is then a best guess, and
/// checks that must not miss must try every later word as the start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layers {
    pub starts: Vec<usize>,
    pub certain: bool,
    /// The index of the first wrapper whose options were not understood.
    pub uncertain_from: Option<usize>,
}

/// The layers of wrappers in `words`; see [`Layers`].
pub fn layers(words: &[Word]) -> Layers {
    let mut starts = vec![0];
    let mut at = 0;
    let mut uncertain_from = None;
    while let Some(first) = words.get(at) {
        let Some(entry) = (!first.dynamic).then(|| table().get(basename(&first.text))).flatten()
        else {
            break;
        };
        if entry.kind != Kind::Wrapper {
            break;
        }
        let mut fx = Effects::default();
        let rest = &words[at + 1..];
        let next = match basename(&first.text) {
            // `busybox APPLET ARGS`: the applet is the command.
            "busybox" => Some(0),
            _ => scan(entry, rest, &mut fx),
        };
        if (!fx.unknown.is_empty() || entry.optional_leading > 0) && uncertain_from.is_none() {
            uncertain_from = Some(at);
        }
        match next {
            Some(k) if k < rest.len() => {
                at += 1 + k;
                starts.push(at);
            }
            _ => break,
        }
    }
    Layers { certain: uncertain_from.is_none(), starts, uncertain_from }
}

/// The effects of one simple command's words (wrappers included: `time -o F`
/// writes F; the wrapped program's effects are added).
pub fn of(words: &[Word]) -> Effects {
    let layers = layers(words);
    let mut fx = Effects::default();
    let starts = &layers.starts;
    for (n, &start) in starts.iter().enumerate() {
        let Some(first) = words.get(start) else { break };
        let end = starts.get(n + 1).copied().unwrap_or(words.len());
        let innermost = n + 1 == starts.len();
        if first.dynamic {
            fx.program.clear();
            break;
        }
        let name = basename(&first.text);
        let Some(entry) = table().get(name) else {
            if innermost {
                fx.program = name.to_string();
            }
            continue;
        };
        let mut here = Effects::default();
        scan(entry, &words[start + 1..end], &mut here);
        fx.writes.extend(here.writes);
        fx.operand_writes.extend(here.operand_writes);
        fx.runs.extend(here.runs);
        fx.opaque.extend(here.opaque);
        fx.unknown.extend(here.unknown);
        fx.helpers.extend(here.helpers);
        fx.state.extend(here.state);
        fx.interpreter |= here.interpreter;
        if innermost {
            fx.program = name.to_string();
            fx.known = true;
        } else {
            fx.fed |= entry.fed;
        }
    }
    fx
}

/// Reads `args` (the words after the program's name) with `entry`, adding
/// their effects to `fx`. For a wrapper, returns the index in `args` where
/// the command it runs starts.
fn scan(entry: &Entry, args: &[Word], fx: &mut Effects) -> Option<usize> {
    scan_with(entry, args, fx, false)
}

/// [`scan`], after the subcommand when `in_sub` (its words are operands).
fn scan_with(entry: &Entry, args: &[Word], fx: &mut Effects, in_sub: bool) -> Option<usize> {
    fx.interpreter |= entry.kind == Kind::Interpreter;
    fx.helpers.extend(entry.helpers.iter().cloned());
    fx.state.extend(entry.state.iter().cloned());
    let mut operands: Vec<&Word> = Vec::new();
    let mut script_words: Vec<&Word> = Vec::new();
    let mut seen_flags: Vec<String> = Vec::new();
    let mut writes_operands: Option<String> = None;
    let mut leading = entry.leading;
    let mut end_of_options = false;
    let mut i = 0;
    // tar's old style: `tar xzf a.tgz` is `tar -x -z -f a.tgz`.
    let bundled;
    let args: &[Word] = if entry.operands == Operands::Tar
        && args.first().is_some_and(|w| !w.text.starts_with('-') && !w.dynamic)
    {
        bundled = std::iter::once(Word { text: format!("-{}", args[0].text), dynamic: false })
            .chain(args[1..].iter().cloned())
            .collect::<Vec<_>>();
        &bundled
    } else {
        args
    };
    while let Some(word) = args.get(i) {
        let t = word.text.as_str();
        i += 1;
        let is_option = !end_of_options && t.starts_with('-') && t != "-";
        // A word computed at run time (`$X`, `$(...)`) may be any option.
        let maybe_option = !end_of_options && word.dynamic && !is_option;
        if maybe_option
            && entry.kind == Kind::Plain
            && entry.operands != Operands::Text
            && entry.writes_or_runs_anything()
        {
            fx.unknown.push(t.to_string());
        }
        if !is_option {
            if entry.kind == Kind::Wrapper {
                if entry.assignments && is_assignment(t) {
                    continue;
                }
                if leading > 0 {
                    leading -= 1;
                    if entry.operands == Operands::Write {
                        let by = "operand".to_string();
                        fx.operand_writes.push(Write {
                            path: t.to_string(),
                            dynamic: word.dynamic,
                            by,
                        });
                    }
                    continue;
                }
                return Some(i - 1);
            }
            if !in_sub && operands.is_empty() && (!entry.sub.is_empty() || entry.open_sub) {
                // The first plain word names the subcommand.
                match entry.sub_entry(t) {
                    Some(sub) => scan(sub, &args[i..], fx),
                    None if entry.open_sub => scan_with(entry, &args[i..], fx, true),
                    None => {
                        scan_unknown(&args[i..], fx);
                        None
                    }
                };
                return None;
            }
            if entry.script.is_some()
                && script_words.is_empty()
                && !entry.has_script_option(&seen_flags)
            {
                script_words.push(word);
                seen_flags.push("(script)".into());
                continue;
            }
            operands.push(word);
            continue;
        }
        if t == "--" {
            end_of_options = true;
            continue;
        }
        let take_value = |attached: Option<&str>, i: &mut usize| -> Option<Word> {
            match attached {
                Some(v) => Some(Word { text: v.to_string(), dynamic: word.dynamic }),
                None => {
                    let v = args.get(*i).cloned();
                    *i += 1;
                    v
                }
            }
        };
        // Whole words first (`-uu`, `-TT`, `-fprint`, `--output=F`).
        let (name, attached) = match t.split_once('=') {
            Some((n, v)) if t.starts_with("--") => (n, Some(v)),
            _ => (t, None),
        };
        let whole = entry.class_of(name).or_else(|| {
            (t.starts_with("--") || entry.single_dash)
                .then(|| entry.class_of_prefix(name))
                .flatten()
        });
        if let Some(class) = whole {
            let value = match class {
                Class::Optional | Class::WritesOperands => {
                    attached.map(|v| Word { text: v.to_string(), dynamic: word.dynamic })
                }
                _ if class.takes_value() => take_value(attached, &mut i),
                _ => None,
            };
            apply(class, name, value, fx, &mut writes_operands);
            if class == Class::Exec {
                // Up to `;` or `+`: the command the parser follows.
                while let Some(w) = args.get(i) {
                    i += 1;
                    if w.text == ";" || w.text == "+" {
                        break;
                    }
                }
            }
            if class == Class::ShellString && entry.kind == Kind::Wrapper {
                return None;
            }
            seen_flags.push(name.to_string());
            continue;
        }
        // Interpreters run code whatever their options; `echo -x` prints.
        let ignored = entry.kind == Kind::Interpreter || entry.operands == Operands::Text;
        if t.starts_with("--") || entry.single_dash {
            if !ignored {
                fx.unknown.push(t.to_string());
            }
            continue;
        }
        let cluster = &t[1..];
        if entry.numeric && cluster.chars().all(|c| c.is_ascii_digit()) {
            continue;
        }
        let chars = cluster.char_indices();
        for (at, c) in chars {
            let short = format!("-{c}");
            let rest = &cluster[at + c.len_utf8()..];
            let Some(class) = entry.class_of(&short) else {
                if entry.numeric && c.is_ascii_digit() {
                    continue;
                }
                if !ignored {
                    fx.unknown.push(t.to_string());
                }
                break;
            };
            seen_flags.push(short.clone());
            if class == Class::Flag {
                continue;
            }
            let attached = (!rest.is_empty()).then_some(rest);
            let value = match class {
                Class::Optional | Class::WritesOperands => {
                    attached.map(|v| Word { text: v.to_string(), dynamic: word.dynamic })
                }
                _ => take_value(attached, &mut i),
            };
            apply(class, &short, value, fx, &mut writes_operands);
            if class == Class::ShellString && entry.kind == Kind::Wrapper {
                return None;
            }
            break;
        }
    }
    if entry.kind == Kind::Wrapper {
        return None;
    }
    let read_only = seen_flags.iter().any(|f| entry.read_only_with.contains(f));
    operand_effects(entry, &operands, read_only, &seen_flags, fx);
    if let Some(by) = writes_operands {
        for w in &operands {
            fx.writes.push(Write { path: w.text.clone(), dynamic: w.dynamic, by: by.clone() });
        }
    }
    for script in script_words {
        let found = match entry.script.as_deref() {
            Some("sed") => scripts::sed(&script.text),
            Some("awk") => scripts::awk(&script.text),
            _ => scripts::Found::default(),
        };
        if script.dynamic {
            fx.opaque.push(format!("a {} program computed at run time", entry.name));
        }
        for path in found.writes {
            fx.writes.push(Write { path, dynamic: false, by: format!("{} script", entry.name) });
        }
        for command in found.runs {
            fx.runs.push(Word { text: command, dynamic: false });
        }
        fx.opaque.extend(found.opaque);
    }
    None
}

/// A subcommand the table does not list: every option is unknown.
fn scan_unknown(args: &[Word], fx: &mut Effects) {
    for w in args {
        if w.text == "--" {
            break;
        }
        if w.text.starts_with('-') && w.text != "-" {
            fx.unknown.push(w.text.clone());
        }
    }
}

/// Records what an option of `class` does.
fn apply(
    class: Class,
    name: &str,
    value: Option<Word>,
    fx: &mut Effects,
    writes_operands: &mut Option<String>,
) {
    match (class, value) {
        (Class::Write, Some(v)) if is_harmless_target(&v.text) => {}
        (Class::Write, Some(v)) => {
            fx.writes.push(Write { path: v.text, dynamic: v.dynamic, by: name.to_string() });
        }
        (Class::Write, None) => fx.opaque.push(format!("{name} without a file")),
        (Class::Run | Class::ShellString, Some(v)) => fx.runs.push(v),
        (Class::Run | Class::ShellString, None) => fx.opaque.push(name.to_string()),
        (Class::Opaque, _) => fx.opaque.push(name.to_string()),
        (Class::WritesOperands, _) => *writes_operands = Some(name.to_string()),
        (Class::Script, Some(v)) => {
            // `sed -e SCRIPT`: the only program whose options take a script.
            let found = if v.dynamic {
                fx.opaque.push(format!("{name} with a script computed at run time"));
                scripts::Found::default()
            } else {
                scripts::sed(&v.text)
            };
            for path in found.writes {
                fx.writes.push(Write { path, dynamic: false, by: format!("{name} script") });
            }
            for command in found.runs {
                fx.runs.push(Word { text: command, dynamic: false });
            }
            fx.opaque.extend(found.opaque);
        }
        _ => {}
    }
}

/// What the plain words of a command do, by the entry's `operands`.
fn operand_effects(
    entry: &Entry,
    operands: &[&Word],
    read_only: bool,
    flags: &[String],
    fx: &mut Effects,
) {
    let write = |w: &Word| Write { path: w.text.clone(), dynamic: w.dynamic, by: "operand".into() };
    if entry.operands == Operands::Tar {
        // `-f` names the archive: written when creating, read otherwise.
        let creates = flags.iter().any(|f| {
            matches!(
                f.as_str(),
                "-c" | "-r" | "-u" | "-A" | "--create" | "--append" | "--update" | "--concatenate"
            )
        });
        if !creates {
            fx.writes.retain(|w| !matches!(w.by.as_str(), "-f" | "--file"));
        }
    }
    if read_only {
        return;
    }
    let chosen: Vec<Write> = match entry.operands {
        Operands::Read | Operands::Text => Vec::new(),
        Operands::Write => operands.iter().map(|w| write(w)).collect(),
        Operands::WriteLast if operands.len() >= 2 => {
            operands.last().map(|w| write(w)).into_iter().collect()
        }
        Operands::WriteLast => Vec::new(),
        Operands::WriteFirst => operands.first().map(|w| write(w)).into_iter().collect(),
        Operands::WriteSecond => operands.get(1).map(|w| write(w)).into_iter().collect(),
        Operands::Cwd => vec![Write { path: ".".into(), dynamic: false, by: "operand".into() }],
        Operands::Dd => operands
            .iter()
            .filter_map(|w| {
                let path = w.text.strip_prefix("of=")?;
                Some(Write { path: path.to_string(), dynamic: w.dynamic, by: "of=".into() })
            })
            .collect(),
        Operands::Tar => {
            let extract = flags.iter().any(|f| matches!(f.as_str(), "-x" | "--extract" | "--get"));
            if extract {
                vec![Write { path: ".".into(), dynamic: false, by: "tar -x".into() }]
            } else {
                Vec::new()
            }
        }
    };
    // A write to the terminal or the bit bucket is no write.
    fx.operand_writes.extend(chosen.into_iter().filter(|w| !is_harmless_target(&w.path)));
}

/// `/dev/null`, `/dev/stdout`, `-` (stdout): writing there changes no file.
pub fn is_harmless_target(path: &str) -> bool {
    matches!(path, "/dev/null" | "/dev/stdout" | "/dev/stderr" | "/dev/tty" | "-")
        || path.starts_with("/dev/fd/")
}

fn is_assignment(word: &str) -> bool {
    word.split_once('=').is_some_and(|(name, _)| {
        !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    })
}

#[cfg(test)]
mod tests;
