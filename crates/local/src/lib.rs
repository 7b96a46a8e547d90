//! Local models: a GGUF model run in process by llama.cpp, as one more
//! ferroclaw provider. No API key, no network, no server to start.
//!
//! What it does: loads a model once per process (every session shares it),
//! renders requests with the model's own chat template, streams tokens as
//! text deltas, reuses the KV cache for the prefix a request shares with the
//! previous one (reported as `cache_read_tokens`), saves the KV state of the
//! fixed prompt prefix for the next process ([`kvcache`]), stops answers that
//! loop ([`repetition`]), and stops generating when the stream is dropped. Tools are offered the way Qwen and Hermes models
//! are trained: described in the system turn, called as
//! `<tool_call>{"name": ..., "arguments": {...}}</tool_call>`. A lazy
//! grammar built from the tools' JSON schemas makes every call valid JSON
//! naming a real tool with schema-valid arguments, even from a tiny model.
//!
//! Also here: the model store (`$FERROCLAW_HOME/models/NAME.gguf`), a small
//! catalogue of models to download, and a resumable, checksummed download.
//!
//! What it is not: a server, a GPU scheduler, or a general llama.cpp binding.
//! Without the `engine` feature (default on) only the store, the catalogue
//! and downloads are built, and llama.cpp is not compiled.
//!
//! ```
//! use ferroclaw_local::{LocalTarget, ModelStore};
//!
//! let home = std::env::temp_dir().join("ferroclaw-doc-home");
//! let target = LocalTarget::parse("local/smollm2-135m-instruct").unwrap();
//! assert_eq!(target, LocalTarget::Named("smollm2-135m-instruct".into()));
//! assert_eq!(
//!     LocalTarget::parse("local:/models/x.gguf"),
//!     Some(LocalTarget::File("/models/x.gguf".into()))
//! );
//! assert!(LocalTarget::parse("anthropic/claude").is_none());
//! let store = ModelStore::new(&home);
//! assert!(target.path(&store).is_err(), "nothing installed in a fresh home");
//! ```
//!
//! ```no_run
//! # #[cfg(feature = "engine")]
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use ferroclaw_llm::{ChatRequest, Provider};
//! use ferroclaw_local::{LocalOptions, LocalProvider};
//! use ferroclaw_protocol::Message;
//! use futures_util::StreamExt;
//!
//! let provider = LocalProvider::open("model.gguf".as_ref(), &LocalOptions::from_env()?)?;
//! let mut events = provider.stream(ChatRequest::new("local", vec![Message::user("hi")]));
//! while let Some(event) = events.next().await {
//!     println!("{event:?}");
//! }
//! # Ok(()) }
//! ```

pub mod catalogue;
#[cfg(feature = "engine")]
mod chat;
pub mod download;
#[cfg(feature = "engine")]
mod engine;
#[cfg(test)]
mod gbnf_match;
pub mod grammar;
pub mod json_gbnf;
pub mod kvcache;
mod options;
#[cfg(feature = "engine")]
mod prefix_state;
pub mod prompt;
#[cfg(feature = "engine")]
mod provider;
pub mod redo;
pub mod repetition;
#[cfg(feature = "engine")]
mod sampling;
#[cfg(feature = "engine")]
mod schedule;
pub mod store;
pub mod toolcall;

use std::path::PathBuf;

pub use catalogue::{CATALOGUE, CatalogueEntry};
pub use download::{DownloadError, Downloaded, Progress, download};
pub use options::{BadOption, LocalOptions, ToolChoice};
#[cfg(feature = "engine")]
pub use provider::LocalProvider;
pub use store::{InstalledModel, ModelStore};

/// True when this build can run models (the `engine` feature).
pub const ENGINE_BUILT: bool = cfg!(feature = "engine");

/// The provider name in model specs: `local/NAME` or `local:PATH`.
pub const PROVIDER_NAME: &str = "local";

/// What a `local` model spec points at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LocalTarget {
    /// An installed model, by name: `local/NAME`.
    Named(String),
    /// A GGUF file anywhere: `local:PATH` (or `local/PATH.gguf`).
    File(PathBuf),
}

impl LocalTarget {
    /// Reads a model spec; `None` when it is not a local one.
    pub fn parse(spec: &str) -> Option<Self> {
        if let Some(path) = spec.strip_prefix("local:") {
            return Some(Self::File(PathBuf::from(path)));
        }
        let name = spec.strip_prefix("local/")?;
        if name.contains('/') || name.ends_with(".gguf") {
            Some(Self::File(PathBuf::from(name)))
        } else {
            Some(Self::Named(name.to_string()))
        }
    }

    /// The model file: the installed model's path, or the given file.
    pub fn path(&self, store: &ModelStore) -> Result<PathBuf, LocalError> {
        match self {
            Self::Named(name) => Ok(store.find(name)?.path),
            Self::File(path) => {
                store::check_gguf(path)?;
                Ok(path.clone())
            }
        }
    }
}

/// Everything that can go wrong finding, loading or storing a local model.
#[derive(Debug, thiserror::Error)]
pub enum LocalError {
    #[error("cannot open model file {path}: {source}")]
    ModelFile {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} is not a GGUF model file")]
    NotGguf { path: PathBuf },
    #[error(
        "no local model named {name:?} (installed: {installed}); `ferroclaw model pull NAME` downloads one, `ferroclaw model import PATH` adds a GGUF file"
    )]
    NotInstalled { name: String, installed: String },
    #[error("model name {name:?} must be letters, digits, '.', '-' or '_'")]
    BadName { name: String },
    #[error("cannot load {path}: {message}")]
    Load { path: PathBuf, message: String },
    #[error("llama.cpp: {0}")]
    Backend(String),
    #[error(transparent)]
    Options(#[from] BadOption),
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}
