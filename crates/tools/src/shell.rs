//! A `bash` command as the simple commands it would run, parsed with the
//! tree-sitter bash grammar: lists (`;`, `&&`, `||`, `&`, newlines),
//! pipelines, subshells, `{ }` groups, control structures, `$(...)`,
//! backticks, `<(...)`, function bodies, and the strings given to
//! `sh -c`/`bash -c`/`eval`, recursively. Redirections are collected apart
//! (a `>` to a file is a write). Whatever the grammar cannot place is listed
//! in [`Script::unknown`]: callers must then ask rather than assume.
//!
//! ```
//! let script = ferroclaw_tools::shell::parse("git status; echo $(touch x) > out.txt");
//! let commands: Vec<String> = script.commands.iter().map(|c| c.text()).collect();
//! assert_eq!(commands, ["git status", "echo $(touch x)", "touch x"]);
//! assert_eq!(script.file_writes()[0].target.text, "out.txt");
//! ```

use std::collections::HashMap;

use tree_sitter::{Node, Parser};

/// How deep `sh -c` strings, `eval` and nested constructs are followed
/// before the command counts as not understood.
const MAX_DEPTH: usize = 48;

/// Programs that run the words after `--` as a command (`runuser -u me --
/// CMD`); their `-c` strings are in the table of program semantics.
const COMMAND_STRING_TAKERS: &[&str] = &["su", "runuser", "script"];

/// What a shell started with `args` (the words after its name) runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShellInput<'a> {
    /// `-c STRING` (after any options, `-o NAME`, `+e`, `--`, in any order).
    Command(&'a Word),
    /// A script file, or commands from stdin: not visible in the command.
    Hidden,
    /// `-c` with nothing to run.
    Nothing,
}

/// Reads a shell's arguments as bash does: options (`-e`, `+x`, `-o NAME`,
/// `-O NAME`, `--rcfile FILE`, `--norc`) up to `--` or the first other word;
/// with `-c` among them, that word is the command string (`bash -o errexit
/// -c 'CMD'`, `bash -c -e 'CMD'`, `bash -c -- 'CMD'` all run `CMD`).
pub fn shell_input(args: &[Word]) -> ShellInput<'_> {
    let mut command = false;
    let mut i = 0;
    while let Some(word) = args.get(i) {
        let t = word.text.as_str();
        i += 1;
        if t == "--" || t == "-" {
            break;
        }
        if let Some(long) = t.strip_prefix("--") {
            if matches!(long, "rcfile" | "init-file") {
                i += 1;
            }
            continue;
        }
        let Some(flags) = t.strip_prefix('-').or_else(|| t.strip_prefix('+')) else {
            i -= 1;
            break;
        };
        command |= t.starts_with('-') && flags.contains('c');
        if flags.contains('o') || flags.contains('O') {
            i += 1; // the option's name
        }
    }
    match args.get(i) {
        Some(word) if command => ShellInput::Command(word),
        None if command => ShellInput::Nothing,
        _ => ShellInput::Hidden,
    }
}

/// Shells whose `-c` string is parsed as a command too.
const SHELLS: &[&str] = &["sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "busybox"];

/// One word of a command: its value with quotes removed, and whether it
/// depends on something known only when it runs (a variable, `$(...)`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Word {
    /// The value, or the source text where it is dynamic.
    pub text: String,
    pub dynamic: bool,
}

/// A redirection such as `> out.txt`, `2>&1` or `< in`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Redirect {
    /// `>`, `>>`, `<`, `&>`, `>&`, ...
    pub op: String,
    pub target: Word,
}

impl Redirect {
    /// True when it writes to a file (not a descriptor, not `/dev/null`).
    pub fn writes_file(&self) -> bool {
        let writes = self.op.contains('>') || self.op == "<>";
        let t = self.target.text.as_str();
        let descriptor = (self.op == ">&" || self.op == "<&")
            && (t == "-" || t.chars().all(|c| c.is_ascii_digit()));
        let harmless = matches!(t, "/dev/null" | "/dev/stdout" | "/dev/stderr" | "/dev/tty")
            || t.starts_with("/dev/fd/");
        writes && !descriptor && !harmless
    }
}

/// One simple command: `NAME=value ... program args...`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SimpleCommand {
    /// Leading `NAME=value` assignments, as written.
    pub assignments: Vec<String>,
    pub words: Vec<Word>,
    /// The function whose body holds it, if any.
    pub in_function: Option<String>,
}

