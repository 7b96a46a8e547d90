//! One simple command against the allow rules, on what it does rather than
//! how it is spelt: the rule must name the program (through wrappers that
//! only change how it runs), and the table of program semantics
//! ([`ferroclaw_tools::effects`]) must know every option it is given. The
//! "always" rule for a command is built the same way: on the wrapped
//! program, never on a wrapper or interpreter, never broader than the call.

use ferroclaw_tools::effects::{self, Kind};
use ferroclaw_tools::shell::{SimpleCommand, Word, basename};

use super::Rule;

/// The words of a rule's pattern that are literal (before any `*`):
/// `git log --oneline:*` -> `["git", "log", "--oneline"]`.
fn literal_words(rule: &Rule) -> Vec<&str> {
    let Some(p) = rule.pattern.as_deref() else { return Vec::new() };
    let p = p.strip_suffix(":*").unwrap_or(p);
    let literal = p.split('*').next().unwrap_or("");
    // A word cut by the `*` is not literal.
    let complete = if p.contains('*') && !literal.ends_with(' ') {
        literal.rsplit_once(' ').map_or("", |(head, _)| head)
    } else {
        literal
    };
    complete.split_whitespace().collect()
}

/// True when `rule` names the exact command (no wildcard).
fn exact(rule: &Rule) -> bool {
    rule.pattern.as_deref().is_some_and(|p| !p.contains('*'))
}

fn joined(words: &[Word]) -> String {
    words.iter().map(|w| w.text.as_str()).collect::<Vec<_>>().join(" ")
}

/// True when an allow rule covers `cmd`: a rule matches the command from
/// some wrapper on (every wrapper before that one only changes how the rest
/// runs: `timeout`, `nice`, `xargs`), and names the wrapped program itself
/// (`npx prettier:*` names prettier; `timeout:*` names no program it runs);
/// and the program's options are all known to the table, none of them
/// running what configuration names, unless the rule spells them out.
pub(super) fn command_allowed(cmd: &SimpleCommand, allow: &[&Rule]) -> bool {
    if cmd.dynamic_program() {
        return false;
    }
    let layers = effects::layers(&cmd.words);
    let innermost = layers.starts.last().copied().unwrap_or(0);
    let table = effects::table();
    let mut chosen: Option<&Rule> = None;
    for (n, &start) in layers.starts.iter().enumerate() {
        // Every wrapper before this layer must only change how the rest runs.
        let outer_ok = layers.starts[..n].iter().all(|&s| {
            cmd.words
                .get(s)
                .and_then(|w| table.get(basename(&w.text)))
                .is_some_and(|e| e.transparent)
        });
        if !outer_ok {
            break;
        }
        let text = if start == 0 { cmd.text() } else { joined(&cmd.words[start..]) };
        let reaches = |r: &Rule| start == innermost || literal_words(r).len() > innermost - start;
        if let Some(rule) =
            allow.iter().find(|r| r.covers_tool("bash") && r.matches_command(&text) && reaches(r))
        {
            chosen = Some(rule);
            break;
        }
    }
    let Some(rule) = chosen else { return false };
    if rule.pattern.is_none() {
        return true; // `bash`: every command.
    }
    if !layers.certain && !exact(rule) {
        return false;
    }
    let fx = effects::of(&cmd.words);
    // Words from stdin (`xargs`) may be any option: only a program none of
    // whose options writes or runs is safe to feed.
    if fx.fed && table.get(&fx.program).is_none_or(effects::Entry::writes_or_runs_anything) {
        return false;
    }
    if exact(rule) {
        return true;
    }
    let named = literal_words(rule);
    let unknown = fx.unknown.iter().any(|o| !named.contains(&o.as_str()));
    !unknown && fx.opaque.is_empty()
}

/// The rule an "always" answer saves for `cmd`, or `None` when no rule
/// may be saved (a `*` in an exact command would be a wildcard). It names
/// the wrapped command, never a wrapper (`timeout 5 ls` saves `ls:*`); a
/// wrapper that does more than change how the rest runs (`sudo`, `env X=1`)
/// keeps the whole command exact, as do interpreters and commands whose
/// options write, run, or are not in the table.
pub(super) fn always_rule(cmd: &SimpleCommand) -> Option<Rule> {
    let layers = effects::layers(&cmd.words);
    let innermost = layers.starts.last().copied().unwrap_or(0);
    let table = effects::table();
    let transparent = layers.certain
        && cmd.assignments.is_empty()
        && layers.starts[..layers.starts.len().saturating_sub(1)].iter().all(|&s| {
            cmd.words
                .get(s)
                .and_then(|w| table.get(basename(&w.text)))
                .is_some_and(|e| e.transparent)
        });
    let whole = cmd.text();
    let inner: Vec<String> = cmd.words[innermost..].iter().map(|w| w.text.clone()).collect();
    let fx = effects::of(&cmd.words);
    let kind = table.get(&fx.program).map(|e| e.kind);
    let plain = fx.writes.is_empty()
        && fx.runs.is_empty()
        && fx.opaque.is_empty()
        && fx.unknown.is_empty()
        && !fx.fed
        && !matches!(kind, Some(Kind::Interpreter | Kind::Shell | Kind::Wrapper));
    let pattern = match (transparent, plain) {
        (true, true) => super::command_prefix(&inner, false),
        (true, false) => inner.join(" "),
        (false, _) => whole.clone(),
    };
    let is_exact = !pattern.ends_with(":*");
    if is_exact && pattern.contains('*') {
        return None;
    }
    Some(Rule::new("bash", Some(pattern)))
}
