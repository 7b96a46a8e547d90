//! The REPL's line-editor behaviour: multi-line input (a trailing `\` or an
//! open ``` fence), completion of slash commands (built-in and custom) and
//! of `@file` mentions from the workspace's folders.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};

use rustyline::completion::Completer;
use rustyline::highlight::Highlighter;
use rustyline::hint::Hinter;
use rustyline::validate::{ValidationContext, ValidationResult, Validator};
use rustyline::{Context, Helper};

use crate::repl::COMMANDS;

/// Most names offered for one `@` completion (a huge folder is not listed whole).
const MAX_FILE_CANDIDATES: usize = 200;

/// The REPL's helper for rustyline.
pub(crate) struct ReplHelper {
    /// `/name` of each custom command.
    custom: Vec<String>,
    /// The line being typed.
    typed: Arc<Mutex<String>>,
    /// Where `@path` mentions are resolved.
    workspace: PathBuf,
}

impl ReplHelper {
    pub(crate) fn new(
        custom: Vec<String>,
        typed: Arc<Mutex<String>>,
        workspace: PathBuf,
    ) -> ReplHelper {
        ReplHelper { custom, typed, workspace }
    }

    /// Names in the folder of `partial` (a path relative to the workspace)
    /// that start with its last component; folders end with `/`. Hidden
    /// entries only when the component starts with `.`.
    fn files(&self, partial: &str) -> Vec<String> {
        let (dir, prefix) = match partial.rfind('/') {
            Some(i) => (&partial[..=i], &partial[i + 1..]),
            None => ("", partial),
        };
        let mut names: Vec<String> = std::fs::read_dir(self.workspace.join(dir))
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|entry| {
                let name = entry.file_name().into_string().ok()?;
                let wanted =
                    name.starts_with(prefix) && (prefix.starts_with('.') || !name.starts_with('.'));
                let folder = entry.file_type().is_ok_and(|t| t.is_dir());
                wanted.then(|| format!("{name}{}", if folder { "/" } else { "" }))
            })
            .collect();
        names.sort();
        names.truncate(MAX_FILE_CANDIDATES);
        names
    }
}

impl Validator for ReplHelper {
    fn validate(&self, ctx: &mut ValidationContext) -> rustyline::Result<ValidationResult> {
        let input = ctx.input();
        let open_fence = input.matches("```").count() % 2 == 1;
        Ok(if input.ends_with('\\') || open_fence {
            ValidationResult::Incomplete
        } else {
            ValidationResult::Valid(None)
        })
    }
}

impl Completer for ReplHelper {
    type Candidate = String;
    fn complete(
        &self,
        line: &str,
        pos: usize,
        _ctx: &Context<'_>,
    ) -> rustyline::Result<(usize, Vec<String>)> {
        let before = &line[..pos];
        let word_start = before.rfind(char::is_whitespace).map_or(0, |i| i + 1);
        if let Some(partial) = before[word_start..].strip_prefix('@') {
            // Replace only the last component: `@src/ma` + Tab keeps `@src/`.
            let last = partial.rfind('/').map_or(0, |i| i + 1);
            return Ok((word_start + 1 + last, self.files(partial)));
        }
        if !line.starts_with('/') || before.contains(' ') {
            return Ok((0, Vec::new()));
        }
        Ok((
            0,
            COMMANDS
                .iter()
                .map(|(c, _)| *c)
                .chain(self.custom.iter().map(String::as_str))
                .filter(|c| c.starts_with(before))
                .map(str::to_string)
                .collect(),
        ))
    }
}

impl Hinter for ReplHelper {
    type Hint = String;

    /// No hints; keeps the line being typed for [`crate::team::InboxWake`],
    /// which wakes the lead only at an empty prompt.
    fn hint(&self, line: &str, _pos: usize, _ctx: &Context<'_>) -> Option<String> {
        let mut typed = self.typed.lock().unwrap_or_else(PoisonError::into_inner);
        if *typed != line {
            line.clone_into(&mut typed);
        }
        None
    }
}
impl Highlighter for ReplHelper {}
impl Helper for ReplHelper {}
