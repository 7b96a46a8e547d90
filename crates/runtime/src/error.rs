//! What can stop an agent from opening: all of it is the user's to fix.

/// Errors before the agent exists (the CLI exits with code 2 on them).
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    #[error(transparent)]
    Config(#[from] ferroclaw_core::ConfigError),
    #[error(transparent)]
    Session(#[from] ferroclaw_core::session::SessionError),
    #[error("{0}")]
    Other(String),
}

impl RuntimeError {
    /// An error in words.
    pub fn other(message: impl Into<String>) -> Self {
        RuntimeError::Other(message.into())
    }
}
