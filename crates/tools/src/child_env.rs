//! The environment of the commands ferroclaw starts (`bash`, background jobs,
//! MCP stdio servers): an allow-list, never the whole environment, so that
//! provider keys, `GITHUB_TOKEN` or the gateway token cannot be printed by a
//! command the model runs. More names pass when config lists them
//! (`[sandbox] env = ["GITHUB_TOKEN"]`); an MCP server's own `env` from its
//! config is added on top by the caller.

use std::ffi::OsString;

/// Names passed from ferroclaw's environment when set: the basics a shell
/// and its tools need, and where toolchains live (paths, not secrets).
pub const PASSED_ENV: &[&str] = &[
    "PATH",
    "HOME",
    "LANG",
    "LANGUAGE",
    "TERM",
    "COLORTERM",
    "USER",
    "LOGNAME",
    "SHELL",
    "TZ",
    "CARGO_HOME",
    "RUSTUP_HOME",
    "GOPATH",
    "GOROOT",
    "JAVA_HOME",
    "VIRTUAL_ENV",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
];

/// Prefixes of names passed (locale settings).
pub const PASSED_PREFIXES: &[&str] = &["LC_"];

/// The temp folder commands get as `TMPDIR`: fixed, the one Landlock lets
/// them write (see [`crate::landlock::TEMP_DIRS`]).
pub const CHILD_TMPDIR: &str = "/tmp";

/// The environment for a command: the allow-listed names from `vars` (in
/// practice `std::env::vars_os()`), the names in `extra`, and `TMPDIR`.
pub fn child_env(
    vars: impl IntoIterator<Item = (OsString, OsString)>,
    extra: &[String],
) -> Vec<(OsString, OsString)> {
    let mut env: Vec<(OsString, OsString)> = vars
        .into_iter()
        .filter(|(name, _)| {
            let Some(name) = name.to_str() else {
                return false;
            };
            name != "TMPDIR"
                && (PASSED_ENV.contains(&name)
                    || PASSED_PREFIXES.iter().any(|p| name.starts_with(p))
                    || extra.iter().any(|e| e == name))
        })
        .collect();
    env.push(("TMPDIR".into(), CHILD_TMPDIR.into()));
    env
}

/// [`child_env`] of ferroclaw's own environment.
pub fn current_child_env(extra: &[String]) -> Vec<(OsString, OsString)> {
    child_env(std::env::vars_os(), extra)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(pairs: &[(&str, &str)]) -> Vec<(OsString, OsString)> {
        pairs.iter().map(|(k, v)| (OsString::from(k), OsString::from(v))).collect()
    }

    fn names(env: &[(OsString, OsString)]) -> Vec<String> {
        env.iter().map(|(k, _)| k.to_string_lossy().into_owned()).collect()
    }

    #[test]
    fn only_allow_listed_names_pass_and_keys_never_do() {
        let env = child_env(
            vars(&[
                ("PATH", "/bin"),
                ("HOME", "/home/u"),
                ("LC_ALL", "C.UTF-8"),
                ("OPENAI_API_KEY", "sk-secret"),
                ("ANTHROPIC_API_KEY", "sk-ant"),
                ("GITHUB_TOKEN", "ghp_x"),
                ("FERROCLAW_GATEWAY_TOKEN", "t"),
                ("AWS_SECRET_ACCESS_KEY", "aws"),
            ]),
            &[],
        );
        assert_eq!(names(&env), ["PATH", "HOME", "LC_ALL", "TMPDIR"]);
    }

    #[test]
    fn names_listed_in_config_pass() {
        let env = child_env(
            vars(&[("GITHUB_TOKEN", "ghp_x"), ("NPM_TOKEN", "n")]),
            &["GITHUB_TOKEN".to_string()],
        );
        assert_eq!(names(&env), ["GITHUB_TOKEN", "TMPDIR"]);
    }

    #[test]
    fn tmpdir_is_fixed_whatever_the_environment_says() {
        let env = child_env(vars(&[("TMPDIR", "/home/u/.ssh")]), &["TMPDIR".to_string()]);
        assert_eq!(env, vars(&[("TMPDIR", "/tmp")]));
    }
}