impl SimpleCommand {
    /// The command as one line: assignments, then words, single-spaced.
    pub fn text(&self) -> String {
        let words = self.words.iter().map(|w| w.text.as_str());
        self.assignments.iter().map(String::as_str).chain(words).collect::<Vec<_>>().join(" ")
    }

    /// The words after wrappers (`sudo`, `env`, `timeout 5`, `xargs -n1`,
    /// `nice -n 5`, ...) and their options, with leading assignments gone.
    /// Wrappers are the table's programs whose effect is "runs the rest"
    /// ([`crate::effects`]).
    pub fn unwrapped(&self) -> &[Word] {
        let layers = crate::effects::layers(&self.words);
        let last = layers.starts.last().copied().unwrap_or(0);
        self.words.get(last..).unwrap_or(&[])
    }

    /// Every command these words may run, outermost first: the whole, then
    /// what each wrapper runs. Where a wrapper's option is not in the table
    /// (its value may be the next word), every later word is tried as the
    /// start, so a check that must not miss sees through it.
    pub fn possible_commands(&self) -> Vec<&[Word]> {
        let layers = crate::effects::layers(&self.words);
        let mut starts = layers.starts.clone();
        if let Some(from) = layers.uncertain_from {
            starts.extend(from + 1..self.words.len());
        }
        starts.sort_unstable();
        starts.dedup();
        starts.into_iter().filter_map(|i| self.words.get(i..)).filter(|w| !w.is_empty()).collect()
    }

    /// The program after wrappers, without its folder (`/usr/bin/rm` -> `rm`);
    /// `None` when there is none or its name is computed at run time.
    pub fn program(&self) -> Option<&str> {
        let first = self.unwrapped().first()?;
        (!first.dynamic).then(|| basename(&first.text))
    }

    /// True when the program's name is computed at run time (`$(echo rm)`).
    pub fn dynamic_program(&self) -> bool {
        self.unwrapped().first().is_some_and(|w| w.dynamic)
    }
}

/// The words of a command before its program (the wrappers and their
/// options): all of them but what `unwrapped` keeps.
fn words_before_program(words: &[Word]) -> Vec<Word> {
    let cmd = SimpleCommand { words: words.to_vec(), ..Default::default() };
    let kept = cmd.unwrapped().len();
    words[..words.len() - kept].to_vec()
}

/// The text `xargs` (among the wrappers) replaces with what it reads
/// (`-I R`, `-iR`, `-i`/`--replace` for `{}`, `--replace=R`), if any: a
/// shell's `-c` string holding it runs whatever comes in on stdin.
fn xargs_placeholder(wrappers: &[Word]) -> Option<String> {
    let start = wrappers.iter().position(|w| basename(&w.text) == "xargs")?;
    let mut rest = wrappers[start + 1..].iter();
    while let Some(w) = rest.next() {
        let t = w.text.as_str();
        match t {
            "-I" => return rest.next().map(|v| v.text.clone()),
            "-i" | "--replace" => return Some("{}".into()),
            _ => {}
        }
        if let Some(r) = t.strip_prefix("--replace=").or_else(|| t.strip_prefix("-I")) {
            return Some(r.to_string());
        }
        if let Some(r) = t.strip_prefix("-i") {
            return Some(r.to_string());
        }
    }
    None
}

/// `/usr/bin/rm` -> `rm`.
pub fn basename(word: &str) -> &str {
    word.rsplit('/').next().unwrap_or(word)
}

/// A shell function defined by the command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Function {
    pub name: String,
    /// Calls of itself inside its own body.
    pub self_calls: usize,
    /// Its body runs something in the background or in a pipeline.
    pub forks: bool,
}

/// Everything a command would run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Script {
    /// Simple commands in source order (those of `$(...)` after their host).
    pub commands: Vec<SimpleCommand>,
    pub redirects: Vec<Redirect>,
    pub functions: Vec<Function>,
    /// Bodies of here-documents.
    pub heredocs: Vec<String>,
    /// What the parser could not understand; non-empty means "ask".
    pub unknown: Vec<String>,
}

impl Script {
    /// The redirections that write files.
    pub fn file_writes(&self) -> Vec<&Redirect> {
        self.redirects.iter().filter(|r| r.writes_file()).collect()
    }

