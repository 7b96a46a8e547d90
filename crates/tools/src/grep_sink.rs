//! The `grep-searcher` sink behind `grep`: records one file's results into a
//! reused buffer, so files without matches cost no allocation.
//!
//! Content lines are stored without their path as `KIND[NUMBER KIND]TEXT\n`
//! (KIND is `:` for a match, `-` for context, as ripgrep prints them); a
//! context break is stored as [`BREAK`]. The path is prefixed when the sorted
//! output is assembled.

use std::io::Write;

use grep_searcher::{Searcher, Sink, SinkContext, SinkMatch};

use crate::lines::push_cut;

/// Characters of one line shown at most (grep output of minified files would
/// otherwise flood the context; ripgrep's `--max-columns` serves the same end).
pub const MAX_GREP_LINE_CHARS: usize = 500;
/// The stored line that stands for a context break (`--`).
pub(crate) const BREAK: &[u8] = b"\0\n";

/// What `grep` reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub(crate) enum OutputMode {
    Content,
    FilesWithMatches,
    Count,
}

/// Collects one file's results.
pub(crate) struct Collect<'a> {
    pub mode: OutputMode,
    pub line_numbers: bool,
    pub out: &'a mut Vec<u8>,
    /// Matching lines (or multi-line matches) seen.
    pub matches: u64,
    /// The file turned out to be binary: its results are dropped.
    pub binary: bool,
    scratch: String,
}

impl<'a> Collect<'a> {
    /// A sink writing into `out` (cleared by the caller).
    pub(crate) fn new(mode: OutputMode, line_numbers: bool, out: &'a mut Vec<u8>) -> Self {
        Self { mode, line_numbers, out, matches: 0, binary: false, scratch: String::new() }
    }

    fn push_line(&mut self, kind: u8, number: Option<u64>, line: &[u8]) {
        self.out.push(kind);
        if self.line_numbers
            && let Some(n) = number
        {
            let _ = write!(self.out, "{n}");
            self.out.push(kind);
        }
        let line = line.strip_suffix(b"\n").unwrap_or(line);
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        self.scratch.clear();
        push_cut(&mut self.scratch, &String::from_utf8_lossy(line), MAX_GREP_LINE_CHARS);
        self.out.extend_from_slice(self.scratch.as_bytes());
        self.out.push(b'\n');
    }
}

impl Sink for Collect<'_> {
    type Error = std::io::Error;

    fn matched(&mut self, _: &Searcher, mat: &SinkMatch<'_>) -> Result<bool, Self::Error> {
        self.matches += 1;
        match self.mode {
            OutputMode::FilesWithMatches => Ok(false),
            OutputMode::Count => Ok(true),
            OutputMode::Content => {
                let first = mat.line_number();
                for (i, line) in mat.lines().enumerate() {
                    self.push_line(b':', first.map(|n| n + i as u64), line);
                }
                Ok(true)
            }
        }
    }

    fn context(&mut self, _: &Searcher, ctx: &SinkContext<'_>) -> Result<bool, Self::Error> {
        if self.mode == OutputMode::Content {
            self.push_line(b'-', ctx.line_number(), ctx.bytes());
        }
        Ok(true)
    }

    fn context_break(&mut self, _: &Searcher) -> Result<bool, Self::Error> {
        if self.mode == OutputMode::Content {
            self.out.extend_from_slice(BREAK);
        }
        Ok(true)
    }

    fn binary_data(&mut self, _: &Searcher, _offset: u64) -> Result<bool, Self::Error> {
        self.binary = true;
        Ok(false)
    }
}
