//! [`LocalProvider`]: the [`Provider`] face of an [`Engine`](crate::engine).

use std::path::Path;
use std::sync::Arc;

use ferroclaw_llm::{ChatRequest, EventStream, Provider};

use crate::engine::{self, Engine};
use crate::{LocalError, LocalOptions};

/// Events buffered between the model thread and the consumer; the thread
/// waits when the consumer falls this far behind.
const EVENT_BUFFER: usize = 256;

/// A GGUF model run in process. Cheap to clone and to open twice: every
/// provider for one file shares one loaded model.
#[derive(Clone)]
pub struct LocalProvider {
    engine: Arc<Engine>,
    options: LocalOptions,
}

impl LocalProvider {
    /// Loads the model at `path` (once per process) and starts its thread.
    /// Threads and context size come from the first `open` of a file;
    /// sampling settings are this provider's own.
    pub fn open(path: &Path, options: &LocalOptions) -> Result<Self, LocalError> {
        Ok(Self { engine: engine::open(path, options)?, options: options.clone() })
    }

    /// The model file, canonical.
    pub fn path(&self) -> &Path {
        &self.engine.path
    }

    /// The context size in tokens the model runs with.
    pub fn context_tokens(&self) -> u32 {
        self.engine.context_tokens
    }

    /// How many chats the model answers at once (more wait their turn).
    pub fn parallel(&self) -> u32 {
        self.engine.parallel
    }
}

impl Provider for LocalProvider {
    fn name(&self) -> &str {
        "local"
    }

    /// Queues the request on the model's thread. Dropping the stream stops
    /// generation at the next token.
    fn stream(&self, request: ChatRequest) -> EventStream {
        let (tx, rx) = tokio::sync::mpsc::channel(EVENT_BUFFER);
        self.engine.submit(request, self.options.clone(), tx);
        Box::pin(futures_util::stream::unfold(rx, |mut rx| async move {
            rx.recv().await.map(|event| (event, rx))
        }))
    }
}
