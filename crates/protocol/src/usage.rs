//! Token usage as providers report it.

use serde::{Deserialize, Serialize};

/// Tokens used by one or more model calls.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// Input tokens served from the provider's prompt cache.
    #[serde(default)]
    pub cache_read_tokens: u64,
    /// Input tokens written to the provider's prompt cache.
    #[serde(default)]
    pub cache_write_tokens: u64,
}

impl Usage {
    /// Adds another call's usage to this one.
    pub fn add(&mut self, other: &Usage) {
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
        self.cache_read_tokens += other.cache_read_tokens;
        self.cache_write_tokens += other.cache_write_tokens;
    }

    /// Merges a later partial report of the same call: non-zero fields win.
    /// (Anthropic reports input in `message_start` and output in `message_delta`.)
    pub fn merge(&mut self, later: &Usage) {
        fn pick(a: &mut u64, b: u64) {
            if b != 0 {
                *a = b;
            }
        }
        pick(&mut self.input_tokens, later.input_tokens);
        pick(&mut self.output_tokens, later.output_tokens);
        pick(&mut self.cache_read_tokens, later.cache_read_tokens);
        pick(&mut self.cache_write_tokens, later.cache_write_tokens);
    }

    /// Total tokens, input and output.
    pub fn total(&self) -> u64 {
        self.input_tokens + self.output_tokens + self.cache_read_tokens + self.cache_write_tokens
    }
}
