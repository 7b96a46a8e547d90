//! A small GBNF reader and matcher for tests: does a grammar accept a whole
//! text? It reads the GBNF the converter writes (one rule a line; string
//! literals, character classes with ranges and `^`, rule references,
//! groups, `|`, and `* + ? {m} {m,} {m,n}`) with llama.cpp's escapes, and
//! fails on anything else or on a rule used but never defined, so a
//! grammar llama.cpp would reject does not pass here either.

use std::collections::{BTreeSet, HashMap};

#[derive(Debug, Clone)]
enum Expr {
    Literal(Vec<char>),
    Class { negated: bool, ranges: Vec<(char, char)> },
    Rule(String),
    Seq(Vec<Expr>),
    Alt(Vec<Expr>),
    Repeat { inner: Box<Expr>, min: usize, max: Option<usize> },
}

/// A parsed grammar.
pub(crate) struct Gbnf {
    rules: HashMap<String, Expr>,
}

impl Gbnf {
    /// Reads `text`; an error says what and where.
    pub(crate) fn parse(text: &str) -> Result<Self, String> {
        let mut rules = HashMap::new();
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let (name, body) = line.split_once("::=").ok_or(format!("line {}: no ::=", n + 1))?;
            let name = name.trim();
            if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') {
                return Err(format!("line {}: bad rule name {name:?}", n + 1));
            }
            let mut p = Parser { chars: body.chars().collect(), at: 0 };
            let expr = p.alternatives().map_err(|e| format!("line {}: {e}", n + 1))?;
            p.skip_space();
            if p.at != p.chars.len() {
                return Err(format!("line {}: unexpected {:?}", n + 1, p.chars[p.at]));
            }
            if rules.insert(name.to_string(), expr).is_some() {
                return Err(format!("rule {name} defined twice"));
            }
        }
        let g = Self { rules };
        for expr in g.rules.values() {
            g.check_refs(expr)?;
        }
        if !g.rules.contains_key("root") {
            return Err("no root rule".into());
        }
        Ok(g)
    }

    fn check_refs(&self, e: &Expr) -> Result<(), String> {
        match e {
            Expr::Rule(r) if !self.rules.contains_key(r) => Err(format!("undefined rule {r}")),
            Expr::Seq(v) | Expr::Alt(v) => v.iter().try_for_each(|e| self.check_refs(e)),
            Expr::Repeat { inner, .. } => self.check_refs(inner),
            _ => Ok(()),
        }
    }

    /// True when `root` matches all of `text`.
    pub(crate) fn matches(&self, text: &str) -> bool {
        let input: Vec<char> = text.chars().collect();
        let mut m = Matcher { g: self, input: &input, memo: HashMap::new() };
        m.ends(&Expr::Rule("root".into()), 0).contains(&input.len())
    }
}

struct Parser {
    chars: Vec<char>,
    at: usize,
}

impl Parser {
    fn peek(&self) -> Option<char> {
        self.chars.get(self.at).copied()
    }

    fn skip_space(&mut self) {
        while self.peek().is_some_and(|c| c == ' ' || c == '\t') {
            self.at += 1;
        }
    }

    fn alternatives(&mut self) -> Result<Expr, String> {
        let mut alts = vec![self.sequence()?];
        while self.peek() == Some('|') {
            self.at += 1;
            alts.push(self.sequence()?);
        }
        Ok(if alts.len() == 1 { alts.remove(0) } else { Expr::Alt(alts) })
    }

    fn sequence(&mut self) -> Result<Expr, String> {
        let mut items = Vec::new();
        loop {
            self.skip_space();
            let item = match self.peek() {
                None | Some('|' | ')') => break,
                Some('"') => Expr::Literal(self.literal()?),
                Some('[') => self.class()?,
                Some('(') => {
                    self.at += 1;
                    let inner = self.alternatives()?;
                    self.skip_space();
                    if self.peek() != Some(')') {
                        return Err("unclosed (".into());
                    }
                    self.at += 1;
                    inner
                }
                Some(c) if c.is_ascii_alphanumeric() || c == '-' => {
                    let start = self.at;
                    while self.peek().is_some_and(|c| c.is_ascii_alphanumeric() || c == '-') {
                        self.at += 1;
                    }
                    Expr::Rule(self.chars[start..self.at].iter().collect())
                }
                Some(c) => return Err(format!("unexpected {c:?}")),
            };
            items.push(self.postfix(item)?);
        }
        Ok(if items.len() == 1 { items.remove(0) } else { Expr::Seq(items) })
    }

