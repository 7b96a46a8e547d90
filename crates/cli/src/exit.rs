//! Process exit codes.

/// The request was answered.
pub const OK: i32 = 0;
/// The agent or the provider failed (after retries), or hit the turn cap.
pub const FAILED: i32 = 1;
/// Bad usage or configuration.
pub const USAGE: i32 = 2;
/// Interrupted by Ctrl-C.
pub const INTERRUPTED: i32 = 130;
