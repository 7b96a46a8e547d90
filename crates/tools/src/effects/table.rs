//! The table of program semantics, read once from `programs.toml` (see the
//! comment at its top for what each field means).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::OnceLock;

use serde::Deserialize;

/// What kind of program an entry is.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    #[default]
    Plain,
    /// Runs the rest of its words as a command.
    Wrapper,
    /// Runs code the gate cannot read.
    Interpreter,
    /// Its `-c` string is parsed as a command.
    Shell,
}

/// What a program's plain words are.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Operands {
    #[default]
    Read,
    Text,
    Write,
    WriteLast,
    WriteFirst,
    WriteSecond,
    Cwd,
    Dd,
    Tar,
}

/// What one option does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Class {
    Flag,
    Value,
    Optional,
    Write,
    Run,
    Opaque,
    WritesOperands,
    Script,
    ShellString,
    Exec,
}

impl Class {
    /// True when the option takes a value (attached or the next word).
    pub(crate) fn takes_value(self) -> bool {
        matches!(
            self,
            Class::Value | Class::Write | Class::Run | Class::Script | Class::ShellString
        )
    }
}

/// One entry as written in the file.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawEntry {
    #[serde(default)]
    kind: Kind,
    #[serde(default)]
    aliases: Vec<String>,
    #[serde(default)]
    flags: String,
    #[serde(default)]
    values: String,
    #[serde(default)]
    optional_values: String,
    #[serde(default)]
    writes: String,
    #[serde(default)]
    writes_operands: String,
    #[serde(default)]
    runs: String,
    #[serde(default)]
    opaque: String,
    #[serde(default)]
    script_values: String,
    #[serde(default)]
    shell_string: String,
    #[serde(default)]
    execs: String,
    #[serde(default)]
    read_only_with: String,
    #[serde(default)]
    operands: Operands,
    #[serde(default)]
    numeric: bool,
    #[serde(default)]
    single_dash: bool,
    #[serde(default)]
    script: Option<String>,
    #[serde(default)]
    helpers: Vec<String>,
    #[serde(default)]
    state: Vec<String>,
    #[serde(default)]
    leading: usize,
    #[serde(default)]
    optional_leading: usize,
    #[serde(default)]
    assignments: bool,
    #[serde(default)]
    transparent: bool,
    #[serde(default)]
    fed: bool,
    #[serde(default)]
    open_sub: bool,
    #[serde(default)]
    sub: BTreeMap<String, RawEntry>,
}

/// One program's semantics.
#[derive(Debug, Default)]
pub struct Entry {
    pub name: String,
    pub kind: Kind,
    options: HashMap<String, Class>,
    pub read_only_with: HashSet<String>,
    pub operands: Operands,
    pub numeric: bool,
    pub single_dash: bool,
    pub script: Option<String>,
    pub helpers: Vec<String>,
    /// Folders where it keeps its own state (git's `.git`).
    pub state: Vec<String>,
    pub leading: usize,
    /// Words that may come before the command (`coproc NAME`).
    pub optional_leading: usize,
    pub assignments: bool,
    /// A wrapper that only changes how the rest runs (`timeout`, `nice`):
    /// a rule for the wrapped command is enough.
    pub transparent: bool,
    pub fed: bool,
    pub open_sub: bool,
    pub sub: HashMap<String, std::sync::Arc<Entry>>,
}

impl Entry {
    fn build(name: &str, raw: RawEntry) -> Result<(Entry, Vec<String>), String> {
        let mut options = HashMap::new();
        let lists = [
            (&raw.flags, Class::Flag),
            (&raw.values, Class::Value),
            (&raw.optional_values, Class::Optional),
            (&raw.writes, Class::Write),
            (&raw.writes_operands, Class::WritesOperands),
            (&raw.runs, Class::Run),
            (&raw.opaque, Class::Opaque),
            (&raw.script_values, Class::Script),
            (&raw.shell_string, Class::ShellString),
            (&raw.execs, Class::Exec),
        ];
        for (list, class) in lists {
            for option in list.split_whitespace() {
                let bare = matches!(option, "!" | "(" | ")" | ",");
                if !option.starts_with('-') && !bare {
                    return Err(format!("{name}: {option:?} is not an option"));
                }
                // A later list wins over `flags`/`values` (the riskier reading).
                let previous = options.insert(option.to_string(), class);
                if let Some(previous) = previous
                    && !matches!(previous, Class::Flag | Class::Value | Class::Optional)
                    && previous != class
                {
                    return Err(format!("{name}: {option} is listed twice"));
                }
            }
        }
        if raw.kind != Kind::Wrapper
            && (raw.leading > 0
                || raw.optional_leading > 0
                || raw.assignments
                || raw.transparent
                || raw.fed)
        {
            return Err(format!("{name}: leading/assignments/transparent/fed are for wrappers"));
        }
        if let Some(script) = &raw.script
            && !matches!(script.as_str(), "sed" | "awk")
        {
            return Err(format!("{name}: unknown script language {script:?}"));
        }
        let mut sub = HashMap::new();
        for (sub_name, sub_raw) in raw.sub {
            let (entry, aliases) = Entry::build(&format!("{name} {sub_name}"), sub_raw)?;
            let entry = std::sync::Arc::new(entry);
            for alias in aliases.into_iter().chain([sub_name]) {
                sub.insert(alias, entry.clone());
            }
        }
        let entry = Entry {
            name: name.to_string(),
            kind: raw.kind,
            options,
            read_only_with: raw.read_only_with.split_whitespace().map(str::to_string).collect(),
            operands: raw.operands,
            numeric: raw.numeric,
            single_dash: raw.single_dash,
            script: raw.script,
            helpers: raw.helpers,
            state: raw.state,
            leading: raw.leading,
            optional_leading: raw.optional_leading,
            assignments: raw.assignments,
            transparent: raw.transparent,
            fed: raw.fed,
            open_sub: raw.open_sub,
            sub,
        };
        Ok((entry, raw.aliases))
    }

