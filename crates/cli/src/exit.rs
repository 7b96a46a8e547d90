//! Process exit codes.

/// The request was answered.
pub(crate) const OK: i32 = 0;
/// The agent or the provider failed (after retries), or hit the turn cap.
pub(crate) const FAILED: i32 = 1;
/// Bad usage or configuration.
pub(crate) const USAGE: i32 = 2;
/// Interrupted by Ctrl-C.
pub(crate) const INTERRUPTED: i32 = 130;
/// Ended by SIGTERM (128 + 15), after saving the session.
pub(crate) const TERMINATED: i32 = 143;
/// Ended by SIGHUP (128 + 1), after saving the session.
pub(crate) const HANGUP: i32 = 129;
/// The reader of our output went away (`ferroclaw status | head`): 128 + SIGPIPE.
pub(crate) const BROKEN_PIPE: i32 = 141;
