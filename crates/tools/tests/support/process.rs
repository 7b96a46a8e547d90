//! Process checks shared by the tests that kill process groups.

use std::time::Duration;

/// True while process `pid` exists and is not a zombie.
pub(crate) fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat.rsplit(')').next().is_some_and(|rest| rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

/// Waits up to 3 s for `pid` to be gone.
pub(crate) async fn gone(pid: i32) -> bool {
    for _ in 0..30 {
        if !alive(pid) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    false
}