    /// True when every part was understood.
    pub fn understood(&self) -> bool {
        self.unknown.is_empty()
    }
}

/// Parses `command`. Never fails: what is not understood is in `unknown`.
pub fn parse(command: &str) -> Script {
    let mut walker = Walker::default();
    walker.parse_into(command, 0);
    if walker.arithmetic && walker.code_in_literal {
        walker.script.unknown.push(
            "arithmetic over a value that holds a command (`$(...)` or backticks in quotes): \
             bash would run it"
                .into(),
        );
    }
    walker.script
}

/// Programs that evaluate arithmetic on their arguments or on the variables
/// they set (`let`, `printf -v 'a[i]'`, `read 'a[i]'`, `test -v 'a[i]'`, ...).
const ARITHMETIC_PROGRAMS: &[&str] =
    &["let", "printf", "read", "mapfile", "readarray", "test", "[", "shift", "return", "exit"];

/// Code points tree-sitter-bash's external scanner cannot take (0.25.1 reads
/// past a table for them); none of them is assigned outside private use.
const SCANNER_UNSAFE_FROM: char = '\u{40000}';

/// `source` with each scanner-unsafe character replaced by U+20000 (a CJK
/// letter, four bytes in UTF-8 like every character it replaces).
fn scanner_safe(source: &str) -> std::borrow::Cow<'_, str> {
    if source.chars().all(|c| c < SCANNER_UNSAFE_FROM) {
        return std::borrow::Cow::Borrowed(source);
    }
    source.chars().map(|c| if c < SCANNER_UNSAFE_FROM { c } else { '\u{20000}' }).collect()
}

#[derive(Default)]
struct Walker {
    script: Script,
    /// Variables assigned a static value earlier in the command (`h=~`).
    vars: HashMap<String, String>,
    function: Option<String>,
    /// Something evaluates arithmetic (`$((x))`, `((...))`, `[[ x -eq y ]]`,
    /// `${a[i]}`, `let`, ...): bash evaluates a variable's value there as an
    /// expression, and `a[$(cmd)]` in that value runs `cmd`.
    arithmetic: bool,
    /// A quoted or escaped literal holds `$(` or a backtick: code that runs
    /// if bash ever evaluates the value (see `arithmetic`).
    code_in_literal: bool,
    /// The command being walked is a `find -exec` one: `{}` in it becomes
    /// each file's name.
    in_find_exec: bool,
}

impl Walker {
    fn parse_into(&mut self, source: &str, depth: usize) {
        if depth > MAX_DEPTH / 4 {
            self.script.unknown.push("shell strings nested too deeply".into());
            return;
        }
        let mut parser = Parser::new();
        if parser.set_language(&tree_sitter_bash::LANGUAGE.into()).is_err() {
            self.script.unknown.push("the bash grammar could not be loaded".into());
            return;
        }
        // The grammar's scanner crashes (SIGSEGV, found by tests/shell_fuzz.rs)
        // on code points from about U+41E20 up; it parses a copy where each
        // is a 4-byte letter, so every byte offset still fits `source`.
        let Some(tree) = parser.parse(scanner_safe(source).as_ref(), None) else {
            self.script.unknown.push("the command could not be parsed".into());
            return;
        };
        let root = tree.root_node();
        if root.has_error() {
            self.script.unknown.push(format!("the shell grammar cannot parse {source:?}"));
        }
        self.visit(root, source, depth * 4);
    }

