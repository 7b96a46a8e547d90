//! Named providers and `PROVIDER/MODEL` model names.

use std::fmt;
use std::str::FromStr;

use crate::{ProviderConfig, WireFormat};

/// A provider we know by name: its wire format, where it lives, and the
/// environment variables that hold its key and may move its base URL.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Preset {
    /// The name used in model specs (`openrouter` in `openrouter/...`).
    pub name: &'static str,
    /// The wire format it speaks.
    pub wire: WireFormat,
    /// Default base URL (for OpenAI-compatible servers, including `/v1`).
    pub base_url: &'static str,
    /// Variable holding the API key; `None` for local servers that need none.
    pub key_env: Option<&'static str>,
    /// Variable that overrides the base URL.
    pub base_url_env: Option<&'static str>,
}

impl Preset {
    /// A provider config for this preset with its default base URL and no key.
    pub fn config(&self) -> ProviderConfig {
        ProviderConfig::new(self.name, self.wire, self.base_url)
    }
}

const fn entry(
    name: &'static str,
    wire: WireFormat,
    base_url: &'static str,
    key_env: Option<&'static str>,
    base_url_env: &'static str,
) -> Preset {
    Preset { name, wire, base_url, key_env, base_url_env: Some(base_url_env) }
}

use WireFormat::{Anthropic, OpenAi};

static PRESETS: [Preset; 9] = [
    entry(
        "anthropic",
        Anthropic,
        "https://api.anthropic.com",
        Some("ANTHROPIC_API_KEY"),
        "ANTHROPIC_BASE_URL",
    ),
    entry("openai", OpenAi, "https://api.openai.com/v1", Some("OPENAI_API_KEY"), "OPENAI_BASE_URL"),
    entry(
        "openrouter",
        OpenAi,
        "https://openrouter.ai/api/v1",
        Some("OPENROUTER_API_KEY"),
        "OPENROUTER_BASE_URL",
    ),
    entry(
        "deepseek",
        OpenAi,
        "https://api.deepseek.com/v1",
        Some("DEEPSEEK_API_KEY"),
        "DEEPSEEK_BASE_URL",
    ),
    entry("groq", OpenAi, "https://api.groq.com/openai/v1", Some("GROQ_API_KEY"), "GROQ_BASE_URL"),
    entry(
        "gemini",
        OpenAi,
        "https://generativelanguage.googleapis.com/v1beta/openai",
        Some("GEMINI_API_KEY"),
        "GEMINI_BASE_URL",
    ),
    entry("ollama", OpenAi, "http://localhost:11434/v1", None, "OLLAMA_BASE_URL"),
    entry("vllm", OpenAi, "http://localhost:8000/v1", None, "VLLM_BASE_URL"),
    entry("llamacpp", OpenAi, "http://localhost:8080/v1", None, "LLAMACPP_BASE_URL"),
];

/// Every preset, in the order they are listed to users.
pub fn presets() -> &'static [Preset] {
    &PRESETS
}

/// The preset with this name, if any.
pub fn preset(name: &str) -> Option<&'static Preset> {
    PRESETS.iter().find(|p| p.name == name)
}

/// A model named as `PROVIDER/MODEL`, split at the first slash
/// (`openrouter/anthropic/claude-sonnet-4.5` is provider `openrouter`,
/// model `anthropic/claude-sonnet-4.5`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelSpec {
    /// The provider's name: a preset or one defined in config.
    pub provider: String,
    /// The model name as the provider knows it.
    pub model: String,
}

/// A model spec that is not `PROVIDER/MODEL`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "model {spec:?} must be written PROVIDER/MODEL, e.g. anthropic/claude-sonnet-4-5 (providers: {})",
    preset_names()
)]
pub struct ModelSpecError {
    /// The spec as given.
    pub spec: String,
}

fn preset_names() -> String {
    PRESETS.iter().map(|p| p.name).collect::<Vec<_>>().join(", ")
}

impl ModelSpec {
    /// Parses `PROVIDER/MODEL`; both parts must be non-empty.
    pub fn parse(spec: &str) -> Result<Self, ModelSpecError> {
        match spec.trim().split_once('/') {
            Some((provider, model)) if !provider.is_empty() && !model.is_empty() => {
                Ok(Self { provider: provider.to_string(), model: model.to_string() })
            }
            _ => Err(ModelSpecError { spec: spec.to_string() }),
        }
    }
}

impl FromStr for ModelSpec {
    type Err = ModelSpecError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

impl fmt::Display for ModelSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.provider, self.model)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_split_at_the_first_slash_so_openrouter_models_keep_theirs() {
        let spec = ModelSpec::parse("openrouter/anthropic/claude-sonnet-4.5").unwrap();
        assert_eq!(spec.provider, "openrouter");
        assert_eq!(spec.model, "anthropic/claude-sonnet-4.5");
        assert_eq!(spec.to_string(), "openrouter/anthropic/claude-sonnet-4.5");
        let spec: ModelSpec = "anthropic/claude-sonnet-4-5".parse().unwrap();
        assert_eq!(
            (spec.provider.as_str(), spec.model.as_str()),
            ("anthropic", "claude-sonnet-4-5")
        );
    }

    #[test]
    fn a_spec_without_slash_or_with_an_empty_part_is_refused_listing_presets() {
        for bad in ["gpt-4o", "/gpt-4o", "openai/", "", "/"] {
            let err = ModelSpec::parse(bad).unwrap_err().to_string();
            assert!(err.contains("PROVIDER/MODEL"), "{err}");
            assert!(err.contains("anthropic, openai, openrouter"), "{err}");
            assert!(err.contains("llamacpp"), "{err}");
        }
    }

    #[test]
    fn every_preset_is_found_by_name_and_local_servers_need_no_key() {
        assert_eq!(presets().len(), 9);
        for p in presets() {
            assert_eq!(preset(p.name), Some(p));
            assert!(p.base_url.starts_with("http"), "{}", p.name);
            assert!(!p.base_url.ends_with('/'), "{}", p.name);
        }
        assert_eq!(preset("nope"), None);
        for local in ["ollama", "vllm", "llamacpp"] {
            assert_eq!(preset(local).and_then(|p| p.key_env), None);
        }
    }

    #[test]
    fn only_anthropic_speaks_the_anthropic_wire_and_its_url_has_no_v1() {
        let anthropic = preset("anthropic").unwrap();
        assert_eq!(anthropic.wire, Anthropic);
        assert_eq!(anthropic.base_url, "https://api.anthropic.com");
        assert_eq!(anthropic.base_url_env, Some("ANTHROPIC_BASE_URL"));
        let others = presets().iter().filter(|p| p.wire == OpenAi).count();
        assert_eq!(others, 8);
        assert_eq!(preset("groq").map(|p| p.base_url), Some("https://api.groq.com/openai/v1"));
    }
}
