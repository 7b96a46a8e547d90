//! A custom command's arguments, filled in as Claude Code 2.1.332 does:
//! `$ARGUMENTS` is everything typed after the name; `$ARGUMENTS[N]` and `$N`
//! are its N-th word counting from 0 (`"quoted words"` stay one word); a name
//! from the frontmatter's `arguments:` list is the word at its place
//! (`arguments: [issue, priority]` makes `$issue` the first word). A position
//! with no word stays as written, `\$1` is a literal `$1`, and `$1x` is no
//! placeholder. A body with no placeholder gets the arguments appended as
//! `\n\nARGUMENTS: <args>`.

/// The arguments of one command call.
pub struct Arguments<'a> {
    raw: &'a str,
    words: Vec<String>,
    names: &'a [String],
}

impl<'a> Arguments<'a> {
    /// `raw` as typed after the command's name; `names` from `arguments:`.
    pub fn new(raw: &'a str, names: &'a [String]) -> Self {
        let raw = raw.trim();
        Arguments { raw, words: split_words(raw), names }
    }

    /// `text` with every placeholder filled in.
    pub fn fill(&self, text: &str) -> String {
        let mut out = String::with_capacity(text.len() + self.raw.len());
        let mut rest = text;
        while let Some(i) = rest.find('$') {
            let escaped = rest[..i].ends_with('\\');
            out.push_str(&rest[..i - usize::from(escaped)]);
            let after = &rest[i + 1..];
            match self.placeholder(after) {
                Some((len, value)) if !escaped => {
                    out.push_str(value.unwrap_or(&rest[i..i + 1 + len]));
                    rest = &after[len..];
                }
                Some(_) => {
                    // `\$1`: the placeholder itself, without the backslash.
                    out.push('$');
                    rest = after;
                }
                None => {
                    if escaped {
                        out.push('\\');
                    }
                    out.push('$');
                    rest = after;
                }
            }
        }
        out.push_str(rest);
        out
    }

    /// True when `text` has a placeholder these arguments fill.
    pub fn has_placeholder(&self, text: &str) -> bool {
        text.match_indices('$').any(|(i, _)| self.placeholder(&text[i + 1..]).is_some())
    }

    /// The command's text for these arguments: `body` filled in, or, when
    /// it has no placeholder, with `ARGUMENTS: ...` appended.
    pub fn apply(&self, body: &str) -> String {
        if self.has_placeholder(body) || self.raw.is_empty() {
            return self.fill(body);
        }
        format!("{body}\n\nARGUMENTS: {}", self.raw)
    }

    /// The placeholder at the start of `after` (the text after a `$`): its
    /// length and its value (`None`: a position with no word).
    fn placeholder(&self, after: &str) -> Option<(usize, Option<&str>)> {
        if let Some(tail) = after.strip_prefix("ARGUMENTS") {
            if let Some(index) = tail.strip_prefix('[') {
                let digits = index.chars().take_while(char::is_ascii_digit).count();
                if digits > 0 && index[digits..].starts_with(']') {
                    let n = index[..digits].parse::<usize>().ok();
                    let len = "ARGUMENTS[".len() + digits + 1;
                    return Some((len, n.and_then(|n| self.word(n))));
                }
            }
            return Some(("ARGUMENTS".len(), Some(self.raw)));
        }
        let digits = after.chars().take_while(char::is_ascii_digit).count();
        if digits > 0 && !starts_with_word_char(&after[digits..]) {
            let n = after[..digits].parse::<usize>().ok();
            return Some((digits, n.and_then(|n| self.word(n))));
        }
        let name_len = after.chars().take_while(|c| c.is_alphanumeric() || *c == '_' || *c == '-');
        let name_len: usize = name_len.map(char::len_utf8).sum();
        let name = &after[..name_len];
        let n = self.names.iter().position(|n| n == name)?;
        Some((name_len, self.word(n)))
    }

    fn word(&self, n: usize) -> Option<&str> {
        self.words.get(n).map(String::as_str)
    }
}

fn starts_with_word_char(text: &str) -> bool {
    text.chars().next().is_some_and(|c| c.is_alphanumeric() || c == '_')
}

/// Words of an argument string; `"quoted words"` stay one.
fn split_words(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    let mut quote = None;
    for c in text.chars() {
        match (quote, c) {
            (None, '"' | '\'') => quote = Some(c),
            (Some(q), c) if c == q => quote = None,
            (None, c) if c.is_whitespace() => {
                if !current.is_empty() {
                    out.push(std::mem::take(&mut current));
                }
            }
            (_, c) => current.push(c),
        }
    }
    if !current.is_empty() {
        out.push(current);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    // Each expected text is what Claude Code 2.1.332 sent the model for the
    // same command file and arguments (recorded against the scripted server).

    #[test]
    fn positions_count_from_zero_and_missing_ones_stay_as_written() {
        let args = Arguments::new(r#"first "two words" third"#, &[]);
        let body =
            "zero=$0 one=$1 two=$2 all=$ARGUMENTS idx0=$ARGUMENTS[0] idx1=$ARGUMENTS[1] nine=$9\n";
        assert_eq!(
            args.apply(body),
            "zero=first one=two words two=third all=first \"two words\" third idx0=first idx1=two words nine=$9\n"
        );
        let args = Arguments::new("one two", &[]);
        assert_eq!(
            args.apply("a=$ARGUMENTS[5] b=$3 c=$10 d=\\$1 e=$1x f=$name g=$0\n"),
            "a=$ARGUMENTS[5] b=$3 c=$10 d=$1 e=$1x f=$name g=one\n"
        );
    }

    #[test]
    fn named_arguments_take_their_place_in_the_list() {
        let names = ["issue".to_string(), "priority".to_string()];
        let args = Arguments::new(r#"42 "very high" extra"#, &names);
        assert_eq!(
            args.apply("issue=$issue prio=$priority all=$ARGUMENTS\n"),
            "issue=42 prio=very high all=42 \"very high\" extra\n"
        );
    }

    #[test]
    fn a_body_without_placeholders_gets_the_arguments_appended() {
        let args = Arguments::new(r#" first "two words" third "#, &[]);
        assert_eq!(
            args.apply("Do the thing.\n"),
            "Do the thing.\n\n\nARGUMENTS: first \"two words\" third"
        );
        assert_eq!(Arguments::new("", &[]).apply("Do the thing.\n"), "Do the thing.\n");
        assert_eq!(Arguments::new("x", &[]).apply("costs $5$ \\$y"), "costs $5$ \\$y");
    }
}
