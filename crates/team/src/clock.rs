//! RFC 3339 UTC timestamps for task files (chrono's calendar, as
//! `ferroclaw_core::clock` uses).

use std::time::{SystemTime, UNIX_EPOCH};

use chrono::DateTime;

/// The current time, e.g. `2026-05-01T12:30:00Z`.
pub(crate) fn now() -> String {
    let secs = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    rfc3339(secs)
}

/// `secs` after the Unix epoch as RFC 3339 UTC, to the second.
pub(crate) fn rfc3339(secs: u64) -> String {
    let time = i64::try_from(secs).ok().and_then(|s| DateTime::from_timestamp(s, 0));
    time.unwrap_or_default().format("%Y-%m-%dT%H:%M:%SZ").to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_instants_format_as_rfc3339_utc() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(rfc3339(1_709_210_096), "2024-02-29T12:34:56Z");
        assert_eq!(rfc3339(4_102_444_799), "2099-12-31T23:59:59Z");
    }

    #[test]
    fn now_is_after_the_time_of_writing() {
        assert!(now().as_str() > "2025-01-01T00:00:00Z");
    }
}