    fn visit(&mut self, node: Node, src: &str, depth: usize) {
        if depth > MAX_DEPTH {
            self.script.unknown.push("the command is nested too deeply".into());
            return;
        }
        match node.kind() {
            "command" => self.command(node, src, depth),
            "variable_assignment" => {
                let (name, value) = self.assignment(node, src, depth);
                match value {
                    Some(v) if !v.dynamic => self.vars.insert(name, v.text),
                    _ => self.vars.remove(&name),
                };
            }
            "declaration_command" | "unset_command" | "test_command" => {
                self.arithmetic = true;
                self.builtin_like(node, src, depth);
            }
            "compound_statement" | "c_style_for_statement" | "subscript" => {
                self.arithmetic |=
                    node.kind() != "compound_statement" || text(node, src).starts_with("((");
                self.children(node, src, depth);
            }
            "file_redirect" | "herestring_redirect" => self.redirect(node, src, depth),
            "heredoc_body" => {
                self.note_literal(text(node, src));
                self.script.heredocs.push(text(node, src).to_string());
                self.children(node, src, depth);
            }
            "heredoc_end" => {
                // bash ends a here-document only at a line that is exactly
                // its delimiter; where the grammar ends it elsewhere
                // (`EOF | cat`), bash reads on, and runs what it reads.
                let start = src[..node.start_byte()].rfind('\n').map_or(0, |i| i + 1);
                let end =
                    src[node.end_byte()..].find('\n').map_or(src.len(), |i| node.end_byte() + i);
                let line = src.get(start..end).unwrap_or("").trim_start_matches('\t');
                if line != text(node, src) {
                    self.script
                        .unknown
                        .push(format!("a here-document ends inside the line {line:?}"));
                }
            }
            "function_definition" => self.function(node, src, depth),
            "comment" => {}
            "command_substitution" | "process_substitution" | "subshell" => {
                self.children(node, src, depth);
            }
            "word"
            | "string"
            | "raw_string"
            | "concatenation"
            | "simple_expansion"
            | "expansion"
            | "number"
            | "ansi_c_string"
            | "arithmetic_expansion" => {
                self.word(node, src, depth);
            }
            "ERROR" => {
                self.script.unknown.push(format!("cannot parse {:?}", text(node, src)));
                self.children(node, src, depth);
            }
            _ => self.children(node, src, depth),
        }
    }

    fn children(&mut self, node: Node, src: &str, depth: usize) {
        let mut cursor = node.walk();
        let kids: Vec<Node> = node.named_children(&mut cursor).collect();
        for child in kids {
            self.visit(child, src, depth + 1);
        }
    }

    fn command(&mut self, node: Node, src: &str, depth: usize) {
        let mut cmd = SimpleCommand { in_function: self.function.clone(), ..Default::default() };
        let mut cursor = node.walk();
        let kids: Vec<Node> = node.named_children(&mut cursor).collect();
        let mut nested = Vec::new();
        let at = self.script.commands.len();
        for child in kids {
            match child.kind() {
                "variable_assignment" => {
                    let (name, value) = self.assignment(child, src, depth);
                    let shown = value.map_or(String::new(), |v| v.text);
                    cmd.assignments.push(format!("{name}={shown}"));
                }
                "command_name" => {
                    let mut c = child.walk();
                    let inner: Vec<Node> = child.named_children(&mut c).collect();
                    for w in inner {
                        cmd.words.push(self.word(w, src, depth));
                    }
                }
                "file_redirect" | "herestring_redirect" | "heredoc_redirect" => nested.push(child),
                "comment" => {}
                _ => cmd.words.push(self.word(child, src, depth)),
            }
        }
        // The command itself first, then what its words and redirects run.
        let substituted = self.script.commands.split_off(at.min(self.script.commands.len()));
        self.finish_command(cmd, src, depth);
        self.script.commands.extend(substituted);
        for child in nested {
            self.visit(child, src, depth + 1);
        }
    }