    fn postfix(&mut self, item: Expr) -> Result<Expr, String> {
        let (min, max) = match self.peek() {
            Some('*') => (0, None),
            Some('+') => (1, None),
            Some('?') => (0, Some(1)),
            Some('{') => {
                let close =
                    self.chars[self.at..].iter().position(|&c| c == '}').ok_or("unclosed {")?;
                let spec: String = self.chars[self.at + 1..self.at + close].iter().collect();
                self.at += close;
                let num =
                    |s: &str| s.trim().parse::<usize>().map_err(|_| format!("bad {{{spec}}}"));
                match spec.split_once(',') {
                    None => (num(&spec)?, Some(num(&spec)?)),
                    Some((a, b)) if b.trim().is_empty() => (num(a)?, None),
                    Some((a, b)) => (num(a)?, Some(num(b)?)),
                }
            }
            _ => return Ok(item),
        };
        self.at += 1;
        Ok(Expr::Repeat { inner: Box::new(item), min, max })
    }

    /// One character of a literal or class, with llama.cpp's escapes.
    fn char(&mut self) -> Result<char, String> {
        let c = self.peek().ok_or("unexpected end")?;
        self.at += 1;
        if c != '\\' {
            return Ok(c);
        }
        let e = self.peek().ok_or("unexpected end after \\")?;
        self.at += 1;
        let hex = |p: &mut Self, n: usize| -> Result<char, String> {
            let s: String = p.chars.get(p.at..p.at + n).ok_or("short escape")?.iter().collect();
            p.at += n;
            u32::from_str_radix(&s, 16)
                .ok()
                .and_then(char::from_u32)
                .ok_or(format!("bad escape {s}"))
        };
        match e {
            'x' => hex(self, 2),
            'u' => hex(self, 4),
            'U' => hex(self, 8),
            't' => Ok('\t'),
            'r' => Ok('\r'),
            'n' => Ok('\n'),
            '\\' | '"' | '[' | ']' => Ok(e),
            _ => Err(format!("unknown escape \\{e}")),
        }
    }

    fn literal(&mut self) -> Result<Vec<char>, String> {
        self.at += 1;
        let mut out = Vec::new();
        while self.peek() != Some('"') {
            out.push(self.char()?);
        }
        self.at += 1;
        Ok(out)
    }

    fn class(&mut self) -> Result<Expr, String> {
        self.at += 1;
        let negated = self.peek() == Some('^');
        if negated {
            self.at += 1;
        }
        let mut ranges = Vec::new();
        while self.peek() != Some(']') {
            let lo = self.char()?;
            let hi = if self.peek() == Some('-') && self.chars.get(self.at + 1) != Some(&']') {
                self.at += 1;
                self.char()?
            } else {
                lo
            };
            ranges.push((lo, hi));
        }
        self.at += 1;
        Ok(Expr::Class { negated, ranges })
    }
}

struct Matcher<'a> {
    g: &'a Gbnf,
    input: &'a [char],
    memo: HashMap<(String, usize), BTreeSet<usize>>,
}

impl Matcher<'_> {
    /// Every position where a match of `e` starting at `at` can end.
    fn ends(&mut self, e: &Expr, at: usize) -> BTreeSet<usize> {
        match e {
            Expr::Literal(l) => {
                let fits = self.input.get(at..at + l.len()) == Some(&l[..]);
                fits.then_some(at + l.len()).into_iter().collect()
            }
            Expr::Class { negated, ranges } => match self.input.get(at) {
                Some(&c) if ranges.iter().any(|&(lo, hi)| lo <= c && c <= hi) != *negated => {
                    BTreeSet::from([at + 1])
                }
                _ => BTreeSet::new(),
            },
            Expr::Rule(name) => {
                let key = (name.clone(), at);
                if let Some(done) = self.memo.get(&key) {
                    return done.clone();
                }
                // Guards left recursion (which the converter never writes).
                self.memo.insert(key.clone(), BTreeSet::new());
                let body = self.g.rules[name].clone();
                let out = self.ends(&body, at);
                self.memo.insert(key, out.clone());
                out
            }
            Expr::Seq(items) => {
                let mut now = BTreeSet::from([at]);
                for item in items {
                    now = now.into_iter().flat_map(|p| self.ends(item, p)).collect();
                }
                now
            }
            Expr::Alt(alts) => alts.iter().flat_map(|a| self.ends(a, at)).collect(),
            Expr::Repeat { inner, min, max } => {
                let mut out = BTreeSet::new();
                let mut now = BTreeSet::from([at]);
                let mut count = 0;
                loop {
                    if count >= *min {
                        out.extend(now.iter().copied());
                    }
                    if max.is_some_and(|m| count >= m) || now.is_empty() {
                        break;
                    }
                    let next: BTreeSet<usize> =
                        now.iter().flat_map(|&p| self.ends(inner, p)).collect();
                    // Only progress counts; an empty match repeated changes nothing.
                    let next: BTreeSet<usize> =
                        next.into_iter().filter(|p| count < *min || !out.contains(p)).collect();
                    if next == now && count >= *min {
                        break;
                    }
                    now = next;
                    count += 1;
                }
                out
            }
        }
    }
}
