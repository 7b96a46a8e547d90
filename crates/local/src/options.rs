//! How the engine runs a model: threads, context size, sampling. Defaults
//! suit a laptop; each can be overridden by an environment variable.

use std::path::PathBuf;
use std::time::{SystemTime, UNIX_EPOCH};

/// Context size in tokens when the model allows that much. 8k holds
/// ferroclaw's system prompt and tool list with room for a conversation;
/// the KV cache for it is small for the models in the catalogue (~100 MB for
/// a 1.7B model).
pub(crate) const DEFAULT_CONTEXT_TOKENS: u32 = 8192;

/// Sampling temperature when a request sets none: low, because small models
/// wander at higher values (SmolLM2's model card suggests 0.2).
pub(crate) const DEFAULT_TEMPERATURE: f32 = 0.2;

/// Most threads used by default. Token generation is memory-bound: past the
/// physical cores, extra threads only contend (measured: on a busy 2-core
/// machine, 2+ threads fell from ~145 to 12-26 tokens/s for SmolLM2-135M).
pub(crate) const MAX_DEFAULT_THREADS: u32 = 8;

/// Chats one model answers at once by default (each in its own sequence
/// of one context; more wait in a queue). Four keeps a gateway's chats and
/// an agent's sub-agents from waiting for each other's whole answers while
/// the batch stays small enough for a laptop CPU.
pub(crate) const DEFAULT_PARALLEL: u32 = 4;
/// Most chats at once that may be configured.
pub(crate) const MAX_PARALLEL: u32 = 64;

/// Variable overriding the thread count.
pub(crate) const THREADS_ENV: &str = "FERROCLAW_LOCAL_THREADS";
/// Variable overriding the context size.
pub(crate) const CONTEXT_ENV: &str = "FERROCLAW_LOCAL_CONTEXT";
/// Variable overriding the default temperature.
pub(crate) const TEMPERATURE_ENV: &str = "FERROCLAW_LOCAL_TEMPERATURE";
/// Variable fixing the sampling seed (for reproducible runs).
pub(crate) const SEED_ENV: &str = "FERROCLAW_LOCAL_SEED";
/// Variable choosing the [`ToolChoice`]: `auto`, `free` or `first`.
pub(crate) const TOOL_CHOICE_ENV: &str = "FERROCLAW_LOCAL_TOOL_CHOICE";
/// Variable capping the saved prompt states, in MB (0 turns saving off).
pub(crate) const KV_CACHE_MB_ENV: &str = "FERROCLAW_LOCAL_KV_CACHE_MB";
/// Variable setting how many chats one model answers at once.
pub(crate) const PARALLEL_ENV: &str = "FERROCLAW_LOCAL_PARALLEL";

/// When the model must call a tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ToolChoice {
    /// The model decides; a call, once started, is held to the grammar. A
    /// first answer to a user's message that makes up a tool result, loops
    /// or says nothing is redone with a call forced ([`crate::redo`]).
    #[default]
    Auto,
    /// The model decides and its answers stand as written (no redo).
    Free,
    /// The first answer to each user message must be a tool call; later
    /// answers (after tool results) are `Auto`. Makes tiny models act
    /// instead of describing how they would.
    First,
}

/// Engine settings.
#[derive(Debug, Clone, PartialEq)]
pub struct LocalOptions {
    /// Threads for reading prompts and generating.
    pub threads: u32,
    /// Context size in tokens (capped by what the model was trained for),
    /// shared by the chats in progress.
    pub context_tokens: u32,
    /// Chats answered at once; more wait their turn.
    pub parallel: u32,
    /// Temperature when a request sets none; 0 samples greedily.
    pub temperature: f32,
    /// Sampling seed; `None` draws one per request.
    pub seed: Option<u32>,
    /// When the model must call a tool.
    pub tool_choice: ToolChoice,
    /// Where the KV state of prompt prefixes is saved across processes
    /// (`$FERROCLAW_HOME/cache/kv`); `None` saves nothing.
    pub kv_cache_dir: Option<PathBuf>,
    /// Cap on that folder in bytes.
    pub kv_cache_cap: u64,
}

impl Default for LocalOptions {
    fn default() -> Self {
        Self {
            threads: default_threads(),
            context_tokens: DEFAULT_CONTEXT_TOKENS,
            parallel: DEFAULT_PARALLEL,
            temperature: DEFAULT_TEMPERATURE,
            seed: None,
            tool_choice: ToolChoice::Auto,
            kv_cache_dir: None,
            kv_cache_cap: crate::kvcache::DEFAULT_CAP_BYTES,
        }
    }
}

/// A bad value in one of the variables.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("environment variable {name}={value:?}: {expected}")]
pub struct BadOption {
    pub name: &'static str,
    pub value: String,
    pub expected: &'static str,
}

