//! Claude Code's command-line flags that ferroclaw does not take, in one
//! table: what a program written for Claude Code (the Agent SDK passes its
//! options as flags) gets when it passes one. A flag that only asks for
//! more output or tuning ferroclaw does not do is left out with a warning
//! on stderr, so the run goes on; a flag whose promise ferroclaw cannot keep
//! (a budget, a tool set, servers to connect) stops the run before anything
//! happens, saying what to use instead. Flags ferroclaw has (`--model`,
//! `--allowedTools`, `--permission-mode`, `--resume`, ...) are not here.

/// What becomes of a flag.
enum Handling {
    /// Left out, with the reason on stderr.
    Ignored(&'static str),
    /// The run stops before it starts, with the reason.
    Refused(&'static str),
    /// `--setting-sources`: left out when it names every source (what
    /// ferroclaw does), refused otherwise.
    Sources(&'static str),
}

/// A Claude Code flag ferroclaw does not take.
struct Flag {
    name: &'static str,
    /// Takes a value (`--flag VALUE` or `--flag=VALUE`).
    value: bool,
    handling: Handling,
}

const fn ignored(name: &'static str, value: bool, why: &'static str) -> Flag {
    Flag { name, value, handling: Handling::Ignored(why) }
}

const fn refused(name: &'static str, value: bool, why: &'static str) -> Flag {
    Flag { name, value, handling: Handling::Refused(why) }
}

const NO_SESSION_FLAGS: &str =
    "sessions are chosen with --continue and --resume ID (ferroclaw sessions list)";

/// Claude Code 2.1's flags (those its Agent SDK passes) that ferroclaw lacks.
const FLAGS: &[Flag] = &[
    ignored("include-partial-messages", false, "whole messages are sent, not partial ones"),
    ignored("include-hook-events", false, "hook events are not sent"),
    ignored("debug", false, "use -v or FERROCLAW_LOG=debug"),
    ignored("debug-to-stderr", false, "use -v or FERROCLAW_LOG=debug"),
    ignored("debug-file", true, "use -v or FERROCLAW_LOG=debug"),
    ignored("max-thinking-tokens", true, "no thinking budget is sent to the model"),
    ignored("thinking-display", true, "thinking is not shown"),
    ignored("effort", true, "no effort level is sent to the model"),
    ignored("betas", true, "no beta headers are sent"),
    ignored("fallback-model", true, "there is no fallback model; a failed request fails"),
    ignored("session-mirror", false, "sessions are not mirrored"),
    refused("max-budget-usd", true, "ferroclaw does not count dollars; --max-turns caps a request"),
    refused("tools", true, "choose tools with --allowedTools and --disallowedTools"),
    Flag {
        name: "setting-sources",
        value: true,
        handling: Handling::Sources(
            "ferroclaw reads the user's settings and, once the project is trusted, the \
             project's; it cannot leave a source out (user,project,local is what it does)",
        ),
    },
    refused(
        "await-initialize",
        false,
        "what the Agent SDK sends in its initialize request (MCP servers, settings, \
         directories) is not read; with mcpServers, pass mcpServersDelivery: \"argv\" \
         (they come as --mcp-config)",
    ),
    refused("fork-session", false, NO_SESSION_FLAGS),
    refused("resume-session-at", true, NO_SESSION_FLAGS),
    refused("resume-drops-turn", false, NO_SESSION_FLAGS),
    refused("session-id", true, NO_SESSION_FLAGS),
    refused("no-session-persistence", false, "every session is kept (ferroclaw sessions)"),
    refused("json-schema", true, "structured output is not supported"),
    refused("agent", true, "agent types are used through the task tool"),
    ignored(
        "allow-dangerously-skip-permissions",
        false,
        "bypass mode needs no unlocking; --permission-mode chooses it",
    ),
    refused("sdk-url", true, "ferroclaw speaks stream-json on stdin and stdout only"),
    refused("project-config-root", true, "the project is the working directory (--cwd)"),
    refused("plugin-dir-no-mcp", true, "use --plugin-dir"),
    refused("managed-settings", true, "managed settings are not supported"),
    refused("managed-settings-in-initialize", false, "managed settings are not supported"),
    refused("channels", true, "channels are the gateway's (ferroclaw gateway)"),
    refused(
        "task-budget",
        true,
        "ferroclaw does not count a task budget; --max-turns caps a request",
    ),
];

/// `args` (program name first) without the ignored flags, and a warning for
/// each; or why the run cannot start. Only what comes before `--` is looked
/// at, and the value of one of ferroclaw's own flags is never taken for a
/// flag.
pub(crate) fn screen(args: Vec<String>) -> Result<(Vec<String>, Vec<String>), String> {
    // Built only when a flag not in the table is met (most runs have none).
    let command = std::cell::OnceCell::new();
    let takes_value = |name: &str| {
        let command: &clap::Command = command.get_or_init(|| {
            let mut command = <crate::args::Cli as clap::CommandFactory>::command();
            command.build();
            command
        });
        command.get_arguments().any(|a| {
            (a.get_long() == Some(name) || a.get_all_aliases().is_some_and(|al| al.contains(&name)))
                && a.get_action().takes_values()
        })
    };
    let mut kept = Vec::with_capacity(args.len());
    let mut warnings = Vec::new();
    let mut args = args.into_iter();
    kept.extend(args.next());
    while let Some(arg) = args.next() {
        if arg == "--" {
            kept.push(arg);
            kept.extend(args);
            break;
        }
        let Some(long) = arg.strip_prefix("--") else {
            kept.push(arg);
            continue;
        };
        let (name, inline) = match long.split_once('=') {
            Some((name, value)) => (name, Some(value.to_string())),
            None => (long, None),
        };
        let Some(flag) = FLAGS.iter().find(|f| f.name == name) else {
            let own_value = inline.is_none() && takes_value(name);
            kept.push(arg);
            if own_value {
                kept.extend(args.next());
            }
            continue;
        };
        let value = inline.or_else(|| if flag.value { args.next() } else { None });
        match flag.handling {
            Handling::Refused(why) => {
                return Err(format!("Claude Code's --{name} is not supported: {why}"));
            }
            Handling::Ignored(why) => {
                warnings.push(format!("ignoring Claude Code's --{name}: {why}"));
            }
            Handling::Sources(why) => {
                let named: Vec<&str> =
                    value.as_deref().unwrap_or_default().split(',').map(str::trim).collect();
                if !["user", "project", "local"].iter().all(|s| named.contains(s)) {
                    return Err(format!("Claude Code's --{name} is not supported: {why}"));
                }
            }
        }
    }
    Ok((kept, warnings))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn screened(args: &[&str]) -> Result<(Vec<String>, Vec<String>), String> {
        screen(args.iter().map(ToString::to_string).collect())
    }

    #[test]
    fn ignored_flags_go_with_their_values_and_are_named_once_each() {
        let (kept, warnings) = screened(&[
            "ferroclaw",
            "--output-format",
            "stream-json",
            "--include-partial-messages",
            "--max-thinking-tokens",
            "2048",
            "--fallback-model=claude-haiku-4-5",
            "--model",
            "claude-sonnet-4-5",
            "-p",
            "hi",
        ])
        .unwrap();
        assert_eq!(
            kept,
            [
                "ferroclaw",
                "--output-format",
                "stream-json",
                "--model",
                "claude-sonnet-4-5",
                "-p",
                "hi"
            ]
        );
        assert_eq!(warnings.len(), 3, "{warnings:?}");
        assert!(warnings[1].starts_with("ignoring Claude Code's --max-thinking-tokens:"));
    }

    #[test]
    fn a_refused_flag_stops_the_run_with_what_to_use_instead() {
        let err = screened(&["ferroclaw", "-p", "hi", "--max-budget-usd", "1"]).unwrap_err();
        assert_eq!(
            err,
            "Claude Code's --max-budget-usd is not supported: ferroclaw does not count dollars; \
             --max-turns caps a request"
        );
        let err = screened(&["ferroclaw", "--tools=Read,Grep", "-p", "hi"]).unwrap_err();
        assert!(err.contains("--allowedTools"), "{err}");
    }

    #[test]
    fn setting_sources_pass_only_when_they_name_what_ferroclaw_reads() {
        let all = screened(&["ferroclaw", "--setting-sources=user,project,local", "-p", "hi"]);
        assert_eq!(all.unwrap(), (vec!["ferroclaw".into(), "-p".into(), "hi".into()], vec![]));
        for some in ["--setting-sources=", "--setting-sources=user"] {
            let err = screened(&["ferroclaw", some, "-p", "hi"]).unwrap_err();
            assert!(err.contains("cannot leave a source out"), "{err}");
        }
    }

    #[test]
    fn a_value_of_ferroclaws_own_flag_or_a_word_after_double_dash_is_not_a_flag() {
        let args = ["ferroclaw", "--append-system-prompt", "--tools", "-p", "--", "--debug"];
        let (kept, warnings) = screened(&args).unwrap();
        assert_eq!(kept, args);
        assert!(warnings.is_empty());
    }

    #[test]
    fn no_flag_in_the_table_is_one_ferroclaw_has() {
        let command = <crate::args::Cli as clap::CommandFactory>::command();
        for flag in FLAGS {
            let ours = command.get_arguments().any(|a| {
                a.get_long() == Some(flag.name)
                    || a.get_all_aliases().is_some_and(|al| al.contains(&flag.name))
            });
            assert!(!ours, "--{} is ferroclaw's own", flag.name);
        }
    }
}