    /// Records `cmd` and follows `sh -c STRING` and `eval ARGS`.
    fn finish_command(&mut self, cmd: SimpleCommand, _src: &str, depth: usize) {
        if cmd.words.is_empty() && !cmd.assignments.is_empty() {
            return; // only assignments: for this command's environment
        }
        if let (Some(f), Some(program)) = (&self.function, cmd.program())
            && f == program
            && let Some(def) = self.script.functions.iter_mut().find(|d| &d.name == f)
        {
            def.self_calls += 1;
        }
        let words = cmd.unwrapped().to_vec();
        let cmd_words = cmd.words.clone();
        let program = cmd.program().map(str::to_string);
        self.arithmetic |= program.as_deref().is_some_and(|p| ARITHMETIC_PROGRAMS.contains(&p));
        // Command lines its options run (`flock F -c CMD`, `env -S CMD`,
        // `sort --compress-program=P`, `tar -I P`, `sed 'e CMD'`).
        let effects = crate::effects::of(&cmd.words);
        self.script.commands.push(cmd);
        for run in effects.runs {
            if run.dynamic {
                self.script
                    .unknown
                    .push(format!("a command line computed at run time ({})", run.text));
            } else {
                self.parse_into(&run.text, depth + 1);
            }
        }
        match program.as_deref() {
            Some(shell) if SHELLS.contains(&shell) => {
                let skip = if shell == "busybox" { 2 } else { 1 }; // busybox's applet
                let args = words.get(skip..).unwrap_or_default();
                match shell_input(args) {
                    ShellInput::Command(w) if !w.dynamic => {
                        let before = words_before_program(&cmd_words);
                        let fill = if self.in_find_exec { Some("{}".to_string()) } else { None };
                        match fill.or_else(|| xargs_placeholder(&before)) {
                            Some(mark) if w.text.contains(&mark) => self.script.unknown.push(
                                format!("{shell} -c with a command string filled in at run time ({mark})"),
                            ),
                            _ => self.parse_into(&w.text.clone(), depth + 1),
                        }
                    }
                    ShellInput::Command(_) => {
                        self.script.unknown.push(format!("{shell} -c with a computed script"));
                    }
                    ShellInput::Hidden | ShellInput::Nothing => {}
                }
            }
            Some(taker) if COMMAND_STRING_TAKERS.contains(&taker) => {
                // `runuser -u me -- CMD ARGS`; `-c` strings are effects.
                let mut args = words.iter().skip(1);
                if args.by_ref().any(|w| w.text == "--") {
                    let words: Vec<Word> = args.cloned().collect();
                    let cmd = SimpleCommand {
                        words,
                        in_function: self.function.clone(),
                        ..Default::default()
                    };
                    if !cmd.words.is_empty() {
                        self.finish_command(cmd, _src, depth + 1);
                    }
                }
            }
            Some("trap") => {
                // `trap 'CMD' EXIT` runs CMD later in this shell.
                let action =
                    words.iter().skip(1).find(|w| !matches!(w.text.as_str(), "-p" | "-l" | "--"));
                // `trap - EXIT` and `trap 2` reset: nothing to run.
                let action =
                    action.filter(|w| w.text != "-" && !w.text.chars().all(|c| c.is_ascii_digit()));
                match action {
                    Some(w) if !w.dynamic => self.parse_into(&w.text.clone(), depth + 1),
                    Some(_) => self.script.unknown.push("trap with a computed action".into()),
                    None => {}
                }
            }
            Some("find") => {
                // `find ... -exec CMD {} ;` (also `-execdir`, `-ok`, `-okdir`)
                // runs CMD for each file.
                let mut rest = words.iter().skip(1);
                while let Some(w) = rest.next() {
                    if !matches!(w.text.as_str(), "-exec" | "-execdir" | "-ok" | "-okdir") {
                        continue;
                    }
                    let inner: Vec<Word> = rest
                        .by_ref()
                        .take_while(|w| w.text != ";" && w.text != "+")
                        .cloned()
                        .collect();
                    let cmd = SimpleCommand {
                        words: inner,
                        in_function: self.function.clone(),
                        ..Default::default()
                    };
                    if !cmd.words.is_empty() {
                        let outer = std::mem::replace(&mut self.in_find_exec, true);
                        self.finish_command(cmd, _src, depth + 1);
                        self.in_find_exec = outer;
                    }
                }
            }
            Some("eval") => {
                if words[1..].iter().any(|w| w.dynamic) {
                    self.script.unknown.push("eval of a computed string".into());
                } else {
                    let joined: Vec<&str> = words[1..].iter().map(|w| w.text.as_str()).collect();
                    self.parse_into(&joined.join(" "), depth + 1);
                }
            }
            _ => {}
        }
    }

    fn builtin_like(&mut self, node: Node, src: &str, depth: usize) {
        let mut cmd = SimpleCommand { in_function: self.function.clone(), ..Default::default() };
        let mut cursor = node.walk();
        let kids: Vec<Node> = node.children(&mut cursor).collect();
        for child in kids {
            if !child.is_named() {
                let t = text(child, src);
                if cmd.words.is_empty() && t.chars().all(|c| c.is_ascii_alphabetic()) {
                    cmd.words.push(Word { text: t.to_string(), dynamic: false });
                }
                continue;
            }
            if child.kind() == "variable_assignment" {
                let (name, value) = self.assignment(child, src, depth);
                match &value {
                    Some(v) if !v.dynamic => self.vars.insert(name.clone(), v.text.clone()),
                    _ => self.vars.remove(&name),
                };
                let shown = value.map_or(String::new(), |v| v.text);
                cmd.words.push(Word { text: format!("{name}={shown}"), dynamic: false });
            } else {
                cmd.words.push(self.word(child, src, depth));
            }
        }
        if node.kind() == "test_command" {
            cmd.words = vec![Word { text: text(node, src).to_string(), dynamic: false }];
        }
        self.finish_command(cmd, src, depth);
    }

