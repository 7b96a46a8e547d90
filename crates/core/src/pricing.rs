//! Prices of well-known models, to show what a turn cost.

use ferroclaw_protocol::Usage;

/// US dollars per million tokens: input, output, cache read, cache write.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Price {
    pub input: f64,
    pub output: f64,
    pub cache_read: f64,
    pub cache_write: f64,
}

/// Model-name prefixes and their list prices (published per-million-token
/// prices at the time of writing; longest matching prefix wins).
const PRICES: &[(&str, Price)] = &[
    ("claude-opus-4", Price { input: 15.0, output: 75.0, cache_read: 1.5, cache_write: 18.75 }),
    ("claude-opus-4-5", Price { input: 5.0, output: 25.0, cache_read: 0.5, cache_write: 6.25 }),
    ("claude-sonnet-4", Price { input: 3.0, output: 15.0, cache_read: 0.3, cache_write: 3.75 }),
    ("claude-haiku-4", Price { input: 1.0, output: 5.0, cache_read: 0.1, cache_write: 1.25 }),
    ("claude-3-5-haiku", Price { input: 0.8, output: 4.0, cache_read: 0.08, cache_write: 1.0 }),
    ("gpt-5", Price { input: 1.25, output: 10.0, cache_read: 0.125, cache_write: 0.0 }),
    ("gpt-5-mini", Price { input: 0.25, output: 2.0, cache_read: 0.025, cache_write: 0.0 }),
    ("gpt-5-nano", Price { input: 0.05, output: 0.4, cache_read: 0.005, cache_write: 0.0 }),
    ("gpt-4.1", Price { input: 2.0, output: 8.0, cache_read: 0.5, cache_write: 0.0 }),
    ("gpt-4o", Price { input: 2.5, output: 10.0, cache_read: 1.25, cache_write: 0.0 }),
    ("deepseek-chat", Price { input: 0.27, output: 1.1, cache_read: 0.07, cache_write: 0.0 }),
];

/// The price of a model (the part after `PROVIDER/`, or the whole spec).
pub fn price(model: &str) -> Option<Price> {
    let name = model.rsplit('/').next().unwrap_or(model);
    PRICES
        .iter()
        .filter(|(prefix, _)| name.starts_with(prefix))
        .max_by_key(|(prefix, _)| prefix.len())
        .map(|(_, p)| *p)
}

/// What `usage` cost on `model`, when its price is known.
pub fn cost(model: &str, usage: &Usage) -> Option<f64> {
    let p = price(model)?;
    let m = 1_000_000.0;
    Some(
        usage.input_tokens as f64 * p.input / m
            + usage.output_tokens as f64 * p.output / m
            + usage.cache_read_tokens as f64 * p.cache_read / m
            + usage.cache_write_tokens as f64 * p.cache_write / m,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn longest_prefix_wins_and_unknown_models_have_no_price() {
        assert_eq!(price("anthropic/claude-opus-4-5-20251101").unwrap().input, 5.0);
        assert_eq!(price("claude-opus-4-1").unwrap().input, 15.0);
        assert!(price("ollama/llama3").is_none());
        let u = Usage { input_tokens: 1_000_000, output_tokens: 100_000, ..Default::default() };
        let c = cost("openai/gpt-5", &u).unwrap();
        assert!((c - 2.25).abs() < 1e-9, "{c}");
    }
}
