//! Wall-clock timestamps as RFC 3339 UTC strings and sortable ids.

use std::time::{SystemTime, UNIX_EPOCH};

use chrono::{DateTime, Utc};

/// Seconds since the Unix epoch.
pub fn unix_seconds() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// `2026-11-30T04:31:51Z` for the current time.
pub fn now_rfc3339() -> String {
    rfc3339(unix_seconds())
}

/// `2026-11-30T04:31:51Z` for a Unix time.
pub fn rfc3339(secs: u64) -> String {
    utc(secs).format("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// A new session id: UTC time plus 4 random hex digits, e.g. `20261130-043151-9f2c`.
/// Sorts by creation time; short enough to type after `--resume`.
pub fn session_id() -> String {
    let time = utc(unix_seconds()).format("%Y%m%d-%H%M%S");
    format!("{time}-{:04x}", fastrand::u16(..))
}

/// A Unix time as a UTC date and time (the epoch for one past chrono's range).
fn utc(secs: u64) -> DateTime<Utc> {
    i64::try_from(secs).ok().and_then(|s| DateTime::from_timestamp(s, 0)).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_known_instants() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(rfc3339(1_796_013_111), "2026-11-30T04:31:51Z");
    }

    #[test]
    fn session_ids_sort_by_time() {
        let id = session_id();
        assert_eq!(id.len(), 20, "{id}");
        assert!(id.starts_with("20"));
    }
}