    fn assignment(&mut self, node: Node, src: &str, depth: usize) -> (String, Option<Word>) {
        let name =
            node.child_by_field_name("name").map_or_else(String::new, |n| text(n, src).to_string());
        let value = node.child_by_field_name("value").map(|v| self.word(v, src, depth));
        (name, value)
    }

    fn function(&mut self, node: Node, src: &str, depth: usize) {
        let name = node.child_by_field_name("name").map(|n| text(n, src).to_string());
        let Some(name) = name else {
            self.children(node, src, depth);
            return;
        };
        let body = node.child_by_field_name("body");
        let forks = body.is_some_and(|b| {
            let t = text(b, src);
            t.contains('&') || t.contains('|')
        });
        self.script.functions.push(Function { name: name.clone(), self_calls: 0, forks });
        let outer = self.function.replace(name);
        if let Some(body) = body {
            self.visit(body, src, depth + 1);
        }
        self.function = outer;
    }

    fn redirect(&mut self, node: Node, src: &str, depth: usize) {
        let mut op = String::new();
        let mut target = None;
        let mut cursor = node.walk();
        let kids: Vec<Node> = node.children(&mut cursor).collect();
        for child in kids {
            if !child.is_named() {
                op.push_str(text(child, src));
            } else if child.kind() == "file_descriptor" {
            } else if target.is_none() {
                target = Some(self.word(child, src, depth));
            } else {
                self.visit(child, src, depth + 1);
            }
        }
        if let Some(target) = target {
            self.script.redirects.push(Redirect { op, target });
        }
    }

    /// The value of a word-like node; substitutions inside are walked.
    fn word(&mut self, node: Node, src: &str, depth: usize) -> Word {
        let raw = text(node, src);
        let stat = |t: String| Word { text: t, dynamic: false };
        let dynamic = |t: &str| Word { text: t.to_string(), dynamic: true };
        match node.kind() {
            "word" | "number" => {
                let t = unescape(raw);
                self.note_literal(&t);
                stat(t)
            }
            "raw_string" => {
                let t = raw.trim_start_matches('\'').trim_end_matches('\'').to_string();
                self.note_literal(&t);
                stat(t)
            }
            "ansi_c_string" => {
                // `$'\x24(cmd)'` spells `$(cmd)` with escapes: any escape counts.
                if raw.contains('\\') {
                    self.code_in_literal = true;
                }
                self.note_literal(raw);
                dynamic(raw)
            }
            "arithmetic_expansion" => {
                self.arithmetic = true;
                self.visit_inside(node, src, depth);
                dynamic(raw)
            }
            "command_substitution" if raw.starts_with('`') && raw.contains("\\`") => {
                // Inside backticks `\`` opens a nested substitution, which the
                // grammar reads as a plain word.
                self.script.unknown.push(format!("nested backticks in {raw:?}"));
                self.visit_inside(node, src, depth);
                dynamic(raw)
            }
            "string" => {
                let mut cursor = node.walk();
                let kids: Vec<Node> = node.named_children(&mut cursor).collect();
                let mut value = String::new();
                let mut is_dynamic = false;
                let mut last = node.start_byte() + 1;
                let end = node.end_byte().saturating_sub(1).max(last);
                for child in kids {
                    value.push_str(&unescape_dq(src.get(last..child.start_byte()).unwrap_or("")));
                    if child.kind() == "string_content" {
                        self.note_literal(&unescape_dq(text(child, src)));
                        value.push_str(&unescape_dq(text(child, src)));
                    } else {
                        let w = self.word(child, src, depth + 1);
                        is_dynamic |= w.dynamic;
                        value.push_str(&w.text);
                    }
                    last = child.end_byte();
                }
                value.push_str(&unescape_dq(src.get(last..end).unwrap_or("")));
                Word { text: value, dynamic: is_dynamic }
            }
            "concatenation" => {
                let mut cursor = node.walk();
                let kids: Vec<Node> = node.named_children(&mut cursor).collect();
                let mut value = String::new();
                let mut is_dynamic = false;
                let mut last = node.start_byte();
                for child in kids {
                    value.push_str(&unescape(src.get(last..child.start_byte()).unwrap_or("")));
                    let w = self.word(child, src, depth + 1);
                    is_dynamic |= w.dynamic;
                    value.push_str(&w.text);
                    last = child.end_byte();
                }
                value.push_str(&unescape(src.get(last..node.end_byte()).unwrap_or("")));
                Word { text: value, dynamic: is_dynamic }
            }
            "expansion" if raw.ends_with("@P}") => {
                // Prompt expansion runs the `$(...)` in the variable's value.
                self.script.unknown.push(format!("prompt expansion {raw:?}"));
                self.children(node, src, depth);
                dynamic(raw)
            }
            "simple_expansion" | "expansion" => {
                if node.kind() == "expansion" && raw.contains(':') {
                    self.arithmetic = true; // `${x:offset:length}`
                }
                let name =
                    raw.trim_start_matches('$').trim_start_matches('{').trim_end_matches('}');
                match self.vars.get(name) {
                    Some(v) => stat(v.clone()),
                    None => {
                        self.children(node, src, depth);
                        dynamic(raw)
                    }
                }
            }
            _ => {
                self.visit_inside(node, src, depth);
                dynamic(raw)
            }
        }
    }

