//! Short model names Claude Code and codex users type (`sonnet`, `opus`,
//! `haiku`, `gpt-5`), resolved to a `PROVIDER/MODEL` spec for the provider in
//! use: `sonnet` is `anthropic/claude-sonnet-4-5`, or
//! `openrouter/anthropic/claude-sonnet-4.5` when the configured model is on
//! OpenRouter.

use ferroclaw_core::Config;
use ferroclaw_tools::repo_file::{MAX_REPO_FILE_BYTES, read_repo_text};

/// An alias: the name typed, the model family's provider, the model there,
/// and the model's id on OpenRouter.
struct Alias {
    name: &'static str,
    provider: &'static str,
    model: &'static str,
    openrouter: &'static str,
}

/// Aliases known; the newest model of each family as of this release.
const ALIASES: &[Alias] = &[
    Alias {
        name: "sonnet",
        provider: "anthropic",
        model: "claude-sonnet-4-5",
        openrouter: "anthropic/claude-sonnet-4.5",
    },
    Alias {
        name: "opus",
        provider: "anthropic",
        model: "claude-opus-4-1",
        openrouter: "anthropic/claude-opus-4.1",
    },
    Alias {
        name: "haiku",
        provider: "anthropic",
        model: "claude-haiku-4-5",
        openrouter: "anthropic/claude-haiku-4.5",
    },
    Alias { name: "gpt-5", provider: "openai", model: "gpt-5", openrouter: "openai/gpt-5" },
    Alias {
        name: "gpt-5-mini",
        provider: "openai",
        model: "gpt-5-mini",
        openrouter: "openai/gpt-5-mini",
    },
    Alias { name: "o3", provider: "openai", model: "o3", openrouter: "openai/o3" },
];

/// Model families by the start of their ids, and the provider whose ids
/// they are: a bare id Claude Code or codex users pass (`--model
/// claude-sonnet-4-5-20250929`, `gpt-4.1`) is that provider's model.
const FAMILIES: &[(&str, &str)] = &[
    ("claude-", "anthropic"),
    ("gpt-", "openai"),
    ("chatgpt-", "openai"),
    ("o1", "openai"),
    ("o3", "openai"),
    ("o4-", "openai"),
    ("codex-", "openai"),
    ("gemini-", "gemini"),
    ("deepseek-", "deepseek"),
];

/// The provider whose model ids start like `id` (a bare id: no `/`).
fn family_of(id: &str) -> Option<&'static str> {
    let id = id.to_ascii_lowercase();
    let starts = |prefix: &str| {
        id.strip_prefix(prefix).is_some_and(|rest| {
            // `o1`, `o3` name a family only as a whole word: `o3`, `o3-mini`.
            prefix.ends_with('-') || rest.is_empty() || rest.starts_with('-')
        })
    };
    FAMILIES.iter().find(|(prefix, _)| starts(prefix)).map(|(_, provider)| *provider)
}

/// The spec for what the user typed: a full `PROVIDER/MODEL` stays as it
/// is; an alias becomes the spec on the configured provider when that
/// provider serves the family (OpenRouter serves all), else on the family's
/// own; a bare id of a known family (`claude-opus-4-1-20250805`) is a model
/// of that family's provider.
pub(crate) fn resolve(typed: &str, config: &Config) -> String {
    let Some(alias) = ALIASES.iter().find(|a| a.name.eq_ignore_ascii_case(typed.trim())) else {
        let id = typed.trim();
        return match family_of(id) {
            Some(provider) if !id.contains('/') => format!("{provider}/{id}"),
            _ => typed.to_string(),
        };
    };
    let configured = configured_provider(config);
    match configured.as_deref() {
        Some("openrouter") => format!("openrouter/{}", alias.openrouter),
        _ => format!("{}/{}", alias.provider, alias.model),
    }
}

