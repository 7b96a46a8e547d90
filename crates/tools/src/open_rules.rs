//! The permission rules' say on the file a tool actually opens.
//!
//! The permission gate in `ferroclaw-core` decides a call on its path as it
//! resolves then; a folder swapped for a link inside the workspace before
//! the tool runs would make the tool open another file than the one judged
//! (`x/key` deciding, `secrets/key` opened). So the gate also hands the
//! tool its deny rules, bound to the tool's name, as [`OpenRules`] in the
//! [`ToolContext`](crate::ToolContext); every open of a [`Beneath`]
//! (`crate::Beneath`) asks them about the path it is opening, joined to its
//! root with no link resolved. As that open follows no link (it is refused
//! when it meets one), the path judged is the file opened, whatever a racer
//! does between the two.

use std::fmt;
use std::path::Path;
use std::sync::Arc;

use crate::ToolError;

/// Why a path is refused by the rules, or `None` when they let it be opened.
type Verdict = dyn Fn(&Path) -> Option<String> + Send + Sync;

/// The deny rules one call's file opens answer to; the default has none.
#[derive(Clone, Default)]
pub struct OpenRules(Option<Arc<Verdict>>);

impl OpenRules {
    /// Rules given by `verdict`: called with the absolute path about to be
    /// opened (as it will be opened: no link in it is followed), it says
    /// why the path is denied, or `None`. It must not follow links itself.
    pub fn new(verdict: impl Fn(&Path) -> Option<String> + Send + Sync + 'static) -> Self {
        Self(Some(Arc::new(verdict)))
    }

    /// True when there are rules to ask.
    pub fn is_some(&self) -> bool {
        self.0.is_some()
    }

    /// Refuses `path` (absolute, no `..`, opened without following links)
    /// when a rule denies it.
    pub fn check(&self, path: &Path) -> Result<(), ToolError> {
        match self.0.as_ref().and_then(|verdict| verdict(path)) {
            Some(reason) => Err(ToolError::Refused(format!("permission denied: {reason}"))),
            None => Ok(()),
        }
    }
}

impl fmt::Debug for OpenRules {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.0.is_some() { "OpenRules(some)" } else { "OpenRules(none)" })
    }
}
