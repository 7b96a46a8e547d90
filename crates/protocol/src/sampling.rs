//! How the model picks its words for one request: temperature, nucleus
//! sampling (`top_p`), a seed and stop sequences, as an OpenAI API client
//! sets them. `None` (or no stop sequence) leaves the provider's default.
//! Each wire sends what it has a field for (see `ferroclaw_llm`: Anthropic
//! has no seed).

use serde::{Deserialize, Serialize};

/// A request's sampling options.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Sampling {
    /// Randomness, 0 to 2 (OpenAI's range; Anthropic's is 0 to 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f32>,
    /// Nucleus sampling: words are drawn from the likeliest whose
    /// probabilities add up to this, 0 to 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_p: Option<f32>,
    /// Asks for repeatable answers where the provider can.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<i64>,
    /// The answer ends before any of these.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stop: Vec<String>,
}

impl Sampling {
    /// True when nothing is asked: every provider default holds.
    pub fn is_default(&self) -> bool {
        *self == Sampling::default()
    }
}