impl LocalOptions {
    /// Defaults, overridden by the `FERROCLAW_LOCAL_*` variables.
    pub fn from_env() -> Result<Self, BadOption> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    /// Defaults overridden by whatever `lookup` returns for each variable.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, BadOption> {
        let mut o = Self::default();
        let get = |name: &'static str| lookup(name).filter(|v| !v.trim().is_empty());
        if let Some(v) = get(THREADS_ENV) {
            o.threads = parse(THREADS_ENV, &v, "a whole number of threads, 1 or more")?;
            if o.threads == 0 {
                return Err(bad(THREADS_ENV, &v, "a whole number of threads, 1 or more"));
            }
        }
        if let Some(v) = get(CONTEXT_ENV) {
            o.context_tokens = parse(CONTEXT_ENV, &v, "a number of tokens, e.g. 8192")?;
            if o.context_tokens < 256 {
                return Err(bad(CONTEXT_ENV, &v, "at least 256 tokens"));
            }
        }
        if let Some(v) = get(TEMPERATURE_ENV) {
            o.temperature = parse(TEMPERATURE_ENV, &v, "a number such as 0.2")?;
            if !(0.0..=5.0).contains(&o.temperature) {
                return Err(bad(TEMPERATURE_ENV, &v, "a number from 0 to 5"));
            }
        }
        if let Some(v) = get(SEED_ENV) {
            o.seed = Some(parse(SEED_ENV, &v, "a whole number")?);
        }
        if let Some(v) = get(TOOL_CHOICE_ENV) {
            o.tool_choice = match v.trim() {
                "auto" => ToolChoice::Auto,
                "free" => ToolChoice::Free,
                "first" => ToolChoice::First,
                _ => return Err(bad(TOOL_CHOICE_ENV, &v, "auto, free or first")),
            };
        }
        if let Some(v) = get(PARALLEL_ENV) {
            const EXPECTED: &str = "a number of chats from 1 to 64";
            o.parallel = parse(PARALLEL_ENV, &v, EXPECTED)?;
            if !(1..=MAX_PARALLEL).contains(&o.parallel) {
                return Err(bad(PARALLEL_ENV, &v, EXPECTED));
            }
        }
        if let Some(v) = get(KV_CACHE_MB_ENV) {
            let mb: u64 = parse(KV_CACHE_MB_ENV, &v, "a size in MB, 0 to save nothing")?;
            o.kv_cache_cap = mb << 20;
        }
        Ok(o)
    }

    /// The seed for one request.
    pub fn seed(&self) -> u32 {
        self.seed.unwrap_or_else(|| {
            SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.subsec_nanos())
        })
    }
}

/// Half the logical CPUs (physical cores on most machines), 1 to
/// [`MAX_DEFAULT_THREADS`].
pub(crate) fn default_threads() -> u32 {
    let logical = std::thread::available_parallelism().map_or(1, |n| n.get() as u32);
    (logical / 2).clamp(1, MAX_DEFAULT_THREADS)
}

fn parse<T: std::str::FromStr>(
    name: &'static str,
    value: &str,
    expected: &'static str,
) -> Result<T, BadOption> {
    value.trim().parse().map_err(|_| bad(name, value, expected))
}

fn bad(name: &'static str, value: &str, expected: &'static str) -> BadOption {
    BadOption { name, value: value.to_string(), expected }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variables_override_defaults_and_bad_values_name_the_variable() {
        let o = LocalOptions::from_lookup(|n| match n {
            THREADS_ENV => Some("3".into()),
            SEED_ENV => Some("7".into()),
            _ => None,
        })
        .unwrap();
        assert_eq!((o.threads, o.seed, o.context_tokens), (3, Some(7), DEFAULT_CONTEXT_TOKENS));
        let err =
            LocalOptions::from_lookup(|n| (n == THREADS_ENV).then(|| "0".into())).unwrap_err();
        assert!(err.to_string().contains("FERROCLAW_LOCAL_THREADS"), "{err}");
        let err =
            LocalOptions::from_lookup(|n| (n == CONTEXT_ENV).then(|| "big".into())).unwrap_err();
        assert!(err.to_string().contains("8192"), "{err}");
        let err =
            LocalOptions::from_lookup(|n| (n == PARALLEL_ENV).then(|| "0".into())).unwrap_err();
        assert!(err.to_string().contains("FERROCLAW_LOCAL_PARALLEL"), "{err}");
        let o = LocalOptions::from_lookup(|n| (n == PARALLEL_ENV).then(|| "2".into())).unwrap();
        assert_eq!(o.parallel, 2);
    }

    #[test]
    fn tool_choice_is_auto_by_default_and_free_or_first_by_variable() {
        let choice = |v: &str| {
            let v = v.to_string();
            LocalOptions::from_lookup(move |n| (n == TOOL_CHOICE_ENV).then(|| v.clone()))
                .map(|o| o.tool_choice)
        };
        assert_eq!(LocalOptions::default().tool_choice, ToolChoice::Auto);
        assert_eq!(choice("free"), Ok(ToolChoice::Free));
        assert_eq!(choice("first"), Ok(ToolChoice::First));
        let err = choice("always").unwrap_err();
        assert!(err.to_string().contains("auto, free or first"), "{err}");
    }

    #[test]
    fn the_default_thread_count_is_between_one_and_the_cap() {
        let t = default_threads();
        assert!((1..=MAX_DEFAULT_THREADS).contains(&t));
    }
}
