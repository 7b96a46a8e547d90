//! Terminal colours, on only when the stream they go to is a terminal.

use std::io::IsTerminal;

/// Whether to colour text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Style {
    color: bool,
}

impl Style {
    /// Colours when stderr (where status lines go) is a terminal.
    pub(crate) fn for_stderr() -> Style {
        Style { color: std::io::stderr().is_terminal() }
    }

    /// No escape codes.
    #[cfg(test)]
    pub(crate) fn plain() -> Style {
        Style { color: false }
    }

    /// Always colour.
    #[cfg(test)]
    pub(crate) fn color() -> Style {
        Style { color: true }
    }

    fn paint(self, code: &str, text: &str) -> String {
        if self.color { format!("\x1b[{code}m{text}\x1b[0m") } else { text.to_string() }
    }

    pub(crate) fn bold(self, text: &str) -> String {
        self.paint("1", text)
    }
    pub(crate) fn dim(self, text: &str) -> String {
        self.paint("2", text)
    }
    pub(crate) fn red(self, text: &str) -> String {
        self.paint("31", text)
    }
    pub(crate) fn green(self, text: &str) -> String {
        self.paint("32", text)
    }
    pub(crate) fn yellow(self, text: &str) -> String {
        self.paint("33", text)
    }
}
