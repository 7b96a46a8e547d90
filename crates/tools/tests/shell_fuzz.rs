//! Property tests (proptest, bounded) for the shell parser and the deny list
//! built on it: any command text gives a parse (with what it could not place
//! listed as unknown), never a panic, and a chain never hides a command that
//! the parser was shown on its own.

use std::path::Path;

use ferroclaw_tools::dangerous_command;
use ferroclaw_tools::shell::parse;
use proptest::prelude::*;

/// Cases per property: cheap in CI (the parser is C, each case well under a millisecond).
const CASES: u32 = 1_000;

/// Shell-looking pieces, so most inputs reach deep into the grammar.
const PIECES: &[&str] = &[
    "git status",
    "rm -rf ~",
    "echo hi",
    "ls",
    " ; ",
    " && ",
    " || ",
    " | ",
    " & ",
    "\n",
    "$(",
    ")",
    "`",
    "<(",
    ">",
    ">>",
    "2>&1",
    "'",
    "\"",
    "\\",
    "{ ",
    " }",
    "( ",
    " )",
    "sh -c '",
    "bash -c \"",
    "eval ",
    "xargs ",
    "env ",
    "/usr/bin/",
    "f(){ f|f& };f",
    "$HOME",
    "${x:-y}",
    "<<EOF\n",
    "EOF\n",
    "for i in a b; do ",
    "; done",
    "if true; then ",
    "; fi",
    "case x in x) ",
    ";; esac",
    "#",
    "\u{0}",
];

fn shellish() -> impl Strategy<Value = String> {
    proptest::collection::vec(
        prop_oneof![proptest::sample::select(PIECES).prop_map(str::to_string), ".{0,12}"],
        0..24,
    )
    .prop_map(|parts| parts.concat())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: CASES, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn any_text_parses_or_is_marked_unknown_never_panics(text in shellish()) {
        let script = parse(&text);
        for command in &script.commands {
            let _ = command.text();
        }
        let _ = script.file_writes();
        let _ = script.understood();
        let _ = dangerous_command(&text, Path::new("/w"), Path::new("/w"));
    }

    #[test]
    fn a_command_chained_after_another_is_still_seen(
        first in proptest::sample::select(&["git status", "ls -la", "true", "echo ok"][..]),
        sep in proptest::sample::select(&["; ", " && ", " || ", " | ", " & ", "\n"][..]),
    ) {
        let script = parse(&format!("{first}{sep}touch pwned"));
        let texts: Vec<String> = script.commands.iter().map(ferroclaw_tools::shell::SimpleCommand::text).collect();
        prop_assert!(texts.iter().any(|t| t == "touch pwned"), "{texts:?}");
    }
}
