//! Claude Code's model names in ferroclaw's files: a custom command's or an
//! agent type's `model:` may say `haiku`, `sonnet`, `opus`, `inherit` or a
//! full Claude id (`claude-sonnet-4-0`) instead of ferroclaw's
//! `PROVIDER/MODEL`. Claude ids are honoured on the provider already in use
//! when it serves Claude models (its model is a `claude-*` id); elsewhere the
//! caller warns, naming the alias, and keeps its model.
//!
//! ```
//! use ferroclaw_core::model_alias::{resolve, Resolved};
//! assert_eq!(resolve("haiku", "anthropic/claude-sonnet-4-5"),
//!            Ok(Resolved::Use("anthropic/claude-haiku-4-5".into())));
//! assert_eq!(resolve("inherit", "openai/gpt-4o"), Ok(Resolved::Inherit));
//! assert!(resolve("opus", "openai/gpt-4o").is_err());
//! ```

/// The ids the short names stand for: the same models
/// the `--model` aliases use too (Claude Code maps them to its own latest).
pub const CLAUDE_ALIASES: [(&str, &str); 3] =
    [("haiku", "claude-haiku-4-5"), ("sonnet", "claude-sonnet-4-5"), ("opus", "claude-opus-4-1")];

/// What a `model:` field asks for, given the model in use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resolved {
    /// Keep the model in use (`inherit`, or the same model).
    Inherit,
    /// Switch to this `PROVIDER/MODEL`.
    Use(String),
}

/// A Claude model name that the provider in use cannot serve.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("model `{alias}` is a Claude model, which {current} does not serve; keeping {current}")]
pub struct NotHonoured {
    /// The name as written.
    pub alias: String,
    /// The `PROVIDER/MODEL` kept.
    pub current: String,
}

/// Resolves `requested` (a `model:` value) against `current` (`PROVIDER/MODEL`
/// in use): `PROVIDER/MODEL` stays as written; `inherit` (or nothing) keeps
/// the current model; `haiku`/`sonnet`/`opus` and `claude-*` ids run on the
/// current provider when it serves Claude models, else [`NotHonoured`];
/// another bare name is taken as a model of the current provider.
pub fn resolve(requested: &str, current: &str) -> Result<Resolved, NotHonoured> {
    let requested = requested.trim();
    if requested.is_empty() || requested == "inherit" {
        return Ok(Resolved::Inherit);
    }
    if requested.contains('/') {
        return Ok(Resolved::Use(requested.to_string()));
    }
    let (provider, model) = current.split_once('/').unwrap_or(("", current));
    let alias = CLAUDE_ALIASES.iter().find(|(short, _)| *short == requested).map(|(_, id)| *id);
    let claude_id = alias.or_else(|| requested.starts_with("claude-").then_some(requested));
    let wanted = match claude_id {
        Some(id) if model.starts_with("claude-") => id,
        Some(_) => {
            return Err(NotHonoured { alias: requested.to_string(), current: current.to_string() });
        }
        None => requested,
    };
    if wanted == model {
        return Ok(Resolved::Inherit);
    }
    Ok(Resolved::Use(format!("{provider}/{wanted}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claude_names_run_on_a_claude_provider_and_are_refused_elsewhere() {
        let on = "anthropic/claude-sonnet-4-5";
        assert_eq!(resolve("opus", on), Ok(Resolved::Use("anthropic/claude-opus-4-1".into())));
        assert_eq!(
            resolve("claude-sonnet-4-0", on),
            Ok(Resolved::Use("anthropic/claude-sonnet-4-0".into()))
        );
        assert_eq!(resolve("sonnet", on), Ok(Resolved::Inherit));
        assert_eq!(resolve("openrouter/x", on), Ok(Resolved::Use("openrouter/x".into())));
        let err = resolve("haiku", "ollama/qwen3").unwrap_err();
        assert_eq!(
            err.to_string(),
            "model `haiku` is a Claude model, which ollama/qwen3 does not serve; keeping ollama/qwen3"
        );
        assert_eq!(
            resolve("qwen3:8b", "ollama/qwen3"),
            Ok(Resolved::Use("ollama/qwen3:8b".into()))
        );
    }
}
