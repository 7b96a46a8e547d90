//! The programs `sed` and `awk` take as their first word: read for the
//! commands in them that write files or run commands. sed's grammar is read
//! in full (anything outside it is opaque); awk's is not, so an awk program
//! that could write or run (`>` after `print`, `|`, `system`) is opaque.

/// What a script does beyond printing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Found {
    /// Files it writes (`w FILE`, `s/a/b/w FILE`).
    pub writes: Vec<String>,
    /// Command lines it runs (`e CMD`).
    pub runs: Vec<String>,
    /// What it does that cannot be told before it runs.
    pub opaque: Vec<String>,
}

/// Reads a sed script.
pub(super) fn sed(script: &str) -> Found {
    let mut found = Found::default();
    let s: Vec<char> = script.chars().collect();
    let mut i = 0;
    let rest_of_line = |i: &mut usize| -> String {
        let start = *i;
        while *i < s.len() && s[*i] != '\n' {
            *i += 1;
        }
        s[start..*i].iter().collect::<String>().trim().to_string()
    };
    while i < s.len() {
        let c = s[i];
        if c.is_whitespace() || c == ';' || c == '{' || c == '}' {
            i += 1;
            continue;
        }
        // An address, a range, then `!`.
        if !skip_address(&s, &mut i) {
            found.opaque.push(format!("sed address not understood in {script:?}"));
            return found;
        }
        while i < s.len() && s[i] == ' ' {
            i += 1;
        }
        if i < s.len() && s[i] == ',' {
            i += 1;
            if i < s.len() && matches!(s[i], '+' | '~') {
                i += 1;
            }
            if !skip_address(&s, &mut i) {
                found.opaque.push(format!("sed address not understood in {script:?}"));
                return found;
            }
        }
        while i < s.len() && (s[i] == ' ' || s[i] == '!') {
            i += 1;
        }
        let Some(&command) = s.get(i) else { break };
        i += 1;
        match command {
            '{' | '}' | ';' => {}
            '#' | ':' | 'a' | 'i' | 'c' | 'r' | 'R' => {
                let _ = rest_of_line(&mut i);
            }
            'b' | 't' | 'T' | 'v' => {
                while i < s.len() && s[i] != ';' && s[i] != '\n' && s[i] != '}' {
                    i += 1;
                }
            }
            'w' | 'W' => {
                let file = rest_of_line(&mut i);
                if !super::is_harmless_target(&file) {
                    found.writes.push(file);
                }
            }
            'e' => {
                let command = rest_of_line(&mut i);
                if command.is_empty() {
                    found.opaque.push("sed `e` runs the pattern space as a command".into());
                } else {
                    found.runs.push(command);
                }
            }
            's' | 'y' => {
                let Some(&delim) = s.get(i) else {
                    found.opaque.push(format!("sed `{command}` without a delimiter"));
                    return found;
                };
                i += 1;
                for _ in 0..2 {
                    if !skip_delimited(&s, &mut i, delim) {
                        found.opaque.push(format!("unterminated sed `{command}` in {script:?}"));
                        return found;
                    }
                }
                if command == 'y' {
                    continue;
                }
                while i < s.len() && !matches!(s[i], ';' | '\n' | '}') {
                    match s[i] {
                        'w' => {
                            i += 1;
                            let file = rest_of_line(&mut i);
                            if !super::is_harmless_target(&file) {
                                found.writes.push(file);
                            }
                        }
                        'e' => {
                            found.opaque.push("sed `s///e` runs the result as a command".into());
                            i += 1;
                        }
                        'g' | 'p' | 'i' | 'I' | 'm' | 'M' | ' ' => i += 1,
                        d if d.is_ascii_digit() => i += 1,
                        other => {
                            found.opaque.push(format!("sed `s` flag {other:?} not understood"));
                            return found;
                        }
                    }
                }
            }
            'p' | 'P' | 'd' | 'D' | 'n' | 'N' | 'g' | 'G' | 'h' | 'H' | 'x' | 'l' | '=' | 'q'
            | 'Q' | 'z' | 'F' => {
                while i < s.len() && s[i].is_ascii_digit() {
                    i += 1;
                }
            }
            other => {
                found.opaque.push(format!("sed command {other:?} not understood"));
                return found;
            }
        }
    }
    found
}

