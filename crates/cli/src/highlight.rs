//! Syntax colours for code blocks in answers: keywords, strings, comments
//! and numbers, one line at a time, for the languages models write most
//! (Rust, Python, JavaScript/TypeScript, Go, C/C++/Java, shell, TOML/YAML).
//!
//! Deliberately small: a full highlighter (syntect with its default syntax
//! and theme sets) adds megabytes to the binary and minutes to a build for a
//! difference few notice in a terminal.

const KEYWORD: &str = "\x1b[35m";
const STRING: &str = "\x1b[32m";
const COMMENT: &str = "\x1b[2m";
const NUMBER: &str = "\x1b[36m";
const RESET: &str = "\x1b[0m";

/// How a language writes keywords, comments and strings.
struct Syntax {
    keywords: &'static [&'static str],
    line_comment: &'static [&'static str],
    /// `'` quotes strings (not Rust, where it starts lifetimes and chars).
    single_quotes: bool,
}

const RUST: Syntax = Syntax {
    keywords: &[
        "as", "async", "await", "break", "const", "continue", "crate", "dyn", "else", "enum",
        "extern", "false", "fn", "for", "if", "impl", "in", "let", "loop", "match", "mod", "move",
        "mut", "pub", "ref", "return", "self", "Self", "static", "struct", "super", "trait",
        "true", "type", "unsafe", "use", "where", "while", "Some", "None", "Ok", "Err",
    ],
    line_comment: &["//"],
    single_quotes: false,
};

const PYTHON: Syntax = Syntax {
    keywords: &[
        "and", "as", "assert", "async", "await", "break", "class", "continue", "def", "del",
        "elif", "else", "except", "False", "finally", "for", "from", "global", "if", "import",
        "in", "is", "lambda", "None", "nonlocal", "not", "or", "pass", "raise", "return", "True",
        "try", "while", "with", "yield", "self",
    ],
    line_comment: &["#"],
    single_quotes: true,
};

const C_LIKE: Syntax = Syntax {
    keywords: &[
        "async",
        "await",
        "break",
        "case",
        "catch",
        "class",
        "const",
        "continue",
        "default",
        "defer",
        "delete",
        "do",
        "else",
        "enum",
        "export",
        "extends",
        "false",
        "final",
        "for",
        "func",
        "function",
        "go",
        "if",
        "import",
        "interface",
        "let",
        "new",
        "null",
        "nil",
        "package",
        "private",
        "public",
        "return",
        "static",
        "struct",
        "switch",
        "this",
        "throw",
        "true",
        "try",
        "type",
        "typeof",
        "var",
        "void",
        "while",
        "int",
        "char",
        "float",
        "double",
        "bool",
        "string",
        "auto",
        "include",
        "from",
        "of",
        "in",
        "range",
        "map",
        "chan",
    ],
    line_comment: &["//"],
    single_quotes: true,
};

const SHELL: Syntax = Syntax {
    keywords: &[
        "if", "then", "else", "elif", "fi", "for", "in", "do", "done", "while", "case", "esac",
        "function", "return", "export", "local", "echo", "cd", "set", "true", "false",
    ],
    line_comment: &["#"],
    single_quotes: true,
};

const CONFIG: Syntax =
    Syntax { keywords: &["true", "false", "null"], line_comment: &["#"], single_quotes: true };

fn syntax(lang: &str) -> Option<&'static Syntax> {
    Some(match lang.trim().to_ascii_lowercase().as_str() {
        "rust" | "rs" => &RUST,
        "python" | "py" => &PYTHON,
        "js" | "javascript" | "ts" | "typescript" | "jsx" | "tsx" | "go" | "golang" | "c" | "h"
        | "cpp" | "c++" | "java" | "kotlin" | "swift" | "cs" | "csharp" => &C_LIKE,
        "sh" | "bash" | "shell" | "zsh" | "console" => &SHELL,
        "toml" | "yaml" | "yml" | "ini" => &CONFIG,
        _ => return None,
    })
}

/// One line of code in `lang`, coloured; `None` for a language not known here.
pub(crate) fn line(lang: &str, code: &str) -> Option<String> {
    let syntax = syntax(lang)?;
    let chars: Vec<char> = code.chars().collect();
    let mut out = String::with_capacity(code.len() + 16);
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if syntax.line_comment.iter().any(|m| starts_with(&chars[i..], m)) {
            out.push_str(COMMENT);
            out.extend(&chars[i..]);
            out.push_str(RESET);
            break;
        }
        if c == '"' || (c == '\'' && syntax.single_quotes) || c == '`' {
            let mut j = i + 1;
            while j < chars.len() && chars[j] != c {
                j += if chars[j] == '\\' { 2 } else { 1 };
            }
            let end = (j + 1).min(chars.len());
            out.push_str(STRING);
            out.extend(&chars[i..end]);
            out.push_str(RESET);
            i = end;
            continue;
        }
        if c.is_alphanumeric() || c == '_' {
            let mut j = i;
            while j < chars.len() && (chars[j].is_alphanumeric() || chars[j] == '_') {
                j += 1;
            }
            let word: String = chars[i..j].iter().collect();
            if c.is_ascii_digit() {
                out.push_str(NUMBER);
                out.push_str(&word);
                out.push_str(RESET);
            } else if syntax.keywords.contains(&word.as_str()) {
                out.push_str(KEYWORD);
                out.push_str(&word);
                out.push_str(RESET);
            } else {
                out.push_str(&word);
            }
            i = j;
            continue;
        }
        out.push(c);
        i += 1;
    }
    Some(out)
}

fn starts_with(chars: &[char], marker: &str) -> bool {
    let mut it = chars.iter();
    marker.chars().all(|m| it.next() == Some(&m))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keywords_strings_comments_and_numbers_get_colours() {
        let out = line("rust", r#"let s = "a \" b"; // note 1"#).unwrap();
        assert!(out.starts_with(&format!("{KEYWORD}let{RESET}")), "{out:?}");
        assert!(out.contains(&format!("{STRING}\"a \\\" b\"{RESET}")), "{out:?}");
        assert!(out.ends_with(&format!("{COMMENT}// note 1{RESET}")), "{out:?}");
        assert!(line("py", "x = 42").unwrap().contains(&format!("{NUMBER}42{RESET}")));
    }

    #[test]
    fn rust_lifetimes_stay_plain_and_unknown_languages_are_left_to_the_caller() {
        assert_eq!(line("rust", "fn f<'a>(x: &'a str)").unwrap().matches(STRING).count(), 0);
        assert_eq!(line("brainfuck", "let x = 1"), None);
    }
}