/// The provider of the model configured in files or the environment
/// (ignoring `--model`, which is what is being resolved).
fn configured_provider(config: &Config) -> Option<String> {
    let spec = std::env::var("FERROCLAW_MODEL")
        .ok()
        .filter(|m| !m.is_empty() && !is_alias(m))
        .or_else(|| {
            let mut plain = config.clone();
            plain.file.model = None;
            let max = MAX_REPO_FILE_BYTES;
            let layers = config.sources.iter().filter_map(|p| read_repo_text(p, max).ok());
            layers
                .filter_map(|text| toml_model(&text))
                .next_back()
                .or_else(|| plain.model_spec().ok())
        })?;
    spec.split_once('/').map(|(p, _)| p.to_string())
}

/// `error` with the aliases named when it says a model is not
/// `PROVIDER/MODEL`: someone who typed `--model claude` learns that
/// `sonnet` would have done.
pub(crate) fn explain(error: &ferroclaw_runtime::RuntimeError) -> String {
    let text = error.to_string();
    match error {
        ferroclaw_runtime::RuntimeError::Config(ferroclaw_core::ConfigError::BadModelSpec {
            ..
        }) => {
            let names: Vec<&str> = ALIASES.iter().map(|a| a.name).collect();
            format!("{text}; or an alias: {}", names.join(", "))
        }
        _ => text,
    }
}

/// True for a name in the alias table.
pub(crate) fn is_alias(name: &str) -> bool {
    ALIASES.iter().any(|a| a.name.eq_ignore_ascii_case(name.trim()))
}

/// The top-level `model = "..."` of a config file's text.
fn toml_model(text: &str) -> Option<String> {
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            return None;
        }
        if let Some(rest) = line.strip_prefix("model")
            && let Some(value) = rest.trim_start().strip_prefix('=')
        {
            return Some(value.trim().trim_matches('"').to_string());
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_model_that_is_not_provider_slash_model_is_explained_with_the_aliases() {
        let error =
            ferroclaw_runtime::RuntimeError::Config(ferroclaw_core::ConfigError::BadModelSpec {
                spec: "claude".into(),
                valid: "anthropic".into(),
            });
        let text = explain(&error);
        assert!(text.starts_with("model \"claude\" is not PROVIDER/MODEL"), "{text}");
        assert!(
            text.ends_with("or an alias: sonnet, opus, haiku, gpt-5, gpt-5-mini, o3"),
            "{text}"
        );
    }

    fn config(model: Option<&str>) -> Config {
        let mut c = Config::load(
            std::env::temp_dir().join("ferroclaw-alias-test-home"),
            std::env::temp_dir(),
            &Default::default(),
        )
        .unwrap();
        c.file.model = model.map(str::to_string);
        c
    }

    #[test]
    fn aliases_become_full_specs_and_full_specs_stay() {
        let c = config(None);
        assert_eq!(resolve("sonnet", &c), "anthropic/claude-sonnet-4-5");
        assert_eq!(resolve("Opus", &c), "anthropic/claude-opus-4-1");
        assert_eq!(resolve("gpt-5", &c), "openai/gpt-5");
        assert_eq!(resolve("ollama/qwen3", &c), "ollama/qwen3");
    }

    #[test]
    fn a_bare_id_of_a_known_family_is_a_model_of_its_provider() {
        let c = config(None);
        for (typed, spec) in [
            ("claude-sonnet-4-5-20250929", "anthropic/claude-sonnet-4-5-20250929"),
            ("claude-3-5-haiku-latest", "anthropic/claude-3-5-haiku-latest"),
            ("gpt-4.1", "openai/gpt-4.1"),
            ("o3-mini", "openai/o3-mini"),
            ("o1", "openai/o1"),
            ("gemini-2.5-pro", "gemini/gemini-2.5-pro"),
            ("deepseek-chat", "deepseek/deepseek-chat"),
        ] {
            assert_eq!(resolve(typed, &c), spec, "{typed}");
        }
        // Not a family: left for the config to refuse with the aliases.
        for typed in ["claude", "o3x", "qwen3:8b", "anthropic/claude-sonnet-4-5"] {
            assert_eq!(resolve(typed, &c), typed, "{typed}");
        }
    }

    #[test]
    fn openrouter_configs_get_openrouter_ids() {
        assert_eq!(
            toml_model("model = \"openrouter/x/y\"\n[a]\n").as_deref(),
            Some("openrouter/x/y")
        );
        assert_eq!(toml_model("[a]\nmodel = \"z/w\"\n"), None);
    }
}