    /// What the option `name` (`-o`, `--output`, `-fprint`) does, if known.
    pub(crate) fn class_of(&self, name: &str) -> Option<Class> {
        self.options.get(name).copied()
    }

    /// GNU programs take any unambiguous start of a long option
    /// (`--out=F` is `--output=F`): the riskiest option it could be.
    pub(crate) fn class_of_prefix(&self, name: &str) -> Option<Class> {
        if name.len() < 3 {
            return None;
        }
        let candidates: Vec<Class> = self
            .options
            .iter()
            .filter(|(option, _)| option.starts_with(name) && option.len() > name.len())
            .map(|(_, c)| *c)
            .collect();
        let risk = |c: &Class| match c {
            Class::Flag => 0,
            Class::Optional => 1,
            Class::Value => 2,
            _ => 3,
        };
        candidates.into_iter().max_by_key(risk)
    }

    /// The entry of subcommand `name` (`log` of git).
    pub fn sub_entry(&self, name: &str) -> Option<&Entry> {
        self.sub.get(name).map(AsRef::as_ref)
    }

    /// True when `-e`/`--expression` was given: operands are then files.
    pub(crate) fn has_script_option(&self, seen: &[String]) -> bool {
        seen.iter().any(|f| self.class_of(f) == Some(Class::Script))
            || seen.iter().any(|f| self.class_of(f) == Some(Class::Opaque))
    }

    /// True when some option or operand writes a file, or some option runs
    /// a command: words fed from stdin (`xargs`) could then do it.
    pub fn writes_or_runs_anything(&self) -> bool {
        self.script.is_some()
            || !matches!(self.operands, Operands::Read | Operands::Text)
            || self.options.values().any(|c| {
                matches!(
                    c,
                    Class::Write
                        | Class::Run
                        | Class::Opaque
                        | Class::WritesOperands
                        | Class::ShellString
                        | Class::Exec
                )
            })
            || self.sub.values().any(|s| s.writes_or_runs_anything())
    }
}

/// Every program of the table, by name and alias.
#[derive(Debug, Default)]
pub struct Table {
    programs: HashMap<String, std::sync::Arc<Entry>>,
}

impl Table {
    /// Reads the table from its TOML text.
    pub fn parse(text: &str) -> Result<Table, String> {
        let raw: BTreeMap<String, RawEntry> =
            toml::from_str(text).map_err(|e| format!("programs.toml: {e}"))?;
        let mut programs = HashMap::new();
        for (name, raw) in raw {
            let (entry, aliases) = Entry::build(&name, raw)?;
            let entry = std::sync::Arc::new(entry);
            for alias in aliases.into_iter().chain([name]) {
                if programs.insert(alias.clone(), entry.clone()).is_some() {
                    return Err(format!("programs.toml: {alias} has two entries"));
                }
            }
        }
        Ok(Table { programs })
    }

    /// The entry for `program` (a name without its folder).
    pub fn get(&self, program: &str) -> Option<&Entry> {
        self.programs.get(program).map(AsRef::as_ref)
    }

    /// Every name the table knows, sorted.
    pub fn names(&self) -> Vec<&str> {
        let mut names: Vec<&str> = self.programs.keys().map(String::as_str).collect();
        names.sort_unstable();
        names
    }
}

/// The table, read once. Its text is part of the binary and checked by a
/// test, so a parse error is a build mistake: it is logged and the table is
/// empty (rules then match text, as before the table).
pub fn table() -> &'static Table {
    static TABLE: OnceLock<Table> = OnceLock::new();
    TABLE.get_or_init(|| {
        Table::parse(include_str!("programs.toml")).unwrap_or_else(|e| {
            tracing::error!("{e}");
            Table::default()
        })
    })
}
