//! The system prompt's old entry point, kept for callers that only have a
//! workspace: it builds the full layered prompt of [`crate::context`] with
//! the default agent home.

use std::path::Path;

use crate::config::Config;
use crate::context::ContextBuilder;

/// The system prompt for a workspace, with `$FERROCLAW_HOME` (or
/// `~/.ferroclaw`) as the agent home. Prefer [`ContextBuilder`], which also
/// gives the skills and memory the context tools need.
pub fn system_prompt(workspace: &Path) -> String {
    ContextBuilder::new(&Config::default_home(), workspace).build().system_prompt()
}