    /// Notes a literal that holds code (see `code_in_literal`).
    fn note_literal(&mut self, text: &str) {
        self.code_in_literal |= text.contains("$(") || text.contains('`');
    }

    /// Walks the commands inside a dynamic word (`$(...)`, `<(...)`).
    fn visit_inside(&mut self, node: Node, src: &str, depth: usize) {
        match node.kind() {
            "command_substitution" | "process_substitution" => self.children(node, src, depth),
            _ => self.children(node, src, depth),
        }
    }
}

fn text<'a>(node: Node, src: &'a str) -> &'a str {
    src.get(node.start_byte()..node.end_byte()).unwrap_or("")
}

/// An unquoted word with backslash escapes removed.
fn unescape(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len());
    let mut chars = raw.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            if let Some(next) = chars.next()
                && next != '\n'
            {
                out.push(next);
            }
        } else if c != '"' && c != '\'' {
            out.push(c);
        }
    }
    out
}

/// Double-quoted text with its escapes (`\"`, `\\`, `\$`, `` \` ``) removed.
fn unescape_dq(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len());
    let mut chars = raw.chars().peekable();
    while let Some(c) = chars.next() {
        match (c, chars.peek()) {
            ('\\', Some('"' | '\\' | '$' | '`')) => {
                if let Some(n) = chars.next() {
                    out.push(n);
                }
            }
            ('\\', Some('\n')) => {
                chars.next();
            }
            _ => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {

    #[test]
    fn characters_that_crash_the_grammars_scanner_are_parsed_safely() {
        // Found by tests/shell_fuzz.rs: `{` then U+F0000 was a SIGSEGV.
        let script = parse("{\u{f0000}\u{10ffff} ; echo \u{a1590}x");
        let texts: Vec<String> = script.commands.iter().map(SimpleCommand::text).collect();
        assert!(texts.iter().any(|t| t == "echo \u{a1590}x"), "{texts:?}");
        assert_eq!(scanner_safe("a\u{a1590}b").len(), "a\u{a1590}b".len());
    }

    use super::*;

    fn texts(command: &str) -> Vec<String> {
        parse(command).commands.iter().map(SimpleCommand::text).collect()
    }

    #[test]
    fn lists_pipelines_and_substitutions_become_simple_commands() {
        assert_eq!(texts("git status; touch X"), ["git status", "touch X"]);
        assert_eq!(texts("git status && touch X || rm y"), ["git status", "touch X", "rm y"]);
        assert_eq!(texts("git status\ntouch X"), ["git status", "touch X"]);
        assert_eq!(texts("git status & touch X"), ["git status", "touch X"]);
        assert_eq!(
            texts("git status | sh -c 'touch X'"),
            ["git status", "sh -c touch X", "touch X"]
        );
        assert_eq!(texts("git status `touch X`"), ["git status `touch X`", "touch X"]);
        assert_eq!(texts("diff <(touch X) y"), ["diff <(touch X) y", "touch X"]);
        assert_eq!(texts("(cd a && make)"), ["cd a", "make"]);
        assert_eq!(texts("eval 'touch X'"), ["eval touch X", "touch X"]);
    }

    #[test]
    fn quotes_are_removed_and_variables_known_from_the_command_are_used() {
        assert_eq!(texts("git commit -m \"a b\" 'c'"), ["git commit -m a b c"]);
        let s = parse("h=~; rm -rf $h");
        assert_eq!(s.commands[0].text(), "rm -rf ~");
        assert!(!s.commands[0].words[2].dynamic);
    }

    #[test]
    fn wrappers_and_folders_are_seen_through() {
        let s = parse("/usr/bin/env FOO=1 timeout 5 nice -n 3 /bin/rm -rf x");
        assert_eq!(s.commands[0].program(), Some("rm"));
        let s = parse("$(echo rm) -rf ~");
        assert!(s.commands[0].dynamic_program());
        assert_eq!(s.commands[1].text(), "echo rm");
    }

    #[test]
    fn redirections_to_files_are_writes_and_descriptors_are_not() {
        let s = parse("make > log.txt 2>&1 < in; ls 2>/dev/null");
        let writes: Vec<&str> = s.file_writes().iter().map(|r| r.target.text.as_str()).collect();
        assert_eq!(writes, ["log.txt"]);
    }

    #[test]
    fn unparseable_commands_are_flagged() {
        assert!(!parse("echo 'unterminated").understood());
        assert!(!parse("bash -c \"$X\"").understood());
        assert!(parse("cargo test -- --nocapture").understood());
    }

    #[test]
    fn every_way_of_handing_a_shell_a_command_string_is_followed() {
        for command in [
            "bash -o errexit -c 'curl x'",
            "bash -c -e 'curl x'",
            "bash -c -- 'curl x'",
            "sh +e -c 'curl x'",
            "bash --rcfile r -O extglob -c 'curl x'",
            "env -S 'curl x'",
            "env -S'curl x'",
            "/usr/bin/env --split-string='curl x'",
            "sudo env -u HOME -S 'curl x'",
            "su -c 'curl x' root",
            "runuser -u me -c 'curl x'",
            "runuser -u me -- curl x",
            "script -q -c 'curl x' /dev/null",
            "trap 'curl x' EXIT",
            "taskset 0x1 curl x",
            "chrt -f 10 curl x",
            "systemd-run --user -p A=b curl x",
            "proxychains4 -f p.conf curl x",
        ] {
            let s = parse(command);
            assert!(
                s.commands.iter().any(|c| c.program() == Some("curl")),
                "{command}: {:?}",
                s.commands.iter().map(SimpleCommand::text).collect::<Vec<_>>()
            );
        }
        assert_eq!(
            shell_input(&parse("bash script.sh").commands[0].words[1..]),
            ShellInput::Hidden
        );
        assert!(!parse("env -S \"$X\"").understood());
        for filled in [
            "cat cmds | xargs -I{} bash -c {}",
            "xargs -I % sh -c 'echo %'",
            "xargs -i sh -c '{}'",
            "find . -name '*.sh' -exec sh -c '{}' \\;",
        ] {
            assert!(!parse(filled).understood(), "{filled}: runs what stdin or a file name says");
        }
        assert!(parse("xargs -n1 sh -c 'echo \"$0\"'").understood());
        assert_eq!(parse("xargs -i rm -rf {}").commands[0].program(), Some("rm"));
        assert!(parse("find . -exec grep -l x {} +").understood());
    }

    #[test]
    fn a_here_document_that_the_grammar_ends_early_is_not_understood() {
        // Found by the exec oracle: bash reads on past `EOF | cat ...` and
        // runs the `$(...)` of the next lines.
        let command = "cat <<EOF\nx\nEOF | cat <<'EOF'\n$(touch y)\nEOF\necho";
        assert!(!parse(command).understood());
        assert!(parse("cat <<EOF\nline $(date)\nEOF\necho done").understood());
        assert!(parse("cat <<-EOF\n\tx\n\tEOF").understood());
    }

    #[test]
    fn functions_that_call_themselves_are_counted() {
        let s = parse(":(){ :|:& };:");
        assert_eq!(s.functions.len(), 1);
        assert_eq!(s.functions[0].self_calls, 2);
    }
}