/// Skips one sed address (`12`, `$`, `/re/I`, `\%re%`, `0~3`), if any;
/// false when one starts but does not end.
fn skip_address(s: &[char], i: &mut usize) -> bool {
    match s.get(*i) {
        Some(c) if c.is_ascii_digit() => {
            while *i < s.len() && (s[*i].is_ascii_digit() || s[*i] == '~') {
                *i += 1;
            }
            true
        }
        Some('$') => {
            *i += 1;
            true
        }
        Some('/') => {
            *i += 1;
            let ok = skip_delimited(s, i, '/');
            while *i < s.len() && matches!(s[*i], 'I' | 'M') {
                *i += 1;
            }
            ok
        }
        Some('\\') => {
            let Some(&delim) = s.get(*i + 1) else { return false };
            *i += 2;
            skip_delimited(s, i, delim)
        }
        _ => true,
    }
}

/// Skips text up to an unescaped `delim` (and past it).
fn skip_delimited(s: &[char], i: &mut usize, delim: char) -> bool {
    while *i < s.len() {
        match s[*i] {
            '\\' => *i += 2,
            c if c == delim => {
                *i += 1;
                return true;
            }
            '\n' if delim != '\n' => return false,
            _ => *i += 1,
        }
    }
    false
}

/// Reads an awk program: string literals are set aside, then `system`,
/// `|` (a pipe to or from a command, not `||`), `@load`/`@include`, and a
/// `print`/`printf` with `>` in the same statement make it opaque.
pub(super) fn awk(program: &str) -> Found {
    let mut found = Found::default();
    let mut code = String::with_capacity(program.len());
    let mut chars = program.chars();
    while let Some(c) = chars.next() {
        if c == '"' {
            code.push_str("\"\"");
            while let Some(n) = chars.next() {
                match n {
                    '\\' => {
                        chars.next();
                    }
                    '"' => break,
                    _ => {}
                }
            }
        } else {
            code.push(c);
        }
    }
    let without_or = code.replace("||", "  ");
    if without_or.contains('|') {
        found.opaque.push("awk pipes to or from a command".into());
    }
    let words = code.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '@'));
    for word in words {
        if matches!(word, "system" | "@load" | "@include" | "@namespace") {
            found.opaque.push(format!("awk `{word}`"));
        }
    }
    for statement in code.split([';', '{', '}', '\n']) {
        let t = statement.trim_start();
        let prints = t.starts_with("print") || t.contains(" print") || t.contains(")print");
        if prints && t.contains('>') {
            found.opaque.push("awk `print >` writes a file".into());
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sed_scripts_that_only_print_do_nothing_else() {
        for script in ["1,20p", "10p", "/fn main/,/^}/p", "$p", "s/a/b/g", "s|a/b|c|2p", "y/ab/cd/"]
        {
            assert_eq!(sed(script), Found::default(), "{script}");
        }
    }

    #[test]
    fn sed_commands_that_write_or_run_are_found() {
        assert_eq!(sed("w out.txt").writes, ["out.txt"]);
        assert_eq!(sed("1,3s/a/b/w log").writes, ["log"]);
        assert_eq!(sed("1e touch x").runs, ["touch x"]);
        assert!(!sed("s/x/id/e").opaque.is_empty());
        assert!(!sed("e").opaque.is_empty());
        assert!(!sed("1!G;h;$!d;Kfoo").opaque.is_empty());
    }

    #[test]
    fn awk_programs_that_can_write_or_run_are_opaque() {
        assert!(awk("{ print $1 }").opaque.is_empty());
        assert!(awk("$3 > 10 { n++ } END { print n }").opaque.is_empty());
        assert!(awk("{ print \"a|b\" }").opaque.is_empty());
        for program in [
            "BEGIN { system(\"id\") }",
            "{ print > \"out\" }",
            "{ print | \"sh\" }",
            "BEGIN { \"id\" | getline x }",
            "@load \"x\"",
        ] {
            assert!(!awk(program).opaque.is_empty(), "{program}");
        }
    }
}
